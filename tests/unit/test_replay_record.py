"""The per-run record (reattach/record.py) and the reattach refusals (reattach/follow.py), without a server."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agui_bridge.config.settings import Settings
from agui_bridge.errors import InvalidInput, ReplayCursorOutOfRange, ReplayExpired, RunNotFound
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.sse import encode_event, encode_numbered
from agui_bridge.reattach.follow import open_reattach, parse_cursor, stream_backlog
from agui_bridge.reattach.format import TRUNCATED_FRAME, RecordHead, ensure_replay_dir, record_paths, ros_digest
from agui_bridge.reattach.reader import (
    CHUNK_BYTES,
    ReaderMarker,
    RecordReader,
    SealOutcome,
    readers_present,
    seal_orphan,
)
from agui_bridge.reattach.record import RunRecord
from agui_bridge.reattach.retention import sweep_records
from agui_bridge.reattach.status import OwnerLiveness
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.observer import NULL_OBSERVER
from agui_bridge.runs.retention import prune
from agui_bridge.store.store import ThreadStore
from agui_bridge.worker.beacon import Beacons
from agui_bridge.worker.runtime import ThreadRuntime
from tests.support.agui_checks import numbered_frames

OWNER = "host:1:1"


def head(thread_id: str = "t", run_id: str = "r", ros: str = "ros-1", owner: str = OWNER) -> RecordHead:
    return RecordHead(thread_id, run_id, ros_digest(ros), owner, 1)


def recorded_run(tmp_path: Path, *, terminal: bool = True, max_bytes: int = 1 << 20) -> tuple[RunRecord, bytes]:
    record = RunRecord(tmp_path, head(), max_bytes=max_bytes)
    emitter = Emitter(NULL_OBSERVER, record)
    shown = emitter.events([ev.run_started("t", "r", None), ev.text_start("m"), ev.text_content("m", "hé")])
    shown += emitter.events([ev.text_end("m")])
    if terminal:
        shown += emitter.events([ev.run_finished("t", "r", {"type": "success"}, [])])
    return record, shown


def test_the_record_is_the_shown_frames_after_a_header(tmp_path: Path) -> None:
    record, shown = recorded_run(tmp_path)
    assert record.finished and record.stopped and record.last_position == 5
    reader = RecordReader(record.path)
    frames = reader.poll()
    assert reader.head == record.head and reader.finished and not reader.truncated
    assert [frame.position for frame in frames] == [1, 2, 3, 4, 5]
    assert b"".join(frame.data for frame in frames) == shown
    assert frames[-1].type == "RUN_FINISHED"
    assert oct(record.path.stat().st_mode & 0o777) == oct(0o600)


def test_the_reader_returns_whole_frames_only_and_picks_up_where_it_stopped(tmp_path: Path) -> None:
    record, _ = recorded_run(tmp_path, terminal=False)
    reader = RecordReader(record.path)
    assert [frame.position for frame in reader.poll()] == [1, 2, 3, 4]
    with open(record.path, "ab") as handle:  # half a frame, as a reader may see mid-write
        handle.write(b'id: 5\ndata: {"type":"RUN_FINI')
    assert reader.poll() == [] and not reader.finished
    with open(record.path, "ab") as handle:
        handle.write(b'SHED","threadId":"t","runId":"r"}\n\n')
    frames = reader.poll()
    assert [frame.position for frame in frames] == [5] and reader.finished


def test_past_the_bound_recording_stops_with_a_truncated_marker(tmp_path: Path) -> None:
    record, shown = recorded_run(tmp_path, max_bytes=300)
    reader = RecordReader(record.path)
    frames = reader.poll()
    assert reader.truncated and not reader.finished and record.stopped
    assert b"".join(frame.data for frame in frames) == shown[: sum(len(frame.data) for frame in frames)]
    assert os.path.getsize(record.path) <= 300 + len(b": truncated\n\n")


def test_a_failing_write_stops_recording_but_not_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "replay"
    blocker.write_text("not a directory")
    record = RunRecord(tmp_path, head(), max_bytes=1 << 20)
    shown = Emitter(NULL_OBSERVER, record).events([ev.run_started("t", "r", None)])
    assert shown.startswith(b"id: 1\ndata: ") and record.stopped


def settings_for(tmp_path: Path, **changes: object) -> Settings:
    return Settings(state_dir=tmp_path).replace(**changes)


def test_refusals_in_order(tmp_path: Path) -> None:
    recorded_run(tmp_path)
    settings = settings_for(tmp_path)
    with pytest.raises(InvalidInput):
        open_reattach(settings, "t", "r", None, 0)
    for thread_id, run_id, ros in (("t", "other", "ros-1"), ("other", "r", "ros-1"), ("t", "r", "ros-2")):
        with pytest.raises(RunNotFound):
            open_reattach(settings, thread_id, run_id, ros, 0)
    with pytest.raises(ReplayCursorOutOfRange):
        open_reattach(settings, "t", "r", "ros-1", 6)
    attach = open_reattach(settings, "t", "r", "ros-1", 2)
    backlog = b"".join(stream_backlog(attach))
    attach.reader.close()
    frames = numbered_frames(backlog)
    assert [position for position, _ in frames] == [3, 4, 5] and b"".join(frame for _, frame in frames) == backlog
    os.utime(record_paths(tmp_path, "t", "r")[0], (time.time() - 100, time.time() - 100))
    with pytest.raises(ReplayExpired):
        open_reattach(settings_for(tmp_path, reattach_retention_s=50.0), "t", "r", "ros-1", 0)


@pytest.mark.parametrize(
    ("header", "after", "expected"),
    [(None, None, 0), ("7", None, 7), (None, "3", 3), ("4", "9", 4), (" 12 ", None, 12)],
)
def test_cursor_parsing(header: str | None, after: str | None, expected: int) -> None:
    assert parse_cursor(header, after) == expected


@pytest.mark.parametrize("bad", ["", "x", "-1", "+1", "1e3", "0x10", "1 2", "1234567890123"])
def test_malformed_cursors_are_400(bad: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        parse_cursor(bad, None)
    assert raised.value.field == "/Last-Event-ID"


def test_reader_markers_count_while_fresh(tmp_path: Path) -> None:
    directory = tmp_path / "x.readers"
    assert not readers_present(directory)
    marker = ReaderMarker(directory)
    marker.touch()
    assert readers_present(directory)
    assert not readers_present(directory, now_s=time.time() + 10)  # a marker nobody touches goes stale
    marker.remove()
    assert not readers_present(directory)


def test_a_dead_owners_record_is_sealed_once(tmp_path: Path) -> None:
    record, _ = recorded_run(tmp_path, terminal=False)

    def terminal(position: int) -> bytes:
        return b"id: %d\n" % position + encode_event(ev.run_error("CANCELLED", "lost"))

    assert seal_orphan(record.path, terminal) is SealOutcome.SEALED
    assert seal_orphan(record.path, terminal) is SealOutcome.LEFT  # already has its terminal frame
    reader = RecordReader(record.path)
    frames = reader.poll()
    assert reader.finished and [frame.position for frame in frames] == [1, 2, 3, 4, 5]
    assert frames[-1].type == "RUN_ERROR"


def test_sweep_keeps_live_runs_and_tombstones_ended_ones(tmp_path: Path) -> None:
    finished, _ = recorded_run(tmp_path)
    live = RunRecord(tmp_path, head(run_id="live"), max_bytes=1 << 20)
    Emitter(NULL_OBSERVER, live).events([ev.run_started("t", "live", None)])
    orphan = RunRecord(tmp_path, head(run_id="orphan", owner="dead"), max_bytes=1 << 20)
    Emitter(NULL_OBSERVER, orphan).events([ev.run_started("t", "orphan", None)])
    later = time.time() + 100
    report = sweep_records(
        tmp_path, retention_s=50, tombstone_retention_s=1000, now_s=later, owner_alive=lambda h: h.owner == OWNER
    )
    assert report.tombstoned == 2
    assert live.path.exists() and not finished.path.exists() and not orphan.path.exists()
    assert record_paths(tmp_path, "t", "r")[1].exists()
    assert sweep_records(tmp_path, retention_s=50, tombstone_retention_s=10, now_s=later + 20).removed == 2


def test_state_prune_removes_expired_records(tmp_path: Path) -> None:
    record, _ = recorded_run(tmp_path)
    store = ThreadStore(tmp_path)
    old = time.time() - 7200
    os.utime(record.path, (old, old))
    report = prune(store, retention_days=30, replay_retention_s=3600)
    assert report.records_expired == 1 and not record.path.exists()


def test_a_follower_of_a_run_that_ended_unrecorded_stops_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agui_bridge.reattach import follow as reattach_module
    from agui_bridge.store.owner import current_owner

    monkeypatch.setattr(reattach_module, "OWNER_CHECK_S", 0.01)
    monkeypatch.setattr(reattach_module, "UNRECORDED_END_GRACE_S", 0.1)
    record = RunRecord(tmp_path, head(owner=current_owner()), max_bytes=1 << 20)  # a live owner: no seal
    Emitter(NULL_OBSERVER, record).events([ev.run_started("t", "r", None)])
    settings = settings_for(tmp_path, heartbeat_interval_s=0.05)
    attach = open_reattach(settings, "t", "r", "ros-1", 0)
    over = {"now": False}
    body = reattach_module.follow(attach, ThreadRuntime(), settings, "en", lambda: over["now"])
    assert next(body).startswith(b"id: 1\n")
    assert next(body) == b": heartbeat\n\n"  # the run holds its lease: keep following
    over["now"] = True
    started = time.monotonic()
    assert b"".join(body) in (b"", b": heartbeat\n\n", b": heartbeat\n\n: heartbeat\n\n")
    assert time.monotonic() - started < 2.0


def test_a_follower_of_a_dead_owner_seals_and_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agui_bridge.reattach import follow as reattach_module

    monkeypatch.setattr(reattach_module, "OWNER_CHECK_S", 0.01)
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead_owner = f"{socket.gethostname()}:{gone.pid}:1"  # this host, a pid that has exited
    record = RunRecord(tmp_path, head(owner=dead_owner), max_bytes=1 << 20)
    Emitter(NULL_OBSERVER, record).events([ev.run_started("t", "r", None), ev.text_start("m")])
    settings = settings_for(tmp_path)
    attach = open_reattach(settings, "t", "r", "ros-1", 2)
    out = b"".join(reattach_module.follow(attach, ThreadRuntime(), settings, "en"))
    assert out.startswith(b'id: 3\ndata: {"type":"RUN_ERROR"') and out.endswith(b"\n\n")
    assert not list(record_paths(tmp_path, "t", "r")[2].glob("*"))  # the reader's marker is gone


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"type":"RUN_ERROR","code":"CANCELLED"}', "RUN_ERROR"),  # the bridge's own frames: type first
        (b'{"threadId":"t","type":"RUN_FINISHED"}', "RUN_FINISHED"),  # any other order is decoded
        (b"not json", ""),
        (b"[1, 2]", ""),
    ],
)
def test_a_frames_type_is_read_without_decoding_the_bridges_own_events(data: bytes, expected: str) -> None:
    from agui_bridge.reattach.reader import _event_type

    assert _event_type(data) == expected


def test_the_record_directory_is_made_only_when_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/design.md#record-dir-once: the first run makes the directory, later runs create their file in it
    directly; a directory removed meanwhile is made again, and every record starts with its header."""
    import agui_bridge.reattach.record as replay_mod

    made: list[Path] = []
    original = ensure_replay_dir

    def counting(state_dir: Path) -> Path:
        made.append(state_dir)
        return original(state_dir)

    def record_one(run_id: str) -> Path:
        record = RunRecord(tmp_path, head(run_id=run_id), max_bytes=1 << 20)
        Emitter(NULL_OBSERVER, record).events([ev.run_started("t", run_id, None)])
        record.close()
        assert not record.stopped or record.path.exists()
        reader = RecordReader(record.path)
        reader.poll()
        reader.close()
        assert reader.head is not None and reader.head.run_id == run_id
        return record.path

    monkeypatch.setattr(replay_mod, "ensure_replay_dir", counting)
    first = record_one("r1")
    record_one("r2")
    assert made == [tmp_path]
    for path in first.parent.iterdir():
        path.unlink()
    first.parent.rmdir()
    record_one("r3")
    assert made == [tmp_path, tmp_path]


