"""The batched state writer: group commit, durability classes, order, and the gevent hub left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from agui_bridge.store import writer as writer_mod
from agui_bridge.store.model import ThreadState, new_thread
from agui_bridge.store.store import Durability, StateWriteFailed, ThreadStore
from agui_bridge.store.writer import forget_state_writer, state_writer
from agui_bridge.worker import process as process_mod
from tests.support.hub_guard import run_patched


def _state(thread_id: str) -> ThreadState:
    return new_thread(thread_id, "/work/ws", None, "ros-1", "exec-1")


def _commit(store: ThreadStore, thread_id: str, durability: Durability) -> None:
    with store.transaction(thread_id) as txn:
        txn.commit(_state(thread_id), durability)


class _Gate:
    """Holds the writer thread back before its next batch until opened."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.batches: list[int] = []

    def __call__(self, batch: Sequence[object]) -> None:
        self.batches.append(len(batch))
        self.reached.set()
        assert self.release.wait(30)


@pytest.fixture(autouse=True)
def fresh_writer() -> Iterator[None]:
    """Each test gets a writer of its own: no earlier test's deferred syncs are queued on it."""
    forget_state_writer()
    yield
    forget_state_writer()


@pytest.fixture
def gate() -> Iterator[_Gate]:
    """A gate, installed by the test with `state_writer().before_batch = gate`; always removed after."""
    held = _Gate()
    try:
        yield held
    finally:
        state_writer().before_batch = None
        held.release.set()


