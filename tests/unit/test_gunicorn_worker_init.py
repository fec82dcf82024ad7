"""`post_worker_init` in a patched process: the worker's long-lived objects are frozen out of later
full collections (docs/design.md#gc-freeze), after the patch check and the drain handler."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

WORKER = """
from gevent import monkey
monkey.patch_all()
import gc, signal, types
from agui_bridge.worker.hooks import post_worker_init
worker = types.SimpleNamespace(wsgi=types.SimpleNamespace(extensions={}), ppid=1, handle_exit=lambda *a: None)
before = gc.get_freeze_count()
post_worker_init(worker)
print(before, gc.get_freeze_count(), signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL)
"""


def test_post_worker_init_freezes_the_objects_that_exist_at_worker_start() -> None:
    done = subprocess.run([sys.executable, "-c", WORKER], capture_output=True, text=True, cwd=REPO, check=True)
    before, after, drain_installed = done.stdout.split()
    assert before == "0"
    assert int(after) > 1000  # the imported modules' objects at least
    assert drain_installed == "True"