def follow_until_end(body: Iterator[bytes], deadline_s: float = 5.0) -> bytes:
    """What a follower sends until its stream ends or `deadline_s` passes (heartbeats keep it yielding)."""
    out = b""
    deadline = time.monotonic() + deadline_s
    for chunk in body:
        out += chunk
        if time.monotonic() > deadline:
            break
    return out


def test_a_follower_on_any_host_seals_a_record_whose_owners_beacon_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agui_bridge.reattach import follow as reattach_module

    monkeypatch.setattr(reattach_module, "OWNER_CHECK_S", 0.01)
    owner = "a-recreated-container.invalid:7:12345"  # another hostname: its pid cannot be checked here
    Beacons(tmp_path).publish(owner, ["exec-1/r"], ev.now_ms() - 60_000)  # it stopped publishing a minute ago
    record = RunRecord(tmp_path, head(owner=owner), max_bytes=1 << 20)
    Emitter(NULL_OBSERVER, record).events([ev.run_started("t", "r", None), ev.text_start("m")])
    settings = settings_for(tmp_path, heartbeat_interval_s=0.05)
    attach = open_reattach(settings, "t", "r", "ros-1", 2)
    out = follow_until_end(reattach_module.follow(attach, ThreadRuntime(), settings, "en"))
    assert out.endswith(b"\n\n") and b'id: 3\ndata: {"type":"RUN_ERROR"' in out and b'"code":"CANCELLED"' in out
    reader = RecordReader(record.path)
    reader.poll()
    reader.close()
    assert reader.finished and reader.last_position == 3


