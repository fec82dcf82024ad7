"""Lease liveness through worker beacons (worker/beacon.py) instead of per-stream renewal writes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agui_bridge.errors import ThreadBusy
from agui_bridge.runs.admission import RunTicket, admit_run
from agui_bridge.store import model
from agui_bridge.store.store import ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.worker.beacon import Beacons, beacon_fresh_ms
from tests.support.harness import run_body

OTHER = "other-host.invalid:4242:999"  # another host: its pid cannot be checked, only its beacon
NOW = 1_800_000_000_000


def test_publish_and_holds(tmp_path: Path) -> None:
    beacons = Beacons(tmp_path)
    assert not beacons.holds(OTHER, "run-1", NOW, 20_000)  # no beacon yet
    beacons.publish(OTHER, ["run-1", "run-2"], NOW)
    assert beacons.holds(OTHER, "run-1", NOW + 1_000, 20_000)
    assert not beacons.holds(OTHER, "run-3", NOW + 1_000, 20_000)  # not streamed by that worker
    assert not beacons.holds(OTHER, "run-1", NOW + 20_000, 20_000)  # stale: the worker stopped publishing
    assert not beacons.holds("yet-another:1:1", "run-1", NOW, 20_000)
    (tmp_path / "owners").chmod(0o700)
    assert oct((tmp_path / "owners").stat().st_mode & 0o777) == "0o700"


def test_cancel_markers_are_taken_once_by_the_owner(tmp_path: Path) -> None:
    beacons = Beacons(tmp_path)
    assert beacons.take_cancels(["run-1"]) == set()  # nothing requested, no directory
    beacons.request_cancel("run-1")
    beacons.request_cancel("run-9")
    assert beacons.take_cancels(["run-1", "run-2"]) == {"run-1"}
    assert beacons.take_cancels(["run-1"]) == set()
    beacons.forget_stale(older_than_s=-1)  # everything is "old": the unclaimed marker goes too
    assert beacons.take_cancels(["run-9"]) == set()


def lease_thread(store: ThreadStore, cwd: Path, expires_at_ms: int) -> None:
    state = model.new_thread("thread-1", str(cwd), None, "invocation-1", "exec-1")
    state.execution.task_id = "task-1"
    state.active_run = model.RunLease("run-1", "exec-1", OTHER, expires_at_ms)
    with store.transaction("thread-1") as txn:
        txn.commit(state)


@pytest.mark.parametrize(
    ("grace_left_ms", "beacon_runs", "busy"),
    [
        (5_000, None, True),  # within the grace period after admission
        (-5_000, ["exec-1/run-1"], True),  # past it, but the owner's fresh beacon lists the run key
        (-5_000, ["run-1"], False),  # a runId alone names no run: another thread may use it too
        (-5_000, ["run-other"], False),  # the owner no longer streams it: reclaimed
        (-5_000, None, False),  # no beacon at all: reclaimed
    ],
)
def test_admission_uses_the_beacon_after_the_grace_period(
    tmp_path: Path, grace_left_ms: int, beacon_runs: list[str] | None, busy: bool
) -> None:
    store = ThreadStore(tmp_path / "state")
    beacons = Beacons(tmp_path / "state")
    now = int(time.time() * 1000)
    lease_thread(store, tmp_path, now + grace_left_ms)
    if beacon_runs is not None:
        beacons.publish(OTHER, beacon_runs, now)
    run = parse_run_input(run_body("thread-1", "hi", tmp_path))

    def admit() -> RunTicket:
        return admit_run(
            store, run, cwd=str(tmp_path), digest="d", owner="me:1:1", now_ms=now, lease_ttl_ms=20_000,
            is_alive=lambda owner: True,
            holds_run=lambda owner, run_id: beacons.holds(owner, run_id, now, 20_000),
        )  # fmt: skip

    if busy:
        with pytest.raises(ThreadBusy):
            admit()
    else:
        ticket = admit()
        assert ticket.orphaned_task_ids == ["task-1"]  # the dead run's task gets cancelled


def test_a_fresh_beacon_says_its_worker_is_alive_whatever_runs_it_lists(tmp_path: Path) -> None:
    beacons = Beacons(tmp_path)
    assert not beacons.fresh(OTHER, NOW, 15_000)  # no beacon: dead
    beacons.publish(OTHER, [], NOW)
    assert beacons.fresh(OTHER, NOW + 14_000, 15_000)
    assert not beacons.fresh(OTHER, NOW + 15_000, 15_000)  # stale: the worker stopped publishing
    assert beacon_fresh_ms(5.0) == 15_000  # three beacon intervals, as for leases
