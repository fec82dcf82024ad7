"""A small stand-in for the bridge's reattach contract (docs/design.md#reattach), for client tests that must not
depend on the server side: it serves the web console's files, `POST /` (a slow run with numbered
events whose first connection it breaks mid-run), the reattach route (a replay after `Last-Event-ID`
that deliberately starts two events early, so a client must deduplicate by id) and a status route.

The real bridge is exercised by tests/e2e/test_reattach_clients.py and test_console_reattach.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from agui_bridge.web.console_api import STATIC_FILES, vendor_files

CHUNKS = [f"slow chunk {n}. " for n in range(1, 7)]


def slow_run(thread_id: str, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}]
    value = {"executionId": f"exec-{run_id}", "rosInvocationId": "ros", "threadId": thread_id}
    events.append({"type": "CUSTOM", "name": "iac-code.session.v1", "value": value})
    events.append({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})
    events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": chunk} for chunk in CHUNKS]
    events.append({"type": "TEXT_MESSAGE_END", "messageId": "m1"})
    events.append({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id, "outcome": {"type": "success"}})
    return events


@dataclass
class FakeState:
    cut_after: int = 5  # events of the first POST before its connection breaks
    pace_s: float = 0.15
    posts: int = 0
    runs: dict[str, tuple[str, str]] = field(default_factory=dict)  # runId -> (threadId, ros)
    gets: list[dict[str, str | None]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: FakeState

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet
        return

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, frames: list[bytes], *, broken: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        try:
            for data in frames:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                time.sleep(self.state.pace_s)
            self.wfile.write(b"ff\r\npartial" if broken else b"0\r\n\r\n")  # a broken chunk: the connection drops
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (the cut some tests make themselves)

    @staticmethod
    def _frames(events: list[dict[str, Any]], first: int) -> list[bytes]:
        return [f"id: {n}\ndata: {json.dumps(e)}\n\n".encode() for n, e in enumerate(events, 1) if n >= first]

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/console":
            self._file("index.html")
        elif url.path.startswith("/console/static/vendor/"):
            self._file("vendor", url.path.rsplit("/", 1)[1])
        elif url.path.startswith("/console/static/"):
            self._file(url.path.rsplit("/", 1)[1])
        elif url.path.startswith("/extensions/iac-code/v1/threads/") and url.path.endswith("/events"):
            parts = url.path.split("/")  # ['', extensions, iac-code, v1, threads, T, runs, R, events]
            thread_id, run_id = parts[5], parts[7]
            # As the bridge: the Ros-Invocation-Id header wins over ?rosInvocationId=.
            header = self.headers.get("Ros-Invocation-Id")
            queried: list[str | None] = [*parse_qs(url.query).get("rosInvocationId", []), None]
            ros = header or queried[0]
            last = self.headers.get("Last-Event-ID")
            sent_in = "header" if header else "query"
            self.state.gets.append({"thread": thread_id, "run": run_id, "ros": ros, "last": last, "in": sent_in})
            if self.state.runs.get(run_id) != (thread_id, ros):
                self._json(404, {"error": {"code": "RUN_NOT_FOUND", "message": "No such run."}})
                return
            after = int(last or 0)
            self._stream(self._frames(slow_run(thread_id, run_id), max(1, after - 1)), broken=False)
        else:
            self._json(404, {"error": {"code": "NOT_FOUND", "message": "Not found."}})

    def _file(self, *path: str) -> None:
        """The console's files, from the same allow-lists as the bridge (the module imports the vendored ones)."""
        content_type = (vendor_files() if path[0] == "vendor" else STATIC_FILES).get(path[-1])
        if content_type is None:
            self._json(404, {"error": {"code": "NOT_FOUND", "message": "Not found."}})
            return
        data = resources.files("agui_bridge.console").joinpath("static", *path).read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        url = urlsplit(self.path)
        if url.path.endswith("/status"):
            self._json(404, {"error": {"code": "THREAD_NOT_FOUND", "message": "No such thread."}})
            return
        if url.path != "/":
            self._json(404, {"error": {"code": "NOT_FOUND", "message": "Not found."}})
            return
        ros = body["forwardedProps"]["iacCode"]["rosInvocationId"]
        self.state.runs[body["runId"]] = (body["threadId"], ros)
        self.state.posts += 1
        frames = self._frames(slow_run(body["threadId"], body["runId"]), 1)
        cut = self.state.posts == 1
        self._stream(frames[: self.state.cut_after] if cut else frames, broken=cut)


@contextmanager
def fake_reattach_bridge(state: FakeState | None = None) -> Iterator[tuple[str, FakeState]]:
    """Yields (base URL, state) of a fake bridge running in a thread."""
    fake = state or FakeState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"state": fake}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", fake
    finally:
        server.shutdown()
        server.server_close()
