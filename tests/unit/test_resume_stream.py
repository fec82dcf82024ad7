"""Resume runs against a scripted A2A client (docs/design.md#interrupts-and-resume).

The demo agent cannot misbehave on purpose (wrong task in GetTask, refused session restore with
arbitrary bodies, sideband waits, a subscription that fails); these tests script those cases and
check the events, the calls made to A2A and the state file after each one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.a2a.signals import A2AEvent, A2ARpcError, A2ATransportError, unwrap
from agui_bridge.config.limits import MAX_ANSWER_JSON_CHARS
from agui_bridge.config.settings import Settings
from agui_bridge.i18n.language import translate
from agui_bridge.protocol import digest
from agui_bridge.protocol.sse_parser import parse_body
from agui_bridge.runs.admission import admit_run
from agui_bridge.runs.stream import RunStream, StreamDeps
from agui_bridge.store.model import format_rfc3339_ms
from agui_bridge.store.owner import current_owner, owner_is_alive
from agui_bridge.store.store import StateWriteFailed, ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.worker.runtime import wall_clock_ms
from tests.support.agui_checks import assert_valid_agui_stream, event_types
from tests.support.clock import ClockedRuntime, FakeClock
from tests.support.eventually import eventually
from tests.support.fakes import ScriptedA2A, ScriptedStream
from tests.support.harness import run_body
from tests.support.runtimes import SettlingRuntime
from tests.support.scripted_runs import TASK, THREAD, collect, status

PERMISSION = {
    "schemaVersion": 1,
    "kind": "permission",
    "inputId": "perm-1",
    "toolUseId": "tool-1",
    "required": True,
    "prompt": "Run a local shell command. Allow once?",
}
QUESTION = {
    "schemaVersion": 1,
    "kind": "ask_user_question",
    "inputId": "question-1",
    "toolUseId": "ask-1",
    "required": True,
    "prompt": "Which size?",
    "options": [{"id": "small", "label": "Small"}, {"id": "large", "label": "Large"}],
}


def snapshot(context_id: str, state: str = "TASK_STATE_INPUT_REQUIRED", task_id: str = TASK, **iac: Any) -> A2AEvent:
    body = {"id": task_id, "contextId": context_id, "status": {"state": state}, "metadata": {"iac_code": iac}}
    return unwrap({"result": body})


class Harness:
    def __init__(self, tmp_path: Path, **settings: Any) -> None:
        self.tmp_path = tmp_path
        self.settings = Settings(state_dir=tmp_path / "state", allowed_cwds=(tmp_path,), **settings)
        self.store = ThreadStore(self.settings.state_dir)
        self.runtime = SettlingRuntime()
        #: The runs' time: interrupts expire when the test moves it, not when it sleeps.
        self.clock = FakeClock(now_ms=wall_clock_ms())
        self.context_id = ""

    def stream(self, body: dict[str, Any], client: ScriptedA2A) -> RunStream:
        run = parse_run_input(body)
        ticket = admit_run(
            self.store, run, cwd=str(self.tmp_path), digest=body["runId"], owner=current_owner(),
            now_ms=self.clock.now_ms(), lease_ttl_ms=20_000, is_alive=owner_is_alive,
        )  # fmt: skip
        self.context_id = ticket.context_id
        runtime = ClockedRuntime(self.runtime, self.clock)
        deps = StreamDeps(self.settings, self.store, client, runtime)
        return RunStream(deps, ticket, run, "en")

    def interrupt(self, *inputs: dict[str, Any], text: str = "I will write it.") -> list[dict[str, Any]]:
        """A first run that ends on an interrupt announcing `inputs` (first in `input`)."""
        body = run_body(THREAD, "please", self.tmp_path)
        client = ScriptedA2A()
        stream = self.stream(body, client)
        ctx = self.context_id
        extra: dict[str, Any] = {"input": inputs[0]}
        if len(inputs) > 1:
            extra["pendingPermissions"] = list(inputs[1:])
        client.streams["SendStreamingMessage"] = [
            [[status(ctx, text=text), status(ctx, "TASK_STATE_INPUT_REQUIRED", **extra)]]
        ]
        events = assert_valid_agui_stream(collect(stream), expect_terminal="interrupt", capture=False)
        result: list[dict[str, Any]] = events[-1]["outcome"]["interrupts"]
        return result

    def resume(self, answers: list[dict[str, Any]], client: ScriptedA2A, **kwargs: Any) -> list[dict[str, Any]]:
        body = run_body(THREAD, "", self.tmp_path)
        body["resume"] = answers
        raw = collect(self.stream(body, client))
        return assert_valid_agui_stream(raw, capture=False, **kwargs)

    def state(self) -> Any:
        return self.store.read(THREAD)


def allow(interrupt_id: str = "perm-1", decision: str = "allow_once") -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": {"decision": decision}}


def done(ctx: str, text: str = "done") -> list[list[A2AEvent]]:
    accepted = status(ctx, inputReceived={"inputId": "perm-1"})
    return [[accepted, status(ctx, text=text)], [status(ctx, "TASK_STATE_INPUT_REQUIRED")]]


def error_code(events: list[dict[str, Any]]) -> str:
    assert events[-1]["type"] == "RUN_ERROR"
    return str(events[-1]["code"])


# --------------------------------------------------------------------------------------------- preflight


def test_permission_resume_sends_the_six_key_part_and_commits_before_showing(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    client.streams["SendStreamingMessage"] = [done(h.context_id)]
    events = h.resume([allow()], client, expect_terminal="success")
    assert client.methods() == ["ensure-restored", "GetTask", "pipeline-state", "SendStreamingMessage"]
    message = client.calls[-1][1]["message"]
    assert message["messageId"].startswith("agui-resume-run-") and message["messageId"].endswith("-perm-1")
    assert message["taskId"] == TASK and message["contextId"] == h.context_id
    assert message["parts"] == [
        {
            "data": {
                "schemaVersion": 1,
                "kind": "permission",
                "requestTaskId": TASK,
                "inputId": "perm-1",
                "toolUseId": "tool-1",
                "decision": "allow_once",
            },
            "mediaType": "application/json",
        }
    ]
    assert event_types(events)[:2] == ["RUN_STARTED", "CUSTOM"]
    state = h.state()
    assert state.execution.pending == {} and state.execution.task_id is None
    assert [(a.interrupt_id, len(a.digest)) for a in state.applied_resume_digests] == [("perm-1", 64)]


def test_replayed_text_is_not_shown_twice(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION, text="before interrupt")
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    client.streams["SendStreamingMessage"] = [done(h.context_id, text="before interruptafter resume")]
    events = h.resume([allow()], client, expect_terminal="success")
    assert [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["after resume"]


@pytest.mark.parametrize(
    ("restored", "code", "message"),
    [
        (
            (404, {"error": {"code": "SESSION_NOT_FOUND"}}),
            "EXECUTION_LOST",
            "The iac-code session to resume is unavailable.",
        ),
        (
            (409, {"error": {"code": "SESSION_BACKUP_NOT_READY", "message": "Backup syncing.", "retryable": True}}),
            "SESSION_BACKUP_NOT_READY",
            "Backup syncing.",
        ),
        ((200, {"status": "stale"}), "A2A_UNAVAILABLE", "The local A2A execution service is unavailable."),
        ((500, None), "A2A_UNAVAILABLE", "The local A2A execution service is unavailable."),
    ],
)
def test_session_restore_failures_keep_the_interrupt(
    tmp_path: Path, restored: tuple[int, object], code: str, message: str
) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(restored=restored)
    events = h.resume([allow()], client, expect_terminal="RUN_ERROR")
    assert event_types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert (events[-1]["code"], events[-1]["message"]) == (code, message)
    assert client.methods() == ["ensure-restored"]
    assert list(h.state().execution.pending) == ["perm-1"] and h.state().active_run is None


def test_gettask_of_another_task_is_a_protocol_error_and_keeps_the_interrupt(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, task_id="task-other", input=PERMISSION)])
    events = h.resume([allow()], client, expect_terminal="RUN_ERROR")
    assert error_code(events) == "A2A_PROTOCOL_ERROR"
    assert "CancelTask" not in client.methods() and list(h.state().execution.pending) == ["perm-1"]


@pytest.mark.parametrize(
    ("answers", "code"),
    [
        ([], "INCOMPLETE_RESUME"),
        ([allow(), allow()], "INCOMPLETE_RESUME"),
        ([allow("perm-unknown")], "UNKNOWN_INTERRUPT"),
        ([allow(decision="allow")], "RESUME_PAYLOAD_INVALID"),
        ([{"interruptId": "perm-1", "status": "resolved"}], "RESUME_PAYLOAD_INVALID"),
        ([{**allow(decision="deny"), "payload": {"decision": "deny", "x": 1}}], "RESUME_PAYLOAD_INVALID"),
    ],
)
def test_invalid_resumes_send_nothing_and_stay_retryable(
    tmp_path: Path, answers: list[dict[str, Any]], code: str
) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    events = h.resume(answers, client, expect_terminal="RUN_ERROR")
    assert event_types(events) == ["RUN_STARTED", "RUN_ERROR"] and events[-1]["code"] == code
    assert client.methods() == ["ensure-restored", "GetTask", "pipeline-state"]
    assert list(h.state().execution.pending) == ["perm-1"]
    retry = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    retry.streams["SendStreamingMessage"] = [done(h.context_id)]
    h.resume([allow()], retry, expect_terminal="success")


def test_an_answer_over_the_size_bound_is_refused_before_validation_and_stays_retryable(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    payload = {"decision": "allow_once", "note": "x" * MAX_ANSWER_JSON_CHARS}
    events = h.resume([{"interruptId": "perm-1", "status": "resolved", "payload": payload}], client,
                      expect_terminal="RUN_ERROR")  # fmt: skip
    assert error_code(events) == "RESUME_PAYLOAD_INVALID"
    assert events[-1]["message"] == translate("resume_payload_too_large", "en", max=str(MAX_ANSWER_JSON_CHARS))
    assert client.methods() == ["ensure-restored", "GetTask", "pipeline-state"]
    assert list(h.state().execution.pending) == ["perm-1"]


class _CountingJson:
    """Stands in for `json` in `protocol/digest.py`: records every value a digest serialises."""

    def __init__(self) -> None:
        self.serialised: list[object] = []

    def dumps(self, value: object, **options: Any) -> str:
        self.serialised.append(value)
        return json.dumps(value, **options)


def test_an_oversized_answer_is_refused_without_the_stream_serialising_it_for_a_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each answer's digest comes with the validated body (`POST /`'s request step, off the hub for a large
    body): the stream, which runs on the hub, serialises no answer, so one near the body cap costs the hub
    nothing before the size bound refuses it (docs/design.md#exactly-once)."""
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    body = run_body(THREAD, "", h.tmp_path)
    payload = {"decision": "allow_once", "note": "x" * (4 * MAX_ANSWER_JSON_CHARS)}
    body["resume"] = [{"interruptId": "perm-1", "status": "resolved", "payload": payload}]
    stream = h.stream(body, client)  # the request step: the body validated, the answers with it
    counting = _CountingJson()
    monkeypatch.setattr(digest, "json", counting)
    events = assert_valid_agui_stream(collect(stream), expect_terminal="RUN_ERROR", capture=False)
    assert error_code(events) == "RESUME_PAYLOAD_INVALID"
    assert events[-1]["message"] == translate("resume_payload_too_large", "en", max=str(MAX_ANSWER_JSON_CHARS))
    assert counting.serialised == []


