"""The demo agent against the real kernel: the same A2A scenarios, the same event shapes.

Each scenario runs once against each server; the test compares what `tests/kernel/a2a_shapes.py` keeps
of the traffic (kind of each result, state sequence, `metadata.iac_code` keys, part kinds, error codes),
never texts or ids. Where the demo differed from the kernel it was corrected, and the row pins it:
a task whose turn ended cannot be cancelled (-32002, it stays INPUT_REQUIRED), a new turn that races a
cancel of its context fails with "RuntimeError: A2A context runtime missing", and an unknown task's
cancel names the task.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.kernel.a2a_shapes import A2A, shape, states
from tests.kernel.kernel_harness import Kernel

TEXTS = {
    "demo": {"plain": "hello", "reason": "[think] hi", "write": "please write file", "slow": "slow [SLOW 8]"},
    "kernel": {"plain": "hello", "reason": "[REASON] hi", "write": "[WRITE] it", "slow": "[SLOW] go"},
}
#: The kernel's window is a few milliseconds and the demo's 0.2 s: start the new turn right with the
#: cancel or a little after it, and try often enough to see the race on both.
RACE_DELAYS_S = (0.0, 0.0, 0.005, 0.01) * 6


def _error(reply: dict[str, Any]) -> int | None:
    error = reply.get("error")
    return None if error is None else int(error["code"])


def _iac_keys(task: dict[str, Any]) -> list[str]:
    return sorted((((task.get("result") or {}).get("metadata") or {}).get("iac_code") or {}).keys())


def _race(a: A2A, texts: dict[str, str], cwd: str) -> Any:
    """A cancel of a waiting task and a new message to its context at the same time, until one fails."""
    for delay in RACE_DELAYS_S:
        waiting = a.text(texts["write"], cwd)
        canceller = threading.Thread(target=a.cancel_task, args=(waiting.task_id,))
        canceller.start()
        time.sleep(delay)
        racing = a.text(texts["plain"], cwd, context_id=waiting.context_id)
        canceller.join()
        if states(racing)[-1] == "TASK_STATE_FAILED":
            message = racing.events[-1]["status"]["message"]
            return shape(racing), [p["text"] for p in message["parts"]], message["messageId"] == racing.task_id + "-4"
    return "no failing race observed"


def scenarios(a: A2A, texts: dict[str, str], cwd: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    plain = a.text(texts["plain"], cwd)
    out["plain"] = shape(plain)
    out["follow-up in the same context"] = shape(a.text(texts["plain"], cwd, context_id=plain.context_id))
    out["follow-up on the same task"] = shape(
        a.text(texts["plain"], cwd, context_id=plain.context_id, task_id=plain.task_id)
    )
    out["reasoning"] = shape(a.text(texts["reason"], cwd))
    write = a.text(texts["write"], cwd)
    out["permission asked"] = shape(write)
    out["GetTask while waiting"] = _iac_keys(a.get_task(write.task_id))
    out["permission allowed"] = shape(a.answer(write, "allow_once", cwd))
    out["GetTask after the answer"] = _iac_keys(a.get_task(write.task_id))
    twice = a.answer(write, "allow_once", cwd)
    out["permission answered twice"] = (shape(twice), twice.error)
    denied = a.text(texts["write"], cwd)
    out["permission denied"] = shape(a.answer(denied, "deny", cwd))
    waiting = a.text(texts["write"], cwd)
    out["CancelTask on a waiting task"] = a.cancel_task(waiting.task_id)["result"]["status"]["state"]
    after = a.text(texts["plain"], cwd, context_id=waiting.context_id)
    out["new turn after the cancel answered"] = (shape(after), after.error)
    running, cancelled = a.cancel_while_streaming(texts["slow"], cwd, 5)
    out["CancelTask on a running turn"] = (states(running), cancelled["result"]["status"]["state"])
    dropped = a.text(texts["slow"], cwd, stop_after=5)
    time.sleep(1)
    out["disconnect mid-turn"] = a.get_task(dropped.task_id)["result"]["status"]["state"]
    a.cancel_task(dropped.task_id)
    idle = a.text(texts["plain"], cwd)
    out["CancelTask on a finished turn"] = (
        _error(a.cancel_task(idle.task_id)),
        a.get_task(idle.task_id)["result"]["status"]["state"],
    )
    out["CancelTask of an unknown task"] = a.cancel_task("no-such-task")["error"]
    out["SubscribeToTask on an idle task"] = _error(a.call("SubscribeToTask", {"id": idle.task_id}))
    asked = a.text(texts["write"], cwd)
    request = dict(asked.last_input, inputId="permission-" + "0" * 32)
    data = {k: request[k] for k in ("requestTaskId", "inputId", "toolUseId")}
    unknown = a.send(
        [
            {
                "mediaType": "application/json",
                "data": {"schemaVersion": 1, "kind": "permission", **data, "decision": "deny"},
            }
        ],
        cwd,
        context_id=asked.context_id,
        task_id=asked.task_id,
    )
    out["answer with an unknown inputId"] = unknown.error and (unknown.error["code"], unknown.error["message"])
    a.cancel_task(asked.task_id)
    out["a new turn racing a cancel of its context"] = _race(a, texts, cwd)
    return out


@pytest.fixture(scope="module")
def observed(kernel: Kernel, kernel_root: Path, demo_url: str, demo_token: str) -> dict[str, dict[str, Any]]:
    ws = kernel_root / f"fidelity-{uuid.uuid4().hex[:8]}"
    ws.mkdir()
    return {
        "demo": scenarios(A2A(demo_url, demo_token), TEXTS["demo"], str(ws)),
        "kernel": scenarios(A2A(kernel.url, kernel.token), TEXTS["kernel"], str(ws)),
    }


SCENARIOS = [
    "plain",
    "follow-up in the same context",
    "follow-up on the same task",
    "reasoning",
    "permission asked",
    "GetTask while waiting",
    "permission allowed",
    "GetTask after the answer",
    "permission answered twice",
    "permission denied",
    "CancelTask on a waiting task",
    "new turn after the cancel answered",
    "CancelTask on a running turn",
    "disconnect mid-turn",
    "CancelTask on a finished turn",
    "CancelTask of an unknown task",
    "SubscribeToTask on an idle task",
    "answer with an unknown inputId",
    "a new turn racing a cancel of its context",
]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_demo_agent_answers_like_the_kernel(observed: dict[str, dict[str, Any]], scenario: str) -> None:
    demo, kernel = observed["demo"][scenario], observed["kernel"][scenario]
    assert demo == kernel, f"{scenario}: demo {demo!r} != kernel {kernel!r}"


def test_every_scenario_is_compared(observed: dict[str, dict[str, Any]]) -> None:
    assert set(observed["demo"]) == set(observed["kernel"]) == set(SCENARIOS)
