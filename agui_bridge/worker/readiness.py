"""systemd readiness that means "a worker answers", not "the master listens" (docs/operations.md#readiness).

gunicorn's arbiter sends READY=1 as soon as it listens, before any worker has imported the app, so a
`Type=notify` unit was "started" while requests still waited for a worker. Here the master takes
`NOTIFY_SOCKET` out of its environment before gunicorn sends (gunicorn's notice then does nothing, and no
worker inherits the address) and a thread of the master waits on a pipe; the first worker
that has built its app writes one byte to it, and the master sends READY=1 itself, so the unit keeps
`NotifyAccess=main`.

Standard library only: this module is imported by the gunicorn hooks in the unpatched master
(docs/design.md#process-model).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import MutableMapping

NOTIFY_SOCKET = "NOTIFY_SOCKET"
WAITING_STATUS = "STATUS=agui-bridge: listening, waiting for the first worker"
READY_MESSAGE = "READY=1\nSTATUS=agui-bridge: a worker answers"
#: Logged by each worker once its app is built, right before it wakes the notice (followed by its pid).
WORKER_READY_LOG = "agui-bridge: app built, accepting connections: worker"


def sd_notify(address: str, message: str) -> bool:
    """Send one datagram to systemd's notification socket (`@` is the abstract namespace)."""
    target = "\0" + address[1:] if address.startswith("@") else address
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(target)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True


class WorkerReadyNotice:
    """Armed in the master (`on_starting`), told by each worker once it is ready (`post_worker_init`)."""

    def __init__(self) -> None:
        self._write_fd: int | None = None

    def arm(self, environ: MutableMapping[str, str] = os.environ) -> bool:
        """Take over systemd's notification: False (and nothing done) when not run under `Type=notify`."""
        address = environ.pop(NOTIFY_SOCKET, None)
        if not address:
            return False
        read_fd, write_fd = os.pipe()  # not inherited by exec'd programs; forked workers keep both ends
        os.set_blocking(write_fd, False)  # a worker never waits on it
        self._write_fd = write_fd
        sd_notify(address, WAITING_STATUS)
        threading.Thread(
            target=self._notify_when_a_worker_is_ready, args=(read_fd, address), name="agui-ready-notice", daemon=True
        ).start()
        return True

    def worker_ready(self) -> None:
        """In a worker whose app is built and whose accept loop starts next: wake the master's notice."""
        if self._write_fd is None:
            return
        with contextlib.suppress(OSError):  # the notice was sent long ago and the pipe is full: nothing to tell
            os.write(self._write_fd, b"1")

    @staticmethod
    def _notify_when_a_worker_is_ready(read_fd: int, address: str) -> None:
        # Blocks this thread only (the master's own loop does not wait); the read end stays open, so later
        # workers' bytes are simply never read.
        if os.read(read_fd, 1):
            sd_notify(address, READY_MESSAGE)
