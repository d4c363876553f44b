"""A warm dbt: dbt commands forked from a process that has already imported dbt.

Every ``dbt`` command starts a new interpreter that spends seconds importing dbt (mashumaro compiles dbt's dataclasses'
serialisers at import) before it reads a byte of the project; an ingest runs two (the warehouse and the formula models),
and those imports are a large share of a small ingest. :class:`WarmDbt` starts one *zygote* process per ingest as soon
as a dbt build is known to come (right after the plan when papers are to be parsed, before Dagster's definitions are
imported, so its imports overlap those and the parse); the dbt commands are then forks of it. An ingest that builds
nothing starts none. dbt runs in the warehouse's folder, whose side file the profile names relative to it, so a new home
of the default layout starts from the project's shared partial-parse state
(:func:`paperlake.warehouse.build.seed_parse_state`); a home whose profile differs would parse the whole project in
its first
build: :meth:`WarmDbt.parse_ahead` runs that ``dbt parse`` as the zygote's first command, in the background, and the
build waits for it (:meth:`WarmDbt.wait_parse_ahead`) and reads its partial-parse state.

- ``paperlake-dbt`` (:func:`launcher_main`) is the executable dagster-dbt runs instead of ``dbt``, with the same
  arguments, in the folder ``PAPERLAKE_DBT_WORKDIR`` names when set. With ``PAPERLAKE_DBT_ZYGOTE`` naming a live
  zygote (``pid:socket``; one still importing is waited for, which never takes longer than importing dbt afresh) it
  sends its arguments, environment, working directory and its stdin/stdout/stderr (``SCM_RIGHTS``) and waits; the
  zygote forks a child that takes those as its own and runs dbt's CLI; the launcher forwards SIGINT/SIGTERM to that
  child (dagster-dbt interrupts a build with SIGINT) and exits with its exit status. Without a zygote, or when it
  cannot be reached, the launcher *is* ``dbt`` (``os.execve``): the Dagster UI and daemon, a worker on another
  machine, or a zygote that died, all run plain dbt.
- Each command is a fresh fork of a zygote that never ran one, so no state carries from one command to the next.
- Crash-consistency is unchanged: the child is a process of the ingest's process group, as a ``dbt`` subprocess is,
  and dies with it; the zygote exits when the ingest does (:meth:`WarmDbt.close`, or on seeing its parent gone).
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from paperlake.runtime.processes import stop_process

ENV_VAR = "PAPERLAKE_DBT_ZYGOTE"
DISABLE_VAR = "PAPERLAKE_DBT_WARM"  # "0": no zygote
# The folder dbt runs in (the warehouse's: the profile names the side file relative to it, so that every home's
# profile is the same and dbt's partial-parse state holds across homes; paperlake.warehouse.build.dbt_env)
WORKDIR_VAR = "PAPERLAKE_DBT_WORKDIR"
LAUNCHER = "paperlake-dbt"  # the console script of launcher_main
READY_WAIT_SECONDS = 30.0  # how long a launcher waits for a zygote that is still importing dbt
COMMAND_LOG = "commands.jsonl"  # beside the socket: one line per command the zygote ran
_MAX_REQUEST = 4 * 1024 * 1024  # argv + environment; an environment is a few kB
_HEADER = struct.Struct("!I")


def real_dbt() -> str:
    """The ``dbt`` of this environment (beside this interpreter), else the one on PATH."""
    beside = Path(sys.executable).with_name("dbt")
    if beside.exists():
        return str(beside)
    return shutil.which("dbt") or str(beside)


def launcher_path() -> str:
    """``paperlake-dbt`` beside this interpreter (the console script), else plain ``dbt``."""
    beside = Path(sys.executable).with_name(LAUNCHER)
    return str(beside) if beside.exists() else real_dbt()


def runs_in_workdir(executable: str) -> bool:
    """Whether ``executable`` moves to :data:`WORKDIR_VAR` before running dbt (``paperlake-dbt`` does; dbt does not)."""
    return Path(executable).name == LAUNCHER


# ── the launcher ───────────────────────────────────────────────────────────────────────────────────────────────


def _send_message(connection: socket.socket, payload: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(payload).encode()
    message = _HEADER.pack(len(data)) + data
    if fds:
        connection.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        connection.sendall(message)


def _read_exactly(connection: socket.socket, size: int, fds: list[int] | None = None) -> bytes:
    chunks, received = [], 0
    while received < size:
        if fds is not None and not chunks:
            data, ancillary, _, _ = connection.recvmsg(size, socket.CMSG_SPACE(3 * array.array("i").itemsize))
            for level, kind, body in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    received_fds = array.array("i")
                    received_fds.frombytes(body[: len(body) - len(body) % received_fds.itemsize])
                    fds.extend(received_fds)
        else:
            data = connection.recv(size - received)
        if not data:
            raise ConnectionError("the connection closed mid-message")
        chunks.append(data)
        received += len(data)
    return b"".join(chunks)


def _receive_message(connection: socket.socket, fds: list[int] | None = None) -> dict:
    head = _read_exactly(connection, _HEADER.size, fds)
    (size,) = _HEADER.unpack(head)
    if size > _MAX_REQUEST:
        raise ValueError(f"message of {size} bytes, more than {_MAX_REQUEST}")
    return json.loads(_read_exactly(connection, size))


def launcher_main() -> None:
    """``paperlake-dbt ARGS``: run ``dbt ARGS`` in a fork of the ingest's zygote, else be ``dbt ARGS``."""
    arguments = sys.argv[1:]
    if os.environ.get(WORKDIR_VAR):  # dagster-dbt starts dbt in the project folder; the profile's paths start here
        os.chdir(os.environ[WORKDIR_VAR])
    zygote, _, address = os.environ.get(ENV_VAR, "").partition(":")
    connection = None
    if zygote.isdigit() and address:
        # a zygote still importing dbt: waiting for it is never slower than importing dbt here
        deadline = time.monotonic() + READY_WAIT_SECONDS
        while not os.path.exists(address) and pid_alive(int(zygote)) and time.monotonic() < deadline:
            time.sleep(0.02)
        sent = False
        try:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(address)
            _send_message(connection, {"argv": arguments, "env": dict(os.environ), "cwd": os.getcwd()}, [0, 1, 2])
            sent = True
            reply = _receive_message(connection)
            if "pid" not in reply:  # refused before any fork: plain dbt below
                raise ValueError(str(reply.get("refused")))
            child = int(reply["pid"])
        except (OSError, ValueError, KeyError, ConnectionError) as error:
            if connection is not None:
                connection.close()
            connection = None
            if sent and not isinstance(error, ValueError):
                # the zygote went away after taking the command: it may have started dbt, so dbt is not run twice
                print(
                    f"paperlake-dbt: the warm dbt went away ({error}); the command's outcome is unknown",
                    file=sys.stderr,
                )
                sys.exit(2)
    if connection is None:
        environment = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        os.execve(real_dbt(), [real_dbt(), *arguments], environment)

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, forward)
    try:
        status = int(_receive_message(connection)["exit"])
    except (OSError, ValueError, KeyError, ConnectionError):
        # the zygote died: wait for its child, whose status is then lost
        while pid_alive(child):
            time.sleep(0.2)
        print(f"paperlake-dbt: lost track of dbt (pid {child}); its exit status is unknown", file=sys.stderr)
        status = 2
    sys.exit(status)


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts). Here, not in a heavier module: the launcher
    imports this module on every dbt command."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ── the zygote ─────────────────────────────────────────────────────────────────────────────────────────────────