def test_cancelled_permission_is_sent_as_deny(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    client.streams["SendStreamingMessage"] = [done(h.context_id)]
    h.resume([{"interruptId": "perm-1", "status": "cancelled"}], client, expect_terminal="success")
    assert client.calls[-1][1]["message"]["parts"][0]["data"]["decision"] == "deny"


def test_cancelled_question_cancels_the_task(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt(QUESTION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=QUESTION)])
    events = h.resume([{"interruptId": "question-1", "status": "cancelled"}], client, expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "CANCELLED"
    assert events[-1]["message"] == "The execution was cancelled by the interrupt response."
    assert client.methods()[-1] == "CancelTask"
    state = h.state()
    assert state.execution.pending == {} and state.execution.execution_id in state.terminal_execution_ids


def test_question_answer_is_streamed_text_with_a_synthetic_tool_result(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt(QUESTION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=QUESTION)])
    ctx = h.context_id
    tool_done = {"status": "completed", "toolUseId": "ask-1", "name": "ask_user_question", "result": "Large"}
    client.streams["SendStreamingMessage"] = [[[status(ctx, tool=tool_done), status(ctx, "TASK_STATE_INPUT_REQUIRED")]]]
    events = h.resume(
        [{"interruptId": "question-1", "status": "resolved", "payload": {"selectedId": "large"}}],
        client,
        expect_terminal="success",
    )
    message = client.calls[-1][1]["message"]
    assert message["parts"] == [{"text": "Large"}] and message["messageId"].startswith("agui-resume-run-")
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert [(r["toolCallId"], r["content"]) for r in results] == [("ask-1", "Large")]  # A2A's copy deduplicated
    assert event_types(events)[1] == "CUSTOM"


