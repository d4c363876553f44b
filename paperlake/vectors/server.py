"""One process per Milvus Lite ``.db``: a file-lock guard for direct access, and a local server for sharing.

Milvus Lite opens a ``.db`` (a data directory) in-process and refuses a second process with a lock error deep in
pymilvus' connection setup ("Open local milvus failed"). We take our own advisory lock on ``<db>.lock`` first, wait
for it up to a timeout, and fail with a message that says who holds it and what to do instead. Several processes
share one store through ``milvus-lite server``, reached at ``http://127.0.0.1:PORT`` by the same client code.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from paperlake.runtime.healing import open_lock_file, set_aside

MILVUS_LITE_LOCK = "LOCK"  # the advisory lock Milvus Lite takes inside its data folder while it has it open


class StoreLockedError(TimeoutError):
    """Another process holds the Milvus Lite file."""


class ServerStartError(RuntimeError):
    """``milvus-lite server`` did not come up."""


_held: dict[str, tuple[int, int, int, str, bool]] = {}  # lock path → (fd, pid, reference count, purpose, shared)
_held_lock = threading.Lock()
_taken: dict[str, int] = {}  # lock path → how many times a guard of this process took it (see FileLockGuard.taken)


def lock_path_for(db_path: str | Path) -> Path:
    path = Path(db_path).resolve()
    return path.with_name(path.name + ".lock")


class FileLockGuard:
    """Exclusive ``fcntl.flock`` on ``<db>.lock``, re-entrant within a process, with a clear timeout error."""

    def __init__(
        self,
        db_path: str | Path,
        timeout: float = 30.0,
        purpose: str = "direct Milvus Lite access",
        shared: bool = True,
    ):
        self.db_path = Path(db_path).resolve()
        self.lock_path = lock_path_for(db_path)
        self.timeout = timeout
        self.purpose = purpose
        self.shared = shared  # other shared guards of this process may take it too (one in-process Milvus Lite)
        self._acquired = False

    def acquire(self) -> "FileLockGuard":
        key = str(self.lock_path)
        with _held_lock:
            held = _held.get(key)
            if held and held[1] == os.getpid():
                fd, pid, count, purpose, shared = held
                if not (shared and self.shared):
                    raise StoreLockedError(
                        f"Milvus Lite file {self.db_path} is held by this process for {purpose}; "
                        "connect through that server's http:// uri instead of opening the file."
                    )
                _held[key] = (fd, pid, count + 1, purpose, shared)
                _taken[key] = _taken.get(key, 0) + 1
                self._acquired = True
                return self
        fd = open_lock_file(self.lock_path)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read_holder(self.lock_path)
                    os.close(fd)
                    raise StoreLockedError(
                        f"Milvus Lite file {self.db_path} is in use by {holder} (waited {self.timeout:g}s). "
                        "Milvus Lite allows one process per .db file: share it through "
                        "paperlake.vectors.server.milvus_lite_server(...) and VectorStore('http://127.0.0.1:PORT')."
                    ) from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "purpose": self.purpose, "since": time.time()}).encode())
        own_lock = self.db_path / MILVUS_LITE_LOCK  # Milvus Lite's own: only it opens the folder, and only under ours
        if self.db_path.is_dir() and os.path.lexists(own_lock) and not own_lock.is_file():
            set_aside(own_lock, "Milvus Lite's lock file's name taken by something that is not a file")
        with _held_lock:
            _held[key] = (fd, os.getpid(), 1, self.purpose, self.shared)
            _taken[key] = _taken.get(key, 0) + 1
        self._acquired = True
        return self

    @property
    def holders(self) -> int:
        """How many guards of this process share the lock (0 when not held here)."""
        with _held_lock:
            held = _held.get(str(self.lock_path))
        return held[2] if held and held[1] == os.getpid() else 0

    @property
    def taken(self) -> int:
        """How many times guards of this process have taken the lock so far: a holder that sees it grow knows
        another store of this process may have written the folder meanwhile."""
        with _held_lock:
            return _taken.get(str(self.lock_path), 0)

    def release(self) -> None:
        if not self._acquired:
            return
        self._acquired = False
        key = str(self.lock_path)
        with _held_lock:
            fd, pid, count, purpose, shared = _held[key]
            if count > 1:
                _held[key] = (fd, pid, count - 1, purpose, shared)
                return
            del _held[key]
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> "FileLockGuard":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(lock_path: Path) -> str:
    try:
        info = json.loads(lock_path.read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    if not info:
        return "another process"
    return f"pid {info.get('pid')} ({info.get('purpose', 'unknown')})"


@dataclass
class MilvusLiteServer:
    """A running ``milvus-lite server`` subprocess."""

    data_dir: Path
    host: str
    port: int
    process: subprocess.Popen
    log_path: Path
    guard: FileLockGuard

    @property
    def uri(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 15.0) -> int:
        """Stop by pid: SIGINT (graceful close), then SIGTERM, then SIGKILL, within ``timeout`` seconds overall."""
        try:
            if self.process.poll() is None:
                for sig, share in ((signal.SIGINT, 0.6), (signal.SIGTERM, 0.3), (signal.SIGKILL, 0.1)):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.process.pid, sig)
                    try:
                        self.process.wait(timeout=max(timeout * share, 0.5))
                        break
                    except subprocess.TimeoutExpired:
                        continue
            return self.process.wait(timeout=5)
        finally:
            self.guard.release()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


# Run in a fresh interpreter between spawn and exec: default signal handling (a background shell may have left
# SIGINT/SIGTERM ignored, which an exec keeps), and death with the parent (Linux), checked against a parent that died
# before the request was in place.
_LAUNCHER = """
import os, signal, sys
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, signal.SIG_DFL)
if sys.platform.startswith("linux"):
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)
os.execv(sys.argv[2], sys.argv[2:])
"""


def launched(command: list[str]) -> list[str]:
    """``command`` run with default signals and stopped when this process dies, set up by the child itself: no
    pre-exec hook, so the child is started by vfork/posix_spawn. A fork would run gRPC's fork handlers (pymilvus is
    loaded here), which can abort the child before it execs ('epoll_wait error: Bad file descriptor', SIGABRT): a
    test that started a server after another had used Milvus failed that way."""
    executable = command[0] if os.path.isabs(command[0]) else shutil.which(command[0]) or command[0]
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), executable, *command[1:]]


def start_milvus_lite_server(
    data_dir: str | Path,
    port: int | None = None,
    host: str = "127.0.0.1",
    *,
    max_workers: int = 1,
    startup_timeout: float = 60.0,
    lock_timeout: float = 30.0,
) -> MilvusLiteServer:
    """Start ``milvus-lite server --data-dir X --host H --port N`` and wait until the port answers.

    ``max_workers`` defaults to 1: Milvus Lite's engine is single-writer per collection and the server does not
    serialise writes itself, so concurrent clients are safe only when the server handles one request at a time.
    The server holds our ``<db>.lock`` (taken here, for its lifetime) so direct opens of the same file wait instead
    of crashing.
    """
    data_dir = Path(data_dir).resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    port = port or free_port(host)
    guard = FileLockGuard(
        data_dir, timeout=lock_timeout, purpose=f"milvus-lite server on {host}:{port}", shared=False
    ).acquire()
    log_path = data_dir.with_name(data_dir.name + ".server.log")
    command = [
        sys.executable,
        "-m",
        "milvus_lite",
        "server",
        "--data-dir",
        str(data_dir),
        "--host",
        host,
        "--port",
        str(port),
        "--max-workers",
        str(max_workers),
    ]
    try:
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                launched(command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
    except BaseException:
        guard.release()
        raise
    server = MilvusLiteServer(data_dir, host, port, process, log_path, guard)
    deadline = time.monotonic() + startup_timeout
    while True:
        if process.poll() is not None:
            server.stop()
            raise ServerStartError(
                f"milvus-lite server for {data_dir} exited with {process.returncode}: {_tail(log_path)}"
            )
        with contextlib.suppress(OSError):
            with socket.create_connection((host, port), timeout=0.5):
                return server
        if time.monotonic() >= deadline:
            server.stop()
            raise ServerStartError(
                f"milvus-lite server for {data_dir} not answering on {host}:{port} after "
                f"{startup_timeout:g}s: {_tail(log_path)}"
            )
        time.sleep(0.1)


@contextlib.contextmanager
def milvus_lite_server(
    data_dir: str | Path, port: int | None = None, host: str = "127.0.0.1", **kwargs
) -> Iterator[MilvusLiteServer]:
    """Context manager around :func:`start_milvus_lite_server`; the server is stopped by pid on exit."""
    server = start_milvus_lite_server(data_dir, port, host, **kwargs)
    try:
        yield server
    finally:
        server.stop()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
