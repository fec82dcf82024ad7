"""The run life cycle's guarantees at unit level: run identity, one lease-liveness rule, streams
that always end, honest outcomes, and cancel markers that do not outlive their runs."""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.a2a.signals import A2AEvent
from agui_bridge.config import ConfigError, load_settings
from agui_bridge.config.options import add_arguments, resolve, worker_environment
from agui_bridge.config.settings import Settings
from agui_bridge.runs.admission import admit_run
from agui_bridge.runs.cancel import CANCELLED, cancel_execution
from agui_bridge.runs.connection import bound_client_socket, release_client_socket
from agui_bridge.runs.observer import Outcome
from agui_bridge.runs.registry import RunRegistry
from agui_bridge.runs.retention import busy_since, prune, sweep_cancel_markers
from agui_bridge.runs.service import BridgeService
from agui_bridge.runs.status import status_of
from agui_bridge.runs.stream import RunStream, StreamDeps
from agui_bridge.store import model
from agui_bridge.store.lease import beacon_check, lease_is_live, run_key
from agui_bridge.store.owner import current_owner, owner_is_alive
from agui_bridge.store.store import ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.worker.beacon import Beacons
from agui_bridge.worker.runtime import ThreadRuntime
from tests.support.agui_checks import parse_sse
from tests.support.fakes import ScriptedA2A, streaming_a2a
from tests.support.harness import run_body
from tests.support.scripted_runs import status

OTHER = "other-host.invalid:4242:999"  # another host: only its beacon can say whether it streams
NOW = 1_800_000_000_000


class Stub:
    def __init__(self) -> None:
        self.cancelled = 0

    def request_stop(self) -> None:
        pass

    def request_cancel(self) -> None:
        self.cancelled += 1


def leased_thread(store: ThreadStore, thread_id: str, execution_id: str, run_id: str, expires_at_ms: int) -> None:
    state = model.new_thread(thread_id, "/w", None, "invocation-1", execution_id)
    state.execution.task_id = f"task-{thread_id}"
    state.active_run = model.RunLease(run_id, execution_id, OTHER, expires_at_ms)
    with store.transaction(thread_id) as txn:
        txn.commit(state)


# ---- identity ----------------------------------------------------------------------------------


def test_the_registry_keeps_two_threads_runs_with_the_same_run_id_apart() -> None:
    registry = RunRegistry()
    first, second = Stub(), Stub()
    registry.add(run_key("exec-a", "run-1"), first)
    registry.add(run_key("exec-b", "run-1"), second)
    registry.remove(run_key("exec-a", "run-1"), first)
    assert registry.holds(run_key("exec-b", "run-1"))  # the other thread's run-1 is still streamed
    assert not registry.holds("run-1")
    # A run that ends after its successor on the same execution does not unregister the successor.
    successor = Stub()
    registry.add(run_key("exec-b", "run-2"), successor)
    registry.remove(run_key("exec-b", "run-2"), Stub())
    assert registry.get(run_key("exec-b", "run-2")) is successor


