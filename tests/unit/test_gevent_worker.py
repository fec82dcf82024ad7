"""The gevent worker's pieces that need no gunicorn master (worker/gevent_worker.py)."""

from __future__ import annotations

import socket

from agui_bridge.worker.gevent_worker import NamedListener


def test_a_connection_taken_before_the_drain_still_learns_its_listeners_name_after_the_close() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    name = listener.getsockname()
    named = NamedListener(listener)
    listener.close()
    assert named.getsockname() == name
    assert named.fileno() == -1  # anything else is the socket's own
