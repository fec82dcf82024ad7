"""Hostile input end to end through gunicorn + gevent (one worker, so nothing hides behind another):
hostile bodies and slow uploads are refused while the worker keeps serving."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from agui_bridge.config import limits
from tests.support.harness import BridgeServer, bridge_server, new_thread_id, run_body

pytestmark = pytest.mark.e2e

MAX_BODY = 12 * 1024 * 1024


@pytest.fixture
def server(tmp_path: Path, demo_url: str, demo_token: str) -> Iterator[BridgeServer]:
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=1) as running:
        yield running


def hostile_messages_body() -> bytes:
    one = b'{"id":"m","role":"user","content":"x"},'
    count = (MAX_BODY - 4096) // len(one)
    return b'{"threadId":"t","runId":"r","messages":[' + one * (count - 1) + one[:-1] + b"]}"


def test_hostile_bodies_are_invalid_input_through_gunicorn(server: BridgeServer, tmp_path: Path) -> None:
    deep: object = "leaf"
    for _ in range(900):
        deep = [deep]
    nested = run_body(new_thread_id(), "hi", tmp_path)
    nested["state"] = {"deep": deep}
    cases = [
        (hostile_messages_body(), ""),
        (json.dumps(nested).encode(), None),
        (b'{"state":' + b"[" * 200_000 + b"]" * 200_000 + b"}", ""),
    ]
    for raw, field in cases:
        response = requests.post(server.url, data=raw, headers={"Content-Type": "application/json"}, timeout=60)
        assert response.status_code == 400, response.text[:500]
        error = response.json()["error"]
        assert error["code"] == "INVALID_INPUT", error
        if field is not None:
            assert error["field"] == field, error
        else:
            assert error["field"].startswith("/state/deep/0/0"), error
    assert requests.get(server.url + "health", timeout=5).status_code == 200


def test_slow_upload_is_dropped_while_the_worker_keeps_serving(server: BridgeServer, tmp_path: Path) -> None:
    raw = json.dumps(run_body(new_thread_id(), "hi", tmp_path)).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        head = (
            f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Accept-Language: fr\r\nContent-Length: {len(raw)}\r\n\r\n"
        )
        sock.sendall(head.encode() + raw[:10])
        started = time.monotonic()
        # The same (only) worker answers other requests while this upload stalls.
        for _ in range(3):
            assert requests.get(server.url + "health", timeout=5).status_code == 200
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        waited = time.monotonic() - started
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 400 " in status_line, answer[:500]
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["error"]["code"] == "INVALID_JSON"
    assert body["error"]["message"] == "Le corps de la requête est arrivé trop lentement et n'a pas été accepté."
    # Dropped by the pace rule, not by some much later socket timeout.
    assert waited < limits.UPLOAD_GRACE_S + 30
