"""The client's socket as one stream holds it: a write deadline, and a watch for the client leaving.

Under gunicorn's gevent worker the stream's greenlet itself writes each chunk with `sendall`; a client that
stops reading blocks that write with no end, and the generator never runs again. A socket timeout makes the
write raise after `client_write_timeout_s`; gunicorn then closes the response, and the stream's clean-up treats
the run as a disconnect (task cancelled, lease released). The timeout goes back to what it was when the stream
lets the socket go (the connection may serve another request).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agui_bridge.worker.runtime import TaskHandle, watch_client_eof

log = logging.getLogger(__name__)


def bound_client_socket(sock: Any, timeout_s: float) -> tuple[Any, Any] | None:
    """Give the client's socket a write deadline; returns (socket, previous timeout), None if none was set."""
    if sock is None or timeout_s <= 0 or not hasattr(sock, "settimeout"):
        return None
    try:
        previous = sock.gettimeout()
        sock.settimeout(timeout_s)
    except OSError:
        log.debug("client write deadline not set", exc_info=True)
        return None
    return (sock, previous)


def release_client_socket(bound: tuple[Any, Any] | None) -> None:
    """Restore the socket's timeout once the stream is over."""
    if bound is None:
        return
    sock, previous = bound
    try:
        sock.settimeout(previous)
    except OSError:
        log.debug("client socket timeout not restored", exc_info=True)


class ClientConnection:
    """A stream's hold on its client's socket (gunicorn's `environ["gunicorn.socket"]`; None in tests).

    `on_eof` (runs only) is called as soon as the client closes its end (`runtime.watch_client_eof`, gevent).
    """

    __slots__ = ("_bound", "_watch")

    def __init__(self, sock: Any, *, write_timeout_s: float, on_eof: Callable[[], None] | None = None) -> None:
        self._bound = bound_client_socket(sock, write_timeout_s)
        self._watch: TaskHandle | None = watch_client_eof(sock, on_eof) if on_eof is not None else None

    def stop_watch(self) -> None:
        """Disarm the EOF watcher before its socket is closed (a watcher must not outlive its fd)."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop(0)

    def release(self) -> None:
        """Let the socket go: no more watching, its own timeout back (idempotent)."""
        self.stop_watch()
        bound, self._bound = self._bound, None
        release_client_socket(bound)


__all__ = ["ClientConnection", "bound_client_socket", "release_client_socket"]
