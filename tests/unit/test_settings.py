"""One owner of configuration: the environment is read by ``Settings.from_env`` and handed on from there."""

from __future__ import annotations

import re

import pytest

from paperlake.config import Settings
from support.fixtures import REPO

# reads that are not configuration: the fault-injection hook of the crash tests, a child's environment handed on
# whole, and the weights variables the collections file itself names per encoder
ALLOWED = {
    "paperlake/config.py",
    "paperlake/runtime/failpoints.py",
    "paperlake/vectors/pymilvus_names.py",  # hides MILVUS_URI from pymilvus's import-time parse, then restores it
    "paperlake/vectors/config.py",  # EncoderSpec.weights_env: the variable named in collections.yaml
}


def test_only_the_settings_read_paperlake_variables():
    pattern = re.compile(r"(os\.environ(\.get)?\s*[\[(]\s*[\"'](PAPERLAKE_|MILVUS_|OPENAI_)|os\.getenv\()")
    offenders = sorted(
        f"{path.relative_to(REPO)}:{number}"
        for package in ("paperlake", "orchestration", "assets", "agent", "cli", "schemas")
        for path in (REPO / package).rglob("*.py")
        if str(path.relative_to(REPO)) not in ALLOWED
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    )
    assert offenders == []


@pytest.mark.parametrize("wanted", ["", "1"])
def test_pymupdfs_layout_model_loads_only_when_asked_for(wanted):
    """PyMuPDF 2.0 loads its ONNX layout model when pymupdf is imported and its layout package can be: paperlake keeps
    it out (its parser never reads it) unless PAPERLAKE_PYMUPDF_LAYOUT=1, and allow_pymupdf_layout() brings it back."""
    import os
    import subprocess
    import sys

    script = (
        "import paperlake, pymupdf; print(pymupdf._get_layout is not None); "
        "paperlake.allow_pymupdf_layout(); import pymupdf.layout; print(pymupdf._get_layout is not None)"
    )
    env = {**os.environ, "PAPERLAKE_PYMUPDF_LAYOUT": wanted}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True" if wanted else "False", "True"], done.stdout + done.stderr


def test_llm_sampling_and_prices_come_from_the_settings(tmp_path, monkeypatch):
    from paperlake.runtime.llm import ChatClient

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("PAPERLAKE_LLM_MODEL", "m")
    monkeypatch.setenv("PAPERLAKE_LLM_PRICES", '{"m": [2.5, 10]}')
    monkeypatch.setenv("PAPERLAKE_LLM_TEMPERATURE", "0.1")
    monkeypatch.setenv("PAPERLAKE_LLM_TOP_P", "0.5")
    client = ChatClient.from_settings(Settings.from_env(home=tmp_path), use_cache=False)
    assert (client.temperature, client.top_p) == (0.1, 0.5)
    assert client.cost("m", 1_000_000, 100_000) == pytest.approx(3.5)


def test_bad_prices_fail_by_name(tmp_path, monkeypatch):
    from paperlake.runtime.llm import parse_prices

    monkeypatch.setenv("PAPERLAKE_LLM_PRICES", "[1, 2]")
    with pytest.raises(ValueError, match="PAPERLAKE_LLM_PRICES must be JSON"):
        parse_prices(Settings.from_env(home=tmp_path).llm_prices)


def test_model_cache_and_collections_file_come_from_the_settings(tmp_path, monkeypatch):
    from paperlake.vectors.config import default_config_path, model_cache_dir

    monkeypatch.setenv("PAPERLAKE_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.setenv("PAPERLAKE_COLLECTIONS", str(tmp_path / "collections.yaml"))
    assert model_cache_dir() == tmp_path / "models"
    assert default_config_path() == tmp_path / "collections.yaml"
    monkeypatch.delenv("PAPERLAKE_MODEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_cache_dir() == tmp_path / "xdg" / "paperlake"
