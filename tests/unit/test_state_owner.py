"""Lease owner ids and liveness, including PID reuse (docs/design.md#lease-owner-id)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from agui_bridge.store.owner import current_owner, owner_is_alive, owner_on_this_host
from tests.support.eventually import eventually


def test_current_owner_is_host_pid_start() -> None:
    host, pid, start = current_owner().rsplit(":", 2)
    assert host == socket.gethostname()
    assert pid == str(os.getpid())
    assert start
    assert current_owner() == current_owner()


def test_own_owner_is_alive() -> None:
    assert owner_is_alive(current_owner())


def test_dead_pid_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    start = current_owner().rsplit(":", 1)[1]
    assert not owner_is_alive(f"{socket.gethostname()}:{child.pid}:{start}")


def test_same_pid_with_other_start_time_is_not_alive() -> None:
    host, pid, start = current_owner().rsplit(":", 2)
    other = str(int(start) + 1) if start.isdigit() else "r0000"
    assert not owner_is_alive(f"{host}:{pid}:{other}")


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_other_live_process_with_matching_start_time_is_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with open(f"/proc/{child.pid}/stat", encoding="ascii") as handle:
            start = handle.read().rpartition(")")[2].split()[19]
        host = socket.gethostname()
        assert owner_is_alive(f"{host}:{child.pid}:{start}")
        assert not owner_is_alive(f"{host}:{child.pid}:{int(start) + 7}")
    finally:
        child.kill()
        child.wait()


def test_other_host_is_assumed_alive() -> None:
    assert owner_is_alive("some-other-host.invalid:1:12345")


@pytest.mark.parametrize("owner", ["", "garbage", "host:pid:1", f"{socket.gethostname()}::1", "a:1:"])
def test_malformed_owner_is_not_alive(owner: str) -> None:
    assert not owner_is_alive(owner)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_zombie_process_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    with open(f"/proc/{child.pid}/stat", encoding="ascii") as handle:
        start = handle.read().rpartition(")")[2].split()[19]
    owner = f"{socket.gethostname()}:{child.pid}:{start}"
    child.kill()
    try:

        def dead() -> None:  # not reaped yet: a zombie keeps its pid but can never renew a lease
            assert not owner_is_alive(owner)

        eventually(dead, timeout_s=2)
    finally:
        child.wait()


@pytest.mark.parametrize(
    ("owner", "here"),
    [
        (f"{socket.gethostname()}:12:345", True),
        ("some-other-host.invalid:12:345", False),  # judged by its beacon instead (reattach/status.py)
        (f"{socket.gethostname()}:pid:345", False),  # malformed
        ("garbage", False),
    ],
)
def test_only_an_owner_id_naming_this_host_can_be_checked_by_pid_here(owner: str, here: bool) -> None:
    assert owner_on_this_host(owner) is here
