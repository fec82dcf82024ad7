"""python deploy/waitress_serve.py [--threads 16]: waitress serving wsgi:app, with the bridge's drain on SIGTERM.

waitress has no graceful stop: on a signal it closes every connection at once, leaving A2A tasks running.
This launcher drains first, as gunicorn's hooks do: new runs get 503, active streams get
`graceful_timeout - 10 s` to end, the rest end with RUN_ERROR CANCELLED and their A2A tasks are cancelled;
then waitress stops. It also starts the hourly retention sweep (and --idle-shutdown) that gunicorn's hook
starts. Settings come from the IAC_CODE_AGUI_* environment (HOST, PORT, GRACEFUL_TIMEOUT, ...), parsed and
validated by `agui_bridge.config.load_settings` as for every entry point (an invalid value or a missing A2A
URL is one line and status 2); the stream cap defaults to `threads - 2`.
"""

import argparse
import os
import signal
import sys
import threading
import time

from waitress import create_server

from agui_bridge import create_app
from agui_bridge.config import ConfigError, load_settings
from agui_bridge.config.settings import require_a2a_upstream
from agui_bridge.worker.hooks import worker_host
from agui_bridge.worker.process import configure_process

DRAIN_MARGIN_S = 10  # as agui_bridge.worker.hooks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=16, help="waitress threads (streams + 2)")
    threads = parser.parse_args().threads
    os.environ.setdefault("IAC_CODE_AGUI_MAX_THREAD_STREAMS", str(max(1, threads - 2)))
    try:
        settings = load_settings(os.environ)
        require_a2a_upstream(settings)  # no managed child here: no URL, no start
    except ConfigError as exc:
        sys.stderr.write(f"agui-bridge: {exc}\n")
        sys.exit(2)
    configure_process(settings)
    app = create_app(settings)
    service = app.extensions["agui_bridge"]
    host = worker_host(app)
    assert host is not None  # create_app registers it
    graceful_s = settings.graceful_timeout_s
    server = create_server(app, host=settings.host, port=settings.port, threads=threads)

    def drain_then_stop() -> None:
        host.loops.drain(max(0.0, graceful_s - DRAIN_MARGIN_S))
        time.sleep(0.5)  # let waitress write the terminal events out
        os.kill(os.getpid(), signal.SIGINT)  # waitress's loop ends on KeyboardInterrupt and closes

    def on_term(_sig: int, _frame: object) -> None:
        if not service.draining:
            threading.Thread(target=drain_then_stop, name="drain", daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    host.loops.start_maintenance(lambda: os.kill(os.getpid(), signal.SIGTERM))
    server.run()


if __name__ == "__main__":
    main()
