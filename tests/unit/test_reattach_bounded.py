"""Reattach's bounds without a server: refusals read the header only and cost the same for a wrong
credential and an unknown run; the end of a record is found without parsing it; the backlog is never
held whole (docs/design.md#reattach)."""

from __future__ import annotations

import builtins
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.config.settings import Settings
from agui_bridge.errors import ReplayCursorOutOfRange, ReplayExpired, RunNotFound
from agui_bridge.reattach.follow import follow, open_reattach
from agui_bridge.reattach.format import MAX_HEADER_BYTES, TRUNCATED_FRAME, RecordHead, record_paths
from agui_bridge.reattach.reader import CHUNK_BYTES, RecordReader, find_frame_after, probe_head, scan_tail
from agui_bridge.worker.runtime import ThreadRuntime
from tests.support.synthetic_record import text_frame, write_synthetic_record

ROS = "ros-1"
BIG = 8 << 20


def settings_for(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path)


def read_bytes_of_process() -> int:
    """Bytes this process has read through read(2)/pread(2) so far: a counter no code path can bypass."""
    with open("/proc/self/io", "rb") as handle:
        for line in handle:
            if line.startswith(b"rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.fixture(autouse=True)
def imports_done(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One reattach of a tiny record first, so modules imported on first use are not counted as reads."""
    directory = tmp_path_factory.mktemp("warm")
    last = write_synthetic_record(directory, "t", "r", ROS, size_bytes=100)
    for ros, cursor in ((ROS, last + 1), ("wrong-ros", 0)):
        with pytest.raises((ReplayCursorOutOfRange, RunNotFound)):
            open_reattach(settings_for(directory), "t", "r", ros, cursor)


class FileWork:
    """Counts opens and bytes read under the records' directory while installed."""

    def __init__(self, directory: Path) -> None:
        self.directory = str(directory)
        self.opens = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_os_open: Callable[..., int] = os.open
        real_open: Callable[..., Any] = builtins.open

        def counted_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
            if str(path).startswith(self.directory):
                self.opens += 1
            return real_os_open(path, *args, **kwargs)

        def counted_open(path: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(path, (str, Path)) and str(path).startswith(self.directory):
                self.opens += 1
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", counted_os_open)
        monkeypatch.setattr(builtins, "open", counted_open)


def refusal_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread_id: str, ros: str) -> tuple[int, int]:
    work = FileWork(tmp_path / "replay")
    with monkeypatch.context() as patch:
        work.install(patch)
        before = read_bytes_of_process()
        with pytest.raises(RunNotFound):
            open_reattach(settings_for(tmp_path), thread_id, "r", ros, 0)
        read = read_bytes_of_process() - before
    return work.opens, read


def test_a_refusal_reads_only_the_records_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_synthetic_record(tmp_path, "t", "r", ROS, size_bytes=BIG)
    _, read = refusal_work(tmp_path, monkeypatch, "t", "wrong-ros")
    assert read <= 2 * MAX_HEADER_BYTES, f"a wrong rosInvocationId read {read} bytes of an 8 MiB record"


def test_a_refusal_does_the_same_file_work_for_a_wrong_credential_and_an_unknown_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_synthetic_record(tmp_path, "t", "r", ROS, size_bytes=BIG)
    wrong_opens, wrong_read = refusal_work(tmp_path, monkeypatch, "t", "wrong-ros")
    unknown_opens, unknown_read = refusal_work(tmp_path, monkeypatch, "unknown-thread", ROS)
    assert wrong_opens == unknown_opens == 2  # the record and its tombstone, whichever exist
    assert wrong_read <= 2 * MAX_HEADER_BYTES and unknown_read <= 2 * MAX_HEADER_BYTES


def test_a_cursor_past_the_end_is_refused_reading_only_the_records_end(tmp_path: Path) -> None:
    last = write_synthetic_record(tmp_path, "t", "r", ROS, size_bytes=BIG)
    before = read_bytes_of_process()
    with pytest.raises(ReplayCursorOutOfRange):
        open_reattach(settings_for(tmp_path), "t", "r", ROS, last + 1)
    read = read_bytes_of_process() - before
    assert read <= 4 * CHUNK_BYTES, f"a 416 read {read} bytes of an 8 MiB record"


def test_the_backlog_is_never_held_whole(tmp_path: Path) -> None:
    write_synthetic_record(tmp_path, "t", "r", ROS, size_bytes=BIG)
    record = record_paths(tmp_path, "t", "r")[0]
    attach = open_reattach(settings_for(tmp_path), "t", "r", ROS, 0)
    body = follow(attach, ThreadRuntime(), settings_for(tmp_path), "en")
    largest = total = 0
    tracemalloc.start()
    try:
        for chunk in body:
            largest = max(largest, len(chunk))
            total += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    header_bytes = probe_head(record).frames_start
    assert total == record.stat().st_size - header_bytes
    assert largest <= CHUNK_BYTES
    assert peak < 1 << 20, f"serving an 8 MiB backlog peaked at {peak} bytes"


def frames_by_full_parse(path: Path) -> tuple[list[int], bool, bool]:
    reader = RecordReader(path)
    positions = [frame.position for frame in reader.poll()]
    reader.close()
    return positions, reader.finished, reader.truncated


def synthetic(path: Path, frames: list[bytes], tail: bytes = b"") -> None:
    path.write_bytes(RecordHead("t", "r", "0" * 64, "o", 1).encode() + b"".join(frames) + tail)


FRAME_SIZES: list[tuple[str, list[int], bytes]] = [
    ("no frames yet", [], b""),
    ("small frames", [50] * 40, b""),
    ("frames across chunk boundaries", [9000] * 30, b""),
    ("a frame larger than a chunk last", [100, 100, CHUNK_BYTES * 3], b""),
    ("a half-written frame at the end", [200] * 10, b'id: 11\ndata: {"type":"TEXT_MESS'),
    ("a truncated record", [300] * 5, TRUNCATED_FRAME),
]


@pytest.mark.parametrize(("sizes", "tail"), [(s, t) for _, s, t in FRAME_SIZES], ids=[n for n, _, _ in FRAME_SIZES])
def test_the_end_of_a_record_is_found_without_parsing_it(tmp_path: Path, sizes: list[int], tail: bytes) -> None:
    path = tmp_path / "record.sse"
    synthetic(path, [text_frame(number + 1, size) for number, size in enumerate(sizes)], tail)
    positions, finished, truncated = frames_by_full_parse(path)
    probe = probe_head(path)
    assert probe.fd is not None
    try:
        found = scan_tail(probe.fd, probe.frames_start)
        assert found.truncated == truncated and found.finished == finished
        if not truncated:
            assert found.last_position == (positions[-1] if positions else 0)
            whole = path.read_bytes()
            assert whole[: found.complete_end].endswith(b"\n\n") and not whole[found.complete_end :].endswith(b"\n\n")
    finally:
        os.close(probe.fd)


@pytest.mark.parametrize("frame_size", [40, 5000, CHUNK_BYTES - 7, CHUNK_BYTES + 13])
def test_the_backlog_starts_at_the_first_frame_after_the_cursor(tmp_path: Path, frame_size: int) -> None:
    path = tmp_path / "record.sse"
    frames = [text_frame(number + 1, frame_size) for number in range(12)]
    synthetic(path, frames)
    probe = probe_head(path)
    assert probe.fd is not None
    try:
        end = scan_tail(probe.fd, probe.frames_start).complete_end
        for cursor in range(len(frames) + 1):
            offset = find_frame_after(probe.fd, probe.frames_start, end, cursor)
            assert path.read_bytes()[offset:end] == b"".join(frames[cursor:]), cursor
    finally:
        os.close(probe.fd)


def test_a_tombstone_alone_is_410_for_its_caller_and_404_for_anyone_else(tmp_path: Path) -> None:
    write_synthetic_record(tmp_path, "t", "r", ROS, size_bytes=1000)
    record, tombstone, _ = record_paths(tmp_path, "t", "r")
    tombstone.write_bytes(record.read_bytes()[: probe_head(record).frames_start])
    record.unlink()
    with pytest.raises(ReplayExpired):
        open_reattach(settings_for(tmp_path), "t", "r", ROS, 0)
    with pytest.raises(RunNotFound):
        open_reattach(settings_for(tmp_path), "t", "r", "wrong-ros", 0)


def test_a_stat_watch_is_signalled_when_the_record_grows(tmp_path: Path) -> None:
    gevent = pytest.importorskip("gevent")
    from agui_bridge.worker.runtime import _StatWatch

    path = tmp_path / "record.sse"
    path.write_bytes(b"")
    watch = _StatWatch(str(path))
    try:
        with open(path, "ab") as handle:
            handle.write(b"id: 1\n\n")
        with gevent.Timeout(10):
            watch._changed.wait()
        assert watch._changed.is_set()
    finally:
        watch.close()
