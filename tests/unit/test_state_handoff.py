"""Waking a greenlet from a native thread (`state.handoff`): at once, with timeouts, and late wakes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.hub_guard import run_patched

_SCRIPT = """
from gevent import monkey
monkey.patch_all()
import json, time
import gevent
from agui_bridge.store.handoff import native_primitives, new_waiter

lock, start_thread, patched = native_primitives()
assert patched
out = {}

# A waiter completed from a native thread resumes its greenlet.
waiter = new_waiter(True, lock)
start_thread(lambda: (time.sleep(0.05), waiter.complete()), (), "t")
out["woken"] = waiter.wait(5)

# A completion that arrives before the wait is kept: the wait returns at once.
early = new_waiter(True, lock)
early.complete()
gevent.sleep(0.05)  # the hub runs the watcher's callback before anyone waits
out["early"] = early.wait(5)

# A timeout returns False; the late completion finds nobody waiting and disturbs no other greenlet.
late = new_waiter(True, lock)
out["timed_out"] = late.wait(0.05)
busy = []
def other():
    for _ in range(20):
        busy.append(1)
        gevent.sleep(0.005)
runner = gevent.spawn(other)
start_thread(late.complete, (), "late")
runner.join(5)
out["other_ran"] = len(busy)

# Many waiters completed in one burst are all resumed (one watcher drains them all).
waiters = [new_waiter(True, lock) for _ in range(50)]
results = []
greenlets = [gevent.spawn(lambda w=w: results.append(w.wait(5))) for w in waiters]
gevent.sleep(0)
start_thread(lambda: [w.complete() for w in waiters], (), "burst")
gevent.joinall(greenlets, timeout=10)
out["burst"] = results.count(True)
print(json.dumps(out))
"""


def test_hub_waiters_wake_time_out_and_ignore_late_completions() -> None:
    out = run_patched(_SCRIPT, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"woken": True, "early": True, "timed_out": False, "other_ran": 20, "burst": 50}
    assert "Traceback" not in out.stderr
