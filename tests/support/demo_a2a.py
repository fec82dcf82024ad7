"""Talking A2A 1.0 to the demo agent over real HTTP, as the bridge's kernel client does: JSON-RPC calls,
streamed turns read into their status updates, and what a finished kernel turn looks like."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import requests

from agui_bridge.protocol.sse_parser import parse_body

TOKEN = "demo-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}


@dataclass
class Stream:
    content_type: str
    raw: bytes
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def results(self) -> list[dict[str, Any]]:
        return [e["result"] for e in self.events]

    @property
    def task_id(self) -> str:
        first = self.results[0]
        return str(first["task"]["id"] if "task" in first else first["statusUpdate"]["taskId"])

    def updates(self) -> list[dict[str, Any]]:
        return [r["statusUpdate"] for r in self.results if "statusUpdate" in r]

    def states(self) -> list[str]:
        return [u["status"]["state"] for u in self.updates()]

    def iac(self) -> list[dict[str, Any]]:
        return [u.get("metadata", {}).get("iac_code", {}) for u in self.updates()]

    def deltas(self) -> list[str]:
        return [
            u["status"]["message"]["parts"][0]["text"]
            for u in self.updates()
            if u["status"].get("message", {}).get("messageId", "").endswith("-message")
            and u["status"]["state"] == "TASK_STATE_WORKING"
        ]


def user_message(text: str, context_id: str | None = None, task_id: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"iac_code": {"cwd": "/workspace/session-1"}},
    }
    if context_id:
        msg["contextId"] = context_id
    if task_id:
        msg["taskId"] = task_id
    return msg


def rpc(base_url: str, method: str, params: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    resp = requests.post(base_url, json=body, headers=AUTH if headers is None else headers, timeout=10)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    return resp.json()


def send(base_url: str, text: str, context_id: str | None = None, task_id: str | None = None) -> Stream:
    body = {
        "jsonrpc": "2.0",
        "id": str(uuid.uuid4()),
        "method": "SendStreamingMessage",
        "params": {
            "message": user_message(text, context_id, task_id),
            "configuration": {"acceptedOutputModes": ["text/plain"]},
        },
    }
    with requests.post(base_url, json=body, headers=AUTH, stream=True, timeout=(5, 30)) as resp:
        assert resp.status_code == 200
        raw = b"".join(resp.iter_content(chunk_size=None))
        stream = Stream(resp.headers["content-type"], raw)
    stream.events.extend(json.loads(message.data) for message in parse_body(raw))
    return stream


def assert_turn_finished(stream: Stream) -> None:
    """The kernel's end of a successful turn: final echo, then INPUT_REQUIRED without input."""
    tid = stream.task_id
    last = stream.updates()[-1]
    assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "input" not in last["metadata"]["iac_code"]
    final = stream.updates()[-2]
    assert final["status"]["state"] == "TASK_STATE_WORKING"
    assert final["status"]["message"]["messageId"] == f"{tid}-2"
    assert final["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
    assert final["status"]["message"]["parts"][0]["text"] == "".join(stream.deltas())
    assert any("usage" in m for m in stream.iac())
