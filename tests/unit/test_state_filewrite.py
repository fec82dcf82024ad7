"""The system calls of one state write (`state.filewrite`) and the syncer's batched flush (`state.writer`)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agui_bridge.store import filewrite
from agui_bridge.store import writer as writer_mod
from agui_bridge.store.model import new_thread
from agui_bridge.store.store import Durability, ThreadStore


def test_temp_files_are_private_named_for_the_sweep_and_never_reused(tmp_path: Path) -> None:
    target = tmp_path / "t1.json"
    fd1, name1 = filewrite.create_temp(target)
    fd2, name2 = filewrite.create_temp(target)
    os.close(fd1)
    os.close(fd2)
    assert name1 != name2
    for name in (name1, name2):
        assert Path(name).parent == tmp_path
        # The crash sweep (`state.sweep`) recognises a killed writer's leftover by this pattern.
        assert re.fullmatch(r"\..+\.json\.[^.]+\.tmp", Path(name).name)
        assert Path(name).name.startswith(f".t1.json.{os.getpid()}-")
        assert stat.S_IMODE(os.lstat(name).st_mode) & 0o077 == 0


def test_a_leftover_or_a_symlink_at_the_next_name_is_skipped_not_opened(tmp_path: Path) -> None:
    target = tmp_path / "t1.json"
    fd, name = filewrite.create_temp(target)
    os.close(fd)
    counter = int(Path(name).name.rsplit("-", 1)[1].removesuffix(".tmp"))
    prefix = f"{tmp_path}/.t1.json.{os.getpid()}-"
    leftover = Path(f"{prefix}{counter + 1}.tmp")
    leftover.write_bytes(b"a killed process's write")
    outside = tmp_path / "outside"
    Path(f"{prefix}{counter + 2}.tmp").symlink_to(outside)
    fd, name = filewrite.create_temp(target)
    os.close(fd)
    assert name == f"{prefix}{counter + 3}.tmp"
    assert leftover.read_bytes() == b"a killed process's write"
    assert not outside.exists()


def test_no_free_name_is_an_os_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filewrite, "_TEMP_ATTEMPTS", 0)
    with pytest.raises(OSError):
        filewrite.create_temp(tmp_path / "t1.json")


def _state(thread_id: str) -> object:
    return new_thread(thread_id, "/work/ws", None, "ros-1", "exec-1")


def _wait_until(predicate: object, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if predicate():  # type: ignore[operator]
            return
        threading.Event().wait(0.01)
    raise AssertionError("condition not reached")


def test_a_burst_of_crash_writes_is_made_durable_by_one_syncfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Aged crash-class writes reach the syncer together; a batch of at least `SYNCFS_MIN_FILES` is
    flushed by one syncfs of their filesystem, instead of an fsync per file and directory."""
    if filewrite._syncfs is None:
        pytest.skip("no syncfs(2) here")
    calls: list[str] = []
    real_syncfs, real_fsync = filewrite._syncfs, os.fsync

    def syncfs(fd: int) -> int:
        calls.append("syncfs")
        return real_syncfs(fd)

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(filewrite, "_syncfs", syncfs)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(writer_mod, "SYNC_DELAY_S", 0.3)
    # The writer is the process's: let deferred syncs of earlier tests (other directories) drain first,
    # so the batch counted below is this test's alone.
    writer = writer_mod.state_writer()
    _wait_until(lambda: not writer._deferred and not writer._to_sync)
    threading.Event().wait(0.3)
    calls.clear()
    store = ThreadStore(tmp_path)
    count = writer_mod.SYNCFS_MIN_FILES + 4
    for i in range(count):
        with store.transaction(f"burst-{i}") as txn:
            txn.commit(_state(f"burst-{i}"), Durability.CRASH)  # type: ignore[arg-type]
    assert "syncfs" not in calls and "fsync" not in calls  # none of them waited for a flush
    _wait_until(lambda: "syncfs" in calls)
    threading.Event().wait(0.6)
    assert calls.count("syncfs") == 1
    assert "fsync" not in calls
    assert all(store.read(f"burst-{i}") == _state(f"burst-{i}") for i in range(count))


def test_a_failed_syncfs_falls_back_to_fsyncing_each_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(filewrite, "_syncfs", lambda fd: -1)
    monkeypatch.setattr(os, "fsync", fsync)
    files = []
    for i in range(writer_mod.SYNCFS_MIN_FILES):
        path = tmp_path / f"f{i}.json"
        path.write_bytes(b"{}")
        files.append((path, os.open(path, os.O_RDONLY)))
    writer_mod.StateWriter._sync(dict(files))
    # every file, then its directory once
    assert len(synced) == len(files) + 1
    for _, fd in files:
        with pytest.raises(OSError):
            os.fstat(fd)  # closed


def test_a_replaced_crash_write_is_released_after_its_successor_woke_its_waiter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The descriptor kept for a crash-class write's deferred sync is closed only after the next write of
    the same file has been renamed over it and its waiter woken: freeing the old inode is off the path."""
    store = ThreadStore(tmp_path)
    with store.transaction("t1") as txn:
        txn.commit(_state("t1"), Durability.CRASH)  # type: ignore[arg-type]
    writer = writer_mod.state_writer()
    old_fd = writer._deferred[store.path_for("t1")][0]
    assert old_fd >= 0
    events: list[str] = []
    real_close, real_finish = filewrite.close_file, writer_mod._Job.finish

    def close(fd: int) -> None:
        if fd == old_fd:
            events.append("closed old")
        real_close(fd)

    def finish(job: writer_mod._Job) -> None:
        events.append("woken")
        real_finish(job)

    monkeypatch.setattr(writer_mod, "_close", close)
    monkeypatch.setattr(writer_mod._Job, "finish", finish)
    with store.transaction("t1") as txn:
        txn.commit(_state("t1"), Durability.CRASH)  # type: ignore[arg-type]
    _wait_until(lambda: "closed old" in events)
    assert events == ["woken", "closed old"]
    assert store.read("t1") == _state("t1")


_CLOSE_SCRIPT = """
from gevent import monkey
monkey.patch_all()
import os, json
from agui_bridge.store import filewrite
print(json.dumps({"patched_os_close": os.close is not filewrite.close_file,
                  "builtin": type(filewrite.close_file).__name__}))
"""


def test_state_files_are_closed_without_gevents_extra_checks() -> None:
    """After patching, `os.close` is gevent's (fcntl + fstat + close); the state layer's is the plain one."""
    out = subprocess.run([sys.executable, "-c", _CLOSE_SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "patched_os_close": True,
        "builtin": "builtin_function_or_method",
    }
