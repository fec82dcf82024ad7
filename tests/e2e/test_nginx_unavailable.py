"""Behind the shipped nginx site, an unavailable bridge is the bridge's JSON 503, never an HTML page
(docs/operations.md#restarts)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from agui_bridge.demo.testing import free_port
from tests.support.harness import new_thread_id, run_body
from tests.support.nginx import bridge_error_envelope, private_nginx, require_nginx

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _needs_nginx() -> None:
    require_nginx()


#: What the bridge itself answers when it refuses a run (agui_bridge/web/http_errors.py), its message read from
#: the English catalog rather than copied.
BRIDGE_REFUSAL = bridge_error_envelope("SERVICE_UNAVAILABLE", "service_unavailable")


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/"), ("GET", "/health"), ("POST", "/extensions/iac-code/v1/threads/t-1/status")]
)
def test_nginx_answers_a_json_503_with_retry_after_while_the_bridge_is_down(
    tmp_path: Path, method: str, path: str
) -> None:
    nobody_listens = free_port()
    with private_nginx(nobody_listens, tmp_path / "nginx") as site:
        response = requests.request(method, site + path, json=run_body(new_thread_id(), "hello", tmp_path), timeout=10)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    assert response.headers["Content-Type"] == "application/json"
    assert "<html" not in response.text.lower()
    assert response.json() == BRIDGE_REFUSAL


class _RefusingBridge(BaseHTTPRequestHandler):
    """Answers every request as a draining bridge does, with a Retry-After of its own."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        body = json.dumps({"error": {"code": "SERVICE_UNAVAILABLE", "message": "draining (stub)"}}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Retry-After", "7")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's signature
        return


@contextlib.contextmanager
def refusing_bridge() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingBridge)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_the_bridges_own_503_passes_through_nginx_unchanged(tmp_path: Path) -> None:
    with refusing_bridge() as port, private_nginx(port, tmp_path / "nginx") as site:
        response = requests.post(site + "/", json=run_body(new_thread_id(), "hello", tmp_path), timeout=10)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "7"
    assert response.json() == {"error": {"code": "SERVICE_UNAVAILABLE", "message": "draining (stub)"}}