def _die_with_the_zygote(zygote: int) -> None:
    """Linux: this child is killed when the zygote ends (the zygote's thread that watches it, and would end it when
    its launcher goes, ends with it; a zygote ends while a command runs only when its ingest is ending badly)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the launcher-gone watch alone
        return
    if os.getppid() != zygote:  # the zygote ended before the request was made
        os._exit(1)


def _run_dbt_child(
    request: dict, fds: list[int], listener: socket.socket, connection: socket.socket, zygote: int
) -> int:
    """In the forked child: take the launcher's streams, environment and directory, run dbt's CLI; its exit status.
    The caller ends the process with it (:func:`_leave`)."""
    _die_with_the_zygote(zygote)
    listener.close()
    connection.close()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    fds.clear()
    for signum in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({k: v for k, v in request["env"].items() if k != ENV_VAR})
        sys.argv = ["dbt", *request["argv"]]
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False, buffering=1)
        sys.stderr = open(2, "w", closefd=False, buffering=1)
        from dbt.cli.main import cli

        cli.main(args=list(request["argv"]), prog_name="dbt", standalone_mode=True)
        return 0
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:
        return 130
    except BaseException as error:  # the child must end, whatever happened
        print(f"paperlake-dbt: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


def _leave(status: int) -> None:
    """End a dbt child: the exit handlers run (dbt-duckdb closes its database, which checkpoints it, so no WAL is
    left for the publish to replay; multiprocessing releases dbt's semaphores), logs and streams are flushed, and
    the process exits without the interpreter's teardown of dbt's objects, a measurable share of every command."""
    import atexit
    import logging

    try:
        atexit._run_exitfuncs()
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except BaseException as error:  # the child must end, whatever happened
        try:
            print(f"paperlake-dbt: at exit: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        except BaseException:
            pass
        status = status or 1
    os._exit(status)


def _fork_command(connection: socket.socket, listener: socket.socket, log: Path) -> None:
    """Read one command and fork its child, in the zygote's main thread (no fork from a helper thread); a thread
    then reports the child's pid and, when it ends, its exit status."""
    fds: list[int] = []
    try:
        request = _receive_message(connection, fds)
        if len(fds) < 3 or not isinstance(request.get("argv"), list):
            _send_message(connection, {"refused": f"a request with {len(fds)} descriptors and no argv list"})
            connection.close()
            return
        zygote = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child never returns to the zygote's loop
            _leave(_run_dbt_child(request, fds, listener, connection, zygote))
    except (OSError, ValueError, ConnectionError) as error:  # not forked: the launcher runs plain dbt
        try:
            _send_message(connection, {"refused": f"{type(error).__name__}: {error}"})
        except OSError:
            pass
        connection.close()
        return
    finally:
        for fd in fds:
            os.close(fd)
    threading.Thread(
        target=_report, args=(connection, pid, request["argv"], str(request.get("cwd")), log), daemon=True
    ).start()


_LOG_LOCK = threading.Lock()


def _report(connection: socket.socket, pid: int, argv: list[str], cwd: str, log: Path) -> None:
    """Tell the launcher the child's pid, then its exit status; the command is noted in the zygote's log before its
    exit is told, so an ingest whose dbt commands have returned finds them all in the log."""
    started = time.perf_counter()
    status: int | None = None
    noted = False

    def note() -> None:
        entry = {
            "argv": argv,
            "cwd": cwd,
            "pid": pid,
            "exit": status,
            "seconds": round(time.perf_counter() - started, 3),
        }
        with _LOG_LOCK, log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    try:
        _send_message(connection, {"pid": pid})
        wait_status = _wait_unless_abandoned(connection, pid)
        code = os.waitstatus_to_exitcode(wait_status)
        status = 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says
        note()
        noted = True
        _send_message(connection, {"exit": status})
    except (OSError, ConnectionError):
        pass
    finally:
        connection.close()
        if not noted:
            note()


ABANDONED_GRACE_SECONDS = 10.0  # from SIGINT to SIGKILL for a dbt child whose launcher is gone


def _wait_unless_abandoned(connection: socket.socket, pid: int) -> int:
    """The dbt child's wait status. Its launcher only reads from the connection after the pid, so the connection
    turning readable means the launcher is gone (killed: dagster-dbt's last resort, a killed run, a killed test):
    nobody will read the command's outcome, and a dbt left running would go on writing (and locking) a side file
    no one publishes, for ever if its query is endless. The child is then interrupted as dagster-dbt would (SIGINT:
    dbt cancels its queries) and killed if it has not ended ``ABANDONED_GRACE_SECONDS`` later."""
    import select

    try:
        watch = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here (not Linux 5.3+): the connection is polled
        watch = None
    try:
        while True:
            waiting = [connection] + ([watch] if watch is not None else [])
            readable, _, _ = select.select(waiting, [], [], None if watch is not None else 0.2)
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                return wait_status
            if connection in readable:
                try:
                    gone = not connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    gone = True
                if gone:
                    return _end_abandoned(pid)
    finally:
        if watch is not None:
            os.close(watch)


def _end_abandoned(pid: int) -> int:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + ABANDONED_GRACE_SECONDS
    while time.monotonic() < deadline:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            return wait_status
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


# What every dbt build loads after dbt's own imports, on first use, in each forked command unless the zygote has:
# these modules (the build's tasks and runners; mashumaro compiles their dataclasses' serialisers as they load) and
# the JSON schemas of these classes (dbt validates the project, the profile, the selectors, the hooks, the contracts'
# constraints and the test results against them, building each schema on first use, in every command). Read from a
# traced build of this project that starts from a parse's state, as every home's builds do; a full parse also needs
# the parsed nodes' schemas, left to it.
# tests/unit/test_dbt_warm.py checks that such a build after the warm-up loads none of these, or anything else of
# dbt's, again. A name this dbt lacks is skipped.
WARM_MODULES = (
    "dbt.adapters.__about__",
    "dbt.adapters.duckdb.__version__",
    "dbt.adapters.duckdb.environments.local",
    "dbt.compilation",
    "dbt.graph.thread_pool",
    "dbt.parser.sql",
    "dbt.runners",
    "dbt.task.build",
    "dbt.task.compile",
    "dbt.task.function",
    "dbt.task.group_lookup",
    "dbt.task.printer",
    "dbt.task.run",
    "dbt.task.runnable",
    "dbt.task.seed",
    "dbt.task.snapshot",
    "dbt.task.test",
    "dbt_common.clients.agate_helper",
)
WARM_SCHEMAS = (
    ("dbt.adapters.duckdb.credentials", "DuckDBCredentials"),
    ("dbt.artifacts.resources.v1.config", "Hook"),
    ("dbt.contracts.project", "Configuration"),
    ("dbt.contracts.project", "PackageConfig"),
    ("dbt.contracts.project", "ProfileConfig"),
    ("dbt.contracts.project", "Project"),
    ("dbt.contracts.project", "ProjectFlags"),
    ("dbt.contracts.selection", "SelectorFile"),
    ("dbt.task.test", "TestResultData"),
    ("dbt_common.contracts.constraints", "ColumnLevelConstraint"),
)


def warm_up() -> list[str]:
    """Load :data:`WARM_MODULES` and build :data:`WARM_SCHEMAS` in this process (the zygote, before it forks any
    command). Returns what could not be loaded (skipped): the warm-up only saves time, so whatever a dbt it was not
    written for does with a name, the zygote still starts and its commands load what they need themselves."""
    import importlib

    missing = []
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception:
            missing.append(name)
    for module, name in WARM_SCHEMAS:
        try:
            getattr(importlib.import_module(module), name).json_schema()
        except Exception:
            missing.append(f"{module}.{name}")
    return missing


def zygote_main(address: str, parent: int) -> None:
    """Import dbt and warm it up (:func:`warm_up`), then fork a dbt child per connection on the socket ``address``
    until ``parent`` is gone or the socket file is removed."""
    import dbt.adapters.duckdb  # imported here once, for every command forked after
    import dbt.cli.main  # noqa: F401

    warm_up()

    log = Path(address).with_name(COMMAND_LOG)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address + ".binding")
    listener.listen(8)
    listener.settimeout(0.5)
    os.rename(address + ".binding", address)  # the socket appears only once it accepts connections
    identity = os.stat(address).st_ino
    while True:
        try:
            connection, _ = listener.accept()
        except socket.timeout:
            try:
                gone = os.getppid() != parent or os.stat(address).st_ino != identity
            except FileNotFoundError:
                gone = True
            if gone:
                break
            continue
        connection.settimeout(None)
        _fork_command(connection, listener, log)
    listener.close()


