"""`paperlake sql` keeps working while an ingest rebuilds the warehouse (no DuckDB lock error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from cli.app import app
from paperlake.config import Settings
from paperlake.warehouse.build import build_path
from support.fixtures import make_inbox


def test_sql_reads_while_dbt_writes(tmp_path, dbt_manifest, corpus):
    from orchestration.run import ingest

    inbox = make_inbox(tmp_path, ["emnlp2024-126-embedding-inversion-attack"])
    home = tmp_path / "home"
    settings = Settings.from_env(home=home, backend="pymupdf", mineru_dir=None)
    ingest([inbox], settings)

    env = {**os.environ, "PAPERLAKE_HOME": str(home), "PAPERLAKE_BACKEND": "pymupdf"}
    cli = Path(sys.executable).with_name("paperlake")
    writer = subprocess.Popen(
        [str(cli), "ingest", str(inbox), "--rebuild-warehouse"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    runner = CliRunner()
    reads, during_build, failures = 0, 0, []
    deadline = time.monotonic() + 300
    try:
        while writer.poll() is None and time.monotonic() < deadline:
            building = build_path(settings.warehouse).exists()
            result = runner.invoke(app, ["sql", "select count(*) as n from metadata", "--json", "--home", str(home)])
            if result.exit_code != 0:
                failures.append(result.output)
            else:
                assert json.loads(result.stdout) == [{"n": 1}]
                reads += 1
                during_build += building
            time.sleep(0.05)
    finally:
        if writer.poll() is None:
            writer.kill()
        _, stderr = writer.communicate(timeout=30)
    assert writer.returncode == 0, stderr[-2000:]
    # the console entry keeps the libraries' notices a user cannot act on to itself (Dagster beta/preview, pymilvus)
    assert not any(noise in stderr for noise in ("BetaWarning", "PreviewWarning", "mvccTs", "Loading weights")), stderr[
        -2000:
    ]
    assert not failures, failures[:2]
    assert during_build >= 1, f"no read overlapped the dbt build ({reads} reads)"
