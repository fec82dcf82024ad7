"""READY=1 is sent by the master once a worker is ready, never when it only listens (docs/operations.md#readiness)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agui_bridge.worker.readiness import READY_MESSAGE, WAITING_STATUS, WorkerReadyNotice


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """systemd's side: a datagram socket that receives what the service sends."""
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(10)
        yield sock, path


def test_ready_is_sent_only_after_a_worker_says_it_is_ready(notify_socket: tuple[socket.socket, str]) -> None:
    sock, path = notify_socket
    environ = {"NOTIFY_SOCKET": path}
    notice = WorkerReadyNotice()
    assert notice.arm(environ) is True
    assert "NOTIFY_SOCKET" not in environ  # gunicorn's own READY=1, and every child, find no address
    assert sock.recv(4096).decode() == WAITING_STATUS
    sock.settimeout(0.2)
    with pytest.raises(TimeoutError):  # listening is not ready
        sock.recv(4096)
    sock.settimeout(10)
    worker = os.fork()
    if worker == 0:  # a forked worker, as under gunicorn
        notice.worker_ready()
        os._exit(0)
    os.waitpid(worker, 0)
    assert sock.recv(4096).decode() == READY_MESSAGE


def test_ready_is_sent_once_whatever_the_number_of_workers(notify_socket: tuple[socket.socket, str]) -> None:
    sock, path = notify_socket
    notice = WorkerReadyNotice()
    notice.arm({"NOTIFY_SOCKET": path})
    assert sock.recv(4096).decode() == WAITING_STATUS
    notice.worker_ready()
    assert sock.recv(4096).decode() == READY_MESSAGE
    notice.worker_ready()
    sock.settimeout(0.2)
    with pytest.raises(TimeoutError):
        sock.recv(4096)


def test_without_systemd_nothing_is_armed_and_a_worker_has_nothing_to_tell() -> None:
    environ: dict[str, str] = {}
    notice = WorkerReadyNotice()
    assert notice.arm(environ) is False
    notice.worker_ready()  # no pipe, no error
    assert environ == {}
