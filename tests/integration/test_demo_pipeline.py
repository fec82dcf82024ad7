"""The demo agent's Pipeline scenario over real HTTP with raw JSON-RPC calls.

One A2A task, several calls, as the bridge makes them (docs/design.md#a2a-methods,
docs/design.md#sending-answers): a streamed first turn that ends at a ``candidate_selection`` input; the
answer streamed (``taskId`` set), which runs until a *sideband* permission (task stays WORKING with
``pendingPermissions``); the permission answered by a unary ``SendMessage`` that returns at once while
the turn goes on; ``GetTask`` and ``SubscribeToTask`` to follow the rest; ``/iac-code/pipeline/state``
for catch-up.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from agui_bridge.demo.testing import running_demo_agent
from agui_bridge.protocol.sse_parser import iter_messages
from tests.support.demo_a2a import AUTH, TOKEN, Stream, assert_turn_finished, rpc

PIPELINE_META = {"cwd": "/workspace/session-1", "run_mode": "pipeline"}
ENVELOPE_KEYS = {
    "schemaVersion",
    "extensionUri",
    "eventId",
    "sequence",
    "createdAt",
    "eventType",
    "scope",
    "pipelineRunId",
    "taskId",
    "contextId",
    "pipelineName",
    "status",
    "data",
    "iacCodeSessionId",
}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with running_demo_agent(token=TOKEN) as url:
        yield url


def message(
    parts: list[dict[str, Any]],
    context_id: str | None = None,
    task_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": parts,
        "metadata": {"iac_code": meta or {"cwd": "/workspace/session-1"}},
    }
    if context_id:
        msg["contextId"] = context_id
    if task_id:
        msg["taskId"] = task_id
    return msg


def open_stream(
    base_url: str, method: str, params: dict[str, Any], until: Callable[[dict[str, Any]], bool] | None = None
) -> Stream:
    """Read an SSE call; with ``until`` stop (and disconnect) after the first result it accepts."""
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    with requests.post(base_url, json=body, headers=AUTH, stream=True, timeout=(5, 30)) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream"), resp.text
        stream = Stream(resp.headers["content-type"], b"")
        for message in iter_messages(resp.iter_content(chunk_size=None)):
            event = json.loads(message.data)
            stream.events.append(event)
            if until is not None and until(event["result"]):
                break
    return stream


def send_streaming(base_url: str, parts: list[dict[str, Any]], **kwargs: Any) -> Stream:
    until = kwargs.pop("until", None)
    params = {"message": message(parts, **kwargs), "configuration": {"acceptedOutputModes": ["text/plain"]}}
    return open_stream(base_url, "SendStreamingMessage", params, until)


def envelopes(stream: Stream) -> list[dict[str, Any]]:
    """Pipeline envelopes in wire order: per event ``pipelineBatch.events`` then ``pipeline``."""
    out: list[dict[str, Any]] = []
    for iac in stream.iac():
        out.extend(iac.get("pipelineBatch", {}).get("events", []))
        if "pipeline" in iac:
            out.append(iac["pipeline"])
    return out


def sequences(items: list[dict[str, Any]]) -> list[int]:
    values = [e["sequence"] for e in items]
    assert all(float(v).is_integer() for v in values)  # Struct numbers arrive as floats
    return [int(v) for v in values]


def kinds(items: list[dict[str, Any]]) -> list[str]:
    return [e["eventType"] for e in items]


def has_pending_permissions(result: dict[str, Any]) -> bool:
    return "pendingPermissions" in result.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})


def pipeline_state(base_url: str, task_id: str, after: int | None = None) -> requests.Response:
    params: dict[str, Any] = {"taskId": task_id}
    if after is not None:
        params["afterSequence"] = after
    return requests.get(f"{base_url}iac-code/pipeline/state", params=params, headers=AUTH, timeout=10)


def get_task(base_url: str, task_id: str) -> dict[str, Any]:
    result: dict[str, Any] = rpc(base_url, "GetTask", {"id": task_id, "historyLength": 100})["result"]
    return result


def permission_part(waiting: dict[str, Any], decision: str, **extra: Any) -> dict[str, Any]:
    data = {
        "schemaVersion": 1,
        "kind": "permission",
        "requestTaskId": waiting["requestTaskId"],
        "inputId": waiting["inputId"],
        "toolUseId": waiting["toolUseId"],
        "decision": decision,
        **extra,
    }
    return {"data": data, "mediaType": "application/json"}


def send_unary(base_url: str, waiting: dict[str, Any], decision: str, **extra: Any) -> dict[str, Any]:
    msg = message([permission_part(waiting, decision, **extra)], waiting["contextId"], waiting["requestTaskId"])
    msg["messageId"] = f"agui-resume-{waiting['inputId']}"
    reply: dict[str, Any] = rpc(base_url, "SendMessage", {"message": msg, "configuration": {}})
    return reply


def start_pipeline(base_url: str, text: str, meta: dict[str, Any] | None = PIPELINE_META) -> Stream:
    stream = send_streaming(base_url, [{"text": text}], meta=meta)
    assert stream.states()[-1] == "TASK_STATE_INPUT_REQUIRED"
    return stream


def answer_selection(base_url: str, first: Stream, answer: str) -> Stream:
    """The candidate answer, streamed; read until the sideband permission shows up (or the end)."""
    context_id = first.results[0]["task"]["contextId"]
    return send_streaming(
        base_url, [{"text": answer}], context_id=context_id, task_id=first.task_id, meta=PIPELINE_META,
        until=has_pending_permissions,
    )  # fmt: skip


def test_pipeline_flow_with_a_sideband_permission(base_url: str) -> None:
    # ---- turn 1: requirements, two parallel candidates, the candidate selection ---------------
    first = start_pipeline(base_url, "Help me sell a small web shop")
    task = first.results[0]["task"]
    task_id, context_id = task["id"], task["contextId"]
    session = first.iac()[0]["iacCodeSessionId"]
    assert all(m.get("iacCodeSessionId") == session for m in first.iac())
    sent = envelopes(first)
    assert sequences(sent) == list(range(1, len(sent) + 1))
    assert len({e["eventId"] for e in sent}) == len(sent)
    assert len({e["pipelineRunId"] for e in sent}) == 1
    run_id = sent[0]["pipelineRunId"]
    assert run_id.startswith("prun-")
    for envelope in sent:
        assert set(envelope) >= ENVELOPE_KEYS, envelope
        assert envelope["eventId"].startswith("evt-")
        assert (envelope["taskId"], envelope["contextId"]) == (task_id, context_id)
        assert envelope["iacCodeSessionId"] == session
        assert envelope["pipelineName"] == "selling"
        assert envelope["schemaVersion"] == 1
    assert any("pipelineBatch" in m for m in first.iac())
    assert any("pipeline" in m for m in first.iac())
    types = kinds(sent)
    assert types[:2] == ["pipeline_started", "step_started"]
    assert sent[1]["step"]["id"] == "requirements"
    assert (sent[1]["step"]["index"], sent[1]["step"]["total"]) == (1, 3)
    assert "text_delta" in types[: types.index("step_completed")]
    assert "usage" in types[: types.index("step_completed")]
    candidate_events = [e for e in sent if "candidateStep" in e]
    by_candidate = [e["candidate"]["id"] for e in candidate_events]
    assert by_candidate[:2] == ["candidate-0", "candidate-1"]  # interleaved (parallel)
    for kind in ("candidate_started", "candidate_step_started", "thinking_delta", "tool_started", "tool_result"):
        assert types.count(kind) == 2, kind
    tool = next(e for e in sent if e["eventType"] == "tool_started")
    result = next(
        e for e in sent if e["eventType"] == "tool_result" and e["data"]["toolUseId"] == tool["data"]["toolUseId"]
    )
    assert {"toolUseId", "toolName", "input"} <= set(tool["data"])
    assert result["data"]["isError"] is False
    assert result["candidate"] == tool["candidate"]
    assert types[-1] == "input_required"
    last = first.updates()[-1]
    waiting = last["metadata"]["iac_code"]["input"]
    assert waiting["kind"] == "candidate_selection"
    assert waiting["required"] is True
    assert waiting["allowFreeText"] is False
    assert (waiting["requestTaskId"], waiting["contextId"]) == (task_id, context_id)
    assert [o["candidate_index"] for o in waiting["options"]] == [0, 1]
    assert all({"candidate_index", "name", "summary"} <= set(o) for o in waiting["options"])
    assert sent[-1]["data"]["inputId"] == waiting["inputId"]

    snapshot = get_task(base_url, task_id)
    assert snapshot["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    meta = snapshot["metadata"]["iac_code"]
    assert meta["iacCodeSessionId"] == session
    assert meta["input"]["inputId"] == waiting["inputId"]
    assert meta["pipelineBatch"]["events"][-1]["eventId"] == sent[-1]["eventId"]  # a bounded suffix

    state = pipeline_state(base_url, task_id, 0)
    assert state.status_code == 200
    body = state.json()
    assert [e["eventId"] for e in body["events"]] == [e["eventId"] for e in sent]
    assert body["snapshot"]["pipelineRunId"] == run_id
    assert body["snapshot"]["lastSequence"] == len(sent)
    assert body["snapshot"]["status"] == "waiting_input"
    assert [s["key"] for s in body["snapshot"]["openSteps"]] == ["step:candidates"]

    # ---- turn 2: the selection resumes the Pipeline up to the sideband permission --------------
    started = time.monotonic()
    second = answer_selection(base_url, first, "web-ha-slb")
    assert time.monotonic() - started < 5
    assert "task" not in second.results[0]
    assert second.iac()[0]["inputReceived"]["inputId"] == waiting["inputId"]
    resumed = envelopes(second)
    assert sequences(resumed)[0] == len(sent) + 1
    assert sequences(sent + resumed) == list(range(1, len(sent) + len(resumed) + 1))
    assert kinds(resumed)[:3] == ["input_received", "candidate_selected", "step_completed"]
    assert resumed[1]["candidate"]["id"] == "candidate-1"
    assert "step_started" in kinds(resumed)
    assert "stack_progress" in kinds(resumed)
    assert kinds(resumed)[-1] == "permission_requested"
    wait_update = second.updates()[-1]
    assert wait_update["status"]["state"] == "TASK_STATE_WORKING"
    wait_meta = wait_update["metadata"]["iac_code"]
    assert "input" not in wait_meta
    assert wait_meta["iacCodeSessionId"] == session
    (permission,) = wait_meta["pendingPermissions"]
    assert permission["kind"] == "permission"
    assert permission["required"] is True
    assert permission["scope"] == "candidate"
    assert permission["subPipelineId"] == "candidate-1"
    assert permission["inputId"].startswith("permission-")
    assert permission["toolUseId"]
    assert (permission["requestTaskId"], permission["contextId"]) == (task_id, context_id)
    assert wait_meta["pipeline"]["data"]["inputId"] == permission["inputId"]

    during = get_task(base_url, task_id)
    assert during["status"]["state"] == "TASK_STATE_WORKING"
    assert "input" not in during["metadata"]["iac_code"]
    assert [p["inputId"] for p in during["metadata"]["iac_code"]["pendingPermissions"]] == [permission["inputId"]]
    assert [s["key"] for s in pipeline_state(base_url, task_id).json()["snapshot"]["openSteps"]] == [
        "candidate:candidate-1:stack_deploying",
        "step:deploy",
    ]

    # ---- the sideband answer: unary SendMessage, accepted at once ------------------------------
    started = time.monotonic()
    reply = send_unary(base_url, permission, "allow_once")
    assert time.monotonic() - started < 2
    accepted = reply["result"]["task"]
    assert accepted["id"] == task_id
    assert accepted["status"]["state"] == "TASK_STATE_WORKING"
    assert accepted["metadata"]["iac_code"]["pendingPermissions"] == []

    # ---- the bridge follows with GetTask + SubscribeToTask -------------------------------------
    assert get_task(base_url, task_id)["status"]["state"] == "TASK_STATE_WORKING"
    rest = open_stream(base_url, "SubscribeToTask", {"id": task_id})  # ends by itself at INPUT_REQUIRED
    assert rest.results[0]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert rest.iac()[0]["inputReceived"]["inputId"] == permission["inputId"]
    later = envelopes(rest)
    assert kinds(later) == [
        "input_received",
        "stack_progress",
        "stack_progress",
        "candidate_step_completed",
        "step_completed",
        "pipeline_completed",
    ]
    assert later[0]["data"]["inputId"] == permission["inputId"]
    assert later[0]["candidateStep"]["id"] == "stack_deploying"
    everything = sent + resumed + later
    assert sequences(everything) == list(range(1, len(everything) + 1))
    assert len({e["eventId"] for e in everything}) == len(everything)
    assert {e["pipelineRunId"] for e in everything} == {run_id}
    assert_turn_finished(rest)
    assert "".join(rest.deltas()) == "Deployed web-ha-slb as stack selling-web-ha-slb."
    assert rest.updates()[-1]["metadata"]["iac_code"] == {"iacCodeSessionId": session}

    # ---- catch-up and the idle task ------------------------------------------------------------
    cursor = int(resumed[-1]["sequence"])
    caught_up = pipeline_state(base_url, task_id, cursor).json()
    assert [e["eventId"] for e in caught_up["events"]] == [e["eventId"] for e in later]
    assert caught_up["snapshot"]["lastSequence"] == len(everything)
    assert caught_up["snapshot"]["status"] == "completed"
    assert caught_up["snapshot"]["openSteps"] == []
    assert pipeline_state(base_url, task_id, len(everything)).json()["events"] == []
    assert get_task(base_url, task_id)["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    idle = rpc(base_url, "SubscribeToTask", {"id": task_id})
    assert idle["error"]["code"] == -32001
    # A retried (identical) sideband answer is a no-op that still succeeds.
    assert send_unary(base_url, permission, "allow_once")["result"]["task"]["id"] == task_id


def test_keyword_trigger_and_fail_deploy(base_url: str) -> None:
    first = start_pipeline(base_url, "run the pipeline [FAIL_DEPLOY]", meta=None)
    assert kinds(envelopes(first))[0] == "pipeline_started"
    failed = answer_selection(base_url, first, "0")
    assert failed.states()[-1] == "TASK_STATE_FAILED"
    assert not any(has_pending_permissions(r) for r in failed.results)
    types = kinds(envelopes(failed))
    assert types[-5:] == [
        "candidate_step_failed",
        "step_failed",
        "rollback_triggered",
        "rollback_completed",
        "pipeline_error",
    ]
    last = failed.updates()[-1]
    assert last["status"]["message"]["parts"][0]["text"].startswith("PipelineError: Stack creation failed")
    assert last["metadata"]["iac_code"]["error"]["retryable"] is False
    assert get_task(base_url, first.task_id)["status"]["state"] == "TASK_STATE_FAILED"
    snapshot = pipeline_state(base_url, first.task_id, 0).json()["snapshot"]
    assert snapshot["status"] == "failed"
    assert snapshot["openSteps"] == []


def test_sideband_deny_and_answer_validation(base_url: str) -> None:
    first = start_pipeline(base_url, "sell it")
    second = answer_selection(base_url, first, "web-single-ecs")
    (permission,) = second.updates()[-1]["metadata"]["iac_code"]["pendingPermissions"]
    unknown = send_unary(base_url, {**permission, "inputId": "permission-" + "0" * 32}, "deny")
    assert unknown["error"]["code"] == -32602
    assert unknown["error"]["message"] == "permission_resume_invalid: pending permission is not active."
    extra = send_unary(base_url, permission, "deny", note="x")
    assert extra["error"]["code"] == -32602
    assert extra["error"]["message"] == "Permission response payload fields do not match schemaVersion 1."
    assert get_task(base_url, first.task_id)["status"]["state"] == "TASK_STATE_WORKING"  # still waiting
    assert send_unary(base_url, permission, "deny")["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    rest = open_stream(base_url, "SubscribeToTask", {"id": first.task_id})
    assert kinds(envelopes(rest))[-3:] == ["candidate_step_completed", "step_completed", "pipeline_completed"]
    assert "".join(rest.deltas()) == "Deployment skipped: the permission was denied."
    assert_turn_finished(rest)


def test_cancel_during_the_sideband_wait(base_url: str) -> None:
    first = start_pipeline(base_url, "sell it")
    second = answer_selection(base_url, first, "1")
    (permission,) = second.updates()[-1]["metadata"]["iac_code"]["pendingPermissions"]
    cancelled = rpc(base_url, "CancelTask", {"id": first.task_id})["result"]
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    assert "pendingPermissions" not in cancelled["metadata"]["iac_code"]
    late = send_unary(base_url, permission, "allow_once")
    assert late["error"]["code"] == -32602
    assert pipeline_state(base_url, first.task_id).json()["snapshot"]["status"] == "canceled"


def test_pipeline_state_route_errors(base_url: str) -> None:
    plain = send_streaming(base_url, [{"text": "say hi"}])
    assert plain.states()[-1] == "TASK_STATE_INPUT_REQUIRED"
    missing = pipeline_state(base_url, plain.task_id, 0)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "PIPELINE_NOT_FOUND"
    assert pipeline_state(base_url, str(uuid.uuid4())).status_code == 404
    no_task = requests.get(f"{base_url}iac-code/pipeline/state", headers=AUTH, timeout=10)
    assert no_task.status_code == 400
    bad_cursor = requests.get(
        f"{base_url}iac-code/pipeline/state",
        params={"taskId": plain.task_id, "afterSequence": "x"},
        headers=AUTH,
        timeout=10,
    )
    assert bad_cursor.status_code == 400
    unauthorized = requests.get(f"{base_url}iac-code/pipeline/state", params={"taskId": plain.task_id}, timeout=10)
    assert unauthorized.status_code == 401