def test_retention_treats_a_record_whose_owners_beacon_is_stale_as_ended(tmp_path: Path) -> None:
    stale, fresh = "gone-host.invalid:7:12345", "busy-host.invalid:8:12345"
    beacons = Beacons(tmp_path)
    beacons.publish(stale, ["exec-1/orphan"], ev.now_ms() - 60_000)
    beacons.publish(fresh, ["exec-2/live"], ev.now_ms())
    for run_id, owner in (("orphan", stale), ("live", fresh)):
        record = RunRecord(tmp_path, head(run_id=run_id, owner=owner), max_bytes=1 << 20)
        Emitter(NULL_OBSERVER, record).events([ev.run_started("t", run_id, None)])
        old = time.time() - 7200
        os.utime(record.path, (old, old))
    report = prune(ThreadStore(tmp_path), retention_days=30, replay_retention_s=3600)
    assert report.records_expired == 1
    assert record_paths(tmp_path, "t", "orphan")[1].exists() and not record_paths(tmp_path, "t", "orphan")[0].exists()
    assert record_paths(tmp_path, "t", "live")[0].exists()  # its worker is alive, on whatever host


def test_a_follower_leaves_a_record_alone_while_its_owners_beacon_is_fresh(tmp_path: Path) -> None:
    from agui_bridge.reattach.follow import _seal_if_owner_died

    owner = "busy-host.invalid:8:12345"
    Beacons(tmp_path).publish(owner, ["exec-1/r"], ev.now_ms())
    record = RunRecord(tmp_path, head(owner=owner), max_bytes=1 << 20)
    Emitter(NULL_OBSERVER, record).events([ev.run_started("t", "r", None)])
    before = record.path.read_bytes()
    reader = RecordReader(record.path)
    reader.poll()
    _seal_if_owner_died(reader, ThreadRuntime(), settings_for(tmp_path), "en")
    reader.close()
    assert record.path.read_bytes() == before


