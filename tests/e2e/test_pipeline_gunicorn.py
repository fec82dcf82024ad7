"""A Pipeline end to end: gunicorn with 2 gevent workers against the demo agent's 'selling' Pipeline
(docs/design.md#pipelines).

Three AG-UI runs: the turn that ends on a candidate selection, the resume that ends on a sideband
permission (the task stays WORKING), and the resume that answers it with a unary SendMessage and follows
the task to its end. The client drops its connection after each interrupt. Every stream is checked by
tests.support.agui_checks (steps: never started twice while open, every STEP_FINISHED matches, nothing open at the
terminal event) and replayed through @ag-ui/client at the end of the session. Across the runs no Pipeline
envelope is shown twice, resumes open with the recovery ACTIVITY_SNAPSHOT, and no durable step stays open.
The same scenario with the bridge restarted at each interrupt gives the same event sequence.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import BridgeServer, bridge_server, custom, new_thread_id, run_body
from tests.support.state_checks import assert_documented_document

pytestmark = pytest.mark.e2e

PIPELINE_PROPS = {"runMode": "pipeline"}


def run_once(server: BridgeServer, body: dict[str, Any], expect: str) -> list[dict[str, Any]]:
    """POST, read up to the terminal event, then drop the connection (the client goes away)."""
    response = server.post(body)
    assert response.status_code == 200, response.text
    raw = b""
    for chunk in response.iter_content(chunk_size=None):
        raw += chunk
        if b'"RUN_FINISHED"' in raw or b'"RUN_ERROR"' in raw:
            break
    response.close()
    return assert_valid_agui_stream(raw, expect_terminal=expect)


def resume_body(
    thread_id: str, workspace: Path, interrupts: list[dict[str, Any]], payloads: list[Any]
) -> dict[str, Any]:
    body = run_body(thread_id, "", workspace, **PIPELINE_PROPS)
    body["resume"] = [
        {"interruptId": i["id"], "status": "resolved", "payload": p} for i, p in zip(interrupts, payloads, strict=True)
    ]
    return body


def play(
    servers: Callable[[], AbstractContextManager[BridgeServer]], workspace: Path
) -> tuple[list[list[dict[str, Any]]], Path]:
    """The three runs; `servers()` gives the server for each (the same one, or a fresh one)."""
    thread_id = new_thread_id()
    runs: list[list[dict[str, Any]]] = []
    with servers() as server:
        first = run_once(
            server, run_body(thread_id, "deploy a small web app", workspace, **PIPELINE_PROPS), "interrupt"
        )
        state_file = server.state_dir / "threads" / f"{thread_id}.json"
    runs.append(first)
    (selection,) = first[-1]["outcome"]["interrupts"]
    assert selection["reason"] == "input_required" and selection["metadata"]["kind"] == "candidate_selection"
    with servers() as server:
        second = run_once(server, resume_body(thread_id, workspace, [selection], [{"selectedId": "1"}]), "interrupt")
    runs.append(second)
    (permission,) = second[-1]["outcome"]["interrupts"]
    assert permission["reason"] == "tool_call"
    with servers() as server:
        third = run_once(
            server, resume_body(thread_id, workspace, [permission], [{"decision": "allow_once"}]), "success"
        )
    runs.append(third)
    return runs, state_file


def shape(events: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """The sequence without ids and timestamps: type plus the names that say what happened."""
    out: list[tuple[str, ...]] = []
    for event in events:
        kind = event["type"]
        if kind.startswith("STEP_"):
            out.append((kind, event["stepName"]))
        elif kind == "CUSTOM":
            value = event["value"]
            out.append((kind, event["name"], value.get("eventType", "") if isinstance(value, dict) else ""))
        elif kind == "TEXT_MESSAGE_CONTENT":
            out.append((kind, event["delta"]))
        elif kind == "RUN_FINISHED":
            out.append((kind, event["outcome"]["type"]))
        else:
            out.append((kind,))
    return out


def check_runs(runs: list[list[dict[str, Any]]], state_file: Path) -> None:
    seen: set[str] = set()
    for events in runs:
        for event in custom(events, "iac-code.pipeline.v1"):
            event_id = event["value"]["eventId"]
            assert event_id not in seen, f"envelope {event_id} shown twice"
            seen.add(event_id)
    assert {"pipeline_started", "candidate_selected", "stack_progress", "pipeline_completed"} <= {
        e["value"]["eventType"] for run in runs for e in custom(run, "iac-code.pipeline.v1")
    }
    for resume in runs[1:]:
        after_start = [e["type"] for e in resume[1:] if e["type"] != "STEP_STARTED"]
        assert after_start[0] == "ACTIVITY_SNAPSHOT", after_start[:3]
        snapshot = next(e for e in resume if e["type"] == "ACTIVITY_SNAPSHOT")
        assert snapshot["activityType"] == "iac-code.pipeline.v1" and snapshot["content"]["snapshot"]["pipelineRunId"]
    reopened = [e["stepName"] for e in runs[1] if e["type"] == "STEP_STARTED"][:1]
    assert reopened == ["candidates"]  # open when the selection was asked, reopened by the resume
    document = assert_documented_document(state_file)
    assert document["execution"]["pipelineOpenSteps"] == []
    assert document["execution"]["pending"] == {} and document["execution"]["pipelineSequence"] > 0
    text = "".join(e.get("delta", "") for e in runs[-1] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text, "the last run shows the kernel's closing text"


def test_pipeline_with_two_interrupts_and_disconnects(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, workers=2) as server:

        class Same(AbstractContextManager[BridgeServer]):
            def __enter__(self) -> BridgeServer:
                return server

            def __exit__(self, *_: object) -> None:
                return None

        runs, state_file = play(Same, workspace)
    check_runs(runs, state_file)
    json.dumps(runs)  # plain JSON throughout

    restarted_root = tmp_path / "restarted"
    restarted_root.mkdir()
    workspace2 = restarted_root / "ws"
    workspace2.mkdir()

    def fresh() -> AbstractContextManager[BridgeServer]:
        return bridge_server(demo_url, demo_token, restarted_root / "state", restarted_root, workers=2)

    restarted, state_file2 = play(fresh, workspace2)
    check_runs(restarted, state_file2)
    assert [shape(run) for run in restarted] == [shape(run) for run in runs]