@pytest.mark.parametrize(
    ("reply", "code", "message"),
    [
        (
            A2ARpcError(-32602, "permission_resume_invalid"),
            "A2A_UNAVAILABLE",
            "The local A2A execution service rejected the interrupt response.",
        ),
        (
            A2ARpcError(-32603, "x", {"code": "SESSION_BACKUP_NOT_READY", "retryable": True}),
            "SESSION_BACKUP_NOT_READY",
            "Session backup is still synchronizing. Retry after 3 seconds.",
        ),
        ([], "A2A_UNAVAILABLE", "The A2A permission response was not accepted."),
        (A2ATransportError("refused"), "A2A_UNAVAILABLE", "The local A2A execution service is unavailable."),
    ],
)
def test_answers_a2a_did_not_accept_stay_pending_and_the_task_is_not_cancelled(
    tmp_path: Path, reply: Any, code: str, message: str
) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    client.streams["SendStreamingMessage"] = [reply]
    events = h.resume([allow()], client, expect_terminal="RUN_ERROR")
    assert (events[-1]["code"], events[-1]["message"]) == (code, message)
    assert "CancelTask" not in client.methods()
    assert list(h.state().execution.pending) == ["perm-1"] and h.state().applied_resume_digests == []


def test_repeated_and_conflicting_answers_after_acceptance(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    client.streams["SendStreamingMessage"] = [done(h.context_id)]
    h.resume([allow()], client, expect_terminal="success")
    for answer in (allow(), allow(decision="deny")):
        again = ScriptedA2A()
        events = h.resume([answer], again, expect_terminal="RUN_ERROR")
        assert event_types(events) == ["RUN_STARTED", "RUN_ERROR"]
        assert events[-1]["code"] == "RESUME_ALREADY_APPLIED" and again.calls == []
    lost = ScriptedA2A()
    assert error_code(h.resume([allow("never-pending")], lost, expect_terminal="RUN_ERROR")) == "EXECUTION_LOST"


def test_stale_gettask_after_a_partial_answer_does_not_resend_it(tmp_path: Path) -> None:
    """Two permissions; the first was accepted in an earlier resume that then failed on the second."""
    h = Harness(tmp_path)
    second = {**PERMISSION, "inputId": "perm-2", "toolUseId": "tool-2"}
    h.interrupt(PERMISSION, second)
    ctx = h.context_id
    first_only = ScriptedA2A(tasks=[snapshot(ctx, input=PERMISSION, pendingPermissions=[second])])
    first_only.streams["SendStreamingMessage"] = [[[status(ctx, inputReceived={"inputId": "perm-1"})]], []]
    events = h.resume([allow(), allow("perm-2")], first_only, expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "A2A_UNAVAILABLE"
    assert list(h.state().execution.pending) == ["perm-2"]
    retry = ScriptedA2A(
        tasks=[
            snapshot(ctx, input=PERMISSION, pendingPermissions=[second]),  # stale: perm-1 was accepted
            snapshot(ctx, "TASK_STATE_INPUT_REQUIRED"),
        ],
        unary=[snapshot(ctx, "TASK_STATE_WORKING")],
    )
    h.resume([allow(), allow("perm-2")], retry, expect_terminal="success")
    # perm-2 came from pendingPermissions (a sideband wait), so it alone goes out as unary SendMessage.
    assert retry.methods() == ["ensure-restored", "GetTask", "pipeline-state", "SendMessage", "GetTask"]
    assert retry.calls[3][1]["message"]["parts"][0]["data"]["inputId"] == "perm-2"
    assert h.state().execution.pending == {}


def test_a_new_interrupt_found_in_preflight_is_announced_with_all_pending(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    second = {**PERMISSION, "inputId": "perm-2", "toolUseId": "tool-2"}
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION, pendingPermissions=[second])])
    events = h.resume([allow()], client, expect_terminal="interrupt")
    assert [i["id"] for i in events[-1]["outcome"]["interrupts"]] == ["perm-1", "perm-2"]
    assert "CUSTOM" not in event_types(events)  # no session event: nothing was sent
    assert client.methods() == ["ensure-restored", "GetTask", "pipeline-state"]
    assert list(h.state().execution.pending) == ["perm-1", "perm-2"]
    assert h.state().execution.pending["perm-2"].sideband is True


