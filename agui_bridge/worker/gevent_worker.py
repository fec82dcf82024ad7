"""gunicorn's gevent worker, except that SIGTERM stops accepting at once (docs/design.md#shutdown-drain).

gunicorn's own `GeventWorker` notices its `alive` flag only once a second and keeps accepting meanwhile: each
connection it takes in that second is a run refused with 503 while the next instance (a new master under socket
activation or USR2, new workers after HUP) would have served it. This worker stops watching the listening socket
in the signal handler itself: connections not yet accepted stay in the kernel's backlog for whichever process
accepts next. It also ends the keep-alive connections that sit idle between two requests (a proxy's pooled
upstream connections, a client's session): their next request would otherwise reach a worker that refuses it,
while on a new connection it waits for the next instance. A connection whose next request has begun to arrive
(bytes in the socket, or bytes its parser already read) is not idle: that request gets the drain's answer. The
rest of the shutdown (close the servers, let open requests finish for `graceful_timeout`, then stop them) is
gunicorn's, unchanged; after SIGTERM gunicorn closes every connection once its response is written.

Imported by the gunicorn master (it loads the worker class, as it loads its own gevent worker), so gevent is
imported here unpatched, exactly as `worker_class = "gevent"` does.
"""

from __future__ import annotations

import socket
import ssl
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, NamedTuple

import gevent
from gevent.event import Event
from gevent.pool import Pool
from gevent.server import StreamServer
from gunicorn.sock import ssl_context
from gunicorn.workers.ggevent import GeventWorker

#: The longest the worker's main loop sleeps between two heartbeats to the master (gunicorn's own value).
HEARTBEAT_S = 1.0


class NamedListener:
    """The listening socket as gunicorn's request handler sees it: it only asks its name, and a connection taken
    just before SIGTERM may ask after the drain has closed the socket (then `getsockname` would fail with EBADF
    and the connection would be reset instead of served)."""

    def __init__(self, listener: Any) -> None:
        self._listener = listener
        self._name = listener.getsockname()

    def getsockname(self) -> Any:
        return self._name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._listener, name)


class ObservedClient:
    """A plain client socket as gunicorn reads it, counting the bytes received: a drain must not take a connection
    whose parser has read part of its next request (then waiting for the rest) for an idle one."""

    __slots__ = ("_socket", "bytes_received")

    def __init__(self, client: Any) -> None:
        self._socket = client
        self.bytes_received = 0

    def recv(self, *args: Any) -> bytes:
        data: bytes = self._socket.recv(*args)
        self.bytes_received += len(data)
        return data

    def has_unread_data(self) -> bool:
        """Bytes wait in the kernel's buffer (never blocks: safe in a hub callback; a closed or failed socket has
        none to lose)."""
        raw = getattr(self._socket, "_sock", self._socket)  # gevent's socket would wait on EAGAIN
        try:
            return bool(raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:  # BlockingIOError: nothing there yet
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._socket, name)


class KeepAliveWait(NamedTuple):
    """A connection waiting for its next request: the timeout that ends the wait, and what it had read when the
    wait began (None: a TLS connection, whose reads are not counted)."""

    keepalive: gevent.Timeout
    client: ObservedClient | None
    received_at_start: int


def has_begun_next_request(wait: KeepAliveWait) -> bool:
    """Whether bytes of the next request arrived since the wait began: already read by the parser (half a head) or
    still in the socket (docs/design.md#shutdown-drain)."""
    client = wait.client
    if client is None:
        return False
    return client.bytes_received > wait.received_at_start or client.has_unread_data()


