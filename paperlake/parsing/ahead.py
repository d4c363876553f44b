"""Parse ahead: the papers an ingest will parse, parsed in a second process from the moment the plan is known.

An ingest knows which PDFs it will parse as soon as it has hashed the inbox, but the parse step cannot start before
Dagster is imported and its instance opened, which takes about as long as a small volume's whole parse.
:class:`ParseAhead` starts a worker process (``python -m paperlake.parsing.ahead``) at that moment and feeds it the
papers in the ingest's order; the parse step, in the ingest's process, asks for each paper before parsing it
(:func:`take_parsed`, called by :func:`paperlake.lake.pipeline.parse_source`) and takes the worker's result when it
has one. So the parse runs on the core the imports leave idle, then on two cores beside the step:

- a paper the worker has parsed is taken (the step never parses it);
- a paper the worker is parsing is waited for, and while it waits the step parses the next paper nobody has claimed
  (kept for its turn), so neither side idles;
- a paper nobody has claimed is the step's own: it parses it as it always did.

The quality gate runs in the worker too (:func:`take_gate`, called by :func:`paperlake.lake.pipeline.ingest_papers`):
the worker imports Great Expectations while it has nothing to parse (seconds of a core that the step, on the ingest's
critical path, no longer spends) and runs :func:`paperlake.lake.quality.validate_papers` on the step's batch, as the
step would.

Nothing here is a store. The worker's result is a :class:`~paperlake.lake.views.ParsedPaper` sent over a pipe, held in
memory until the step takes it, and used only for the very inputs it was parsed from (file, manifest row, backend
and its version, chunk size: :func:`parse_inputs`); the step still checks identity and integrity, has the gate run
and publishes, so the lake cannot tell a paper parsed ahead from one parsed in the step. A worker that fails on a
paper, or dies, or whose result is for other inputs, only makes the step parse that paper itself (so a parser error
is raised where it always was, with its traceback), and a gate it cannot run is run in the step. The worker ends
when the ingest closes it, or when its input pipe closes (the ingest died: after the paper it is on). At most
``lead`` results wait in memory.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from paperlake.config import Settings
    from paperlake.lake.inbox import PaperSource
    from paperlake.lake.views import ParsedPaper

log = logging.getLogger(__name__)

LEAD = 4  # results parsed ahead of the step's current paper, at most (a paper's views: a few MB to tens of MB)

# a paper's state in a ParseAhead
_PENDING, _WORKER, _STEP, _DONE, _FAILED, _PASSED = "pending", "worker", "step", "done", "failed", "passed"


def parse_inputs(source: "PaperSource", backend: str, settings: "Settings") -> tuple:
    """What a paper's parse depends on: its file and manifest row, the backend (and its version, as the process
    computing this has it: the worker's is compared with the step's) and the settings it reads. A result parsed for
    other inputs is never used."""
    from paperlake.parsing.backends import PARSERS

    return (
        PARSERS[backend].version if backend in PARSERS else None,
        source.paper_key,
        str(source.pdf_path),
        source.sha256,
        source.manifest_hash,
        str(source.mineru_dir) if source.mineru_dir else None,
        backend,
        settings.max_chunk_tokens,
        settings.mineru_executable if backend == "mineru" else None,
        str(settings.cache) if backend == "mineru" else None,
    )


@dataclass
class AheadParseStats:
    papers: int = 0  # parsed by the worker
    taken: int = 0  # of those, taken by the step
    stolen: int = 0  # parsed by the step out of turn, while it waited for the worker
    waited_seconds: float = 0.0  # the step's time spent waiting for the worker
    gated: int = 0  # papers whose quality gate the worker ran
    errors: list[str] = field(default_factory=list)


class _Worker:
    """The worker process and its two pipes. One :class:`ParseAhead` uses it at a time; an idle, healthy one can be
    handed to the next ingest of this process (:mod:`paperlake.runtime.kept_helpers`)."""

    def __init__(self) -> None:
        to_child, send = os.pipe()
        receive, from_child = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "paperlake.parsing.ahead", str(to_child), str(from_child)],
                pass_fds=(to_child, from_child),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except BaseException:
            os.close(send)
            os.close(receive)
            raise
        finally:
            os.close(to_child)
            os.close(from_child)
        self.requests = Connection(send, readable=False)
        self.replies = Connection(receive, writable=False)

    def alive(self) -> bool:
        return self.process.poll() is None and not self.requests.closed

    def stop(self) -> None:
        """Close its pipes (it ends after the request it is on) and wait; killed if it has not ended in 5 s."""
        for connection in (self.requests, self.replies):
            try:
                connection.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ParseAhead:
    """The worker process and the bookkeeping for one ingest's papers (``sources``, in the order the parse step
    will ask for them), each parsed with the backend it will be parsed with (``backends``, by paper key). With
    ``keep=True`` the worker is taken from, and left for, this process's next ingest when it is idle at the end
    (:mod:`paperlake.runtime.kept_helpers`): its Great Expectations import and gate are then paid once per process."""

    KIND = "parse-ahead"

    def __init__(
        self,
        sources: list["PaperSource"],
        backends: dict[str, str],
        settings: "Settings",
        *,
        lead: int = LEAD,
        keep: bool = False,
    ):
        from paperlake.runtime import kept_helpers

        self.settings, self.lead, self.keep = settings, max(1, lead), keep
        self.sources = list(sources)
        self.backends = dict(backends)
        self._index = {source.paper_key: i for i, source in enumerate(self.sources)}
        self._state = [_PENDING] * len(self.sources)
        self._results: dict[int, tuple[tuple, "ParsedPaper"]] = {}  # index -> (its parse inputs, its parse)
        self._position = 0  # the step's current paper: every paper before it is passed
        self._closed = False
        self._tainted = False  # a request failed on the pipe: what the worker will send next is unknown
        self._cond = threading.Condition()
        self._pipe = threading.Lock()  # one request at a time on the worker's pipe (a parse, or a gate)
        self.stats = AheadParseStats()
        self._context = kept_helpers.context_key()
        worker = kept_helpers.take(self.KIND, self._context) if keep else None
        self.reused = worker is not None
        self.worker = worker or _Worker()
        self.process = self.worker.process
        self._requests, self._replies = self.worker.requests, self.worker.replies
        self._feeder = threading.Thread(target=self._feed, name="paperlake-parse-ahead", daemon=True)
        self._feeder.start()

    # ── the step's side ──

    def take(self, source: "PaperSource", backend: str, settings: "Settings") -> "ParsedPaper | None":
        """The worker's parse of ``source`` if it has (or is about to have) one for these inputs, else None: the
        caller parses the paper itself. While the worker is on this paper, parses the next unclaimed ones here."""
        index = self._index.get(source.paper_key)
        if index is None or self.sources[index].paper_key != source.paper_key:
            return None
        wanted = parse_inputs(source, backend, settings)
        started = time.perf_counter()
        with self._cond:
            self._pass_before(index)
            while self._state[index] == _WORKER:
                stolen = self._claim_next(after=index)
                if stolen is None:
                    self._cond.wait()
                    continue
                self._cond.release()
                try:
                    self._parse_here(stolen)
                finally:
                    self._cond.acquire()
            state = self._state[index]
            self._state[index] = _STEP if state == _PENDING else _PASSED
            result = self._results.pop(index, None)
            self._cond.notify_all()
        if state != _PENDING:
            self.stats.waited_seconds += time.perf_counter() - started
        if state != _DONE or result is None:
            return None
        inputs, parsed = result
        if inputs != wanted:
            return None  # parsed for other inputs (another backend, parser version or chunk size than the step's)
        self.stats.taken += 1
        return parsed

    def _pass_before(self, index: int) -> None:
        """The step is at ``index``: the papers before it will not be asked for again (refused before their parse,
        or taken); their results, if any, are dropped. Under the lock."""
        for earlier in range(self._position, index):
            if self._state[earlier] in (_PENDING, _DONE, _FAILED):
                self._state[earlier] = _PASSED
            self._results.pop(earlier, None)
        self._position = max(self._position, index)

    def _claim_next(self, after: int) -> int | None:
        """The first unclaimed paper after ``after`` within the lead, claimed for the step. Under the lock."""
        for candidate in range(after + 1, min(len(self.sources), self._position + self.lead + 1)):
            if self._state[candidate] == _PENDING:
                self._state[candidate] = _STEP
                return candidate
        return None

    def _parse_here(self, index: int) -> None:
        """Parse a paper out of turn in the step's process (outside the lock), kept for its turn. A failure is left
        for its turn, when the step parses it again and meets the error where it always does."""
        from paperlake.lake.pipeline import parse_source

        source = self.sources[index]
        try:
            parsed = parse_source(source, self.backends[source.paper_key], self.settings, ahead=False)
        except Exception:
            parsed = None
        with self._cond:
            if parsed is not None and self._state[index] == _STEP and index >= self._position:
                inputs = parse_inputs(source, self.backends[source.paper_key], self.settings)
                self._results[index] = (inputs, parsed)
                self._state[index] = _DONE
                self.stats.stolen += 1
            elif self._state[index] == _STEP:
                self._state[index] = _FAILED
            self._cond.notify_all()

    def validate(self, items: list[tuple["ParsedPaper", int]], max_chunk_tokens: int) -> list | None:
        """:func:`paperlake.lake.quality.validate_papers` run by the worker, which imported Great Expectations while it
        had nothing to parse (an import the step does not then pay for), after the paper it is on; None when the
        worker is gone (the caller validates here)."""
        try:
            with self._pipe:
                if self._closed or self.process.poll() is not None:
                    return None
                try:
                    self._requests.send(("gate", items, max_chunk_tokens))
                    status, payload = self._replies.recv()
                except BaseException:
                    self._tainted = True
                    raise
        except Exception as error:
            self.stats.errors.append(f"the gate in the parse-ahead worker failed: {type(error).__name__}: {error}")
            return None
        if status != "ok":
            self.stats.errors.append(f"the gate in the parse-ahead worker failed: {payload}")
            return None
        self.stats.gated += len(items)
        return payload

    # ── the worker's side ──

    def _feed(self) -> None:
        """Give the worker the next unclaimed paper within the lead, one at a time, and keep what it returns."""
        try:
            while True:
                with self._cond:
                    index = None
                    while not self._closed:
                        index = self._claim_for_worker()
                        if index is not None:
                            break
                        if all(state != _PENDING for state in self._state):
                            break
                        self._cond.wait()
                    if index is None:
                        break
                source = self.sources[index]
                with self._pipe:
                    if self._closed:  # closed since the claim: nothing more is sent to the worker
                        break
                    try:
                        self._requests.send(("parse", source, self.backends[source.paper_key], self.settings))
                        status, payload = self._replies.recv()
                    except BaseException:
                        self._tainted = True
                        raise
                with self._cond:
                    if status == "ok" and self._state[index] == _WORKER and index >= self._position:
                        self._results[index] = payload  # (the inputs as the worker saw them, the parse)
                        self._state[index] = _DONE
                        self.stats.papers += 1
                    else:
                        if status != "ok":
                            self.stats.errors.append(f"{source.paper_key}: {payload}")
                        self._state[index] = _FAILED if self._state[index] == _WORKER else self._state[index]
                    self._cond.notify_all()
        except Exception as error:  # the worker died or was stopped: every paper not parsed yet is the step's own
            if not self._closed:
                self.stats.errors.append(f"the parse-ahead worker stopped: {type(error).__name__}: {error}")
        finally:  # the worker stays up for the gate (:meth:`validate`) until :meth:`close`
            with self._cond:
                self._state = [_FAILED if state == _WORKER else state for state in self._state]
                self._cond.notify_all()

    def _claim_for_worker(self) -> int | None:
        for candidate in range(self._position, min(len(self.sources), self._position + self.lead)):
            if self._state[candidate] == _PENDING:
                self._state[candidate] = _WORKER
                return candidate
        return None

    def close(self) -> AheadParseStats:
        """Stop using the worker and drop the results not taken. A worker on a request (a paper parsing, a gate) is
        stopped, since what it is doing is nobody's now; an idle one is kept for the next ingest (``keep``) or
        stopped."""
        from paperlake.runtime import kept_helpers

        with self._cond:
            self._closed = True
            self._results.clear()
            self._cond.notify_all()
        idle = self._pipe.acquire(blocking=False)  # taken: no request in flight, and none is sent after _closed
        if idle:
            self._pipe.release()
        elif self.process.poll() is None:
            self.process.terminate()
        self._feeder.join()
        if idle and self.keep and not self._tainted:
            kept_helpers.keep(self.KIND, self._context, self.worker)  # stopped instead when it cannot be kept
        else:
            self.worker.stop()
        return self.stats


# The parse-ahead of this process's ingest, which the parse step (running in the same process) asks: one at a time.
_ACTIVE: ParseAhead | None = None
_ACTIVE_LOCK = threading.Lock()


def activate(ahead: ParseAhead | None) -> None:
    """Make ``ahead`` the one :func:`take_parsed` asks (None: none)."""
    global _ACTIVE
    with _ACTIVE_LOCK:
        _ACTIVE = ahead


def take_parsed(source: "PaperSource", backend: str, settings: "Settings") -> "ParsedPaper | None":
    """This process's parse-ahead result for ``source`` (see :meth:`ParseAhead.take`), or None."""
    with _ACTIVE_LOCK:
        ahead = _ACTIVE
    if ahead is None:
        return None
    try:
        return ahead.take(source, backend, settings)
    except Exception as error:  # a helper's failure is never the paper's: the step parses it
        log.warning("%s: parse ahead failed: %s: %s", source.paper_key, type(error).__name__, error)
        return None


