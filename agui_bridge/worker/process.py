"""What a serving process sets up for itself, once, before it builds its app (docs/design.md#process-setup).

Logging, tracing, the interpreter's switch interval and gevent's greenlet-tree tracking belong to the
process, not to an app object: the entry points that own a process (`agui-bridge serve`, wsgi.py, which
uWSGI loads too, the gunicorn hooks, the waitress and mod_wsgi launchers under deploy/) call
`configure_process` before `create_app`; `create_app` alone changes none of them (the pytest plugin and the
Flask test client use it so).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agui_bridge.config.settings import Settings

__all__ = ["HUB_SWITCH_INTERVAL_S", "configure_process"]

#: In a gevent worker, the longest the busy hub keeps the GIL from a native thread that asks for it (the
#: state writer, the lock helpers; Python's default is 5 ms). A write re-takes the GIL after each of its ~6
#: system calls, so with the default a crash-class commit waited up to 30 ms for the GIL alone while greenlets
#: kept the hub busy (docs/design.md#state-writer). Only lowered, never raised; no effect while no other
#: thread wants the GIL, and the number of forced switches is one per request whatever the interval: only
#: their delay shrinks.
HUB_SWITCH_INTERVAL_S = 0.00025


def configure_process(settings: Settings) -> None:
    """Set up this process's logging, tracing and switch interval for `settings`; calling it again is
    harmless (logging takes the latest level and format, tracing and the interval are set once)."""
    from agui_bridge.observability import tracing
    from agui_bridge.observability.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    tracing.configure()  # from the OTEL_* variables; nothing is imported from OpenTelemetry when off
    if _threading_patched():
        if sys.getswitchinterval() > HUB_SWITCH_INTERVAL_S:
            sys.setswitchinterval(HUB_SWITCH_INTERVAL_S)
        _stop_tracking_greenlet_tree()


def _stop_tracking_greenlet_tree() -> None:
    """gevent records, for every greenlet it spawns, the spawning stack (ten frame records) and the spawner:
    about 3 KiB per held stream (its request and its pump greenlet) that only gevent's debugging
    printouts read (docs/design.md#stream-memory). An operator's `GEVENT_TRACK_GREENLET_TREE` is kept."""
    if "GEVENT_TRACK_GREENLET_TREE" in os.environ:
        return
    import gevent

    gevent.config.track_greenlet_tree = False


def _threading_patched() -> bool:
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a hard dependency
        return False
    return bool(monkey.is_module_patched("threading"))