class DrainingGeventWorker(GeventWorker):  # type: ignore[misc]
    """`worker_class = "agui_bridge.worker.gevent_worker.DrainingGeventWorker"` (set by worker/hooks.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.servers: list[StreamServer] = []
        self._exit_requested: Event | None = None
        #: How many times each connection's greenlet has waited for a request (1: its first one).
        self._request_waits: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        #: Each connection's greenlet's client socket, as its parser reads it.
        self._clients: weakref.WeakKeyDictionary[Any, ObservedClient] = weakref.WeakKeyDictionary()
        #: Connections idle between two requests, with the keep-alive timeout that ends their wait.
        self._idle: dict[Any, KeepAliveWait] = {}

    def stop_accepting(self) -> None:
        """Stop taking connections from the listening sockets and end the idle keep-alive ones (idempotent, safe
        in a signal handler: it stops the event loop's watchers and schedules the ends; the sockets stay open in
        the master and in the next instance)."""
        for server in self.servers:
            server.stop_accepting()
        loop = gevent.get_hub().loop
        for connection, wait in list(self._idle.items()):
            loop.run_callback(self._end_if_still_idle, connection, wait)
        if self._exit_requested is not None:
            self._exit_requested.set()

    def _end_if_still_idle(self, connection: Any, wait: KeepAliveWait) -> None:
        """As if its keep-alive timeout had expired (gunicorn closes the connection quietly), unless a request
        has begun to arrive: then it gets the drain's answer like any request taken before the drain (closing the
        socket with unread bytes would reset a request the client fully sent)."""
        if self._idle.get(connection) is wait and not has_begun_next_request(wait):
            connection.throw(wait.keepalive)

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        """gunicorn's handling of a connection, with its plain socket's reads counted (a TLS socket is passed as
        is: gunicorn needs its type)."""
        if not isinstance(client, ssl.SSLSocket):
            client = ObservedClient(client)
            self._clients[gevent.getcurrent()] = client
        super().handle(listener, client, addr)

    @contextmanager
    def timeout_ctx(self) -> Iterator[None]:
        """gunicorn's wait for a connection's next request (keep-alive timeout), remembered while a connection
        that already had a request waits, so that a drain can end it. A first request is always waited for:
        its connection was accepted before the drain and is this worker's own."""
        current = gevent.getcurrent()
        waits = self._request_waits.get(current, 0) + 1
        self._request_waits[current] = waits
        keepalive = gevent.Timeout(self.cfg.keepalive, False)
        if waits > 1:
            client = self._clients.get(current)
            received = client.bytes_received if client is not None else 0
            self._idle[current] = KeepAliveWait(keepalive, client, received)
        try:
            with keepalive:
                yield
        finally:
            self._idle.pop(current, None)

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        self.stop_accepting()

    def run(self) -> None:
        """`GeventWorker.run` (gunicorn 23-27) with the servers kept on the worker and the heartbeat sleep cut
        short by an exit request."""
        self._exit_requested = Event()
        ssl_args: dict[str, Any] = {"ssl_context": ssl_context(self.cfg)} if self.cfg.is_ssl else {}
        for listener in self.sockets:
            listener.setblocking(1)
            server = StreamServer(
                listener,
                handle=partial(self.handle, NamedListener(listener)),
                spawn=Pool(self.worker_connections),
                **ssl_args,
            )
            if self.cfg.workers > 1:
                server.max_accept = 1  # share the backlog fairly between the workers
            server.start()
            self.servers.append(server)
        if not self.alive:  # SIGTERM came while the servers started
            self.stop_accepting()

        while self.alive:
            self.notify()
            self._exit_requested.wait(HEARTBEAT_S)

        try:
            for server in self.servers:
                server.close()
            started = time.monotonic()
            while time.monotonic() - started <= self.cfg.graceful_timeout:
                if all(server.pool.free_count() == server.pool.size for server in self.servers):
                    return
                self.notify()
                gevent.sleep(HEARTBEAT_S)
            self.log.warning("Worker graceful timeout (pid:%s)", self.pid)
            for server in self.servers:
                server.stop(timeout=1)
        except Exception:  # as gunicorn's own worker: the process is ending, exit without a traceback
            self.log.debug("error while stopping the servers", exc_info=True)
