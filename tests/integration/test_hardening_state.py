"""Bounded state (docs/design.md#decision-bounded-state): history windows, lock files and temp files.

A refused request leaves no `<thread>.json.lock` file, the sweep removes orphaned locks and stale temp
files, and `runDigests`/`terminalExecutionIds` keep a bounded window, so the state directory cannot grow
without limit whatever clients send.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from agui_bridge.config import limits
from agui_bridge.errors import DuplicateRunId
from agui_bridge.runs.admission import admit_run
from agui_bridge.runs.retention import prune
from agui_bridge.store import model
from agui_bridge.store.store import ThreadStore
from agui_bridge.store.sweep import sweep_thread_dir
from agui_bridge.validation.run_input import parse_run_input

OLD = 3600.0  # seconds: older than SWEEP_MIN_AGE_S


def run_body(workspace: Path, thread_id: str, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": f"r-{uuid.uuid4().hex}",
        "state": {},
        "messages": [{"id": "m-1", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "inv-1", "cwd": str(workspace)}},
    }
    body.update(changes)
    return body


def lock_files(state_dir: Path) -> list[str]:
    threads = state_dir / "threads"
    return sorted(p.name for p in threads.glob("*.lock")) if threads.exists() else []


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


# ------------------------------------------------------------------------------------------ lock files


def test_refused_requests_on_unknown_threads_leave_no_lock_file(
    client: FlaskClient, workspace: Path, state_dir: Path
) -> None:
    for index in range(20):
        thread_id = f"unknown-{index}"
        resume = run_body(workspace, thread_id, resume=[{"interruptId": "i-1", "status": "resolved"}])
        response = client.post("/", json=resume)
        assert response.status_code == 409 and response.get_json()["error"]["code"] == "EXECUTION_LOST"
        guidance = run_body(workspace, thread_id)
        guidance["forwardedProps"]["iacCode"].update(activeGuidance=True, runMode="pipeline")
        response = client.post("/", json=guidance)
        assert response.status_code == 409 and response.get_json()["error"]["code"] == "EXECUTION_LOST"
        cancel = client.post(
            "/extensions/iac-code/v1/executions/e-1/cancel", json={"threadId": thread_id, "rosInvocationId": "inv-1"}
        )
        assert cancel.status_code == 404
        status = client.post(f"/extensions/iac-code/v1/threads/{thread_id}/status", json={"rosInvocationId": "x"})
        assert status.status_code == 404
    assert lock_files(state_dir) == []


def test_prune_removes_orphaned_lock_files_only(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    for thread_id in ("kept", "pruned"):
        state = model.new_thread(thread_id, "/w", None, "ros", f"exec-{thread_id}")
        state.last_activity_ms = int(time.time() * 1000)  # recent: retention keeps it
        with store.transaction(thread_id) as txn:
            txn.commit(state)
    store.delete("pruned")  # the thread file goes, its lock file stays (by design, under the lock)
    threads = tmp_path / "threads"
    young = threads / "young.json.lock"
    young.touch()  # an orphan younger than a minute: a writer may be about to create its file
    for name in ("kept.json.lock", "pruned.json.lock"):
        age(threads / name, OLD)
    report = prune(store, retention_days=30)
    assert report.swept == ["pruned.json.lock"]
    assert sorted(p.name for p in threads.iterdir()) == ["kept.json", "kept.json.lock", "young.json.lock"]
    assert store.read("kept") is not None


def test_a_held_lock_file_is_never_removed(tmp_path: Path) -> None:
    threads = tmp_path / "threads"
    threads.mkdir()
    lock = threads / "busy.json.lock"
    lock.touch()
    age(lock, OLD)
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert sweep_thread_dir(threads).removed == []
    finally:
        os.close(fd)
    assert sweep_thread_dir(threads).removed == ["busy.json.lock"]


def test_a_waiter_on_a_swept_lock_retries_on_the_new_inode(tmp_path: Path) -> None:
    """The store's defence for the sweep race: a lock won on an unlinked inode is let go and retaken."""
    store = ThreadStore(tmp_path, lock_timeout_s=2)
    with store.transaction("t1") as txn:
        txn.commit(model.new_thread("t1", "/w", None, "ros", "exec-1"))
    lock_path = tmp_path / "threads" / "t1.json.lock"
    from agui_bridge.store import flock

    real_acquire = flock._try_lock
    calls: list[int] = []

    def acquire_then_unlink(*args: Any, **kwargs: Any) -> Any:
        result = real_acquire(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            os.unlink(lock_path)  # as if swept between this waiter's open and its flock
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flock, "_try_lock", acquire_then_unlink)
        with store.transaction("t1") as txn:
            assert txn.state is not None
            assert lock_path.exists()
    assert len(calls) == 2