_PREFIX = "paperlake-dbt-"


def _sweep_stale_directories() -> None:
    """Remove the socket directories of ingests that were killed (their zygote died with them, leaving it)."""
    for directory in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        owner = directory.name[len(_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not pid_alive(int(owner)):
            shutil.rmtree(directory, ignore_errors=True)


class _Zygote:
    """A running zygote: its process, private directory (socket and command log) and socket address."""

    def __init__(self, process: subprocess.Popen, directory: Path, address: str) -> None:
        self.process, self.directory, self.address = process, directory, address

    @classmethod
    def start(cls) -> "_Zygote | None":
        _sweep_stale_directories()
        directory = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        address = str(directory / "zygote.sock")
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "paperlake.runtime.dbt_warm", address, str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            shutil.rmtree(directory, ignore_errors=True)
            return None
        return cls(process, directory, address)

    def alive(self) -> bool:
        """Running, and its directory (socket and log) not removed; one still importing dbt counts as alive."""
        return self.process.poll() is None and self.directory.exists()

    def commands_since(self, offset: int) -> list[dict]:
        log = self.directory / COMMAND_LOG
        try:
            with log.open("rb") as handle:
                handle.seek(offset)
                lines = handle.read().decode("utf-8").splitlines()
        except OSError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def log_size(self) -> int:
        try:
            return (self.directory / COMMAND_LOG).stat().st_size
        except OSError:
            return 0

    def stop(self) -> None:
        Path(self.address).unlink(missing_ok=True)  # a zygote that misses the signal sees its socket gone
        # and ends: at once, not at its next look at the socket (every 0.5 s) nor through the interpreter's
        # shutdown of dbt's modules; it holds nothing to clean up (its commands are processes of their own)
        stop_process(self.process)
        shutil.rmtree(self.directory, ignore_errors=True)


class WarmDbt:
    """The zygote for one ingest: inside ``with WarmDbt() as warm:``, ``warm.start()`` starts it (at once, in the
    background) and sets ``PAPERLAKE_DBT_ZYGOTE`` for the dbt commands run after; leaving the block stops it and
    keeps the log of the commands it ran (:attr:`commands`). A launcher that comes while the zygote is still
    importing waits for it. A zygote that cannot start costs nothing but the warm start.

    With ``keep=True`` (what ``orchestration.run.ingest`` uses unless its caller is one-shot) the zygote is not
    stopped but kept for this process's next ingest (:mod:`paperlake.runtime.kept_helpers`: for a few minutes, in the
    same process context), and ``start`` takes a kept one when there is one: a process that ingests again does not
    import dbt again."""

    KIND = "dbt-zygote"

    def __init__(self, *, keep: bool = False) -> None:
        self.keep = keep
        self.directory: Path | None = None  # made by start(): a private directory for the socket and the log
        self.address = ""
        self.process: subprocess.Popen | None = None
        self.commands: list[dict] = []  # after close: the commands the zygote ran (argv, pid, exit, seconds)
        self.reused = False  # whether start() took a zygote kept by an earlier ingest of this process
        self._zygote: _Zygote | None = None
        self._context: tuple | None = None
        self._log_offset = 0
        self._saved: str | None = None
        self._started = False
        self._parse_ahead: tuple[subprocess.Popen, Path] | None = None  # (`dbt parse`, its target folder)

    def __enter__(self) -> "WarmDbt":
        return self

    def start(self) -> "WarmDbt":
        """Start the zygote (once; call it as soon as a dbt command is known to come). An ingest that runs no dbt
        command never starts one: importing dbt costs seconds of a core."""
        if self.process is not None or self._started or os.environ.get(DISABLE_VAR, "1") == "0":
            return self
        self._started = True
        from paperlake.runtime import kept_helpers

        self._context = kept_helpers.context_key()
        zygote = kept_helpers.take(self.KIND, self._context) if self.keep else None
        self.reused = zygote is not None
        zygote = zygote or _Zygote.start()
        if zygote is None:
            return self
        self._zygote, self.process, self.directory, self.address = (
            zygote,
            zygote.process,
            zygote.directory,
            zygote.address,
        )
        self._log_offset = zygote.log_size()
        self._saved = os.environ.get(ENV_VAR)
        os.environ[ENV_VAR] = f"{self.process.pid}:{self.address}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def parse_ahead(self, target: Path, env: dict[str, str]) -> None:
        """Start ``dbt parse`` into ``target`` in the background (a fork of the zygote, once it is ready), for a
        build stage whose folder has no partial-parse state yet and could not be given the project's shared one (a
        home whose profile differs from the shared parse's): its first build would otherwise parse the whole project
        on the way to the warehouse. The parse writes only ``target``, and the build must not start before
        :meth:`wait_parse_ahead`."""
        if self._parse_ahead is not None or not self._started or (target / "partial_parse.msgpack").exists():
            return
        target.mkdir(parents=True, exist_ok=True)
        try:
            process = subprocess.Popen(
                [launcher_path(), "parse", "--quiet"],
                cwd=env.get("DBT_PROJECT_DIR"),
                env={**os.environ, **env, "DBT_TARGET_PATH": str(target), "DBT_LOG_PATH": str(target)},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            return
        self._parse_ahead = (process, target)

    def wait_parse_ahead(self, timeout: float = 60.0) -> bool:
        """Wait for the background parse; one still running after ``timeout`` seconds is stopped and what it may
        have written is removed (the build then parses in full, as without it). Whether it left a parse state."""
        if self._parse_ahead is None:
            return False
        process, target = self._parse_ahead
        self._parse_ahead = None
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_process(process, grace=10)
            code = -1
        if code != 0:
            (target / "partial_parse.msgpack").unlink(missing_ok=True)
        return code == 0 and (target / "partial_parse.msgpack").exists()

    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Whether the zygote listens (its socket exists) within ``timeout`` seconds; False if it is not running."""
        deadline = time.monotonic() + timeout
        while self.process is not None and self.process.poll() is None and time.monotonic() < deadline:
            if Path(self.address).exists():
                return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        if self._parse_ahead is not None:
            self.wait_parse_ahead(timeout=0)
        zygote, self._zygote = self._zygote, None
        if zygote is None:
            return
        if self._saved is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = self._saved
        self.commands = zygote.commands_since(self._log_offset)
        if self.keep:
            from paperlake.runtime import kept_helpers

            kept_helpers.keep(self.KIND, self._context, zygote)  # stopped instead when it cannot be kept
        else:
            zygote.stop()
        self.process, self.directory = None, None


if __name__ == "__main__":
    zygote_main(sys.argv[1], int(sys.argv[2]))
