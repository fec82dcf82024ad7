"""A run is built once (docs/design.md#run-built-once): `build_run` gives every part what it needs at
construction, nothing rewires a part afterwards, and a run gives its place in the registry back itself."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.a2a.signals import A2AEvent, unwrap
from agui_bridge.config.settings import Settings
from agui_bridge.runs.admission import RunTicket, admit_run
from agui_bridge.runs.context import RunContext, build_run
from agui_bridge.runs.deps import StreamDeps
from agui_bridge.runs.registry import RunRegistry
from agui_bridge.runs.stream import RunStream
from agui_bridge.store.owner import current_owner, owner_is_alive
from agui_bridge.store.store import ThreadStore
from agui_bridge.validation.run_input import RunInput, parse_run_input
from agui_bridge.worker.beacon import Beacons
from agui_bridge.worker.runtime import ThreadRuntime
from tests.support.fakes import ScriptedA2A, ScriptedStream
from tests.support.harness import run_body

TASK = "task-1"


def status(context_id: str, state: str = "TASK_STATE_WORKING", text: str | None = None, **iac: Any) -> A2AEvent:
    body: dict[str, Any] = {"taskId": TASK, "contextId": context_id, "status": {"state": state}}
    if text is not None:
        body["status"]["message"] = {"messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    body["metadata"] = {"iac_code": {"iacCodeSessionId": "session-1", **iac}}
    return unwrap({"result": {"statusUpdate": body}})


def admitted(tmp_path: Path, settings: Settings, store: ThreadStore) -> tuple[RunTicket, RunInput]:
    run = parse_run_input(run_body("thread-1", "hi", tmp_path))
    ticket = admit_run(
        store, run, cwd=str(tmp_path), digest="d", owner=current_owner(), now_ms=int(time.time() * 1000),
        lease_ttl_ms=int(settings.lease_ttl_s * 1000), is_alive=owner_is_alive,
    )  # fmt: skip
    return ticket, run


def deps_for(tmp_path: Path, client: ScriptedA2A, **extra: Any) -> StreamDeps:
    settings = Settings(state_dir=tmp_path / "state", allowed_cwds=(tmp_path,))
    lent: Any = client  # the scripted kernel stands in for the A2A client
    return StreamDeps(settings, ThreadStore(settings.state_dir), lent, ThreadRuntime(), **extra)


def built(tmp_path: Path) -> tuple[RunContext, ThreadStore]:
    deps = deps_for(tmp_path, ScriptedA2A())
    ticket, run = admitted(tmp_path, deps.settings, deps.store)
    return build_run(deps, ticket, run, "en"), deps.store


def test_the_factory_gives_each_part_what_it_needs_at_construction(tmp_path: Path) -> None:
    context, store = built(tmp_path)
    assert context.emitter.sink is not None and context.emitter.sink is context.detacher.record
    assert context.pipeline.projector is context.projector
    assert context.turn.projector is context.projector and context.turn.pipeline is context.pipeline
    envelope = {"eventType": "step_started", "eventId": "e-1", "sequence": 3, "step": {"id": "plan"}}
    shown = context.projector.project(status(context.ticket.context_id, pipeline=envelope))
    assert [event["type"] for event in shown] == ["STEP_STARTED"]  # the projector maps envelopes from the start
    context.ledger.finish(int(time.time() * 1000), retire=False)  # any write carries the Pipeline cursor
    state = store.read("thread-1")
    assert state is not None
    assert (state.execution.pipeline_sequence, state.execution.pipeline_open_steps) == (3, ["step:plan"])


REWIRINGS: list[tuple[str, Callable[[RunContext], None]]] = [
    ("a part of the context", lambda context: setattr(context, "end", None)),
    ("the emitter's sink", lambda context: setattr(context.emitter, "sink", None)),
    ("the ledger's Pipeline reader", lambda context: setattr(context.ledger, "pipeline_state", None)),
    ("the pacer's departure rule", lambda context: setattr(context.pacer, "detaches_on_departure", None)),
    ("the detacher's record", lambda context: setattr(context.detacher, "record", None)),
    ("the detacher's pacer", lambda context: setattr(context.detacher, "_pacer", None)),
]


@pytest.mark.parametrize(("part", "rewire"), REWIRINGS, ids=[part for part, _ in REWIRINGS])
def test_no_part_of_a_run_can_be_rewired_after_construction(
    tmp_path: Path, part: str, rewire: Callable[[RunContext], None]
) -> None:
    context, _ = built(tmp_path)
    with pytest.raises(AttributeError):
        rewire(context)


def test_a_closing_body_gives_the_runs_place_back_without_any_service(tmp_path: Path) -> None:
    registry = RunRegistry()  # no BridgeService anywhere in this test
    client = ScriptedA2A()
    deps = deps_for(tmp_path, client, registry=registry)
    ticket, run = admitted(tmp_path, deps.settings, deps.store)
    client.every_stream = ScriptedStream(
        [[status(ticket.context_id, text="hello")], [status(ticket.context_id, "TASK_STATE_COMPLETED")]]
    )
    assert registry.reserve(1)
    stream = RunStream(deps, ticket, run, "en")
    registry.open_leased(stream.key, stream)
    assert registry.active == 1 and registry.holds(stream.key)
    assert not registry.reserve(1)  # the cap of one is taken by the run
    opened_at = registry.last_activity
    try:
        assert b"RUN_FINISHED" in b"".join(stream)
    finally:
        stream.close()
    assert registry.active == 0 and not registry.holds(stream.key)
    assert registry.last_activity >= opened_at  # idle shutdown counts from the run's end
    assert registry.reserve(1)  # the place is free again


def test_a_body_closed_before_its_first_write_gives_its_place_back(tmp_path: Path) -> None:
    registry = RunRegistry()
    deps = deps_for(tmp_path, ScriptedA2A(), registry=registry)
    ticket, run = admitted(tmp_path, deps.settings, deps.store)
    assert registry.reserve(1)
    stream = RunStream(deps, ticket, run, "en")
    registry.open_leased(stream.key, stream)
    stream.close()  # the server gave up on the response before iterating it
    assert registry.active == 0 and not registry.holds(stream.key) and registry.reserve(1)


def test_a_runs_end_removes_the_cancel_marker_left_for_it(tmp_path: Path) -> None:
    client = ScriptedA2A()
    markers = Beacons(tmp_path / "state")
    deps = deps_for(tmp_path, client, cancel_markers=markers)
    ticket, run = admitted(tmp_path, deps.settings, deps.store)
    client.every_stream = ScriptedStream([[status(ticket.context_id, "TASK_STATE_COMPLETED")]])
    stream = RunStream(deps, ticket, run, "en")
    markers.request_cancel(stream.key, ticket.thread_id)  # asked too late for the beacon to pass it on
    assert markers.take_cancels([stream.key]) == {stream.key}  # the marker is there ...
    markers.request_cancel(stream.key, ticket.thread_id)
    try:
        b"".join(stream)
    finally:
        stream.close()
    assert markers.take_cancels([stream.key]) == set()  # ... and the run's end removed it