# ------------------------------------------------------------------------------------------ temp files


def test_prune_removes_stale_temp_files(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    state = model.new_thread("t1", "/w", None, "ros", "exec-1")
    state.last_activity_ms = int(time.time() * 1000)
    with store.transaction("t1") as txn:
        txn.commit(state)
    threads = tmp_path / "threads"
    stale = threads / ".t1.json.k2j3h4g5.tmp"
    fresh = threads / ".t1.json.a1b2c3d4.tmp"
    other = threads / "notes.tmp"
    for path in (stale, fresh, other):
        path.write_bytes(b"{partial")
    age(stale, OLD)
    age(other, OLD)
    dry = prune(store, retention_days=30, dry_run=True)
    assert dry.swept == [stale.name] and stale.exists()
    report = prune(store, retention_days=30)
    assert report.swept == [stale.name]
    assert not stale.exists() and fresh.exists() and other.exists()
    assert store.read("t1") is not None


# ------------------------------------------------------------------------------------------ history windows


def _admit(store: ThreadStore, workspace: Path, thread_id: str, run_id: str) -> None:
    run = parse_run_input(run_body(workspace, thread_id, runId=run_id))
    admit_run(
        store,
        run,
        cwd=str(workspace),
        digest=f"digest-{run_id}",
        owner="dead-owner",
        now_ms=1_800_000_000_000,
        lease_ttl_ms=1,
        is_alive=lambda owner: False,  # every earlier lease is dead: the next run is admitted
    )


def test_run_digests_keep_a_bounded_window(tmp_path: Path, workspace: Path) -> None:
    store = ThreadStore(tmp_path / "state")
    total = limits.MAX_RUN_DIGESTS + 10
    for index in range(total):
        _admit(store, workspace, "thread-w", f"run-{index}")
    document = json.loads(store.path_for("thread-w").read_text())
    assert list(document["runDigests"]) == [f"run-{i}" for i in range(10, total)]
    with pytest.raises(DuplicateRunId):
        _admit(store, workspace, "thread-w", f"run-{total - 1}")  # inside the window: still a duplicate
    _admit(store, workspace, "thread-w", "run-0")  # fell out of the window: a new run


def test_terminal_execution_ids_keep_a_bounded_window() -> None:
    state = model.new_thread("t", "/w", None, "ros", "exec-first")
    for index in range(limits.MAX_TERMINAL_EXECUTION_IDS + 5):
        state.execution.task_id = f"task-{index}"
        model.rotate_execution(state, "ros", f"exec-{index}")
    ids = state.terminal_execution_ids
    assert len(ids) == limits.MAX_TERMINAL_EXECUTION_IDS
    assert ids[-1] == f"exec-{limits.MAX_TERMINAL_EXECUTION_IDS + 3}" and "exec-first" not in ids
    document = model.to_document(state)
    assert document["terminalExecutionIds"] == ids


def test_applied_digests_keep_the_current_execution_first() -> None:
    state = model.new_thread("t", "/w", None, "ros", "exec-now")
    old = [model.AppliedResume(f"exec-old-{i:04d}", "i", "d") for i in range(limits.MAX_APPLIED_RESUME_DIGESTS)]
    current = [model.AppliedResume("exec-now", f"i-{i}", "d") for i in range(3)]
    state.applied_resume_digests = old + current
    document = model.to_document(state)
    applied = document["appliedResumeDigests"]
    assert isinstance(applied, list) and len(applied) == limits.MAX_APPLIED_RESUME_DIGESTS
    assert sum(1 for a in applied if a["executionId"] == "exec-now") == 3


def test_thread_file_stays_small_with_maximal_ids(tmp_path: Path, workspace: Path) -> None:
    store = ThreadStore(tmp_path / "state")
    for index in range(limits.MAX_RUN_DIGESTS + 50):
        _admit(store, workspace, "t" * limits.MAX_ID_CHARS, f"{index:06d}" + "r" * (limits.MAX_ID_CHARS - 6))
    size = store.path_for("t" * limits.MAX_ID_CHARS).stat().st_size
    assert size < 256 * 1024, size  # was unbounded: 6.4 MB after three runs with 2 MiB runIds
