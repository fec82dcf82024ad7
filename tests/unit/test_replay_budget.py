"""The total budget of `replay/` and the free-space reserve (docs/design.md#retention): the oldest ended records
go first, a live record that cannot grow stops with `: truncated`, and the run itself never fails."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agui_bridge.config.settings import Settings
from agui_bridge.errors import ReplayExpired
from agui_bridge.protocol import events as ev
from agui_bridge.reattach import retention as replay_retention
from agui_bridge.reattach.budget import CHARGE_STEP_BYTES, RecordBudget, record_budget
from agui_bridge.reattach.follow import open_reattach
from agui_bridge.reattach.format import TRUNCATED_FRAME, RecordHead, record_paths, ros_digest
from agui_bridge.reattach.reader import RecordReader
from agui_bridge.reattach.record import RunRecord
from agui_bridge.reattach.retention import enforce_budget
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.observer import NULL_OBSERVER
from agui_bridge.runs.retention import prune
from agui_bridge.store.store import ThreadStore

KIB = 1024
LIVE_OWNER = "live-host.invalid:1:1"


def _live_only(head: RecordHead) -> bool:
    return head.owner == LIVE_OWNER


def record_run(
    state_dir: Path, run_id: str, *, text_bytes: int, finished: bool = True, age_s: float = 0.0,
    budget: RecordBudget | None = None, owner: str = "ended-host.invalid:1:1",
) -> tuple[RunRecord, bytes]:  # fmt: skip
    """A run recorded through the owner's sink; returns the record and what its client was shown."""
    record = RunRecord(
        state_dir, RecordHead("t", run_id, ros_digest("ros-1"), owner, 1), max_bytes=1 << 30, budget=budget
    )
    emitter = Emitter(NULL_OBSERVER, record)
    shown = emitter.events([ev.run_started("t", run_id, None), ev.text_start("m")])
    for _ in range(max(1, text_bytes // (16 * KIB))):
        shown += emitter.events([ev.text_content("m", "x" * (16 * KIB))])
    if finished:
        shown += emitter.events([ev.text_end("m"), ev.run_finished("t", run_id, {"type": "success"})])
    record.close()
    if age_s:
        old = time.time() - age_s
        os.utime(record.path, (old, old))
    return record, shown


def synchronous_budget(
    state_dir: Path, *, budget_bytes: int, min_free_bytes: int = 0, owner_alive: Callable[[RecordHead], bool]
) -> RecordBudget:
    """A budget whose scans run in the caller (the real one starts a native thread)."""

    def run_now(fn: Callable[[], None]) -> None:
        fn()

    return RecordBudget(
        state_dir, budget_bytes=budget_bytes, min_free_bytes=min_free_bytes, owner_alive=owner_alive, start=run_now
    )


def test_over_the_budget_the_oldest_finished_records_go_first_and_become_tombstones(tmp_path: Path) -> None:
    live, _ = record_run(tmp_path, "live", text_bytes=100 * KIB, finished=False, age_s=500, owner=LIVE_OWNER)
    oldest, _ = record_run(tmp_path, "oldest", text_bytes=100 * KIB, age_s=400)
    older, _ = record_run(tmp_path, "older", text_bytes=100 * KIB, age_s=300)
    newer, _ = record_run(tmp_path, "newer", text_bytes=100 * KIB, age_s=200)
    newest, _ = record_run(tmp_path, "newest", text_bytes=100 * KIB, age_s=100)
    usage = enforce_budget(
        tmp_path, budget_bytes=450 * KIB, target_bytes=300 * KIB, min_free_bytes=0, owner_alive=_live_only
    )
    assert usage.evicted == 2 and usage.used <= 300 * KIB
    assert live.path.exists()  # a live run's record is never evicted, however old
    assert not oldest.path.exists() and not older.path.exists()
    assert newer.path.exists() and newest.path.exists()
    with pytest.raises(ReplayExpired):  # a tombstone: 410 to the same caller, not 404
        open_reattach(Settings(state_dir=tmp_path), "t", "oldest", "ros-1", 0)


def test_eviction_leaves_a_record_being_created_alone(tmp_path: Path) -> None:
    """Between `O_CREAT` and the owner's first write a record has no header: it is a run starting, not an
    ended one, so the budget never tombstones it (an empty one would free nothing anyway)."""
    finished, _ = record_run(tmp_path, "finished", text_bytes=100 * KIB, age_s=300)
    empty = record_paths(tmp_path, "t", "empty")[0]
    empty.write_bytes(b"")
    half_header = record_paths(tmp_path, "t", "starting")[0]
    half_header.write_bytes(b": agui-bridge run record")  # the header's first bytes only
    abandoned = record_paths(tmp_path, "t", "abandoned")[0]
    abandoned.write_bytes(b": agui-bridge run record")
    old = time.time() - 60  # its owner died before finishing the header
    os.utime(abandoned, (old, old))
    usage = enforce_budget(tmp_path, budget_bytes=1, target_bytes=1, min_free_bytes=0, owner_alive=_live_only)
    assert not finished.path.exists() and not abandoned.exists()
    assert empty.exists() and half_header.exists() and usage.evicted == 2


def test_within_the_budget_nothing_is_evicted(tmp_path: Path) -> None:
    first, _ = record_run(tmp_path, "a", text_bytes=64 * KIB, age_s=100)
    usage = enforce_budget(
        tmp_path, budget_bytes=1 << 20, target_bytes=1 << 19, min_free_bytes=0, owner_alive=_live_only
    )
    assert usage.evicted == 0 and first.path.exists() and 64 * KIB < usage.used < 1 << 20


def test_a_live_record_that_cannot_grow_within_the_budget_stops_with_truncated_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    record_run(tmp_path, "other-live", text_bytes=200 * KIB, finished=False, owner=LIVE_OWNER)
    budget = synchronous_budget(tmp_path, budget_bytes=400 * KIB, owner_alive=_live_only)
    record, shown = record_run(tmp_path, "growing", text_bytes=600 * KIB, budget=budget, owner=LIVE_OWNER)
    assert shown.count(b"TEXT_MESSAGE_CONTENT") == 37 and shown.endswith(b"\n\n")  # the client saw everything
    assert b"RUN_FINISHED" in shown
    data = record.path.read_bytes()
    assert data.endswith(TRUNCATED_FRAME) and b"RUN_FINISHED" not in data
    assert len(data) < 400 * KIB
    with pytest.raises(ReplayExpired) as refused:
        open_reattach(Settings(state_dir=tmp_path), "t", "growing", "ros-1", 0)
    assert refused.value.message_key == "replay_truncated"


def test_recording_stops_below_the_free_space_reserve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_retention, "_free_bytes", lambda directory: 10 * 1024 * 1024)
    budget = synchronous_budget(tmp_path, budget_bytes=0, min_free_bytes=64 * 1024 * 1024, owner_alive=_live_only)
    record, shown = record_run(tmp_path, "r", text_bytes=16 * KIB, budget=budget)
    assert b"RUN_FINISHED" in shown  # the run is not failed, only not recorded
    reader = RecordReader(record.path)
    frames = reader.poll()
    reader.close()
    assert reader.head is not None and reader.truncated and frames == []


def test_the_free_space_is_looked_up_per_scan_not_per_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up: list[Path] = []

    def free_bytes(directory: Path) -> int:
        looked_up.append(directory)
        return 1 << 40

    monkeypatch.setattr(replay_retention, "_free_bytes", free_bytes)
    budget = synchronous_budget(tmp_path, budget_bytes=1 << 30, min_free_bytes=1 << 20, owner_alive=_live_only)
    record, shown = record_run(tmp_path, "r", text_bytes=1024 * KIB, budget=budget)
    assert shown.count(b"TEXT_MESSAGE_CONTENT") == 64 and record.path.read_bytes().endswith(b"\n\n")
    assert 1 <= len(looked_up) <= 2  # the first charge scans; the next is due only in 30 s


def test_a_scan_over_the_budget_frees_room_for_new_records(tmp_path: Path) -> None:
    for index in range(4):
        record_run(tmp_path, f"old-{index}", text_bytes=100 * KIB, age_s=1000 - index)
    budget = synchronous_budget(tmp_path, budget_bytes=300 * KIB, owner_alive=_live_only)
    record, _ = record_run(tmp_path, "new", text_bytes=100 * KIB, budget=budget)
    assert record.path.read_bytes().endswith(b"\n\n") and not record.path.read_bytes().endswith(TRUNCATED_FRAME)
    kept = sorted(path.name for path in record.path.parent.glob("*.sse"))
    assert record.path.name in kept and len(kept) <= 3
    assert record_paths(tmp_path, "t", "old-0")[1].exists()


def test_prune_tombstones_the_oldest_finished_records_over_the_budget(tmp_path: Path) -> None:
    for index in range(4):
        record_run(tmp_path, f"r{index}", text_bytes=100 * KIB, age_s=100 - index)  # all within retention
    report = prune(ThreadStore(tmp_path), retention_days=30, replay_retention_s=3600, replay_budget_bytes=250 * KIB)
    assert report.records_expired == 0 and report.records_evicted == 2
    assert not record_paths(tmp_path, "t", "r0")[0].exists() and record_paths(tmp_path, "t", "r3")[0].exists()


def test_a_worker_has_one_budget_per_state_directory_and_none_without_bounds(tmp_path: Path) -> None:
    options = {"beacon_interval_s": 5.0, "grace_s": 20.0}
    first = record_budget(tmp_path, budget_bytes=1 << 20, min_free_bytes=0, **options)
    assert first is not None and record_budget(tmp_path, budget_bytes=1 << 20, min_free_bytes=0, **options) is first
    assert record_budget(tmp_path, budget_bytes=0, min_free_bytes=0, **options) is None
    assert CHARGE_STEP_BYTES <= 1 << 20


def test_bytes_written_count_against_the_budget_before_and_after_a_scan_sees_them(tmp_path: Path) -> None:
    budget = synchronous_budget(tmp_path, budget_bytes=100 * KIB, owner_alive=_live_only)
    assert budget.allows(10 * KIB)  # the first question scans: replay/ is empty
    written, _ = record_run(tmp_path, "r", text_bytes=80 * KIB, finished=False, owner=LIVE_OWNER)
    budget.charge(written.path.stat().st_size)  # reported after the write
    assert not budget.allows(20 * KIB)
    usage = budget.scan()  # a scan that sees the file replaces the reported bytes, never drops them
    assert usage is not None and usage.used == written.path.stat().st_size
    assert not budget.allows(20 * KIB) and budget.allows(5 * KIB)


def test_short_of_free_space_the_oldest_finished_records_go_to_leave_room_for_thread_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    oldest, _ = record_run(tmp_path, "oldest", text_bytes=64 * KIB, age_s=300)
    live, _ = record_run(tmp_path, "live", text_bytes=64 * KIB, finished=False, age_s=400, owner=LIVE_OWNER)
    newest, _ = record_run(tmp_path, "newest", text_bytes=64 * KIB, age_s=100)
    free = {"bytes": 1 << 20}

    def free_bytes(directory: Path) -> int:
        return free["bytes"] - sum(p.stat().st_size for p in directory.glob("*.sse"))

    monkeypatch.setattr(replay_retention, "_free_bytes", free_bytes)
    usage = enforce_budget(
        tmp_path, budget_bytes=0, target_bytes=0, min_free_bytes=(1 << 20) - 150 * KIB, owner_alive=_live_only
    )
    assert usage.evicted == 1 and not oldest.path.exists() and live.path.exists() and newest.path.exists()
