"""Test-only WSGI app for tests/e2e/test_hub_watchdog.py: the bridge's own app (wsgi.py) plus one route
that blocks the gevent hub on purpose. Nothing in the package can register it: only this module, which
only that test serves (`gunicorn -c deploy/gunicorn.conf.py tests.support.hub_block_app:app`)."""

from __future__ import annotations

from gevent import monkey

from tests.support.hub_block import BLOCK_PATH, BLOCK_S
from wsgi import app


def block_the_hub_on_purpose() -> str:
    """The unpatched sleep holds the worker's only thread: no other greenlet runs meanwhile."""
    monkey.get_original("time", "sleep")(BLOCK_S)
    return "blocked\n"


app.add_url_rule(BLOCK_PATH, "block_the_hub_on_purpose", block_the_hub_on_purpose)
