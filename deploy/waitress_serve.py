"""python deploy/waitress_serve.py [--threads 16]: waitress serving wsgi:app, with the bridge's drain on SIGTERM.

waitress has no graceful stop: on a signal it closes every connection at once, leaving A2A tasks running.
This launcher drains first, as gunicorn's hooks do: new runs get 503, active streams get
`graceful_timeout - 10 s` to end, the rest end with RUN_ERROR CANCELLED and their A2A tasks are cancelled;
then waitress stops. It also starts the hourly retention sweep (and --idle-shutdown) that gunicorn's hook
starts. Settings come from the IAC_CODE_AGUI_* environment (HOST, PORT, GRACEFUL_TIMEOUT, ...), parsed and
validated by `agui_bridge.config.load_settings` as for every entry point (an invalid value or a missing A2A
URL is one line and status 2, docs/configuration.md#exit-codes); the stream cap defaults to `threads - 2`.

The stop goes through waitress's own loop, not a signal to itself: a SIGINT inherited as ignored (a
background start from a script) cannot keep the process up (docs/design.md#shutdown-drain).
"""

import argparse
import math
import os
import signal
import sys
import threading
import time
from typing import Any

from waitress import create_server, wasyncore

from agui_bridge import create_app
from agui_bridge.config import ConfigError, load_settings
from agui_bridge.config.settings import require_a2a_upstream
from agui_bridge.worker.hooks import worker_host
from agui_bridge.worker.process import configure_process

DRAIN_MARGIN_S = 10  # as agui_bridge.worker.hooks
#: What is left of the margin for waitress's task threads to end once the drain is over.
THREADS_STOP_S = 5.0


class StopRequest:
    """What the drain thread hands to waitress's loop: stop now, and flush what is left until this deadline."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.flush_deadline = math.inf  # time.monotonic() seconds

    def request(self, flush_deadline: float) -> None:
        self.flush_deadline = flush_deadline
        self.requested.set()


def output_pending(server: Any) -> bool:
    """A channel still has bytes for its client, or a task thread that may still write some.

    waitress's own test for "something to write" is `channel.writable()` (`total_outbufs_len`, or a close it
    has yet to perform); a channel with `requests` has a task that has not finished writing.
    """
    return any(channel.total_outbufs_len or channel.requests for channel in list(server.active_channels.values()))


def serve_until(server: Any, socket_map: dict[int, Any], stop: StopRequest) -> None:
    """waitress's `server.run()` loop over the socket map given to `create_server`, one poll at a time,
    ending once `stop` is requested; then it stops accepting and goes on polling, so that a slow client still
    receives its stream's last events (its terminal event), until no channel has output left or the stop's
    flush deadline passes; then, as waitress does on KeyboardInterrupt, its task threads end and every socket
    of the map closes (docs/design.md#shutdown-drain).

    `server.pull_trigger()` wakes the poll at once; without it the loop notices within
    `asyncore_loop_timeout` (1 s).
    """
    adj = server.adj

    def poll(timeout: float) -> None:
        wasyncore.loop(timeout=timeout, map=socket_map, use_poll=adj.asyncore_use_poll, count=1)

    while not stop.requested.is_set() and socket_map:
        poll(adj.asyncore_loop_timeout)
    server.accepting = False  # waitress's `readable()` then leaves the listening socket alone
    while socket_map and output_pending(server):
        remaining = stop.flush_deadline - time.monotonic()
        if remaining <= 0:
            break
        poll(min(remaining, adj.asyncore_loop_timeout))
    close(server, socket_map, THREADS_STOP_S)


def close(server: Any, socket_map: dict[int, Any], threads_stop_s: float) -> None:
    server.task_dispatcher.shutdown(timeout=threads_stop_s)
    wasyncore.close_all(socket_map)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=16, help="waitress threads (streams + 2)")
    threads = parser.parse_args().threads
    os.environ.setdefault("IAC_CODE_AGUI_MAX_THREAD_STREAMS", str(max(1, threads - 2)))
    try:
        settings = load_settings(os.environ)
        require_a2a_upstream(settings)
    except ConfigError as exc:
        sys.stderr.write(f"agui-bridge: {exc}\n")
        sys.exit(2)
    configure_process(settings)
    app = create_app(settings)
    host = worker_host(app)
    assert host is not None  # create_app registers it
    graceful_s = settings.graceful_timeout_s
    socket_map: dict[int, Any] = {}
    server = create_server(app, map=socket_map, host=settings.host, port=settings.port, threads=threads)
    stop = StopRequest()
    stop_begun = threading.Lock()

    def drain_then_stop() -> None:
        begun = time.monotonic()
        host.loops.drain(max(0.0, graceful_s - DRAIN_MARGIN_S))
        # Slow clients take their last events within what the margin leaves once the task threads' stop is set aside.
        stop.request(flush_deadline=begun + max(0.0, graceful_s - THREADS_STOP_S - 1.0))
        server.pull_trigger()  # wake waitress's loop, which flushes, then closes

    def begin_stop() -> None:
        """The first SIGTERM (or the idle monitor) starts the one drain; later ones change nothing."""
        if stop_begun.acquire(blocking=False):
            threading.Thread(target=drain_then_stop, name="drain", daemon=True).start()

    signal.signal(signal.SIGTERM, lambda _sig, _frame: begin_stop())
    host.loops.start_maintenance(begin_stop)
    try:
        serve_until(server, socket_map, stop)
    except KeyboardInterrupt:  # Ctrl-C in a terminal: waitress's own immediate stop, as `server.run()` does
        close(server, socket_map, THREADS_STOP_S)


if __name__ == "__main__":
    main()
