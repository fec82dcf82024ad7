"""agui-bridge: a production AG-UI server in front of A2A 1.0 agent kernels.

`create_app` is imported lazily so that `deploy/gunicorn.conf.py` and the CLI can import small
stdlib-only modules of this package in the gunicorn master without pulling in Flask or requests
before gevent patches the worker (docs/design.md#process-model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agui_bridge._version import __version__

__all__ = ["__version__", "create_app"]

if TYPE_CHECKING:
    from agui_bridge.app import create_app as create_app


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from agui_bridge.app import create_app

        return create_app
    raise AttributeError(name)