def test_a_beacon_listing_another_threads_run_1_does_not_keep_a_lease(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    beacons = Beacons(tmp_path)
    leased_thread(store, "thread-b", "exec-b", "run-1", NOW - 5_000)  # past its grace period
    beacons.publish(OTHER, [run_key("exec-a", "run-1")], NOW)  # the owner streams thread A's run-1 only
    check = beacon_check(beacons, 15_000, is_alive=lambda owner: True)
    lease = store.read("thread-b").active_run  # type: ignore[union-attr]
    assert lease is not None and not check(lease, NOW)
    beacons.publish(OTHER, [run_key("exec-a", "run-1"), run_key("exec-b", "run-1")], NOW)
    assert check(lease, NOW)


# ---- one lease-liveness rule --------------------------------------------------------------------


def test_status_retention_and_idleness_use_the_same_rule(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    beacons = Beacons(tmp_path)
    leased_thread(store, "thread-1", "exec-1", "run-1", NOW - 60_000)  # a minute past its grace period
    state = store.read("thread-1")
    assert state is not None and state.active_run is not None
    state.last_activity_ms = NOW - 40 * 24 * 3600 * 1000
    with store.transaction("thread-1") as txn:
        txn.commit(state)
    beacons.publish(OTHER, [run_key("exec-1", "run-1")], NOW)
    check = beacon_check(beacons, 15_000, is_alive=lambda owner: True)
    assert lease_is_live(state.active_run, NOW, is_alive=lambda owner: True, holds_run=lambda o, k: True)
    assert status_of(state, "invocation-1", NOW, check)["active"] is True  # the worker still streams it
    assert busy_since(store, NOW, check) is None  # so the server is not idle
    report = prune(store, retention_days=30, now_ms=NOW, lease_live=check)
    assert report.removed == [] and store.read("thread-1") is not None  # and its file is kept
    beacons.publish(OTHER, [], NOW)  # the run ended on its worker (the file was not released)
    assert status_of(state, "invocation-1", NOW, check)["active"] is False
    assert busy_since(store, NOW, check) == state.last_activity_ms
    assert prune(store, retention_days=30, now_ms=NOW, lease_live=check).removed == ["thread-1"]


# ---- a dead pump ends the stream ----------------------------------------------------------------


class DeadPumpRuntime(ThreadRuntime):
    """The pump dies at once without putting its end or its failure marker into the queue."""

    def spawn(self, fn: Callable[..., Any], *args: Any, name: str, on_stop: Callable[[], None] | None = None) -> Any:
        if name.startswith("pump:"):
            return super().spawn(lambda: None, name=name, on_stop=on_stop)
        return super().spawn(fn, *args, name=name, on_stop=on_stop)


def make_stream(
    tmp_path: Path, batches: Callable[[str], list[list[A2AEvent]]], runtime: ThreadRuntime, **settings: Any
) -> tuple[RunStream, ScriptedA2A, ThreadStore]:
    config = Settings(state_dir=tmp_path / "state", allowed_cwds=(tmp_path,), heartbeat_interval_s=0.1, **settings)
    store = ThreadStore(config.state_dir)
    run = parse_run_input(run_body("thread-1", "hi", tmp_path))
    ticket = admit_run(
        store, run, cwd=str(tmp_path), digest="d", owner=current_owner(), now_ms=int(time.time() * 1000),
        lease_ttl_ms=20_000, is_alive=owner_is_alive,
    )  # fmt: skip
    client = streaming_a2a(batches(ticket.context_id))
    deps = StreamDeps(config, store, client, runtime)
    return RunStream(deps, ticket, run, "en"), client, store


def read_for(stream: RunStream, seconds: float, pause_after_text_s: float = 0.0) -> list[dict[str, Any]]:
    """Read until a terminal event or `seconds` (a stream that never ends only heartbeats)."""
    raw = b""
    deadline = time.monotonic() + seconds
    iterator: Iterator[bytes] = iter(stream)
    try:
        for chunk in iterator:
            raw += chunk
            events = parse_sse(raw)
            if pause_after_text_s and any(e["type"] == "TEXT_MESSAGE_CONTENT" for e in events):
                time.sleep(pause_after_text_s)  # a client that stops reading for a while mid-run
                pause_after_text_s = 0.0
            if (events and events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")) or time.monotonic() > deadline:
                break
    finally:
        stream.close()
    return parse_sse(raw)


def test_a_pump_that_dies_without_reporting_ends_the_stream(tmp_path: Path) -> None:
    stream, _, store = make_stream(tmp_path, lambda ctx: [[status(ctx, text="hi")]], DeadPumpRuntime())
    events = read_for(stream, 5.0)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "A2A_UNAVAILABLE"
    state = store.read("thread-1")
    assert state is not None and state.active_run is None  # the lease is released


def test_a_dropped_failure_marker_ends_the_stream(tmp_path: Path) -> None:
    """The queue stays full past the stall timeout: the pump drops an item and its failure marker."""

    def script(ctx: str) -> list[list[A2AEvent]]:
        return [[status(ctx, text=f"part {i}")] for i in range(20)] + [[status(ctx, "TASK_STATE_INPUT_REQUIRED")]]

    stream, _, _ = make_stream(tmp_path, script, ThreadRuntime(), queue_maxsize=1, client_stall_timeout_s=0.05)
    events = read_for(stream, 5.0, pause_after_text_s=1.0)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "A2A_UNAVAILABLE"
    assert stream.outcome == Outcome.ERROR


# ---- outcomes ----------------------------------------------------------------------------------


def test_a_cancelled_run_stays_cancelled(tmp_path: Path) -> None:
    def script(ctx: str) -> list[list[A2AEvent]]:
        return [[status(ctx, text="working")], [status(ctx, "TASK_STATE_CANCELED")]]

    stream, _, _ = make_stream(tmp_path, script, ThreadRuntime())
    events = read_for(stream, 5.0)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "CANCELLED"
    assert stream.outcome == Outcome.CANCELLED

    other = tmp_path / "other"
    other.mkdir()
    requested, _, _ = make_stream(other, lambda ctx: [[status(ctx, text="working")]], ThreadRuntime())
    requested.request_cancel()  # the cancellation extension, through the registry or a marker
    events = read_for(requested, 5.0)
    assert events[-1]["code"] == "CANCELLED" and requested.outcome == Outcome.CANCELLED


# ---- cancel markers ----------------------------------------------------------------------------


class Channel:
    def __init__(self, beacons: Beacons, calls: list[str]) -> None:
        self.beacons = beacons
        self.calls = calls

    def notify(self, thread_id: str, lease: model.RunLease) -> None:
        self.calls.append("notify")
        self.beacons.request_cancel(run_key(lease.execution_id, lease.run_id), thread_id)

    def withdraw(self, lease: model.RunLease) -> None:
        self.calls.append("withdraw")
        self.beacons.discard_cancel(run_key(lease.execution_id, lease.run_id))


def test_cancel_tells_the_owner_first_and_leaves_no_marker_for_an_ended_run(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    beacons = Beacons(tmp_path)
    leased_thread(store, "thread-1", "exec-1", "run-1", NOW + 60_000)
    calls: list[str] = []

    def cancel_task(task_id: str) -> None:
        calls.append(f"cancel {task_id}")
        # A2A's "canceled" reaches the owner, which ends its run and releases the lease.
        with store.transaction("thread-1") as txn:
            state = txn.state
            assert state is not None
            state.active_run = None
            txn.commit(state)

    live = beacon_check(beacons, 15_000, is_alive=lambda owner: True)
    status = cancel_execution(
        store, cancel_task, "exec-1", "thread-1", "invocation-1", int(time.time() * 1000), Channel(beacons, calls), live
    )
    assert status == CANCELLED
    assert calls == ["notify", "cancel task-thread-1", "withdraw"]
    assert list((tmp_path / "cancel-requests").iterdir()) == []


def test_the_sweep_removes_markers_of_ended_runs_only(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    beacons = Beacons(tmp_path)
    now = int(time.time() * 1000)
    leased_thread(store, "live", "exec-live", "run-1", now + 60_000)
    leased_thread(store, "ended", "exec-ended", "run-1", now - 60_000)  # no beacon lists it
    beacons.request_cancel(run_key("exec-live", "run-1"), "live")
    beacons.request_cancel(run_key("exec-ended", "run-1"), "ended")
    beacons.request_cancel(run_key("exec-gone", "run-1"), "no-such-thread")
    live = beacon_check(beacons, 15_000, is_alive=lambda owner: True)
    assert sweep_cancel_markers(store, now, live, dry_run=True) == 2
    assert len(list((tmp_path / "cancel-requests").iterdir())) == 3
    report = prune(store, retention_days=30, now_ms=now, lease_live=live)  # prune sweeps markers too
    assert report.markers_removed == 2 and "live" not in report.removed
    assert [m.run_key for m in beacons.cancel_markers()] == [run_key("exec-live", "run-1")]
    assert beacons.take_cancels([run_key("exec-live", "run-1")]) == {run_key("exec-live", "run-1")}


# ---- the client write deadline -------------------------------------------------------------------


def test_the_client_socket_gets_a_write_deadline_and_gets_it_back() -> None:
    server_side, client_side = socket.socketpair()
    try:
        server_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        bound = bound_client_socket(server_side, 0.3)
        assert bound is not None and server_side.gettimeout() == 0.3
        started = time.monotonic()
        try:
            server_side.sendall(b"x" * (8 * 1024 * 1024))  # the peer never reads
        except TimeoutError:
            pass
        else:
            raise AssertionError("a write the client never takes must not block forever")
        assert time.monotonic() - started < 10
        release_client_socket(bound)
        assert server_side.gettimeout() is None
        assert bound_client_socket(server_side, 0) is None  # 0 turns the deadline off
        assert bound_client_socket(None, 5) is None  # no socket (dev server, test client)
    finally:
        server_side.close()
        client_side.close()


def test_client_write_timeout_is_a_validated_setting() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ConfigError, match="--client-write-timeout"):
        resolve(parser.parse_args(["--client-write-timeout", "-1"]), {})
    resolved = resolve(parser.parse_args([]), {"IAC_CODE_AGUI_CLIENT_WRITE_TIMEOUT": "7.5"})
    assert resolved["client_write_timeout"] == 7.5
    assert load_settings(worker_environment(resolved, {})).client_write_timeout_s == 7.5
    assert load_settings({}).client_write_timeout_s == 60.0


def test_the_end_of_a_guidance_request_leaves_other_runs_registered(tmp_path: Path) -> None:
    """Guidance `run-1` on thread B ends: thread A's live `run-1` stays registered (and so live)."""

    class Guidance(Stub):
        key = "guidance:thread-b/run-1"

    settings = Settings(state_dir=tmp_path / "state")
    registry = RunRegistry()
    client: Any = streaming_a2a([])
    service = BridgeService(settings, ThreadStore(settings.state_dir), client, ThreadRuntime(), registry=registry)
    live, guidance = Stub(), Guidance()
    key = run_key("exec-a", "run-1")
    assert registry.reserve(2) and registry.reserve(2)
    registry.open_leased(key, live)
    registry.open(guidance)
    registry.close(guidance)  # what the guidance stream's clean-up does
    assert registry.holds(key) and registry.active == 1
    assert service.holds_run(service.owner, key) and not service.holds_run(service.owner, "run-1")
