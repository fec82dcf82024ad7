"""The thread file lock without polling (docs/design.md#state-lock): woken by the release, deadline kept,
one parked helper per file, the hub left running, nothing inherited across fork."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.store import flock
from agui_bridge.store.errors import StateLockTimeout
from tests.support.eventually import eventually
from tests.support.hub_guard import run_patched

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """The lock file, locked by another open file description (as another process would)."""
    path = str(tmp_path / "t1.json.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield path, fd
    finally:
        os.close(fd)


def _free(path: str) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_uncontended_lock_is_created_private_and_released(tmp_path: Path) -> None:
    path = str(tmp_path / "t1.json.lock")
    fd = flock.acquire(path, time.monotonic() + 1)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert not _free(path)
    flock.release(fd)
    assert _free(path)


def test_a_contended_wait_does_not_poll(held: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    path, holder = held
    tries: list[int] = []
    real = flock._try_lock

    def counting(fd: int) -> bool:
        tries.append(fd)
        return real(fd)

    monkeypatch.setattr(flock, "_try_lock", counting)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(flock.acquire(path, time.monotonic() + 30)))
    waiter.start()
    time.sleep(0.5)  # 100 polls at filelock's 5 ms
    assert not got
    fcntl.flock(holder, fcntl.LOCK_UN)
    waiter.join(10)
    assert len(got) == 1 and len(tries) == 1  # one non-blocking try, then woken by the release
    assert not _free(path)
    flock.release(got[0])


def test_the_deadline_holds_and_a_late_win_is_let_go(held: tuple[str, int]) -> None:
    path, holder = held
    started = time.monotonic()
    with pytest.raises(StateLockTimeout):
        flock.acquire(path, started + 0.3)
    assert 0.25 <= time.monotonic() - started < 3
    registry = flock._current()
    assert list(registry.abandoned) == [path]  # its helper is still queued in the kernel
    fcntl.flock(holder, fcntl.LOCK_UN)

    def helper_let_go() -> None:
        assert not registry.abandoned

    eventually(helper_let_go, timeout_s=5)
    assert _free(path)  # the helper won after its caller gave up, and let go at once


def test_one_parked_helper_per_file(held: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    path, holder = held
    registry = flock._current()
    started: list[Any] = []
    real_start = registry.start_thread

    def counting(target: Any, args: Any, name: str) -> None:
        started.append(name)
        real_start(target, args, name)

    monkeypatch.setattr(registry, "start_thread", counting)
    for _ in range(3):
        with pytest.raises(StateLockTimeout):
            flock.acquire(path, time.monotonic() + 0.1)
    assert len(started) == 1  # the second and third caller adopted the first one's helper
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(flock.acquire(path, time.monotonic() + 30)))
    waiter.start()
    time.sleep(0.1)
    fcntl.flock(holder, fcntl.LOCK_UN)
    waiter.join(10)
    assert len(got) == 1 and len(started) == 1 and not registry.abandoned
    flock.release(got[0])
    assert _free(path)


_GEVENT_SCRIPT = """
from gevent import monkey; monkey.patch_all()
import fcntl, os, sys, time, gevent
from agui_bridge.store import flock
from agui_bridge.store.errors import StateLockTimeout

path = sys.argv[1]
holder = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(holder, fcntl.LOCK_EX)
ticks = 0
def ticker():
    global ticks
    while True:
        ticks += 1
        gevent.sleep(0.01)
t = gevent.spawn(ticker)
# A greenlet killed while it waits leaves no lock behind.
victim = gevent.spawn(flock.acquire, path, time.monotonic() + 30)
gevent.sleep(0.2)
victim.kill()
# Another waits while the hub keeps running, and wins when the holder lets go.
waiter = gevent.spawn(flock.acquire, path, time.monotonic() + 30)
gevent.sleep(0.3)
fcntl.flock(holder, fcntl.LOCK_UN)
fd = waiter.get(timeout=10)
flock.release(fd)
fd = flock.acquire(path, time.monotonic() + 2)
flock.release(fd)
t.kill()
print(ticks)
"""


def test_under_gevent_the_hub_runs_while_a_greenlet_waits(tmp_path: Path) -> None:
    result = run_patched(_GEVENT_SCRIPT, str(tmp_path / "t1.json.lock"), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 20


_FORK_SCRIPT = """
import fcntl, os, sys, time
from agui_bridge.store import flock

path = sys.argv[1]
fd = flock.acquire(path, time.monotonic() + 2)
pid = os.fork()
if pid == 0:
    try:
        os.fstat(fd)
        os._exit(3)  # still open in the child
    except OSError:
        pass
    time.sleep(1.0)
    os._exit(0)
flock.release(fd)  # the parent lets go while the child lives on
probe = os.open(path, os.O_RDWR)
fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_inherits_no_lock(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT, str(tmp_path / "t1.json.lock")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
