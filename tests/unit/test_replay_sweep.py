"""The run records' sweep (docs/design.md#retention): bounded reads per record, one process at a time, off
the hub; and how a record's end is read from its tail alone."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

import pytest

from agui_bridge.protocol import events as ev
from agui_bridge.protocol.sse import encode_numbered
from agui_bridge.reattach.format import (
    MAX_HEADER_BYTES,
    TRUNCATED_FRAME,
    RecordHead,
    record_paths,
    replay_dir,
    ros_digest,
)
from agui_bridge.reattach.reader import RecordReader
from agui_bridge.reattach.retention import SWEEP_LOCK, sweep_records
from agui_bridge.reattach.status import TAIL_BYTES, read_status
from tests.support.hub_guard import run_patched

OWNER = "other-host.invalid:1:1"


def write_record(
    state_dir: Path, run_id: str, *, frames: int = 3, text_bytes: int = 10, end: bytes | None = b"finished",
    age_s: float = 0.0,
) -> Path:  # fmt: skip
    """A record as the owner writes it: header, `frames` text frames, then a terminal frame (`end` b"finished"),
    `: truncated` (TRUNCATED_FRAME), or nothing (a live run)."""
    path = record_paths(state_dir, "t", run_id)[0]
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    head = RecordHead("t", run_id, ros_digest("ros-1"), OWNER, 1)
    with open(path, "wb") as handle:
        handle.write(head.encode())
        handle.write(encode_numbered(1, ev.run_started("t", run_id, None)))
        text = "x" * text_bytes
        for position in range(2, frames + 2):
            handle.write(encode_numbered(position, ev.text_content("m", text)))
        if end == b"finished":
            handle.write(encode_numbered(frames + 2, ev.run_finished("t", run_id, {"type": "success"})))
        elif end is not None:
            handle.write(end)
    if age_s:
        old = time.time() - age_s
        os.utime(path, (old, old))
    return path


class CountingReads:
    """Every byte the sweep reads from a file, whichever call it uses."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.total = 0
        original_pread, original_read = os.pread, os.read

        def pread(fd: int, n: int, offset: int) -> bytes:
            data = original_pread(fd, n, offset)
            self.total += len(data)
            return data

        def read(fd: int, n: int) -> bytes:
            data = original_read(fd, n)
            self.total += len(data)
            return data

        def no_full_parse(*args: object) -> object:
            raise AssertionError("the sweep parsed a whole record")

        monkeypatch.setattr(os, "pread", pread)
        monkeypatch.setattr(os, "read", read)
        monkeypatch.setattr(RecordReader, "poll", no_full_parse)


def test_the_sweep_reads_only_a_bounded_header_and_tail_of_each_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_finished = write_record(tmp_path, "finished", frames=400, text_bytes=20_000, age_s=7200)
    big_live = write_record(tmp_path, "live", frames=400, text_bytes=20_000, end=None, age_s=7200)
    assert big_finished.stat().st_size > 100 * (MAX_HEADER_BYTES + TAIL_BYTES)
    reads = CountingReads(monkeypatch)
    report = sweep_records(
        tmp_path, retention_s=3600, tombstone_retention_s=86400, owner_alive=lambda head: head.run_id == "live"
    )
    assert report.tombstoned == 1 and not big_finished.exists() and big_live.exists()
    assert record_paths(tmp_path, "t", "finished")[1].exists()  # a tombstone: a later reattach is 410
    assert 0 < reads.total <= 2 * (MAX_HEADER_BYTES + TAIL_BYTES)


@pytest.mark.parametrize(
    ("frames", "text_bytes", "end", "expected"),
    [
        (3, 10, b"finished", (True, False, 5)),  # the terminal frame is the last one
        (3, 10, TRUNCATED_FRAME, (False, True, None)),  # the owner stopped recording
        (3, 10, None, (False, False, 4)),  # a live run: its last frame is a text frame
        (0, 10, None, (False, False, 1)),  # only RUN_STARTED so far
        (3, 10, b'id: 5\ndata: {"type":"RUN_FIN', (False, False, None)),  # a write under way
        (1, 100_000, None, (False, False, 2)),  # a last frame larger than a chunk: read backwards to its start
        (40, 4_000, b"finished", (True, False, 42)),  # many frames: only the tail is looked at
    ],
)
def test_how_a_record_ends_is_read_from_its_tail(
    tmp_path: Path, frames: int, text_bytes: int, end: bytes | None, expected: tuple[bool, bool, int | None]
) -> None:
    path = write_record(tmp_path, "r", frames=frames, text_bytes=text_bytes, end=end)
    status = read_status(path)
    assert status is not None and status.head is not None and status.head.run_id == "r"
    assert (status.finished, status.truncated, status.last_position) == expected


def test_a_record_with_only_its_header_has_no_frame_yet(tmp_path: Path) -> None:
    path = record_paths(tmp_path, "t", "r")[0]
    path.parent.mkdir()
    path.write_bytes(RecordHead("t", "r", ros_digest("ros-1"), OWNER, 1).encode())
    status = read_status(path)
    assert status is not None and (status.ended, status.last_position) == (False, 0)
    assert read_status(tmp_path / "missing.sse") is None


def test_only_one_process_sweeps_the_records_at_a_time(tmp_path: Path) -> None:
    expired = write_record(tmp_path, "r", age_s=7200)
    holder = os.open(replay_dir(tmp_path) / SWEEP_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another worker is sweeping
        report = sweep_records(tmp_path, retention_s=3600, tombstone_retention_s=86400)
        assert report.skipped and report.tombstoned == 0 and expired.exists()
    finally:
        os.close(holder)
    report = sweep_records(tmp_path, retention_s=3600, tombstone_retention_s=86400)
    assert not report.skipped and report.tombstoned == 1 and not expired.exists()


_OFF_HUB_SCRIPT = """
from gevent import monkey
import json, sys, threading
from pathlib import Path
from agui_bridge.reattach import retention as replay_retention
from agui_bridge.runs.retention import prune
from agui_bridge.store.store import ThreadStore

get_ident = monkey.get_original("threading", "get_ident")
hub_thread = get_ident()
seen = []
original = replay_retention.read_status

def spying(path):
    seen.append(get_ident())
    return original(path)

replay_retention.read_status = spying
report = prune(ThreadStore(Path(sys.argv[1])), retention_days=30, replay_retention_s=3600)
print(json.dumps({"expired": report.records_expired, "threads": [t != hub_thread for t in seen]}))
"""


def test_the_record_sweep_runs_off_the_hub(tmp_path: Path) -> None:
    write_record(tmp_path, "r", age_s=7200)
    out = run_patched(_OFF_HUB_SCRIPT, str(tmp_path), cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"expired": 1, "threads": [True]}
    assert not list(replay_dir(tmp_path).glob("*.sse"))
