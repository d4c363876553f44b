"""The warm dbt (paperlake.runtime.dbt_warm): dbt commands forked from a zygote that imported dbt once, with the
launcher falling back to plain dbt whenever there is no zygote to reach."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from paperlake.runtime.dbt_warm import DISABLE_VAR, ENV_VAR, WarmDbt, launcher_path, pid_alive, real_dbt

LAUNCHER = launcher_path()
pytestmark = pytest.mark.skipif(
    not LAUNCHER.endswith("paperlake-dbt"), reason="the paperlake-dbt console script is not installed"
)


def dbt_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("dbt-core")


def launch(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([LAUNCHER, *arguments], capture_output=True, text=True, timeout=120, env=env)


def test_a_command_runs_in_a_fork_of_the_zygote_and_keeps_its_output_and_status() -> None:
    with WarmDbt() as warm:
        assert warm.process is None and ENV_VAR not in os.environ  # started when a dbt command is known to come
        assert warm.start().wait_ready(), "the zygote did not start"
        zygote = warm.process.pid
        version = launch("--version")
        unknown = launch("no-such-command")
    assert version.returncode == 0 and dbt_version() in version.stdout + version.stderr
    assert unknown.returncode == 2 and "No such command 'no-such-command'" in unknown.stdout + unknown.stderr
    assert [(c["argv"], c["exit"]) for c in warm.commands] == [(["--version"], 0), (["no-such-command"], 2)]
    assert all(c["pid"] not in (zygote, os.getpid()) for c in warm.commands)
    assert not Path(f"/proc/{zygote}").exists() and ENV_VAR not in os.environ
    plain = subprocess.run([real_dbt(), "no-such-command"], capture_output=True, text=True, timeout=120)
    assert plain.returncode == unknown.returncode  # the same status as plain dbt's


def test_without_a_reachable_zygote_the_launcher_is_plain_dbt(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    assert dbt_version() in launch("--version", env=environment).stdout
    # a zygote that is gone (its pid dead, its socket never made): no wait, plain dbt
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = {**environment, ENV_VAR: f"{dead.pid}:{tmp_path / 'zygote.sock'}"}
    started = time.monotonic()
    assert dbt_version() in launch("--version", env=stale).stdout
    assert time.monotonic() - started < 25  # not the launcher's 30 s wait for a zygote still importing
    # a socket file nobody listens on
    (tmp_path / "zygote.sock").write_text("")
    stale[ENV_VAR] = f"{os.getpid()}:{tmp_path / 'zygote.sock'}"
    assert dbt_version() in launch("--version", env=stale).stdout


ENDLESS = "select count(*) from range(1000000000000) a, range(10) b"


def _start_endless_query(tmp_path: Path) -> subprocess.Popen:
    """`paperlake-dbt show` of a query that never ends, returned once dbt has sent it to DuckDB (its debug log
    names the query just before): a signal sent earlier may meet dbt before the query starts, and dbt then cancels
    nothing and runs the query anyway (seen on a loaded machine)."""
    from paperlake.warehouse.build import DBT_PROJECT_DIR

    environment = {
        **os.environ,
        "PAPERLAKE_DBT_TARGET_PATH": str(tmp_path / "w.duckdb"),
        "PAPERLAKE_LAKE": str(tmp_path / "lake"),
        "DBT_PROFILES_DIR": str(DBT_PROJECT_DIR),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_LOG_PATH": str(tmp_path / "logs"),
        "DBT_LOG_LEVEL_FILE": "debug",
    }
    process = subprocess.Popen(
        [LAUNCHER, "show", "--target-path", str(tmp_path / "target"), "--inline", ENDLESS],
        cwd=DBT_PROJECT_DIR,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log = tmp_path / "logs" / "dbt.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "range(1000000000000)" in log.read_text(errors="replace")):
        assert time.monotonic() < deadline and process.poll() is None, "dbt never sent the query"
        time.sleep(0.1)
    time.sleep(0.5)
    return process


def test_sigint_reaches_the_forked_dbt(tmp_path: Path) -> None:
    """dagster-dbt stops a build with SIGINT: the launcher forwards it to the dbt child, which stops."""
    with WarmDbt() as warm:
        assert warm.start().wait_ready()
        process = _start_endless_query(tmp_path)
        process.send_signal(signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=60)
        finally:
            process.kill()
    assert process.returncode != 0 and "KeyboardInterrupt" in output, output[-2000:]
    assert [c["exit"] for c in warm.commands] == [process.returncode]


def test_a_dbt_whose_launcher_is_killed_is_ended(tmp_path: Path) -> None:
    """A launcher killed outright (dagster-dbt's last resort, a killed run) leaves nobody to read the outcome: the
    zygote interrupts its dbt, and kills it if need be, instead of letting it run (here: for ever)."""
    from paperlake.runtime.dbt_warm import ABANDONED_GRACE_SECONDS

    with WarmDbt() as warm:
        assert warm.start().wait_ready()
        log = Path(os.environ[ENV_VAR].partition(":")[2]).with_name("commands.jsonl")
        process = _start_endless_query(tmp_path)
        process.kill()
        process.communicate()
        deadline = time.monotonic() + ABANDONED_GRACE_SECONDS + 30
        while not (log.exists() and log.read_text().strip()):  # the zygote notes a command when its dbt has ended
            assert time.monotonic() < deadline, "the abandoned dbt is still running"
            time.sleep(0.2)
    (command,) = warm.commands
    # ended by the interrupt (dbt's own status for it, its output pipe gone with the launcher) or by the kill
    assert command["argv"][0] == "show" and command["exit"] not in (None, 0), command
    assert command["seconds"] < ABANDONED_GRACE_SECONDS + 20, command
    assert not pid_alive(command["pid"])


def test_the_zygotes_commands_end_with_it(tmp_path: Path) -> None:
    """A zygote that ends while a command runs (its ingest ending badly) takes the command's dbt with it."""
    with WarmDbt() as warm:
        assert warm.start().wait_ready()
        zygote = warm.process.pid
        process = _start_endless_query(tmp_path)
        children = [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _parent_of(int(pid)) == zygote]
        assert len(children) == 1
        os.kill(zygote, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while pid_alive(children[0]) and _parent_of(children[0]) is not None:
            assert time.monotonic() < deadline, "the command's dbt outlived its zygote"
            time.sleep(0.1)
        process.communicate(timeout=60)
    assert process.returncode != 0


def _parent_of(pid: int) -> int | None:
    """The parent of a live (not zombie) process, else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[1])


def test_the_zygote_ends_with_a_killed_ingest_and_its_directory_is_swept(monkeypatch: pytest.MonkeyPatch) -> None:
    # a temporary folder of the test's own: an ingest in the other pytest worker sweeps the shared one's dead
    # directories too, which would remove this one before the test looks (as it should: it is dead). Short, beside
    # the shared one: a unix socket's path has at most 107 bytes.
    private = Path(tempfile.mkdtemp(prefix="pl-sweep-"))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    script = textwrap.dedent(
        """
        import json, os, sys
        from paperlake.runtime.dbt_warm import WarmDbt
        warm = WarmDbt().start()
        assert warm.wait_ready()
        print(json.dumps({"zygote": warm.process.pid, "directory": str(warm.directory)}), flush=True)
        os._exit(0)  # killed: no close
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "TMPDIR": str(private)},
    )
    left = json.loads(done.stdout)
    assert Path(left["directory"]).parent == private
    deadline = time.monotonic() + 30
    while Path(f"/proc/{left['zygote']}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{left['zygote']}").exists(), "the zygote outlived its ingest"
    assert Path(left["directory"]).exists()
    with WarmDbt() as warm:  # the next ingest's zygote sweeps the dead one's directory
        warm.start()
    assert not Path(left["directory"]).exists()
    shutil.rmtree(private, ignore_errors=True)


