"""The hub-blocking test route's path and how long it holds the hub: apart from tests/support/hub_block_app.py,
which builds the bridge's app from the environment when imported (the test module only needs these)."""

from __future__ import annotations

#: The route's path and how long it holds the hub (well past the test's 100 ms threshold).
BLOCK_PATH = "/test-only/block-hub"
BLOCK_S = 0.4
