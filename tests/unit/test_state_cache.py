"""The worker's cache of its own last writes: used only while the file is that write (docs/design.md#state-cache)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.store import doc_cache
from agui_bridge.store.model import ThreadState, new_thread
from agui_bridge.store.store import StateWriteFailed, ThreadStore
from agui_bridge.store.writer import Durability


def _state(thread_id: str = "t1") -> ThreadState:
    return new_thread(thread_id, "/w", None, "ros", "exec-1")


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Thread files opened for reading under this test's directory, by name: each is a read from disk
    (counted where the operating system is asked, whatever path inside the store asks)."""
    seen: list[str] = []
    real_open = os.open
    mine = str(tmp_path)

    def counting_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        name = os.fsdecode(path)
        if name.startswith(mine) and name.endswith(".json") and flags & os.O_ACCMODE == os.O_RDONLY:
            seen.append(Path(name).name)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    return seen


def _bump(root: str, thread_id: str, value: str) -> None:
    """Another process's read-modify-write (child process entry point)."""
    store = ThreadStore(Path(root))
    with store.transaction(thread_id) as txn:
        assert txn.state is not None
        txn.state.session_id = value
        txn.commit(txn.state, Durability.CRASH)


def test_own_last_write_is_not_read_again(tmp_path: Path, reads: list[str]) -> None:
    store = ThreadStore(tmp_path)
    with store.transaction("t1") as txn:
        txn.commit(_state(), Durability.CRASH)
    for session in ("s1", "s2", "s3"):
        with store.transaction("t1") as txn:
            assert txn.state is not None
            txn.state.session_id = session
            txn.commit(txn.state, Durability.CRASH)
    with store.transaction("t1") as txn:
        assert txn.state is not None and txn.state.session_id == "s3"
    assert reads == []
    assert store.read("t1") == txn.state  # the lock-free read goes to the file, and agrees


def test_another_process_writing_in_between_means_a_fresh_read(tmp_path: Path, reads: list[str]) -> None:
    store = ThreadStore(tmp_path)
    with store.transaction("t1") as txn:
        txn.commit(_state(), Durability.POWER)
    ctx = multiprocessing.get_context("spawn")
    for value in ("from-other-1", "from-other-2"):  # twice: the inode number may come back
        child = ctx.Process(target=_bump, args=(str(tmp_path), "t1", value))
        child.start()
        child.join(60)
        assert child.exitcode == 0
        with store.transaction("t1") as txn:
            assert txn.state is not None and txn.state.session_id == value
    assert reads == ["t1.json", "t1.json"]


def test_a_deleted_file_is_none_and_a_replaced_one_is_read(tmp_path: Path, reads: list[str]) -> None:
    store = ThreadStore(tmp_path)
    with store.transaction("t1") as txn:
        txn.commit(_state(), Durability.CRASH)
    path = store.path_for("t1")
    os.unlink(path)
    with store.transaction("t1") as txn:
        assert txn.state is None
    with store.transaction("t1") as txn:
        txn.commit(_state(), Durability.CRASH)
    copy = path.with_name("copy.json")
    copy.write_bytes(path.read_bytes().replace(b'"userId": null', b'"userId": "u-2"'))
    os.replace(copy, path)
    with store.transaction("t1") as txn:
        assert txn.state is not None and txn.state.user_id == "u-2"
    os.chmod(path, 0o644)  # same file, other mode: read again (and made private again)
    with store.transaction("t1") as txn:
        pass
    assert reads == ["t1.json", "t1.json"]
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_mutating_a_returned_state_never_reaches_the_cache(tmp_path: Path, reads: list[str]) -> None:
    store = ThreadStore(tmp_path)
    state = _state()
    with store.transaction("t1") as txn:
        txn.commit(state, Durability.CRASH)
    state.session_id = "mutated after the commit"  # the caller's object is not the remembered one
    with store.transaction("t1") as txn:
        assert txn.state is not None and txn.state.session_id is None
        txn.state.session_id = "mutated, never committed"
        txn.state.run_digests["x"] = "y"
    with store.transaction("t1") as txn:
        assert txn.state == _state()
    assert reads == []