def test_sideband_answers_use_unary_send_then_the_task_snapshot_decides(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.interrupt({**PERMISSION, "scope": "candidate"})
    ctx = h.context_id
    client = ScriptedA2A(
        tasks=[
            snapshot(ctx, "TASK_STATE_WORKING", input={**PERMISSION, "scope": "candidate"}),
            snapshot(ctx, "TASK_STATE_WORKING"),
            snapshot(ctx, "TASK_STATE_COMPLETED"),
        ],
        unary=[snapshot(ctx, "TASK_STATE_WORKING")],
    )
    client.streams["SubscribeToTask"] = [A2ARpcError(-32602, "Task is already completed")]
    events = h.resume([allow()], client, expect_terminal="success")
    assert client.methods() == [
        "ensure-restored",
        "GetTask",
        "pipeline-state",
        "SendMessage",
        "GetTask",
        "SubscribeToTask",
        "GetTask",
    ]
    assert client.calls[3][1]["message"]["messageId"] == "agui-resume-perm-1"
    assert event_types(events)[1] == "CUSTOM"


def test_expired_interrupt_ends_execution_expired_and_frees_the_thread(tmp_path: Path) -> None:
    h = Harness(tmp_path, interrupt_ttl_s=60.0)
    interrupts = h.interrupt(PERMISSION)
    assert interrupts[0]["expiresAt"] == format_rfc3339_ms(h.clock.now_ms() + 60_000)
    h.clock.advance(60.0)  # the interrupt's time to live has passed
    client = ScriptedA2A()
    events = h.resume([allow()], client, expect_terminal="RUN_ERROR")
    assert event_types(events) == ["RUN_STARTED", "RUN_ERROR"] and events[-1]["code"] == "EXECUTION_EXPIRED"

    def task_cancelled() -> None:
        assert client.methods() == ["CancelTask"]

    eventually(task_cancelled, timeout_s=5)
    state = h.state()
    assert state.execution.pending == {} and state.execution.task_id is None and state.active_run is None


def test_accepted_answer_that_cannot_be_committed_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness(tmp_path)
    h.interrupt(PERMISSION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    client.streams["SendStreamingMessage"] = [done(h.context_id)]

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise StateWriteFailed("disk full")

    monkeypatch.setattr("agui_bridge.runs.ledger.RunLedger.accept_answers", refuse)
    events = h.resume([allow()], client, expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "STATE_PERSISTENCE_FAILED"
    assert events[-1]["message"] == "The accepted interrupt response could not be committed."
    assert "TEXT_MESSAGE_CONTENT" not in event_types(events)

    def task_cancelled() -> None:
        assert client.methods()[-1] == "CancelTask"

    eventually(task_cancelled, timeout_s=5)


def test_disconnect_while_the_answer_is_in_flight_keeps_the_interrupt(tmp_path: Path) -> None:
    # No window: a disconnect cancels; a short heartbeat: the stream moves on while its client reads.
    h = Harness(tmp_path, reattach_window_s=0.0, heartbeat_interval_s=0.05)
    h.interrupt(PERMISSION)
    gate = threading.Event()
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=PERMISSION)])
    client.streams["SendStreamingMessage"] = [ScriptedStream([], gate=gate)]
    body = run_body(THREAD, "", tmp_path)
    body["resume"] = [allow()]
    stream = h.stream(body, client)
    iterator = iter(stream)
    assert b"RUN_STARTED" in next(iterator)

    def answer_sent() -> None:
        next(iterator)  # read on (a heartbeat at the latest): the run sends the answer meanwhile
        assert "SendStreamingMessage" in client.methods()

    eventually(answer_sent, timeout_s=5, interval_s=0)
    stream.close()  # the client went away while A2A had not accepted the answer
    h.runtime.settle()  # everything the run did off the caller's thread has finished
    assert "CancelTask" not in client.methods()
    state = h.state()
    assert list(state.execution.pending) == ["perm-1"] and state.execution.task_id == TASK
    assert state.active_run is None


