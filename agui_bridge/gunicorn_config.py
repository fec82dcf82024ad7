"""The gunicorn configuration under its documented name.

`deploy/gunicorn.conf.py` and users' copies of it import from here: every public name this module had
before the hooks moved to `agui_bridge.worker.hooks` stays importable (hooks, settings, limits, log
config). Only stdlib at import (this runs in the unpatched master).
"""

from agui_bridge.worker.hooks import DRAIN_MARGIN_S as DRAIN_MARGIN_S
from agui_bridge.worker.hooks import FORMATTERS as FORMATTERS
from agui_bridge.worker.hooks import KEEPALIVE_S as KEEPALIVE_S
from agui_bridge.worker.hooks import OPEN_FILES_SPARE as OPEN_FILES_SPARE
from agui_bridge.worker.hooks import TIMEOUT_S as TIMEOUT_S
from agui_bridge.worker.hooks import child_exit as child_exit
from agui_bridge.worker.hooks import config_from_environment as config_from_environment
from agui_bridge.worker.hooks import drain_worker as drain_worker
from agui_bridge.worker.hooks import gunicorn_settings as gunicorn_settings
from agui_bridge.worker.hooks import logconfig as logconfig
from agui_bridge.worker.hooks import open_files_needed as open_files_needed
from agui_bridge.worker.hooks import post_worker_init as post_worker_init
from agui_bridge.worker.hooks import raise_open_files_limit as raise_open_files_limit
from agui_bridge.worker.hooks import worker_abort as worker_abort

__all__ = [
    "DRAIN_MARGIN_S",
    "FORMATTERS",
    "KEEPALIVE_S",
    "OPEN_FILES_SPARE",
    "TIMEOUT_S",
    "child_exit",
    "config_from_environment",
    "drain_worker",
    "gunicorn_settings",
    "logconfig",
    "open_files_needed",
    "post_worker_init",
    "raise_open_files_limit",
    "worker_abort",
]
