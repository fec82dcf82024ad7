"""The hub watchdog (docs/design.md#hub-watchdog): how windows become reports, the setting, and the
monitor in a patched process; plus how the test suite reads reports back out of a server's log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agui_bridge.config import ConfigError, load_settings
from agui_bridge.worker import hub_watchdog
from agui_bridge.worker.hooks import gunicorn_settings
from agui_bridge.worker.hub_watchdog import (
    BlockAccounting,
    BlockReport,
    HubWatchdog,
    blocked_stack,
    logged_reports,
    others_waited_s,
)
from tests.support.hub_guard import HubGuard, run_patched

REPO = Path(__file__).resolve().parents[2]
GREENLET_A, GREENLET_B = object(), object()

HUB = (None, 0.05, 0.0)  # a window in which the hub ran
#: (windows as (blocked greenlet or None, wall s, waited-for-CPU s), blocked_ms of each report in order)
WINDOWS: list[tuple[str, list[tuple[object | None, float, float]], list[int]]] = [
    ("one window at the threshold is a report", [(GREENLET_A, 0.10, 0.0), HUB], [100]),
    ("two half windows of one greenlet add up", [(GREENLET_A, 0.05, 0.0), (GREENLET_A, 0.05, 0.0), HUB], [100]),
    ("a switch between windows starts over", [(GREENLET_A, 0.06, 0.0), HUB, (GREENLET_A, 0.06, 0.0), HUB], []),
    ("another greenlet starts over", [(GREENLET_A, 0.06, 0.0), (GREENLET_B, 0.06, 0.0), HUB], []),
    ("time spent waiting for a CPU is not the greenlet's", [(GREENLET_A, 0.3, 0.25), HUB], []),
    ("a wait the kernel counts only in the next window is taken off before reporting",
     [(GREENLET_A, 0.1, 0.0), (None, 0.05, 0.04)], []),
    ("a loaded machine still reports a long stall", [(GREENLET_A, 0.1, 0.06)] * 3 + [HUB], [120]),
    ("one stall is one report however long", [(GREENLET_A, 0.05, 0.0)] * 10 + [HUB], [100]),
    ("a new stall after a switch is reported again",
     [(GREENLET_A, 0.1, 0.0), HUB, (GREENLET_A, 0.1, 0.0), HUB], [100, 100]),
    ("a late-counted wait never makes own time negative", [(GREENLET_A, 0.05, 0.2), (GREENLET_A, 0.1, 0.0), HUB],
     [100]),
    ("the hub running is never a report", [(None, 1.0, 0.0), HUB], []),
]  # fmt: skip


@pytest.mark.parametrize(("windows", "reported_ms"), [case[1:] for case in WINDOWS], ids=[c[0] for c in WINDOWS])
def test_windows_without_a_switch_add_up_to_one_report_per_stall(
    windows: list[tuple[object | None, float, float]], reported_ms: list[int]
) -> None:
    accounting = BlockAccounting(0.1)
    reports: list[BlockReport] = []
    now = 1000.0
    for blocked, wall, waited in windows:
        now += wall
        report = accounting.sample(blocked, wall, waited, now, "stack")
        if report is not None:
            reports.append(report)
    assert [report.blocked_ms for report in reports] == reported_ms


def test_a_report_says_when_its_stall_began() -> None:
    accounting = BlockAccounting(0.1)
    assert accounting.sample(GREENLET_A, 0.05, 0.0, 100.05) is None
    assert accounting.sample(GREENLET_A, 0.05, 0.0, 100.10, "the stack") is None
    report = accounting.sample(None, 0.05, 0.0, 100.15)  # confirmed once the next window is counted
    assert report is not None
    assert report.started_at == pytest.approx(100.0)
    assert report.stack == "the stack" and report.greenlet == str(GREENLET_A)


def test_the_blocked_stack_is_cut_out_of_gevents_report() -> None:
    lines = ["=" * 80, "\n<time> : Greenlet <g> appears to be blocked", "    Reported by <tracer>",
             "Blocked Stack (for thread id 0x1):", '  File "a.py", line 1, in f\n    g()\n',
             "Info:", "more"]  # fmt: skip
    assert blocked_stack(lines) == '  File "a.py", line 1, in f\n    g()'


def test_the_watchdog_is_off_unless_asked_for() -> None:
    assert load_settings({}).hub_watchdog_ms == 0
    assert load_settings({"IAC_CODE_AGUI_HUB_WATCHDOG_MS": "100"}).hub_watchdog_ms == 100
    with pytest.raises(ConfigError, match="IAC_CODE_AGUI_HUB_WATCHDOG_MS"):  # an environment value names its variable
        load_settings({"IAC_CODE_AGUI_HUB_WATCHDOG_MS": "-1"})
    # One post_worker_init either way (gunicorn checks its arity): it starts the watchdog only when set.
    assert gunicorn_settings(load_settings({}))["post_worker_init"].__name__ == "init_worker"


_PATCHED = r"""
from gevent import monkey
monkey.patch_all()
import json, time, gevent
from agui_bridge.worker.hub_watchdog import start_hub_watchdog

reports = []
start_hub_watchdog(100, reports.append)
real_sleep = monkey.get_original("time", "sleep")

def held_for_long():
    real_sleep(0.35)

def held_briefly():
    real_sleep(0.02)

gevent.sleep(0.2)
for work in (held_briefly, held_for_long, held_briefly):
    gevent.spawn(work).join()
    gevent.sleep(0.25)