def test_cancelling_an_expired_interrupt_ends_cancelled_after_the_same_clean_up(tmp_path: Path) -> None:
    h = Harness(tmp_path, interrupt_ttl_s=60.0)
    h.interrupt(PERMISSION)
    h.clock.advance(60.0)
    client = ScriptedA2A()
    events = h.resume([{"interruptId": "perm-1", "status": "cancelled"}], client, expect_terminal="cancelled")
    assert event_types(events) == ["RUN_STARTED", "RUN_FINISHED"]

    def task_cancelled() -> None:
        assert client.methods() == ["CancelTask"]

    eventually(task_cancelled, timeout_s=5)
    assert h.state().execution.pending == {} and h.state().execution.task_id is None


def test_disconnect_after_acceptance_cancels_the_task_and_retires_the_execution(tmp_path: Path) -> None:
    """9.1: once A2A accepted the answer, the resume is an ordinary active run."""
    h = Harness(tmp_path, reattach_window_s=0.0)  # no window: a disconnect cancels
    h.interrupt(PERMISSION)
    ctx = h.context_id
    gate = threading.Event()

    class AcceptedThenSilent(ScriptedStream):
        def batches(self) -> Iterator[list[A2AEvent]]:
            yield [status(ctx, inputReceived={"inputId": "perm-1"}), status(ctx, text="working on it")]
            gate.wait(10)
            raise A2ATransportError("aborted")

    client = ScriptedA2A(tasks=[snapshot(ctx, input=PERMISSION)])
    client.streams["SendStreamingMessage"] = [AcceptedThenSilent([], gate=gate)]
    body = run_body(THREAD, "", tmp_path)
    body["resume"] = [allow()]
    stream = h.stream(body, client)
    raw = b""
    for chunk in stream:
        raw += chunk
        if b"working on it" in raw:
            break
    stream.close()  # the client went away after the answer was accepted

    def task_cancelled() -> None:
        assert client.methods()[-1] == "CancelTask"

    eventually(task_cancelled, timeout_s=5)
    state = h.state()
    assert state.execution.pending == {} and state.execution.task_id is None and state.active_run is None
    assert [a.interrupt_id for a in state.applied_resume_digests] == ["perm-1"]


