"""Drive an A2A 1.0 server directly and reduce what it sends to its shape, to compare the demo agent
with the real kernel: the state sequence, the `metadata.iac_code` keys, the kinds of parts and the
kind of each result (`task`, `statusUpdate`, `artifactUpdate`), never the texts or ids.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import requests

from agui_bridge.protocol.sse_parser import iter_messages

TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
TURN_END = TERMINAL | {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}


@dataclass
class Turn:
    events: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None

    @property
    def task_id(self) -> str:
        first = self.events[0]
        return str(first.get("id") or first.get("taskId"))

    @property
    def context_id(self) -> str:
        return str(self.events[0]["contextId"])

    @property
    def last_input(self) -> dict[str, Any]:
        for event in reversed(self.events):
            iac = (event.get("metadata") or {}).get("iac_code") or {}
            if "input" in iac:
                result: dict[str, Any] = iac["input"]
                return result
        raise AssertionError("no input in the turn")


class A2A:
    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.headers = {"A2A-Version": "1.0"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        result: dict[str, Any] = requests.post(self.url, json=body, headers=self.headers, timeout=60).json()
        return result

    def send(
        self,
        parts: list[dict[str, Any]],
        cwd: str,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        stop_after: int | None = None,
        read_to_eof: bool = False,
    ) -> Turn:
        message: dict[str, Any] = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": parts,
            "metadata": {"iac_code": {"cwd": cwd}},
        }
        if context_id:
            message["contextId"] = context_id
        if task_id:
            message["taskId"] = task_id
        body = {"jsonrpc": "2.0", "id": "1", "method": "SendStreamingMessage", "params": {"message": message}}
        turn = Turn()
        with requests.post(self.url, json=body, headers=self.headers, stream=True, timeout=60) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                turn.error = response.json().get("error")
                return turn
            for record in iter_messages(response.iter_content(chunk_size=None)):
                data = json.loads(record.data)
                if "error" in data:
                    turn.error = data["error"]
                    break
                result = data["result"]
                (kind,) = result
                turn.events.append({"kind": kind, **result[kind]})
                if stop_after is not None and len(turn.events) >= stop_after:
                    break
                if not read_to_eof and state_of(turn.events[-1]) in TURN_END:
                    break
        return turn

    def text(self, text: str, cwd: str, **kwargs: Any) -> Turn:
        return self.send([{"text": text}], cwd, **kwargs)

    def answer(self, turn: Turn, decision: str, cwd: str) -> Turn:
        request = turn.last_input
        data = {
            "schemaVersion": 1,
            "kind": "permission",
            "requestTaskId": request["requestTaskId"],
            "inputId": request["inputId"],
            "toolUseId": request["toolUseId"],
            "decision": decision,
        }
        parts = [{"mediaType": "application/json", "data": data}]
        return self.send(parts, cwd, context_id=turn.context_id, task_id=turn.task_id, read_to_eof=True)

    def get_task(self, task_id: str) -> dict[str, Any]:
        return self.call("GetTask", {"id": task_id, "historyLength": 1})

    def cancel_task(self, task_id: str) -> dict[str, Any]:
        return self.call("CancelTask", {"id": task_id})

    def cancel_while_streaming(self, text: str, cwd: str, after_events: int) -> tuple[Turn, dict[str, Any]]:
        """Start a turn, cancel it once `after_events` arrived, and read its stream to the end."""
        turn = Turn()
        ready = threading.Event()
        holder: dict[str, Any] = {}

        def read() -> None:
            message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}],
                       "metadata": {"iac_code": {"cwd": cwd}}}  # fmt: skip
            body = {"jsonrpc": "2.0", "id": "1", "method": "SendStreamingMessage", "params": {"message": message}}
            with requests.post(self.url, json=body, headers=self.headers, stream=True, timeout=60) as response:
                for record in iter_messages(response.iter_content(chunk_size=None)):
                    result = json.loads(record.data)["result"]
                    (kind,) = result
                    turn.events.append({"kind": kind, **result[kind]})
                    if len(turn.events) >= after_events:
                        ready.set()
                    if state_of(turn.events[-1]) in TURN_END:
                        break
            ready.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert ready.wait(30)
        holder["cancel"] = self.cancel_task(turn.task_id)
        reader.join(30)
        return turn, holder["cancel"]


def state_of(event: dict[str, Any]) -> str | None:
    status: dict[str, str] = event.get("status") or {}
    return status.get("state")


def part_kinds(event: dict[str, Any]) -> list[str]:
    parts: list[dict[str, Any]] = []
    message = (event.get("status") or {}).get("message")
    if message:
        parts = message.get("parts", [])
    elif "artifact" in event:
        parts = event["artifact"].get("parts", [])
    return [next(k for k in ("text", "data", "url", "raw") if k in part) for part in parts]


def iac_keys(event: dict[str, Any]) -> list[str]:
    iac = (event.get("metadata") or {}).get("iac_code") or {}
    keys = []
    for key, value in sorted(iac.items()):
        if key == "tool" and isinstance(value, dict):
            keys.append(f"tool.{value.get('status')}")
        else:
            keys.append(key)
    return keys


def shape(turn: Turn) -> list[tuple[str, str | None, tuple[str, ...], tuple[str, ...]]]:
    """One row per event, consecutive repeats collapsed (chunk counts are the script's, not the protocol's)."""
    rows: list[tuple[str, str | None, tuple[str, ...], tuple[str, ...]]] = []
    for event in turn.events:
        row = (event["kind"], state_of(event), tuple(iac_keys(event)), tuple(part_kinds(event)))
        if not rows or rows[-1] != row:
            rows.append(row)
    return rows


def states(turn: Turn) -> list[str | None]:
    out: list[str | None] = []
    for event in turn.events:
        state = state_of(event)
        if state and (not out or out[-1] != state):
            out.append(state)
    return out


def wait(seconds: float) -> None:
    time.sleep(seconds)