@pytest.fixture
def deferred_gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Holds the writer's deferred (crash-class) syncs back until set."""
    release = threading.Event()
    real = writer_mod.StateWriter._sync_deferred

    def held(self: writer_mod.StateWriter) -> None:
        if self._deferred:
            assert release.wait(30)
        real(self)

    monkeypatch.setattr(writer_mod.StateWriter, "_sync_deferred", held)
    try:
        yield release
    finally:
        release.set()


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """What the writer fsyncs under this test's directory: "file" or "dir". A writer an earlier test
    forgot may still sync that test's files meanwhile (the switch is process-wide): those are not counted."""
    calls: list[str] = []
    real_fsync = os.fsync
    mine = str(tmp_path)

    def fsync(fd: int) -> None:
        if _fd_path(fd).startswith(mine):
            calls.append("file")
        real_fsync(fd)

    def fsync_dir(directory: Path) -> None:
        if str(directory).startswith(mine):
            calls.append("dir")
        real_fsync_dir_no_count(directory)

    def real_fsync_dir_no_count(directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            real_fsync(fd)
        finally:
            os.close(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(writer_mod, "_fsync_dir", fsync_dir)
    return calls


def test_concurrent_power_commits_share_one_directory_sync(tmp_path: Path, gate: _Gate, fsyncs: list[str]) -> None:
    store = ThreadStore(tmp_path)
    _commit(store, "warm-up", Durability.POWER)  # creates the directories
    fsyncs.clear()
    state_writer().before_batch = gate
    workers = [threading.Thread(target=_commit, args=(store, f"thread-{i}", Durability.POWER)) for i in range(8)]
    workers[0].start()
    assert gate.reached.wait(10)  # the writer now holds the first commit back ...
    for worker in workers[1:]:
        worker.start()
    while state_writer().pending(Durability.POWER) < 7:  # ... while the other seven queue behind it
        threading.Event().wait(0.01)
    assert all(store.read(f"thread-{i}") is None for i in range(8))  # nothing held is written yet
    gate.release.set()
    for worker in workers:
        worker.join(30)
    assert all(store.read(f"thread-{i}") == _state(f"thread-{i}") for i in range(8))
    # The seven that queued were taken as one batch: each file fsynced, their directory once (plus the
    # first commit's own directory sync).
    assert gate.batches == [1, 7]
    assert fsyncs.count("file") == 8
    assert fsyncs.count("dir") == 2


def test_a_power_batch_fsyncs_its_files_concurrently(
    tmp_path: Path, gate: _Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files of one power-class batch are fsynced by several threads at once, so they share the
    filesystem's journal commits; the waiters still return only once their file and directory are synced."""
    store = ThreadStore(tmp_path)
    _commit(store, "warm-up", Durability.POWER)
    guard = threading.Lock()
    inside = [0, 0]  # now, most at once
    two_at_once = threading.Event()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        with guard:
            inside[0] += 1
            inside[1] = max(inside[1], inside[0])
            if inside[0] >= 2:
                two_at_once.set()
        two_at_once.wait(2)  # bounded: a writer that fsyncs one file after another never gets here twice
        try:
            real_fsync(fd)
        finally:
            with guard:
                inside[0] -= 1

    state_writer().before_batch = gate
    workers = [threading.Thread(target=_commit, args=(store, f"thread-{i}", Durability.POWER)) for i in range(4)]
    workers[0].start()
    assert gate.reached.wait(10)
    for worker in workers[1:]:
        worker.start()
    while state_writer().pending(Durability.POWER) < 3:
        threading.Event().wait(0.01)
    monkeypatch.setattr(os, "fsync", fsync)
    gate.release.set()
    for worker in workers:
        worker.join(30)
    assert gate.batches == [1, 3]
    assert inside[1] >= 2
    assert all(store.read(f"thread-{i}") == _state(f"thread-{i}") for i in range(4))


def test_a_failed_file_sync_fails_only_that_power_commit(
    tmp_path: Path, gate: _Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ThreadStore(tmp_path)
    _commit(store, "warm-up", Durability.POWER)
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if ".thread-bad." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(5, "I/O error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    state_writer().before_batch = gate
    outcomes: dict[str, str] = {}

    def commit(thread_id: str) -> None:
        try:
            _commit(store, thread_id, Durability.POWER)
            outcomes[thread_id] = "ok"
        except StateWriteFailed:
            outcomes[thread_id] = "failed"

    names = ["thread-a", "thread-bad", "thread-c"]
    first = threading.Thread(target=commit, args=("thread-first",))
    first.start()
    assert gate.reached.wait(10)
    workers = [threading.Thread(target=commit, args=(name,)) for name in names]
    for worker in workers:
        worker.start()
    while state_writer().pending(Durability.POWER) < 3:
        threading.Event().wait(0.01)
    gate.release.set()
    for worker in [first, *workers]:
        worker.join(30)
    assert outcomes == {"thread-first": "ok", "thread-a": "ok", "thread-bad": "failed", "thread-c": "ok"}
    assert store.read("thread-bad") is None  # not renamed into place, and no temporary file left
    assert list(tmp_path.rglob("*.tmp")) == []


def test_crash_class_commit_returns_before_any_fsync(
    tmp_path: Path, fsyncs: list[str], deferred_gate: threading.Event
) -> None:
    store = ThreadStore(tmp_path)
    _commit(store, "thread-1", Durability.CRASH)
    # Visible at once to a lock-free reader (another worker), and not fsynced before returning ...
    assert store.read("thread-1") == _state("thread-1")
    assert fsyncs == []
    # ... the writer makes it durable afterwards, off the committer's path.
    deferred_gate.set()
    for _ in range(500):
        if "dir" in fsyncs:
            break
        threading.Event().wait(0.01)
    assert fsyncs == ["file", "dir"]


def test_power_commit_is_fsynced_before_it_returns(
    tmp_path: Path, fsyncs: list[str], deferred_gate: threading.Event
) -> None:
    store = ThreadStore(tmp_path)
    _commit(store, "thread-1", Durability.POWER)
    assert fsyncs == ["file", "dir"]


def test_a_failed_directory_sync_fails_the_power_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ThreadStore(tmp_path)
    _commit(store, "thread-1", Durability.POWER)

    def broken(_directory: Path) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(writer_mod, "_fsync_dir", broken)
    with pytest.raises(StateWriteFailed, match="directory sync"), store.transaction("thread-1") as txn:
        state = _state("thread-1")
        state.session_id = "s-1"
        txn.commit(state, Durability.POWER)


def test_writes_of_one_thread_land_in_the_order_made(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path)
    for n, durability in enumerate([Durability.CRASH, Durability.POWER, Durability.CRASH, Durability.POWER] * 5):
        with store.transaction("thread-1") as txn:
            state = txn.state or _state("thread-1")
            state.run_digests[f"r{n}"] = str(n)
            txn.commit(state, durability)
        assert json.loads(store.path_for("thread-1").read_text())["runDigests"][f"r{n}"] == str(n)


_HUB_SCRIPT = r"""
from gevent import monkey
monkey.patch_all()
import json, sys, time
from pathlib import Path
import gevent
from agui_bridge.store.model import new_thread
from agui_bridge.store.store import Durability, ThreadStore
from agui_bridge.store.writer import state_writer

store = ThreadStore(Path(sys.argv[1]))
sleep = monkey.get_original("time", "sleep")
batches = []
def slow_disk(batch):  # the writer's hook before each batch: count it, and take 0.3 s over it
    batches.append(len(batch))
    sleep(0.3)
state_writer().before_batch = slow_disk
ticks = []
def ticker():
    while True:
        ticks.append(time.monotonic())
        gevent.sleep(0.01)
def commit(i):
    with store.transaction(f"t-{i}") as txn:
        txn.commit(new_thread(f"t-{i}", "/w", None, "r", "e"), Durability.POWER)
tick = gevent.spawn(ticker)
gevent.sleep(0.05)
started = time.monotonic()
gevent.joinall([gevent.spawn(commit, i) for i in range(50)], raise_error=True)
elapsed = time.monotonic() - started
tick.kill()
during = [t for t in ticks if started <= t <= started + elapsed]
print(json.dumps({"batches": batches, "ticks": len(during), "elapsed": elapsed,
                  "written": sum(1 for i in range(50) if store.read(f"t-{i}") is not None)}))
"""


def test_gevent_hub_keeps_running_while_the_writer_is_slow(tmp_path: Path) -> None:
    """In a patched process the committing greenlets wait cooperatively: the hub keeps ticking, and the
    fifty concurrent commits are written in at most two batches (group commit), not fifty."""
    out = run_patched(_HUB_SCRIPT, str(tmp_path), cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["written"] == 50
    assert sum(result["batches"]) == 50 and len(result["batches"]) <= 2
    # Every batch took 0.3 s on the writer thread; a blocked hub would not tick at all meanwhile.
    assert result["ticks"] >= 10


_SWITCH_SCRIPT = """
import sys
if sys.argv[1] == "patched":
    from gevent import monkey
    monkey.patch_all()
sys.setswitchinterval(float(sys.argv[2]))
from agui_bridge.config.settings import Settings
from agui_bridge.worker.process import configure_process
configure_process(Settings())
print(sys.getswitchinterval())
"""


@pytest.mark.parametrize(
    ("mode", "before", "after"),
    [("patched", 0.005, process_mod.HUB_SWITCH_INTERVAL_S), ("patched", 0.0002, 0.0002), ("plain", 0.005, 0.005)],
)
def test_a_gevent_worker_hands_the_gil_to_the_writer_sooner(mode: str, before: float, after: float) -> None:
    """Only in a patched process, and only lowered: a busy hub keeps the GIL from the writer at most 0.25 ms.
    The serving process sets it up (`configure_process`), not the writer."""
    command = [sys.executable, "-c", _SWITCH_SCRIPT, mode, str(before)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    assert float(out.stdout.strip()) == pytest.approx(after)
