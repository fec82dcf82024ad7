"""The parts a run is made of, each on its own: pump, pacer, emitter, the one way to end a run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.errors import A2AUnavailable, Cancelled, ExecutionLost
from agui_bridge.projection.projector import RunProjector
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.sse import HEARTBEAT_FRAME
from agui_bridge.protocol.sse_parser import parse_body
from agui_bridge.runs.admission import RunTicket, admit_run
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.ending import RunEnd
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.runs.observer import NullObserver, Outcome
from agui_bridge.runs.pump import Pacer, Pump, PumpDied, Signal, StopRequested
from agui_bridge.runs.upstream import SendOpened, UnaryAccepted
from agui_bridge.store import model
from agui_bridge.store.owner import current_owner, owner_is_alive
from agui_bridge.store.store import ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.worker.runtime import Runtime, ThreadRuntime
from tests.support.agui_checks import numbered_frames
from tests.support.clock import ClockedRuntime, FakeClock
from tests.support.eventually import eventually
from tests.support.fakes import ScriptedA2A
from tests.support.harness import run_body
from tests.support.runtimes import SettlingRuntime


class ListUpstream:
    """An `Upstream` stand-in: fixed items, then optionally an exception; records abort and close."""

    def __init__(self, items: list[Any], error: Exception | None = None, gate: threading.Event | None = None) -> None:
        self._items = items
        self._error = error
        self._gate = gate
        self.aborted = False
        self.closed = False

    def __iter__(self) -> Iterator[Any]:
        yield from self._items
        if self._gate is not None:
            self._gate.wait(10)
        if self._error is not None:
            raise self._error

    def abort(self) -> None:
        self.aborted = True
        if self._gate is not None:
            self._gate.set()

    def close(self) -> None:
        self.closed = True


def started_pump(upstream: ListUpstream, maxsize: int = 16) -> Pump:
    pump = Pump(ThreadRuntime(), upstream, maxsize=maxsize, put_timeout_s=5.0)
    pump.start(name="pump:test")
    return pump


def next_item(pump: Pump) -> object:
    """The pump's next item: the stand-in upstream's items are strings, the pump hands them on untouched."""
    return pump.get(5.0)


def drain(pump: Pump) -> list[Any]:
    items = []
    while (item := pump.get(5.0)) is not Signal.END:
        if item is not Signal.WAKE:
            items.append(item)
    return items


# ---- Pump --------------------------------------------------------------------------------------


def test_pump_hands_over_every_item_in_order_then_its_end() -> None:
    items: list[Any] = [["a"], SendOpened(("i1",)), ["b"], UnaryAccepted(("i2",))]
    upstream = ListUpstream(items)
    pump = started_pump(upstream)
    assert drain(pump) == items
    pump.stop()
    assert upstream.closed


def test_pump_raises_what_reading_the_upstream_raised() -> None:
    pump = started_pump(ListUpstream([["a"]], error=A2AUnavailable("a2a_rejected_answer")))
    assert next_item(pump) == ["a"]
    with pytest.raises(A2AUnavailable) as info:
        pump.get(5.0)
    assert info.value.message_key == "a2a_rejected_answer"


def test_ready_batches_events_and_unary_acceptances_but_holds_anything_else() -> None:
    gate = threading.Event()
    items: list[Any] = [["a"], UnaryAccepted(("i1",)), ["b"], SendOpened(("i2",)), ["c"]]
    pump = started_pump(ListUpstream(items, gate=gate))

    def all_queued() -> None:
        assert pump.queue.qsize() >= len(items)

    eventually(all_queued, timeout_s=5)
    assert next_item(pump) == ["a"]
    assert list(pump.ready()) == [UnaryAccepted(("i1",)), ["b"]]  # stops at SendOpened
    assert list(pump.ready()) == []  # the held item is not batched by a second call either
    assert pump.get(5.0) == SendOpened(("i2",))  # the next get returns the held item
    assert next_item(pump) == ["c"]
    gate.set()
    assert pump.get(5.0) is Signal.END


def test_ready_takes_nothing_the_caller_does_not_ask_for() -> None:
    gate = threading.Event()
    pump = started_pump(ListUpstream([["a"], ["b"], ["c"]], gate=gate))

    def all_queued() -> None:
        assert pump.queue.qsize() >= 3

    eventually(all_queued, timeout_s=5)
    for item in pump.ready():
        assert item == ["a"]
        break  # a full batch: the rest stays queued
    assert next_item(pump) == ["b"] and next_item(pump) == ["c"]
    gate.set()


def test_a_pump_that_died_without_reporting_is_pump_died() -> None:
    class DeadTask:
        """A task that is already gone, without having reported anything."""

        def stop(self, timeout: float) -> None:
            pass

        def alive(self) -> bool:
            return False

    class DeadRuntime(ThreadRuntime):
        def spawn(self, fn: Any, *args: Any, name: str, on_stop: Any = None) -> Any:
            return DeadTask()

    pump = Pump(DeadRuntime(), ListUpstream([["a"]]), maxsize=4, put_timeout_s=1.0)
    pump.start(name="pump:dead")
    with pytest.raises(PumpDied) as info:
        pump.get(0.01)
    assert info.value.code == "A2A_UNAVAILABLE"


def test_stopping_a_pump_aborts_a_blocked_reader_and_closes_the_upstream() -> None:
    upstream = ListUpstream([["a"]], gate=threading.Event())
    pump = started_pump(upstream)
    assert next_item(pump) == ["a"]
    pump.stop()
    assert upstream.aborted and upstream.closed


# ---- Pacer -------------------------------------------------------------------------------------


def test_a_stop_request_wakes_the_watched_queue_and_ends_with_stop_requested() -> None:
    upstream = ListUpstream([], gate=threading.Event())
    pump = started_pump(upstream)
    pacer = Pacer(ThreadRuntime(), 60.0, lambda: HEARTBEAT_FRAME)
    pacer.watch(pump.queue)
    threading.Timer(0.05, pacer.request_stop).start()
    assert pump.get(30.0) is Signal.WAKE  # woken, not timed out
    with pytest.raises(StopRequested):
        list(pacer.tick())
    pump.stop()


def test_a_cancel_request_ends_with_cancelled() -> None:
    pacer = Pacer(ThreadRuntime(), 60.0, lambda: HEARTBEAT_FRAME)
    pacer.request_cancel()
    with pytest.raises(Cancelled):
        list(pacer.tick())


def test_heartbeat_is_sent_only_when_due_and_writes_restart_the_timer() -> None:
    beats: list[int] = []

    def heartbeat() -> bytes:
        beats.append(1)
        return HEARTBEAT_FRAME

    clock = FakeClock()
    pacer = Pacer(ClockedRuntime(ThreadRuntime(), clock), 5.0, heartbeat)
    assert list(pacer.tick()) == [] and pacer.wait_s() == 5.0  # not due yet
    clock.advance(4.9)
    assert list(pacer.tick()) == []
    clock.advance(0.1)
    assert list(pacer.tick()) == [HEARTBEAT_FRAME]
    assert list(pacer.tick()) == [] and pacer.wait_s() == 5.0  # the timer restarted
    clock.advance(5.0)
    pacer.shown()  # something was written: no heartbeat needed
    assert list(pacer.tick()) == [] and pacer.wait_s() == 5.0 and len(beats) == 1
    clock.advance(5.0)
    assert list(pacer.tick()) == [HEARTBEAT_FRAME] and len(beats) == 2


def test_call_runs_off_the_generator_heartbeating_and_returns_or_raises() -> None:
    pacer = Pacer(ClockedRuntime(ThreadRuntime(), FakeClock()), 0.02, lambda: HEARTBEAT_FRAME)
    released = threading.Event()

    def slow(value: str) -> str:
        assert released.wait(10.0)
        return value

    frames: list[bytes] = []
    call = pacer.call(slow, "done", name="call:test")
    try:
        while True:
            frames.append(next(call))
            if len(frames) == 2:  # the call is still running: the stream heartbeats meanwhile
                released.set()
    except StopIteration as stop:
        assert stop.value == "done"
    assert len(frames) >= 2 and set(frames) == {HEARTBEAT_FRAME}  # one more if the call's thread was slow to end

    def fails() -> None:
        raise ExecutionLost("session_unavailable")

    with pytest.raises(ExecutionLost):
        list(pacer.call(fails, name="call:test"))


# ---- Emitter -----------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.frames: list[tuple[int, dict[str, Any], bytes]] = []

    def frame(self, position: int, event: dict[str, Any], data: bytes) -> None:
        self.frames.append((position, event, data))


class CountingObserver(NullObserver):
    def __init__(self) -> None:
        self.types: list[str] = []
        self.heartbeats = 0

    def events(self, types: Any) -> None:
        self.types.extend(types)

    def heartbeat(self) -> None:
        self.heartbeats += 1


def test_emitter_numbers_every_event_and_offers_each_frame_to_its_sink() -> None:
    recorder, observer = Recorder(), CountingObserver()
    emitter = Emitter(observer, recorder)
    first = emitter.events([ev.run_started("t", "r", None)])
    assert emitter.heartbeat() == HEARTBEAT_FRAME
    second = emitter.events([ev.text_start("m"), ev.text_content("m", "hi")])
    assert [position for position, _, _ in recorder.frames] == [1, 2, 3] and emitter.position == 3
    assert first + second == b"".join(data for _, _, data in recorder.frames)  # heartbeats are not offered
    frames = numbered_frames(first + second)
    assert b"".join(frame for _, frame in frames) == first + second  # nothing but `id: <n>\ndata: ..\n\n`
    assert [position for position, _ in frames] == [1, 2, 3]  # the reattach cursor
    shown = [json.loads(message.data) for message in parse_body(first + second)]
    assert shown == [event for _, event, _ in recorder.frames]
    assert observer.types == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    assert observer.heartbeats == 1


# ---- RunEnd ------------------------------------------------------------------------------------


def ending(
    tmp_path: Path, *, task_id: str | None = "task-1", pending: bool = False, runtime: Runtime | None = None
) -> tuple[RunEnd, ScriptedA2A, ThreadStore, RunTicket]:
    store = ThreadStore(tmp_path / "state")
    run = parse_run_input(run_body("thread-1", "hi", tmp_path))
    ticket = admit_run(
        store, run, cwd=str(tmp_path), digest="d", owner=current_owner(), now_ms=int(time.time() * 1000),
        lease_ttl_ms=20_000, is_alive=owner_is_alive,
    )  # fmt: skip
    ledger = RunLedger(store, ticket)
    if task_id is not None:
        ledger.record_identity(task_id, None)
    if pending:
        entry = model.PendingInterrupt({"inputId": "p1", "kind": "permission"}, False, 10**13)
        ticket.pending = {"p1": entry}
        with store.transaction("thread-1") as txn:
            assert txn.state is not None
            txn.state.execution.pending["p1"] = entry
            txn.commit(txn.state)
    client = ScriptedA2A()
    projector = RunProjector(ticket.thread_id, ticket.run_id, set())
    end = RunEnd(ticket, ledger, projector, client=client, runtime=runtime or ThreadRuntime(), observer=NullObserver(),
                 language="en")  # fmt: skip
    return end, client, store, ticket


def test_the_first_ending_acts_once_and_its_outcome_stays(tmp_path: Path) -> None:
    runtime = SettlingRuntime()
    end, client, store, _ = ending(tmp_path, runtime=runtime)
    events = end.fail(Cancelled())
    assert [e["type"] for e in events] == ["RUN_ERROR"] and events[-1]["code"] == "CANCELLED"
    assert end.finished and end.outcome == Outcome.CANCELLED
    state = store.read("thread-1")
    assert state is not None and state.active_run is None and state.execution.task_id is None  # retired
    again = end.fail(A2AUnavailable())  # a later path only builds its events: nothing is cancelled, outcome kept
    assert again[-1]["code"] == "A2A_UNAVAILABLE" and end.outcome == Outcome.CANCELLED
    assert runtime.settle() == [] and client.cancelled == []  # a kernel-cancelled task is not cancelled again


def test_a_failure_cancels_the_task_and_retires_unless_an_interrupt_is_pending(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    failing = SettlingRuntime()
    end, client, store, _ = ending(tmp_path / "a", runtime=failing)
    end.fail(A2AUnavailable())
    failing.settle()  # a CancelTask sent off the caller's thread has been sent too
    assert client.cancelled == ["task-1"] and end.error_code == "A2A_UNAVAILABLE"
    retired = store.read("thread-1")
    assert retired is not None and retired.execution.task_id is None and retired.active_run is None
    runtime = SettlingRuntime()
    kept, kept_client, kept_store, _ = ending(tmp_path / "b", pending=True, runtime=runtime)
    kept.fail(A2AUnavailable())
    assert runtime.settle() == []
    state = kept_store.read("thread-1")
    assert kept_client.cancelled == [] and state is not None
    assert list(state.execution.pending) == ["p1"] and state.active_run is None  # released, still answerable


def test_a_run_cancelled_elsewhere_does_not_retire_again(tmp_path: Path) -> None:
    runtime = SettlingRuntime()
    end, client, store, _ = ending(tmp_path, runtime=runtime)
    end.cancelled_elsewhere = True
    end.fail(Cancelled(), task_ended=True)  # the kernel's "canceled" ended the stream
    assert runtime.settle() == []
    state = store.read("thread-1")
    assert client.cancelled == [] and state is not None and state.execution.task_id == "task-1"
    assert state.active_run is None


def test_a_run_cancelled_elsewhere_before_its_task_ended_cancels_the_task_it_knows(tmp_path: Path) -> None:
    """The extension may have read the thread before the task id was written: only the run knows it."""
    end, client, store, _ = ending(tmp_path)
    end.cancelled_elsewhere = True
    end.fail(Cancelled())  # the owner was told first and ended its stream before the kernel's answer
    assert client.cancelled == ["task-1"]  # before the lease is released, like every CANCEL_NOW
    state = store.read("thread-1")
    assert state is not None and state.execution.task_id == "task-1"  # retiring is the extension's write
    assert state.active_run is None


def test_shutdown_cancels_the_task_before_the_terminal_event(tmp_path: Path) -> None:
    end, client, _, _ = ending(tmp_path)
    events = end.shutdown()
    assert client.cancelled == ["task-1"]  # synchronously: the process may exit right after
    assert events[-1]["code"] == "CANCELLED" and end.outcome == Outcome.SHUTDOWN


def test_an_abandoned_run_is_disconnected_and_cleaned_up(tmp_path: Path) -> None:
    runtime = SettlingRuntime()
    end, client, store, _ = ending(tmp_path, runtime=runtime)
    end.abandon()
    runtime.settle()  # a CancelTask sent off the caller's thread has been sent too
    state = store.read("thread-1")
    assert end.outcome == Outcome.DISCONNECTED and client.cancelled == ["task-1"]
    assert state is not None and state.active_run is None
    end.abandon()  # idempotent
    runtime.settle()
    assert client.cancelled == ["task-1"]


def test_an_expired_interrupt_drops_the_execution(tmp_path: Path) -> None:
    runtime = SettlingRuntime()
    end, client, store, ticket = ending(tmp_path, pending=True, runtime=runtime)
    events = end.expire(dismissed=True)
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "cancelled"}
    assert end.outcome == Outcome.CANCELLED and ticket.pending == {}
    runtime.settle()  # a CancelTask sent off the caller's thread has been sent too
    state = store.read("thread-1")
    assert client.cancelled == ["task-1"] and state is not None and state.execution.pending == {}


def test_a_refused_resume_keeps_everything(tmp_path: Path) -> None:
    runtime = SettlingRuntime()
    end, client, store, ticket = ending(tmp_path, pending=True, runtime=runtime)
    events = end.refuse(ExecutionLost("task_unavailable"))
    assert events[-1]["code"] == "EXECUTION_LOST" and end.outcome == Outcome.ERROR
    assert runtime.settle() == []
    state = store.read("thread-1")
    assert client.cancelled == [] and state is not None and list(state.execution.pending) == ["p1"]
    assert state.execution.task_id == "task-1" and list(ticket.pending) == ["p1"]


def test_success_and_failed_turns(tmp_path: Path) -> None:
    end, _, store, _ = ending(tmp_path)
    events = end.succeed()
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
    state = store.read("thread-1")
    assert state is not None and state.execution.task_id is None and end.outcome == Outcome.SUCCESS
    other = tmp_path / "other"
    other.mkdir()
    runtime = SettlingRuntime()
    failed, client, _, _ = ending(other, runtime=runtime)
    assert failed.failed_turn("failed", task_ended=True)[-1]["code"] == "A2A_EXECUTION_FAILED"
    assert runtime.settle() == []
    assert client.cancelled == []  # the task already ended
