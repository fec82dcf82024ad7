"""Runs and guidance streams built in-process over a scripted kernel (tests/support/fakes.py): no network.

The A2A status updates the scripts are made of, a run stream admitted on a fresh state directory, a
thread that another run is streaming (for guidance), and reading a stream to its end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agui_bridge.a2a.signals import A2AEvent, unwrap
from agui_bridge.config.settings import Settings
from agui_bridge.runs.admission import GuidanceTicket, admit_guidance, admit_run
from agui_bridge.runs.stream import RunStream, StreamDeps
from agui_bridge.store import model
from agui_bridge.store.owner import current_owner, owner_is_alive
from agui_bridge.store.store import ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.worker.runtime import Runtime, ThreadRuntime
from tests.support.fakes import ScriptedA2A, streaming_a2a
from tests.support.harness import run_body

THREAD, TASK, SESSION = "thread-1", "task-1", "session-1"

#: What a scripted kernel streams for a run, given the run's context id.
Script = Callable[[str], list[list[A2AEvent]]]


def status(context_id: str, state: str = "TASK_STATE_WORKING", text: str | None = None, **iac: Any) -> A2AEvent:
    """The kernel's status update of TASK in `state`, with agent `text` and `iac_code` metadata."""
    body: dict[str, Any] = {"taskId": TASK, "contextId": context_id, "status": {"state": state}}
    if text is not None:
        body["status"]["message"] = {"messageId": f"{TASK}-message", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    body["metadata"] = {"iac_code": {"iacCodeSessionId": SESSION, **iac}}
    return unwrap({"result": {"statusUpdate": body}})


def make_stream(
    tmp_path: Path,
    script: Script,
    settings: Settings | None = None,
    store: ThreadStore | None = None,
    *,
    delay_s: float = 0.0,
    client: ScriptedA2A | None = None,
    runtime: Runtime | None = None,
) -> tuple[RunStream, ScriptedA2A, ThreadStore]:
    """A new run of thread-1 admitted on `store`, its kernel answering every stream with `script`."""
    settings = settings or Settings(state_dir=tmp_path / "state", allowed_cwds=(tmp_path,))
    store = store or ThreadStore(settings.state_dir)
    raw = run_body(THREAD, "hi", tmp_path)
    run = parse_run_input(raw)
    ticket = admit_run(
        store, run, cwd=str(tmp_path), digest="d", owner=current_owner(), now_ms=int(time.time() * 1000),
        lease_ttl_ms=int(settings.lease_ttl_s * 1000), is_alive=owner_is_alive,
    )  # fmt: skip
    client = client or streaming_a2a(script(ticket.context_id), delay_s)
    # StreamDeps names the concrete kernel client; the scripted one implements the same A2APort.
    deps = StreamDeps(settings, store, client, runtime or ThreadRuntime())
    stream = RunStream(deps, ticket, run, "en")
    return stream, client, store


def collect(stream: RunStream) -> bytes:
    """Every byte the stream sends, then closed as a WSGI server closes it."""
    try:
        return b"".join(stream)
    finally:
        stream.close()


def thread(
    store: ThreadStore, cwd: Path, *, task: str | None = TASK, pending: bool = False, leased: bool = True
) -> str:
    """Thread-1 with an execution on `task`, optionally a pending interrupt and another run streaming it."""
    state = model.new_thread(THREAD, str(cwd), None, "invocation-1", "exec-1")
    state.execution.task_id = task
    if pending:
        value: dict[str, object] = {"inputId": "p1", "kind": "permission"}
        state.execution.pending["p1"] = model.PendingInterrupt(value, True, 10**13)
    if leased:  # another run is streaming the Pipeline right now
        state.active_run = model.RunLease("run-main", "exec-1", "host:1:1", 10**13)
    with store.transaction(THREAD) as txn:
        txn.commit(state)
    return state.context_id


def guidance_body(cwd: Path, text: str = "also add a NAT gateway", **props: Any) -> dict[str, Any]:
    """An active-guidance run input for thread-1 (Pipeline mode unless `props` says otherwise)."""
    props.setdefault("runMode", "pipeline")
    return run_body(THREAD, text, cwd, activeGuidance=True, **props)


def admit(store: ThreadStore, body: dict[str, Any], cwd: Path) -> GuidanceTicket:
    """Admit `body` as guidance, as the service does before it builds the guidance stream."""
    return admit_guidance(
        store, parse_run_input(body), cwd=str(cwd), digest=body["runId"], now_ms=int(time.time() * 1000)
    )
