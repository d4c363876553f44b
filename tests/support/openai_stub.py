"""A scripted OpenAI-compatible chat server for tests, on 127.0.0.1 only.

Run as a process: ``python tests/support/openai_stub.py SCRIPT.json RECORD.jsonl [--idle SECONDS]``. It binds port 0,
prints ``PORT <n>`` on stdout, answers ``POST /v1/chat/completions`` with the script's entries in order, appends
every request body to RECORD.jsonl (one JSON object per line), and exits by itself after ``--idle`` seconds without
a request. SIGTERM is reset to its default so a test can stop it by pid.

A script entry is either the assistant's text, or an object ``{"content": ..., "status": 500, "error": "...",
"prompt_tokens": n, "completion_tokens": n}``; a non-2xx ``status`` answers with an OpenAI-style error body.
Once the script is used up every request gets a 400 ``stub script exhausted``, so a test fails loudly.

For concurrent clients the script can instead be ``{"rules": [...], "default": entry}``: each request gets the
first rule whose ``match`` string occurs in its messages (as JSON) and that has ``times`` left (unlimited when
absent); a rule is an entry as above plus ``match`` and ``times``; ``"content": "{echo}"`` answers with the first
40 characters of the request's last text part. No matching rule: ``default``, else a 400.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from paperlake.runtime.processes import stop_process


def _serve(script_path: Path, record_path: Path, idle: float) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    script: Any = json.loads(script_path.read_text(encoding="utf-8"))
    state = {"next": 0, "last": time.monotonic()}
    rules: list[dict[str, Any]] | None = script.get("rules", []) if isinstance(script, dict) else None
    uses: dict[int, int] = {}

    def by_rule(request: dict[str, Any]) -> dict[str, Any] | None:
        text = json.dumps(request.get("messages", []), ensure_ascii=False)
        with lock:
            for number, rule in enumerate(rules or []):
                if rule.get("match", "") in text and uses.get(number, 0) < rule.get("times", 1 << 30):
                    uses[number] = uses.get(number, 0) + 1
                    return rule
        return script.get("default")

    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            with lock:
                state["last"] = time.monotonic()
                with open(record_path, "a", encoding="utf-8") as record:
                    record.write(json.dumps({"path": self.path, "body": json.loads(raw or b"{}")}) + "\n")
                index = state["next"]
                state["next"] += 1
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._reply(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            if rules is not None:
                entry = by_rule(json.loads(raw or b"{}"))
                if entry is None:
                    self._reply(400, {"error": {"message": "no stub rule matches", "type": "invalid_request_error"}})
                    return
            elif index >= len(script):
                self._reply(400, {"error": {"message": "stub script exhausted", "type": "invalid_request_error"}})
                return
            else:
                entry = script[index]
            if isinstance(entry, str):
                entry = {"content": entry}
            status = int(entry.get("status", 200))
            if status >= 300:
                message = entry.get("error", f"scripted error {status}")
                self._reply(status, {"error": {"message": message, "type": "stub_error", "code": status}})
                return
            request = json.loads(raw or b"{}")
            content = entry.get("content", "")
            if "{echo}" in content:
                last = request.get("messages", [{}])[-1].get("content", "")
                last = last if isinstance(last, str) else " ".join(p.get("text", "") for p in last)
                content = content.replace("{echo}", " ".join(last.split())[:40])
            prompt_tokens = entry.get("prompt_tokens", max(1, len(json.dumps(request.get("messages", []))) // 4))
            completion_tokens = entry.get("completion_tokens", max(1, len(content) // 4))
            self._reply(
                200,
                {
                    "id": f"chatcmpl-stub-{index}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": request.get("model", "stub-model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                },
            )

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True

    def watchdog() -> None:
        while True:
            time.sleep(0.2)
            if time.monotonic() - state["last"] > idle:
                server.shutdown()
                return

    threading.Thread(target=watchdog, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()
    server.server_close()


# The stub's own exit, a safety net for a test that died without stopping it by pid: long enough for an ingest between
# two of a test's requests on a loaded machine (60 s was not: a suite run on two busy cores lost the stub mid-test).
IDLE = 1800.0


@dataclass
class StubServer:
    """A running stub: ``base_url`` for the client, ``requests()`` for what it received, ``stop()`` by pid."""

    process: subprocess.Popen[str]
    port: int
    record_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int:
        return self.process.pid

    def requests(self) -> list[dict[str, Any]]:
        if not self.record_path.exists():
            return []
        lines = self.record_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line)["body"] for line in lines if line.strip()]

    def stop(self) -> None:
        stop_process(self.process)
        if self.process.stdout:
            self.process.stdout.close()

    def __enter__(self) -> "StubServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_stub(script: list[Any], directory: Path, idle: float = IDLE) -> StubServer:
    """Write ``script`` to ``directory`` and start the stub process; returns once it listens."""
    directory.mkdir(parents=True, exist_ok=True)
    script_path = directory / "stub_script.json"
    record_path = directory / "stub_requests.jsonl"
    script_path.write_text(json.dumps(script), encoding="utf-8")
    record_path.unlink(missing_ok=True)
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), str(script_path), str(record_path), "--idle", str(idle)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("PORT "):
        process.kill()
        raise RuntimeError(f"openai stub did not start (said {line!r})")
    return StubServer(process=process, port=int(line.split()[1]), record_path=record_path)


def main(argv: list[str]) -> None:
    idle = IDLE
    if "--idle" in argv:
        position = argv.index("--idle")
        idle = float(argv[position + 1])
        del argv[position : position + 2]
    script_path, record_path = map(Path, argv[:2])
    _serve(script_path, record_path, idle)


if __name__ == "__main__":
    main(sys.argv[1:])
