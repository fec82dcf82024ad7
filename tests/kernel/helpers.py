"""Helpers of the real-kernel tier: bodies, resumes, the thread file and the kernel's own view (GetTask)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import requests

from agui_bridge.store.keys import thread_file_stem
from tests.kernel.kernel_harness import Kernel
from tests.support.agui_checks import event_types
from tests.support.harness import BridgeServer, new_thread_id, run_body

ROS = "invocation-1"


def workspace(root: Path) -> Path:
    path = root / f"ws-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    return path


def start(server: BridgeServer, ws: Path, text: str, **props: Any) -> tuple[str, list[dict[str, Any]]]:
    """A new thread whose first run ends on an interrupt; returns (threadId, interrupts)."""
    thread_id = new_thread_id()
    events = server.run(run_body(thread_id, text, ws, ros_invocation_id=ROS, **props), expect="interrupt")
    return thread_id, events[-1]["outcome"]["interrupts"]


def resume_body(
    thread_id: str, ws: Path, answers: list[dict[str, Any]], ros: str = ROS, **props: Any
) -> dict[str, Any]:
    body = run_body(thread_id, "", ws, ros_invocation_id=ros, **props)
    body["messages"] = []
    body["resume"] = answers
    return body


def answer(interrupt: dict[str, Any], decision: str) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": decision}}


def error_code(events: list[dict[str, Any]]) -> str:
    assert event_types(events)[-1] == "RUN_ERROR", event_types(events)
    return str(events[-1]["code"])


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e.get("delta", "") for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def document(server: BridgeServer, thread_id: str) -> dict[str, Any]:
    path = server.state_dir / "threads" / f"{thread_file_stem(thread_id)}.json"
    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return result


def get_task(kernel: Kernel, task_id: str) -> dict[str, Any]:
    response = requests.post(
        kernel.url,
        json={"jsonrpc": "2.0", "id": "probe", "method": "GetTask", "params": {"id": task_id, "historyLength": 1}},
        headers={"A2A-Version": "1.0", "Authorization": f"Bearer {kernel.token}"},
        timeout=10,
    )
    result: dict[str, Any] = response.json()["result"]
    return result


def wait_task_state(kernel: Kernel, task_id: str, state: str, timeout_s: float = 15.0) -> str:
    deadline = time.monotonic() + timeout_s
    current = ""
    while time.monotonic() < deadline:
        current = str(get_task(kernel, task_id)["status"]["state"])
        if current == state:
            break
        time.sleep(0.2)
    return current
