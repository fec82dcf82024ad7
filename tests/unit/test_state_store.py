"""ThreadStore: atomic files, modes, corruption isolation, and cross-process locking.

See docs/design.md#state-write-protocol, docs/design.md#state-load and
docs/design.md#decision-many-workers-one-truth.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from agui_bridge.store.model import PendingInterrupt, ThreadState, new_thread
from agui_bridge.store.store import InvalidThreadId, StateCorrupt, StateLockTimeout, StateWriteFailed, ThreadStore
from tests.support.hub_guard import run_patched

COUNTER = "counter"


def _state(thread_id: str = "thread-1") -> ThreadState:
    return new_thread(thread_id, "/work/ws", None, "ros-1", "exec-1")


def _save(store: ThreadStore, state: ThreadState) -> None:
    with store.transaction(state.thread_id) as txn:
        txn.commit(state)


def _leftovers(store: ThreadStore) -> list[str]:
    return sorted(name for name in os.listdir(store.threads_dir) if name.endswith(".tmp"))


def _increment(root: str, thread_id: str, times: int) -> None:
    """Read-modify-write a counter kept in run_digests (child process entry point)."""
    store = ThreadStore(Path(root), lock_timeout_s=60.0)
    for _ in range(times):
        with store.transaction(thread_id) as txn:
            state = txn.state or _state(thread_id)
            state.run_digests[COUNTER] = str(int(state.run_digests.get(COUNTER, "0")) + 1)
            txn.commit(state)


def _hold_lock(root: str, thread_id: str, held: object, release: object) -> None:
    store = ThreadStore(Path(root))
    with store.transaction(thread_id):
        held.set()  # type: ignore[attr-defined]
        release.wait(30)  # type: ignore[attr-defined]


def test_construction_touches_nothing(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path / "state")
    assert store.read("thread-1") is None
    assert not (tmp_path / "state").exists()
    assert list(store.iter_thread_ids()) == []


def test_commit_writes_private_atomic_file(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path / "state")
    state = _state()
    _save(store, state)
    path = store.path_for("thread-1")
    assert path == tmp_path / "state" / "threads" / "thread-1.json"
    assert stat.S_IMODE(os.stat(tmp_path / "state").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.threads_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(f"{path}.lock").st_mode) == 0o600
    assert _leftovers(store) == []
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.startswith('{\n  "')
    assert store.read("thread-1") == state
    assert not (tmp_path / "state" / "adapter-state.json").exists()


def test_non_ascii_is_written_literally(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    state = new_thread("会话", "/工作", None, "ros", "exec")
    _save(store, state)
    assert "/工作" in store.path_for("会话").read_text(encoding="utf-8")
    assert store.read("会话") == state


def test_transaction_without_commit_writes_nothing(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    with store.transaction("thread-1") as txn:
        assert txn.state is None
    assert not store.path_for("thread-1").exists()


def test_commit_twice_and_transaction_sees_fresh_state(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    with store.transaction("thread-1") as txn:
        state = _state()
        txn.commit(state)
        state.execution.task_id = "task-1"
        txn.commit(state)
        assert txn.state is state
    with store.transaction("thread-1") as txn:
        assert txn.state is not None and txn.state.execution.task_id == "task-1"


def test_commit_refuses_outside_block_and_foreign_state(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    with store.transaction("thread-1") as txn, pytest.raises(ValueError):
        txn.commit(_state("thread-2"))
    with pytest.raises(RuntimeError):
        txn.commit(_state())


@pytest.mark.parametrize("thread_id", ["", "\udc80"])
def test_invalid_thread_id_is_refused(tmp_path: Path, thread_id: str) -> None:
    store = ThreadStore(tmp_path)
    with pytest.raises(InvalidThreadId):
        store.path_for(thread_id)
    with pytest.raises(InvalidThreadId):
        store.read(thread_id)
    with pytest.raises(InvalidThreadId), store.transaction(thread_id):
        pass


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"\xff\xfe", b"[]", b'{"schemaVersion": 2}', b'{"schemaVersion": NaN}', b"[" * 100_000],
)
def test_corrupt_file_makes_only_that_thread_unavailable(tmp_path: Path, content: bytes) -> None:
    store = ThreadStore(tmp_path)
    _save(store, _state("thread-2"))
    store.path_for("thread-1").write_bytes(content)
    with pytest.raises(StateCorrupt):
        store.read("thread-1")
    with pytest.raises(StateCorrupt), store.transaction("thread-1"):
        pass
    assert store.read("thread-2") == _state("thread-2")
    _save(store, _state("thread-3"))
    assert list(store.iter_thread_ids()) == ["thread-2", "thread-3"]


def test_file_of_another_thread_is_corrupt(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    _save(store, _state("thread-2"))
    os.replace(store.path_for("thread-2"), store.path_for("thread-1"))
    with pytest.raises(StateCorrupt):
        store.read("thread-1")
    assert list(store.iter_thread_ids()) == []  # misplaced files are not reported


def test_symlinked_file_is_refused(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path / "state")
    _save(store, _state("thread-2"))
    target = tmp_path / "elsewhere.json"
    target.write_bytes(store.path_for("thread-2").read_bytes().replace(b"thread-2", b"thread-1"))
    store.path_for("thread-1").symlink_to(target)
    with pytest.raises(StateCorrupt):
        store.read("thread-1")
    with pytest.raises(StateCorrupt), store.transaction("thread-1"):
        pass


def test_read_reapplies_private_mode(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    _save(store, _state())
    os.chmod(store.path_for("thread-1"), 0o644)
    store.read("thread-1")
    assert stat.S_IMODE(os.stat(store.path_for("thread-1")).st_mode) == 0o600


@pytest.mark.parametrize("broken", ["replace", "fsync"])
def test_write_failure_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    store = ThreadStore(tmp_path)
    old = _state()
    _save(store, old)
    before = store.path_for("thread-1").read_bytes()

    def fail(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, broken, fail)
    new = _state()
    new.execution.task_id = "task-1"
    with pytest.raises(StateWriteFailed), store.transaction("thread-1") as txn:
        txn.commit(new)
    monkeypatch.undo()
    assert store.path_for("thread-1").read_bytes() == before
    assert _leftovers(store) == []
    assert store.read("thread-1") == old


def test_unserialisable_state_fails_before_touching_disk(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    state = _state()
    state.execution.pending["i"] = PendingInterrupt({"inputId": "i", "options": [float("nan")]}, False, 0)
    with pytest.raises(StateWriteFailed), store.transaction("thread-1") as txn:
        txn.commit(state)
    assert not store.path_for("thread-1").exists()
    assert _leftovers(store) == []


def test_exception_in_block_releases_lock(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path, lock_timeout_s=0.5)
    with pytest.raises(KeyError), store.transaction("thread-1"):
        raise KeyError("boom")
    with store.transaction("thread-1") as txn:
        txn.commit(_state())


def test_delete_and_iter_thread_ids(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    for thread_id in ("b", "Thread-A", "T" * 120):
        _save(store, _state(thread_id))
    assert sorted(store.iter_thread_ids()) == sorted(["b", "Thread-A", "T" * 120])
    store.delete("Thread-A")
    store.delete("never-existed")
    assert store.read("Thread-A") is None
    assert sorted(store.iter_thread_ids()) == sorted(["b", "T" * 120])


def test_nested_transaction_on_same_thread_times_out(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path, lock_timeout_s=0.2)
    with store.transaction("thread-1"):
        started = time.monotonic()
        with pytest.raises(StateLockTimeout), store.transaction("thread-1"):
            pass
        assert time.monotonic() - started < 2
        with store.transaction("thread-2") as other:  # other threads are independent
            other.commit(_state("thread-2"))


def test_threads_of_one_process_serialise(tmp_path: Path) -> None:
    workers = [threading.Thread(target=_increment, args=(str(tmp_path), "thread-1", 25)) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    state = ThreadStore(tmp_path).read("thread-1")
    assert state is not None and state.run_digests[COUNTER] == "200"


def test_processes_serialise_read_modify_write(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    processes = [ctx.Process(target=_increment, args=(str(tmp_path), "thread-1", 50)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(90)
        assert process.exitcode == 0
    state = ThreadStore(tmp_path).read("thread-1")
    assert state is not None and state.run_digests[COUNTER] == "200"
    assert _leftovers(ThreadStore(tmp_path)) == []


def test_lock_held_by_another_process_times_out(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    held, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(str(tmp_path), "thread-1", held, release))
    holder.start()
    try:
        assert held.wait(30)
        store = ThreadStore(tmp_path, lock_timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(StateLockTimeout), store.transaction("thread-1"):
            pass
        assert 0.25 <= time.monotonic() - started < 3
    finally:
        release.set()
        holder.join(30)
    assert holder.exitcode == 0
    with ThreadStore(tmp_path, lock_timeout_s=5).transaction("thread-1") as txn:
        txn.commit(_state())


_GEVENT_SCRIPT = """
from gevent import monkey; monkey.patch_all()
import sys, gevent
from pathlib import Path
from agui_bridge.store.model import new_thread
from agui_bridge.store.store import ThreadStore

store = ThreadStore(Path(sys.argv[1]), lock_timeout_s=30)
ticks = 0
def ticker():
    global ticks
    while True:
        ticks += 1
        gevent.sleep(0.01)
def work():
    for _ in range(20):
        with store.transaction("thread-1") as txn:
            state = txn.state or new_thread("thread-1", "/w", None, "r", "e")
            n = int(state.run_digests.get("counter", "0"))
            gevent.sleep(0.002)  # yield while holding the lock
            state.run_digests["counter"] = str(n + 1)
            txn.commit(state)
t = gevent.spawn(ticker)
gevent.joinall([gevent.spawn(work) for _ in range(5)])
t.kill()
print(store.read("thread-1").run_digests["counter"], ticks)
"""


def test_greenlets_serialise_under_gevent(tmp_path: Path) -> None:
    result = run_patched(_GEVENT_SCRIPT, str(tmp_path), cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    count, ticks = result.stdout.split()
    assert count == "100"
    assert int(ticks) > 10  # the hub kept running while greenlets waited


def test_document_on_disk_is_plain_json(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    _save(store, _state())
    doc = json.loads(store.path_for("thread-1").read_text(encoding="utf-8"))
    assert doc["schemaVersion"] == 1 and doc["threadId"] == "thread-1"
