"""A forked child (a gunicorn worker) starts with fresh per-process objects, reset through one registry."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path

from agui_bridge.reattach import budget as budget_mod
from agui_bridge.store import flock
from agui_bridge.store import handoff as handoff_mod
from agui_bridge.store import owner as owner_mod
from agui_bridge.store import writer as writer_mod
from agui_bridge.store.model import new_thread
from agui_bridge.store.store import ThreadStore
from agui_bridge.worker import fork as fork_mod
from agui_bridge.worker.managed import ManagedUpstream
from agui_bridge.worker.runtime import OffHubPool

Report = dict[str, object]


def in_forked_child(probe: Callable[[], Report]) -> Report:
    """`probe()` run in a child forked now; its report comes back over a pipe (bounded wait)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running anything of pytest's
        status = 1
        try:
            os.close(read_end)
            os.write(write_end, json.dumps(probe()).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    chunks: list[bytes] = []
    with os.fdopen(read_end, "rb") as reader:
        while chunk := reader.read(65536):
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, b"".join(chunks)
    report: Report = json.loads(b"".join(chunks))
    return report


def test_a_forked_child_gets_fresh_per_process_objects(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    with store.transaction("thread-1") as txn:  # the writer started, the cache and the key locks used
        txn.commit(new_thread("thread-1", "/w", None, "ros-1", "exec-1"))
    parent_writer = writer_mod.state_writer()
    pool = OffHubPool(1, "test-pool")
    pool._pool = object()  # as if its threads had been started in this process
    handoff_mod._signals[-1] = object()  # type: ignore[assignment]  # a watcher of this process's hub
    budget_mod._budgets[(tmp_path, 1, 0)] = object()  # type: ignore[assignment]
    flock._current()
    upstream = ManagedUpstream("demo")
    parent_owner = owner_mod.current_owner()
    assert len(store._cache) == 1 and writer_mod._writer is parent_writer

    def probe() -> Report:
        return {
            "writer_forgotten": writer_mod._writer is None,
            "new_writer": writer_mod.state_writer() is not parent_writer,
            "cache_entries": len(store._cache),
            "key_locks": len(store._local_locks._entries),
            "pool_forgotten": pool._pool is None,
            "hub_signals": -1 in handoff_mod._signals,
            "budgets": len(budget_mod._budgets),
            "flock_registry": flock._registry is not None,
            "stops_upstream_at_exit": upstream._stops_at_exit,
            "owner_forgotten": owner_mod._cache is None,
            "owner_names_the_child": owner_mod.current_owner().split(":")[-2] == str(os.getpid()),
        }

    try:
        child = in_forked_child(probe)
    finally:
        handoff_mod._signals.pop(-1, None)
        budget_mod._budgets.pop((tmp_path, 1, 0), None)
    assert child == {
        "writer_forgotten": True,
        "new_writer": True,
        "cache_entries": 0,
        "key_locks": 0,
        "pool_forgotten": True,
        "hub_signals": False,
        "budgets": 0,
        "flock_registry": False,
        "stops_upstream_at_exit": False,
        "owner_forgotten": True,
        "owner_names_the_child": True,
    }
    # The parent keeps what it had.
    assert writer_mod._writer is parent_writer and len(store._cache) == 1 and upstream._stops_at_exit
    assert owner_mod.current_owner() == parent_owner


class _Resettable:
    def __init__(self) -> None:
        self.reset_count = 0
        fork_mod.after_fork_in_child(self.reset)

    def reset(self) -> None:
        self.reset_count += 1


def test_the_registry_does_not_keep_an_object_alive() -> None:
    holder = _Resettable()
    alive = fork_mod.registered()
    watched = weakref.ref(holder)
    del holder
    gc.collect()
    assert watched() is None
    assert fork_mod.registered() < alive  # its entry went with it


def test_every_reset_runs_in_the_child_even_after_one_fails() -> None:
    class _Failing:
        def reset(self) -> None:
            raise RuntimeError("a broken reset")

    failing = _Failing()
    fork_mod.after_fork_in_child(failing.reset)
    later = _Resettable()
    try:
        child = in_forked_child(lambda: {"reset_count": later.reset_count})
    finally:
        del failing  # weakly held: unregistered with it
    assert child == {"reset_count": 1}
    assert later.reset_count == 0  # the parent's object is untouched


_EXIT_SCRIPT = """
import sys
from agui_bridge.store.store import ThreadStore
stores = [ThreadStore(sys.argv[1]) for _ in range(3)]  # alive until the interpreter clears its modules
"""


def test_objects_alive_at_interpreter_exit_leave_nothing_on_stderr(tmp_path: Path) -> None:
    """A launcher's refusal is one line on stderr: the registry's weak references add nothing at exit."""
    out = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert (out.returncode, out.stderr) == (0, "")
