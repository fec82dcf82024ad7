"""gunicorn's gevent worker, except that SIGTERM stops accepting at once (docs/design.md#shutdown-drain).

gunicorn's own `GeventWorker` notices its `alive` flag only once a second and keeps accepting meanwhile: each
connection it takes in that second is a run refused with 503 while the next instance (a new master under socket
activation or USR2, new workers after HUP) would have served it. This worker stops watching the listening socket
in the signal handler itself: connections not yet accepted stay in the kernel's backlog for whichever process
accepts next. The rest of the shutdown (close the servers, let open requests finish for `graceful_timeout`, then
stop them) is gunicorn's, unchanged.

Imported by the gunicorn master (it loads the worker class, as it loads its own gevent worker), so gevent is
imported here unpatched, exactly as `worker_class = "gevent"` does.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import gevent
from gevent.event import Event
from gevent.pool import Pool
from gevent.server import StreamServer
from gunicorn.sock import ssl_context
from gunicorn.workers.ggevent import GeventWorker

#: The longest the worker's main loop sleeps between two heartbeats to the master (gunicorn's own value).
HEARTBEAT_S = 1.0


class DrainingGeventWorker(GeventWorker):  # type: ignore[misc]
    """`worker_class = "agui_bridge.worker.gevent_worker.DrainingGeventWorker"` (set by worker/hooks.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.servers: list[StreamServer] = []
        self._exit_requested: Event | None = None

    def stop_accepting(self) -> None:
        """Stop taking connections from the listening sockets (idempotent, safe in a signal handler: it only
        stops the event loop's watchers; the sockets stay open in the master and in the next instance)."""
        for server in self.servers:
            server.stop_accepting()
        if self._exit_requested is not None:
            self._exit_requested.set()

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
                listener, handle=partial(self.handle, listener), spawn=Pool(self.worker_connections), **ssl_args
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