def test_pipeline_steps_survive_the_interrupt_and_recovery_opens_the_resume(tmp_path: Path) -> None:
    """5.6/5.7: durable steps and the cursor are persisted with the interrupt, reopened by the resume,
    and the resume shows the recovery snapshot and the missed envelopes before anything else."""
    h = Harness(tmp_path)
    body = run_body(THREAD, "pipeline please", tmp_path)
    client = ScriptedA2A()
    stream = h.stream(body, client)
    ctx = h.context_id
    select = {**QUESTION, "kind": "candidate_selection", "inputId": "select-1", "toolUseId": None}

    def env(event_type: str, sequence: int, **fields: Any) -> dict[str, Any]:
        return {"eventType": event_type, "sequence": sequence, "eventId": f"evt-{sequence}", **fields}

    client.streams["SendStreamingMessage"] = [
        [
            [
                status(ctx, pipeline=env("step_started", 1, step={"id": "candidates"})),
                status(ctx, pipelineBatch={"events": [
                    env("candidate_step_started", 2, candidate={"id": "c0"}, candidateStep={"id": "tpl"}),
                    env("text_delta", 3, scope="candidate", candidate={"id": "c0"}, data={"text": "c0 draft"}),
                ]}),
                status(ctx, "TASK_STATE_INPUT_REQUIRED", input=select),
            ]
        ]
    ]  # fmt: skip
    first = assert_valid_agui_stream(collect(stream), expect_terminal="interrupt", capture=False)
    steps = [(e["type"], e["stepName"]) for e in first if e["type"].startswith("STEP_")]
    assert steps == [
        ("STEP_STARTED", "candidates"),
        ("STEP_STARTED", "candidate:c0:tpl"),
        ("STEP_FINISHED", "candidate:c0:tpl"),  # closed before RUN_FINISHED, sorted by key
        ("STEP_FINISHED", "candidates"),
    ]
    execution = h.state().execution
    assert (execution.pipeline_sequence, execution.pipeline_open_steps) == (3, ["candidate:c0:tpl", "step:candidates"])

    recovery = {
        "snapshot": {"pipelineRunId": "prun-1", "lastSequence": 5},
        "events": [env("candidate_step_completed", 4, candidate={"id": "c0"}, candidateStep={"id": "tpl"}),
                   env("stack_progress", 5, data={"percent": 10})],
    }  # fmt: skip
    resume_client = ScriptedA2A(tasks=[snapshot(ctx, input=select)], pipeline=[recovery])
    resume_client.streams["SendStreamingMessage"] = [
        [[status(ctx, pipeline=env("step_completed", 6, step={"id": "candidates"})),
          status(ctx, "TASK_STATE_INPUT_REQUIRED")]]
    ]  # fmt: skip
    events = h.resume(
        [{"interruptId": "select-1", "status": "resolved", "payload": {"selectedId": "large"}}],
        resume_client,
        expect_terminal="success",
    )
    assert ("pipeline-state", 3) in resume_client.calls  # catch-up from the persisted cursor
    assert event_types(events)[:4] == ["RUN_STARTED", "STEP_STARTED", "STEP_STARTED", "ACTIVITY_SNAPSHOT"]
    steps = [(e["type"], e["stepName"]) for e in events if e["type"].startswith("STEP_")]
    assert steps == [
        ("STEP_STARTED", "candidate:c0:tpl"),
        ("STEP_STARTED", "candidates"),
        ("STEP_FINISHED", "candidate:c0:tpl"),
        ("STEP_FINISHED", "candidates"),
    ]
    execution = h.state().execution
    assert (execution.pipeline_sequence, execution.pipeline_open_steps) == (6, [])


