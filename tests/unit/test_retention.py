"""Retention and idleness decided from thread files, with real files under a lock.

See docs/design.md#decision-bounded-state and docs/design.md#idle-shutdown.
"""

from __future__ import annotations

from pathlib import Path

from agui_bridge.runs.retention import DAY_MS, busy_since, prune
from agui_bridge.store import model
from agui_bridge.store.store import ThreadStore

NOW = 1_800_000_000_000


def write(store: ThreadStore, thread_id: str, *, idle_days: float, pending: bool = False, lease_ms: int = 0) -> None:
    state = model.new_thread(thread_id, "/w", None, "ros", f"exec-{thread_id}")
    state.last_activity_ms = NOW - int(idle_days * DAY_MS)
    if pending:
        value: dict[str, object] = {"inputId": "p1", "kind": "permission"}
        state.execution.pending["p1"] = model.PendingInterrupt(value, False, NOW + lease_ms if lease_ms else NOW - 1)
    if lease_ms:
        state.active_run = model.RunLease("run-1", state.execution.execution_id, "host:1:1", NOW + lease_ms)
    with store.transaction(thread_id) as txn:
        txn.commit(state)


def test_prune_removes_only_idle_threads_with_nothing_to_keep(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    write(store, "old-idle", idle_days=31)
    write(store, "old-pending", idle_days=31, pending=True)
    write(store, "old-leased", idle_days=31, lease_ms=10_000)
    write(store, "recent", idle_days=29)
    dry = prune(store, retention_days=30, now_ms=NOW, dry_run=True)
    assert (dry.examined, dry.removed) == (4, ["old-idle"])
    assert store.read("old-idle") is not None  # a dry run removes nothing
    report = prune(store, retention_days=30, now_ms=NOW)
    assert report.removed == ["old-idle"] and report.problems == []
    assert store.read("old-idle") is None
    assert sorted(store.iter_thread_ids()) == ["old-leased", "old-pending", "recent"]


def test_busy_since_sees_live_work_and_the_latest_activity(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    assert busy_since(store, NOW) == 0
    write(store, "a", idle_days=2)
    write(store, "b", idle_days=1)
    assert busy_since(store, NOW) == NOW - DAY_MS
    write(store, "c", idle_days=5, pending=True, lease_ms=60_000)  # unexpired interrupt and live lease
    assert busy_since(store, NOW) is None
    assert busy_since(store, NOW + 120_000) == NOW - DAY_MS  # both expired since


def test_state_prune_command(tmp_path: Path, capsys: object) -> None:
    from agui_bridge.cli import main

    store = ThreadStore(tmp_path / "state")
    write(store, "gone", idle_days=400)
    write(store, "kept", idle_days=0)
    assert main(["state", "prune", "--state-dir", str(tmp_path / "state"), "--dry-run"]) == 0
    assert store.read("gone") is not None
    assert main(["state", "prune", "--state-dir", str(tmp_path / "state"), "--state-retention-days", "300"]) == 0
    assert store.read("gone") is None and store.read("kept") is not None
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "would remove 1 of 2" in out and "removed 1 of 2" in out


def test_prune_and_busy_since_give_the_hub_a_turn_between_thread_files(tmp_path: Path) -> None:
    """Under gevent the sweep runs on the hub: no two thread files are read without a yield between them."""
    store = ThreadStore(tmp_path)
    for name in ("a", "b", "c"):
        write(store, name, idle_days=31)
    events: list[str] = []
    real_transaction, real_read = store.transaction, store.read

    def transaction(thread_id: str) -> object:
        events.append("file")
        return real_transaction(thread_id)

    def read(thread_id: str) -> object:
        events.append("file")
        return real_read(thread_id)

    store.transaction = transaction  # type: ignore[method-assign,assignment]
    store.read = read  # type: ignore[method-assign,assignment]
    assert busy_since(store, NOW, yield_turn=lambda: events.append("yield")) == NOW - 31 * DAY_MS
    assert events.count("file") == 3 and "file,file" not in ",".join(events)
    events.clear()
    report = prune(store, retention_days=30, now_ms=NOW, yield_turn=lambda: events.append("yield"))
    assert sorted(report.removed) == ["a", "b", "c"]
    assert events.count("file") == 3 and "file,file" not in ",".join(events)
