# gunicorn -c deploy/gunicorn-gthread.conf.py wsgi:app                           (thread workers)
# gunicorn -c deploy/gunicorn-gthread.conf.py -k sync --threads 1 --timeout 3600 wsgi:app   (sync workers)
# Same bind, workers, graceful_timeout and logging as deploy/gunicorn.conf.py (IAC_CODE_AGUI_* environment),
# but the app runs on the thread back-end: one host thread per open stream. gunicorn's --threads on the
# command line overrides `threads`; each worker caps its streams two below it (IAC_CODE_AGUI_MAX_THREAD_STREAMS
# wins when set), so /health, cancel and status still find a thread and new runs get 503 + Retry-After.
import os
import signal
import sys
import threading
import traceback

from agui_bridge.gunicorn_config import config_from_environment, drain_worker
from agui_bridge.worker.hooks import publish_load

# The validated IAC_CODE_AGUI_* settings, as for gevent; the gevent-only parts are replaced below.
globals().update({k: v for k, v in config_from_environment().items() if k != "worker_connections"})

worker_class = "gthread"
threads = 16
#: Threads kept free of streams in every worker.
SPARE_THREADS = 2


def post_fork(server, worker):
    """Before the app is built in the worker: derive the stream cap from the worker's thread count."""
    os.environ.setdefault("IAC_CODE_AGUI_MAX_THREAD_STREAMS", str(max(1, worker.cfg.threads - SPARE_THREADS)))


def post_worker_init(worker):
    """On SIGTERM, drain as under gevent: refuse new runs, wait, then end the rest with RUN_ERROR."""
    original = worker.handle_exit

    def on_term(sig, frame):
        original(sig, frame)  # stop accepting; gunicorn then waits up to graceful_timeout for open requests
        drain = threading.Thread(target=drain_worker, args=(worker,), name="drain", daemon=True)
        worker.agui_drain = drain  # the shared worker_exit hook waits for it before the worker ends
        drain.start()

    signal.signal(signal.SIGTERM, on_term)
    publish_load(worker)  # this worker's counts for HAProxy's agent check, when IAC_CODE_AGUI_AGENT_CHECK_PORT is set


def worker_abort(worker):
    """On a watchdog kill, log where every thread was."""
    frames = sys._current_frames()
    dump = "".join(f"thread {ident}:\n" + "".join(traceback.format_stack(frame)) for ident, frame in frames.items())
    worker.log.error("worker aborted; threads:\n%s", dump)