# --------------------------------------------------------------------------------------------- emitter


@pytest.mark.parametrize("outcome", ["success", "refused"])
def test_every_event_of_a_resume_passes_through_the_emitter(tmp_path: Path, outcome: str) -> None:
    """Preflight events, acceptance, the tool result and the terminal event all go out through one place."""
    h = Harness(tmp_path)
    h.interrupt(QUESTION)
    client = ScriptedA2A(tasks=[snapshot(h.context_id, input=QUESTION)])
    client.streams["SendStreamingMessage"] = [done(h.context_id)]
    body = run_body(THREAD, "", tmp_path)
    answer = {"interruptId": "question-1", "status": "resolved", "payload": {"selectedId": "large"}}
    body["resume"] = [answer] if outcome == "success" else [answer, answer]
    stream = h.stream(body, client)
    raw = collect(stream)
    events = assert_valid_agui_stream(
        raw, capture=False, expect_terminal="success" if outcome == "success" else "RUN_ERROR"
    )
    record = stream.record  # the emitter's sink, given at construction
    assert record is not None
    recorded = record.path.read_bytes()
    header = record.head.encode()
    assert recorded.startswith(header) and raw == recorded[len(header) :]
    positions = [int(message.event_id or b"0") for message in parse_body(raw)]
    assert positions == list(range(1, len(events) + 1))
    if outcome == "success":
        assert "TOOL_CALL_RESULT" in event_types(events)
