"""The gevent worker's pieces that need no gunicorn master (worker/gevent_worker.py)."""

from __future__ import annotations

import socket

import gevent
import gevent.socket

from agui_bridge.worker.gevent_worker import KeepAliveWait, NamedListener, ObservedClient, has_begun_next_request


def test_a_connection_taken_before_the_drain_still_learns_its_listeners_name_after_the_close() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    name = listener.getsockname()
    named = NamedListener(listener)
    listener.close()
    assert named.getsockname() == name
    assert named.fileno() == -1  # anything else is the socket's own


def waiting_connection() -> tuple[KeepAliveWait, socket.socket]:
    """A keep-alive wait that began after the first request was read, and the client's end of the connection."""
    server_end, client_end = gevent.socket.socketpair()
    observed = ObservedClient(server_end)
    client_end.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert observed.recv(8192)
    return KeepAliveWait(gevent.Timeout(1, False), observed, observed.bytes_received), client_end


def test_a_keep_alive_connection_with_nothing_received_since_its_wait_began_is_idle() -> None:
    wait, client_end = waiting_connection()
    assert not has_begun_next_request(wait)
    client_end.close()


def test_a_draining_worker_keeps_a_connection_whose_next_request_waits_in_the_socket() -> None:
    wait, client_end = waiting_connection()
    client_end.sendall(b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
    assert has_begun_next_request(wait)
    client_end.close()


def test_a_draining_worker_keeps_a_connection_whose_parser_read_half_a_request_head() -> None:
    wait, client_end = waiting_connection()
    client_end.sendall(b"POST / HTTP/1.1\r\n")
    assert wait.client is not None
    assert wait.client.recv(8192) == b"POST / HTTP/1.1\r\n"
    assert has_begun_next_request(wait)
    client_end.close()


def test_a_connection_its_client_closed_is_idle() -> None:
    wait, client_end = waiting_connection()
    client_end.close()
    assert not has_begun_next_request(wait)
