"""Reading a request body under gevent (agui_bridge.web.request_body): a large body that is already
buffered is read in slices, with the hub running between them (docs/design.md#hub-watchdog)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.hub_guard import run_patched

REPO = Path(__file__).resolve().parents[2]

_READ_BUFFERED_BODY = """
import io, json
import gevent
from agui_bridge.web.request_body import read_limited

ticks = []
def ticker():
    while True:
        ticks.append(1)
        gevent.sleep(0)
body = b"x" * (8 * 1024 * 1024)
spinning = gevent.spawn(ticker)
gevent.sleep(0)
ticks.clear()
read = read_limited(io.BytesIO(body), str(len(body)), len(body), "too-large")
during = len(ticks)
spinning.kill()
print(json.dumps({"read": len(read), "ticks_during_read": during}))
"""


def test_a_buffered_body_of_megabytes_lets_the_hub_run_while_it_is_read() -> None:
    """A read of data already buffered never switches by itself: without the slices the ticker would not run
    at all until the whole body was read."""
    done = run_patched(_READ_BUFFERED_BODY, cwd=REPO)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["read"] == 8 * 1024 * 1024
    assert result["ticks_during_read"] >= 7  # one turn of the hub per MiB at least