def take_gate(items: list[tuple["ParsedPaper", int]], max_chunk_tokens: int) -> list | None:
    """The quality gate's reports for ``items`` from this process's parse-ahead worker (:meth:`ParseAhead.validate`),
    or None: the caller runs :func:`paperlake.lake.quality.validate_papers` itself."""
    with _ACTIVE_LOCK:
        ahead = _ACTIVE
    return None if ahead is None else ahead.validate(items, max_chunk_tokens)


def _warm_gate() -> None:
    """Import Great Expectations and make the gate's context and data sources: what the first gate would pay."""
    from paperlake.lake.quality import prepare_gate

    prepare_gate()


def worker_main(requests_fd: int, replies_fd: int) -> None:
    """The worker: answer each request, ("parse", source, backend, settings) with the parsed paper, ("gate", items,
    max_chunk_tokens) with the quality gate's reports, as ("ok", result) or ("error", reason), until the ingest
    closes the pipe. Between requests, once, it prepares the gate."""
    from paperlake.parsing.backends import parse_with

    requests = Connection(requests_fd, readable=True, writable=False)
    replies = Connection(replies_fd, readable=False, writable=True)
    warmed = False
    while True:
        try:
            if not warmed and not requests.poll(0):  # nothing to parse now: the gate's imports, while idle
                warmed = True
                try:
                    _warm_gate()
                except Exception:  # the gate request then says what is wrong
                    pass
            kind, *request = requests.recv()
        except (EOFError, OSError):
            return
        try:
            if kind == "parse":
                source, backend, settings = request
                reply = ("ok", (parse_inputs(source, backend, settings), parse_with(backend, source, settings)))
            else:
                from paperlake.lake.quality import validate_papers

                items, max_chunk_tokens = request
                reply = ("ok", validate_papers(items, max_chunk_tokens=max_chunk_tokens))
        except Exception as error:
            reply = ("error", f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
        try:
            replies.send(reply)
        except (OSError, ValueError):
            return


if __name__ == "__main__":
    worker_main(int(sys.argv[1]), int(sys.argv[2]))