print(json.dumps([{"ms": r.blocked_ms, "stack": r.stack, "greenlet": r.greenlet} for r in reports]))
"""


def test_a_patched_process_reports_the_greenlet_that_held_the_hub_with_its_stack() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PATCHED], capture_output=True, text=True, cwd=REPO, timeout=60, check=True
    )
    reports = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(reports) == 1, reports
    assert reports[0]["ms"] >= 100
    assert "held_for_long" in reports[0]["greenlet"]
    assert "in held_for_long" in reports[0]["stack"] and "held_briefly" not in reports[0]["stack"]
    assert "Unable to monitor memory usage" not in done.stderr


TEXT_LOG = (
    "2026-01-01 00:00:00,000 [INFO] gunicorn.error - Booting worker\n"
    "2026-01-01 00:00:01,000 [WARNING] agui_bridge.worker.hub_watchdog - hub blocked for at least 103 ms by <Greenlet> "
    "blocked_ms=103 blocked_since=1700000000.5\n"
    "    Blocked stack (most recent call last):\n"
    '      File "x.py", line 3, in slow\n'
    "        work()\n"
    "2026-01-01 00:00:02,000 [INFO] gunicorn.error - next\n"
)
JSON_LOG = json.dumps(
    {"ts": "t", "level": "warning", "logger": "agui_bridge.worker.hub_watchdog",
     "message": "hub blocked for at least 7 ms", "blocked_ms": 120, "blocked_since": 1700000001.0,
     "stack": 'Blocked stack:\n  File "y.py", line 1, in f'}
) + "\n"  # fmt: skip


@pytest.mark.parametrize(
    ("log", "blocked_ms", "since", "stack_end"),
    [(TEXT_LOG, 103, 1700000000.5, "    work()"), (JSON_LOG, 120, 1700000001.0, "line 1, in f")],
    ids=["text", "json"],
)
def test_a_report_is_read_back_out_of_either_log_format(
    log: str, blocked_ms: int, since: float, stack_end: str
) -> None:
    reports = logged_reports(log)
    assert [(r.blocked_ms, r.blocked_since) for r in reports] == [(blocked_ms, since)]
    assert reports[0].stack.endswith(stack_end)


def test_the_suite_reads_each_log_from_where_it_stopped_and_keeps_a_half_written_record(tmp_path: Path) -> None:
    log = tmp_path / "bridge.log"
    log.write_text("before the server started: " + JSON_LOG)
    guard = HubGuard()
    guard.watch(log)
    assert guard.collect() == []
    with log.open("a") as out:
        out.write(JSON_LOG + JSON_LOG[:20])
    assert len(guard.collect()) == 1
    with log.open("a") as out:
        out.write(JSON_LOG[20:])
    guard.stopped(log)
    assert len(guard.collect()) == 1
    assert guard.watched == {}  # a stopped server is read once more, then forgotten


_HOLDS_THE_HUB_AT_THE_END = """
import gevent
from gevent import monkey
def hold_the_hub():
    monkey.get_original("time", "sleep")(0.3)
gevent.spawn(hold_the_hub).join()
"""


def test_a_patched_script_that_holds_the_hub_fails_its_test_with_the_stack() -> None:
    """Even a stall in the script's last instant: the report is written before the process exits."""
    with pytest.raises(AssertionError, match=r"(?s)reported 1 stall.*in hold_the_hub"):
        run_patched(_HOLDS_THE_HUB_AT_THE_END, cwd=REPO)


@pytest.mark.parametrize(
    ("before", "now", "waited"),
    [
        ({}, {}, 0.0),
        ({1: 0.5}, {1: 0.5}, 0.0),
        ({1: 0.5, 2: 1.0}, {1: 0.52, 2: 1.09}, 0.09),  # the longest wait of any other thread
        ({1: 0.5}, {2: 3.0}, 0.0),  # a thread that ended and one that began: no reading of either twice
    ],
)
def test_the_other_threads_longest_wait_for_a_cpu(
    before: dict[int, float], now: dict[int, float], waited: float
) -> None:
    assert others_waited_s(before, now) == pytest.approx(waited)


class _FakeLoop:
    def __init__(self) -> None:
        self.reports: list[BlockReport] = []

    def run_callback_threadsafe(self, _deliver: object, report: BlockReport) -> None:
        self.reports.append(report)


class _FakeHub:
    def __init__(self) -> None:
        self.loop = _FakeLoop()


class _Blocked:
    """What gevent's EventLoopBlocked carries that the watchdog reads."""

    def __init__(self, greenlet: object) -> None:
        self.greenlet = greenlet
        self.info = ["Blocked Stack (for thread id 0x1):", '  File "a.py", line 1, in f', "Info:"]


@pytest.mark.parametrize(("others_wait_per_window_s", "reports"), [(0.0, 1), (0.025, 0)])
def test_a_stall_spent_behind_a_gil_holder_waiting_for_a_cpu_is_not_reported(
    monkeypatch: pytest.MonkeyPatch, others_wait_per_window_s: float, reports: int
) -> None:
    """Six 25 ms windows without a switch: a block of 150 ms, unless another thread of the process (the GIL
    holder the hub waits behind, sleeping) waited for a CPU the whole time."""
    waits = {"other": 0.0}
    monkeypatch.setattr(hub_watchdog, "run_queue_wait_s", lambda _path: 0.0)  # the hub's own count shows nothing
    monkeypatch.setattr(hub_watchdog, "_other_threads_waits", lambda _tid: {7: waits["other"]})
    watchdog = HubWatchdog(0.1, lambda _report: None)
    hub = _FakeHub()
    now = watchdog._last_at
    for _ in range(6):
        watchdog._pending = _Blocked(GREENLET_A)
        now += 0.025
        waits["other"] += others_wait_per_window_s
        watchdog.window_ended(hub, now)
    now += 0.025
    waits["other"] += others_wait_per_window_s
    watchdog.window_ended(hub, now)  # the hub ran again
    assert len(hub.loop.reports) == reports