def test_the_cache_holds_what_the_file_holds_not_the_record_committed(tmp_path: Path, reads: list[str]) -> None:
    store = ThreadStore(tmp_path)
    state = _state()
    state.execution.pipeline_open_steps = ["b", "a", "b"]
    state.run_digests = {"": "dropped on read", "run-1": "d"}
    with store.transaction("t1") as txn:
        txn.commit(state, Durability.CRASH)
    with store.transaction("t1") as txn:
        cached = txn.state
    assert reads == []
    assert cached == store.read("t1")
    assert cached is not None and cached.execution.pipeline_open_steps == ["a", "b"]


def test_failed_write_and_delete_forget_the_thread(tmp_path: Path, reads: list[str]) -> None:
    store = ThreadStore(tmp_path)
    with store.transaction("t1") as txn:
        txn.commit(_state(), Durability.CRASH)
    assert len(store._cache) == 1

    def fail(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    changed = _state()
    changed.session_id = "never written"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "replace", fail)
        with pytest.raises(StateWriteFailed), store.transaction("t1") as txn:
            txn.commit(changed, Durability.CRASH)
    assert len(store._cache) == 0
    with store.transaction("t1") as txn:
        assert txn.state == _state()
    assert reads == ["t1.json"]
    store.delete("t1")
    assert len(store._cache) == 0
    with store.transaction("t1") as txn:
        assert txn.state is None


def test_bounded_by_count_and_bytes(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    store._cache = doc_cache.DocumentCache(capacity=3)
    for index in range(5):
        with store.transaction(f"t{index}") as txn:
            txn.commit(_state(f"t{index}"), Durability.CRASH)
    assert len(store._cache) == 3
    assert store._cache.get(str(store.path_for("t0")), (0, 0, 0, 0, 0)) is None
    size = store.path_for("t4").stat().st_size
    store._cache = doc_cache.DocumentCache(byte_budget=2 * size)
    for index in range(5):
        with store.transaction(f"t{index}") as txn:
            assert txn.state is not None
            txn.commit(txn.state, Durability.CRASH)
    assert len(store._cache) == 2
    store._cache = doc_cache.DocumentCache(byte_budget=size - 1)  # a file larger than the budget: not kept
    with store.transaction("t1") as txn:
        assert txn.state is not None
        txn.commit(txn.state, Durability.CRASH)
    assert len(store._cache) == 0


def test_no_signature_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]) -> None:
    """A filesystem that rounds the modification time gives no signature: every transaction reads."""
    from agui_bridge.store import writer

    monkeypatch.setattr(writer, "_stamp", lambda fd: None)
    store = ThreadStore(tmp_path)
    with store.transaction("t1") as txn:
        txn.commit(_state(), Durability.CRASH)
    with store.transaction("t1") as txn:
        assert txn.state == _state()
    assert reads == ["t1.json"]


_FORK_SCRIPT = """
import os, sys
from pathlib import Path
from agui_bridge.store.model import new_thread
from agui_bridge.store.store import StateWriteFailed, ThreadStore
from agui_bridge.store.writer import Durability

store = ThreadStore(Path(sys.argv[1]))
with store.transaction("t1") as txn:
    txn.commit(new_thread("t1", "/w", None, "ros", "exec-1"), Durability.CRASH)
pid = os.fork()
if pid == 0:
    ok = store._cache.get(str(store.path_for("t1")), (0, 0, 0, 0, 0)) is None and len(store._cache) == 0
    with store.transaction("t1") as txn:
        ok = ok and txn.state is not None
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), len(store._cache))
"""


def test_a_forked_child_starts_empty(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "1"]