def test_switched_off_there_is_no_zygote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_VAR, "0")
    with WarmDbt() as warm:
        warm.start()
        assert warm.process is None and ENV_VAR not in os.environ and not warm.wait_ready(timeout=0.1)
        assert launch("--version").returncode == 0
    assert warm.commands == []


def test_a_malformed_request_is_refused_before_any_fork() -> None:
    """A request without the three streams gets a refusal (the launcher then runs plain dbt), and no command."""
    import socket

    from paperlake.runtime.dbt_warm import _receive_message, _send_message

    with WarmDbt() as warm:
        assert warm.start().wait_ready()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(warm.address)
            _send_message(client, {"argv": ["--version"], "env": {}, "cwd": "/"})  # no descriptors passed
            reply = _receive_message(client)
    assert "refused" in reply and "0 descriptors" in reply["refused"], reply
    assert warm.commands == []


def _tiny_project(root: Path, model: str = "select 1 as one") -> dict[str, str]:
    """A one-model dbt-duckdb project and the environment a dbt command over it needs."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "dbt_project.yml").write_text("name: tiny\nversion: '1.0'\nprofile: tiny\nmodel-paths: [models]\n")
    (root / "profiles.yml").write_text(
        f"tiny:\n  target: local\n  outputs:\n    local:\n      type: duckdb\n      path: '{root / 'tiny.duckdb'}'\n"
    )
    (root / "models").mkdir(exist_ok=True)
    (root / "models" / "m.sql").write_text(model)
    return {"DBT_PROJECT_DIR": str(root), "DBT_PROFILES_DIR": str(root), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}


def _build(env: dict[str, str], target: Path) -> subprocess.CompletedProcess:
    """`paperlake-dbt build` of the project ``env`` names, into ``target`` (results and logs), from this environment
    (so through the zygote it names, if any)."""
    return subprocess.run(
        [LAUNCHER, "build"],
        cwd=env["DBT_PROJECT_DIR"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env, "DBT_TARGET_PATH": str(target), "DBT_LOG_PATH": str(target)},
    )


def test_a_parse_ahead_leaves_the_state_a_build_reads_and_a_failed_or_late_one_leaves_none(tmp_path: Path) -> None:
    """`parse_ahead` parses a project into a build stage's target folder in the background (a fork of the zygote),
    once: the build then reads that partial-parse state. A parse that fails, or is still running when the build
    comes, leaves no state behind (the build parses in full, as without it)."""
    env = _tiny_project(tmp_path / "project")
    target = tmp_path / "target"
    with WarmDbt() as warm:
        warm.parse_ahead(target, env)  # before start(): nothing to fork from, nothing started
        assert not warm.wait_parse_ahead()
        warm.start()
        warm.parse_ahead(target, env)
        assert warm.wait_parse_ahead(), "the parse left no partial-parse state"
        warm.parse_ahead(target, env)  # the state is there: no second parse
        assert not warm.wait_parse_ahead()
        build = _build(env, target)
        assert build.returncode == 0, build.stdout[-2000:]
        assert "Unable to do partial parsing" not in build.stdout, build.stdout[-2000:]

        broken = tmp_path / "broken-target"
        warm.parse_ahead(broken, _tiny_project(tmp_path / "broken", "select {{ unclosed"))
        assert not warm.wait_parse_ahead() and not (broken / "partial_parse.msgpack").exists()
    assert [c["argv"][0] for c in warm.commands] == ["parse", "build", "parse"]
    assert [c["exit"] for c in warm.commands][:2] == [0, 0] and warm.commands[2]["exit"] != 0

    with WarmDbt() as warm:  # the zygote still imports dbt: a build that comes now stops the parse
        warm.start()
        late = tmp_path / "late-target"
        warm.parse_ahead(late, env)
        assert not warm.wait_parse_ahead(timeout=0) and not (late / "partial_parse.msgpack").exists()


def test_a_forked_build_ends_with_its_database_closed_and_nothing_leaked(tmp_path: Path) -> None:
    """A dbt child ends without the interpreter's teardown (paperlake.runtime.dbt_warm._leave), but after the exit
    handlers:
    dbt-duckdb has closed (and checkpointed) its database, so no WAL is left; multiprocessing has released dbt's
    semaphores, so its resource tracker reports no leak; the results and logs are written; the status is dbt's."""
    import duckdb

    with WarmDbt() as warm:
        assert warm.start().wait_ready(), "the zygote did not start"
        build = _build(_tiny_project(tmp_path / "project"), tmp_path / "target")
        failed = _build(_tiny_project(tmp_path / "failing", "select * from no_such_table"), tmp_path / "failing-target")
    assert build.returncode == 0, build.stdout[-2000:]
    assert "Completed successfully" in build.stdout and "leaked" not in build.stdout + build.stderr
    database = tmp_path / "project" / "tiny.duckdb"
    assert database.exists() and not Path(f"{database}.wal").exists()
    with duckdb.connect(str(database), read_only=True) as con:
        assert con.execute("select one from m").fetchall() == [(1,)]
    results = json.loads((tmp_path / "target" / "run_results.json").read_text())
    assert [r["status"] for r in results["results"]] == ["success"]
    assert "Completed successfully" in (tmp_path / "target" / "dbt.log").read_text()
    assert failed.returncode == 1 and "no_such_table" in failed.stdout, failed.stdout[-2000:]
    assert "leaked" not in failed.stdout + failed.stderr
    assert [c["exit"] for c in warm.commands] == [0, 1]


