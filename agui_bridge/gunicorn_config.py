"""gunicorn settings and hooks shared by `agui-bridge serve` and `deploy/gunicorn.conf.py`.

Only stdlib at module level: this runs in the unpatched master, and anything imported here would be
inherited by workers before gevent patches them (stack-notes 2.1). Hooks import inside their body.
"""

from __future__ import annotations

import os
from typing import Any

ENV = os.environ

bind = [f"{ENV.get('IAC_CODE_AGUI_HOST', '127.0.0.1')}:{ENV.get('IAC_CODE_AGUI_PORT', '8000')}"]
workers = int(ENV.get("IAC_CODE_AGUI_WORKERS", "2"))
worker_class = "gevent"
worker_connections = int(ENV.get("IAC_CODE_AGUI_WORKER_CONNECTIONS", "1000"))
timeout = 30
graceful_timeout = int(ENV.get("IAC_CODE_AGUI_GRACEFUL_TIMEOUT", "30"))
keepalive = 5
preload_app = False
max_requests = 0
control_socket_disable = True
accesslog = None
errorlog = "-"
loglevel = ENV.get("IAC_CODE_AGUI_LOG_LEVEL", "info")


def post_worker_init(worker: Any) -> None:
    """Fail at boot if gevent did not patch what the stream design relies on."""
    from agui_bridge.runtime import require_patched

    require_patched()


def worker_abort(worker: Any) -> None:
    """On a watchdog kill, log which greenlet blocked the hub."""
    from gevent.util import format_run_info

    worker.log.error("worker aborted; run info:\n%s", "\n".join(format_run_info()))


SETTINGS = {
    "bind": bind,
    "workers": workers,
    "worker_class": worker_class,
    "worker_connections": worker_connections,
    "timeout": timeout,
    "graceful_timeout": graceful_timeout,
    "keepalive": keepalive,
    "preload_app": preload_app,
    "max_requests": max_requests,
    "control_socket_disable": control_socket_disable,
    "accesslog": accesslog,
    "errorlog": errorlog,
    "loglevel": loglevel,
    "post_worker_init": post_worker_init,
    "worker_abort": worker_abort,
}