def test_a_dead_owners_record_is_sealed_in_the_read_pool_retrying_while_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seal's tail scan is blocking file work: it runs through `read_off_hub`, and a lock held by
    another follower is waited for with the runtime's (cooperative) sleep, not inside the pool."""
    from agui_bridge.reattach import follow as reattach_module

    owner = "gone-host.invalid:7:12345"
    Beacons(tmp_path).publish(owner, ["exec-1/r"], ev.now_ms() - 60_000)
    record = RunRecord(tmp_path, head(owner=owner), max_bytes=1 << 20)
    Emitter(NULL_OBSERVER, record).events([ev.run_started("t", "r", None)])
    holder = os.open(record.path, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another follower is sealing it
    off_hub: list[str] = []

    def read_off_hub(fn: Callable[..., object], *args: object) -> object:
        off_hub.append(fn.__name__)
        return fn(*args)

    class ReleasingRuntime(ThreadRuntime):
        sleeps = 0

        def sleep(self, seconds: float) -> None:
            self.sleeps += 1
            os.close(holder)  # the other follower lets go

    monkeypatch.setattr(reattach_module, "read_off_hub", read_off_hub)
    reader = RecordReader(record.path)
    reader.poll()
    runtime = ReleasingRuntime()
    reattach_module._seal_if_owner_died(reader, runtime, settings_for(tmp_path), "en")
    reader.close()
    assert off_hub == ["seal_orphan", "seal_orphan"] and runtime.sleeps == 1
    assert b'"type":"RUN_ERROR"' in record.path.read_bytes()


@pytest.mark.parametrize(
    ("owner", "started_ago_ms", "beacon_age_ms", "alive"),
    [
        ("other.invalid:7:1", 60_000, None, False),  # another host, no beacon, past the grace: gone
        ("other.invalid:7:1", 60_000, 60_000, False),  # another host, a stale beacon
        ("other.invalid:7:1", 60_000, 1_000, True),  # another host, a fresh beacon
        ("other.invalid:7:1", 1_000, None, True),  # a new run: its worker's first beacon may not be out yet
        ("malformed", 1_000, 1_000, False),  # nobody can identify it
    ],
)
def test_a_record_owner_is_judged_by_its_beacon_off_this_host(
    tmp_path: Path, owner: str, started_ago_ms: int, beacon_age_ms: int | None, alive: bool
) -> None:
    now = ev.now_ms()
    if beacon_age_ms is not None:
        Beacons(tmp_path).publish(owner, [], now - beacon_age_ms)
    liveness = OwnerLiveness(tmp_path, beacon_interval_s=5.0, grace_s=20.0)
    assert liveness(RecordHead("t", "r", ros_digest("ros-1"), owner, now - started_ago_ms), now) is alive


def test_a_record_owner_on_this_host_is_judged_by_its_pid_at_once(tmp_path: Path) -> None:
    from agui_bridge.store.owner import current_owner

    gone = subprocess.Popen(["true"])
    gone.wait()
    liveness = OwnerLiveness(tmp_path, beacon_interval_s=5.0, grace_s=20.0)
    now = ev.now_ms()
    assert liveness(RecordHead("t", "r", "x", current_owner(), now), now)
    assert not liveness(RecordHead("t", "r", "x", f"{socket.gethostname()}:{gone.pid}:1", now), now)  # no grace


def _live_record_bytes(big_text_bytes: int) -> bytes:
    """A header, small frames, one frame far larger than a read, and the terminal frame."""
    frames = [
        encode_numbered(1, ev.run_started("t", "r", None)),
        encode_numbered(2, ev.text_start("m")),
        encode_numbered(3, ev.text_content("m", "x" * big_text_bytes)),
        encode_numbered(4, ev.text_content("m", "y")),
        encode_numbered(5, ev.run_finished("t", "r", {"type": "success"})),
    ]
    return head().encode() + b"".join(frames)


@pytest.mark.parametrize(("max_read", "write_step"), [(64, 7), (64, 1000), (1024, 300), (CHUNK_BYTES, 50_000)])
def test_a_follower_forwards_whole_frames_in_bounded_reads_however_large_the_frame(
    tmp_path: Path, max_read: int, write_step: int
) -> None:
    """The live path never holds a frame: each call gives out at most one read, only whole frames reach the
    client (a frame being written waits), and the run is finished only once its terminal frame is out."""
    record = _live_record_bytes(big_text_bytes=max(4 * max_read, 200_000))
    path = tmp_path / "record.sse"
    path.write_bytes(b"")
    reader = RecordReader(path)
    out = bytearray()
    for written in range(write_step, len(record) + write_step, write_step):
        with open(path, "ab") as handle:
            handle.write(record[written - write_step : written])
        for _ in range(len(record)):  # bounded: each call reads at least one byte or stops
            piece = reader.forward(max_read)
            assert len(piece) <= max_read
            out += piece
            assert not reader.finished or bytes(out) == record
            if not piece and not reader.behind:
                break
        assert out == record[: len(out)] and (not out or out.endswith(b"\n\n"))
    reader.close()
    assert bytes(out) == record and reader.finished and reader.last_position == 5
    assert reader.head is not None and reader.head.run_id == "r"


def test_a_forwarded_truncated_marker_ends_the_follow(tmp_path: Path) -> None:
    path = tmp_path / "record.sse"
    path.write_bytes(head().encode() + encode_numbered(1, ev.run_started("t", "r", None)) + TRUNCATED_FRAME)
    reader = RecordReader(path)
    out = reader.forward(64 * 1024)
    reader.close()
    assert out.endswith(TRUNCATED_FRAME) and reader.truncated and reader.last_position == 1 and not reader.finished