def test_after_the_warm_up_a_build_of_the_project_loads_nothing_more_of_dbt(tmp_path: Path) -> None:
    """What the zygote loads before it forks (paperlake.runtime.dbt_warm.warm_up) is all an ingest's build needs
    beyond dbt's
    imports: a build of this project (on an empty lake, from the partial-parse state a parse left, as every home's
    builds start) after it builds no JSON schema and imports no module of dbt's. A dbt upgrade that moves either
    fails here, not silently in every ingest's two builds."""
    script = textwrap.dedent(
        """
        import json, os, sys
        from pathlib import Path

        import dbt.adapters.duckdb, dbt.cli.main
        import dbt_common.dataclass_schema as schemas

        from paperlake.runtime.dbt_warm import warm_up
        from paperlake.formulas.store import ensure_formula_contract
        from paperlake.lake.store import Lake
        from paperlake.warehouse.build import DBT_PROJECT_DIR, dbt_env

        root, command = Path(sys.argv[1]), sys.argv[2:]
        Lake(root / "lake").ensure_contract()
        ensure_formula_contract(root / "lake" / "formulas")
        os.environ.update(dbt_env(root / "lake", root / "warehouse.duckdb", relative=False))
        missing = warm_up()
        built, real = [], schemas.build_json_schema
        schemas.build_json_schema = lambda cls, *a, **k: built.append(cls.__qualname__) or real(cls, *a, **k)
        loaded = {name for name in sys.modules if name.startswith("dbt")}
        os.chdir(DBT_PROJECT_DIR)
        common = ["--target-path", str(root / "target"), "--log-path", str(root / "target"), "--quiet"]
        ok = dbt.cli.main.dbtRunner().invoke(command + common).success
        new = sorted({name for name in sys.modules if name.startswith("dbt")} - loaded)
        print(json.dumps({"missing": missing, "ok": ok, "schemas": built, "modules": new}))
        """
    )

    def run(*command: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path), *command],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    from paperlake.runtime import dbt_warm

    with pytest.MonkeyPatch.context() as patch:  # a name this dbt lacks, or one that fails to build: skipped, said
        patch.setattr(dbt_warm, "WARM_MODULES", ("dbt.no_such_module",))
        patch.setattr(dbt_warm, "WARM_SCHEMAS", (("dbt.contracts.project", "NoSuchClass"), ("json", "dumps")))
        assert dbt_warm.warm_up() == ["dbt.no_such_module", "dbt.contracts.project.NoSuchClass", "json.dumps"]

    parsed = run("parse")  # a full parse needs more (the parsed nodes' schemas): the warm-up leaves it to the parse
    assert parsed["ok"] and parsed["schemas"], parsed
    report = run("build", "--exclude-resource-type", "unit_test")
    assert report == {"missing": [], "ok": True, "schemas": [], "modules": []}, report
