"""The gunicorn configuration under its documented name.

`deploy/gunicorn.conf.py` and users' copies of it import `config_from_environment` from here; the hooks live
in `agui_bridge.worker.hooks`. Only stdlib at import (this runs in the unpatched master).
"""

from agui_bridge.worker.hooks import config_from_environment as config_from_environment
from agui_bridge.worker.hooks import drain_worker as drain_worker
from agui_bridge.worker.hooks import gunicorn_settings as gunicorn_settings

__all__ = ["config_from_environment", "drain_worker", "gunicorn_settings"]
