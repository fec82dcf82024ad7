"""The hub watchdog in the test suite: every gevent server the harness starts reports hub stalls, and a
report fails the test that was running (README "Hub watchdog in the tests", docs/design.md#hub-watchdog).

Servers run the production watchdog (`--hub-watchdog-ms`, through IAC_CODE_AGUI_HUB_WATCHDOG_MS) at
`THRESHOLD_MS`; its WARNING records land in the server's log file, which this module reads after each
test from where it last stopped. A module-scoped server shared by several tests is read after each of
them, so a report fails the test during (or right after) which the stall happened; the message says
which test was running when the stall began.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from agui_bridge.worker.hub_watchdog import logged_reports

#: The threshold of every gevent server in the tests (the production default is off).
THRESHOLD_MS = 100
ENV_NAME = "IAC_CODE_AGUI_HUB_WATCHDOG_MS"


@dataclass(frozen=True)
class HubReport:
    """One stall as the server logged it."""

    log_path: Path
    blocked_ms: int
    blocked_since: float
    stack: str
    line: str

    def describe(self, running: str) -> str:
        return (
            f"hub blocked for {self.blocked_ms} ms (stall began while {running} ran) in {self.log_path.name}:\n"
            f"{self.stack}"
        )


@dataclass
class _Watched:
    offset: int
    running: bool = True


@dataclass
class HubGuard:
    """The server logs being watched, and when each recent test began (to name where a stall began)."""

    watched: dict[Path, _Watched] = field(default_factory=dict)
    tests: list[tuple[float, str]] = field(default_factory=list)
    pending: list[HubReport] = field(default_factory=list)  # read by a claim() for another log

    def watch(self, log_path: Path) -> None:
        """A server starts writing `log_path` (appending): read it from its current end."""
        offset = log_path.stat().st_size if log_path.exists() else 0
        known = self.watched.get(log_path)
        self.watched[log_path] = _Watched(known.offset if known else offset)

    def stopped(self, log_path: Path) -> None:
        """The server exited: read what is left once more, then forget the file."""
        if log_path in self.watched:
            self.watched[log_path].running = False

    def test_started(self, nodeid: str) -> None:
        self.tests = [*self.tests[-20:], (time.time(), nodeid)]

    def running_at(self, when: float) -> str:
        names = [nodeid for started, nodeid in self.tests if started <= when]
        return names[-1] if names else "(before the first test)"

    def collect(self) -> list[HubReport]:
        """Every report written since the last collection, from every watched log."""
        reports, self.pending = self.pending, []
        for path, watched in list(self.watched.items()):
            if path.exists():
                with path.open("rb") as log:
                    log.seek(watched.offset)
                    data = log.read()
                complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next look
                watched.offset += len(complete)
                for logged in logged_reports(complete.decode("utf-8", "replace")):
                    reports.append(
                        HubReport(path, logged.blocked_ms, logged.blocked_since, logged.stack, logged.record)
                    )
            if not watched.running:
                del self.watched[path]
        return reports

    def claim(self, log_path: Path) -> list[HubReport]:
        """A test that blocks the hub on purpose takes its reports (they then fail nothing)."""
        reports = self.collect()
        self.pending = [report for report in reports if report.log_path != log_path]
        return [report for report in reports if report.log_path == log_path]


#: One guard per pytest process (xdist workers each have their own).
GUARD = HubGuard()


#: Put before a script that patches gevent itself: the same watchdog, its reports written to a file.
PATCHED_PRELUDE = f"""
from gevent import monkey
monkey.patch_all()
import atexit as _atexit, json as _json, os as _os, gevent as _gevent
from agui_bridge.worker.hub_watchdog import start_hub_watchdog as _start_hub_watchdog

def _write_hub_report(report, _path=_os.environ["AGUI_TEST_HUB_REPORTS"]):
    with open(_path, "a", encoding="utf-8") as out:
        out.write(_json.dumps({{"blocked_ms": report.blocked_ms, "stack": report.stack}}) + "\\n")

_start_hub_watchdog({THRESHOLD_MS}, _write_hub_report)
_atexit.register(_gevent.sleep, {THRESHOLD_MS * 2 / 1000})  # a report of the last instant still gets written
"""


def run_patched(script: str, *argv: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a script that patches gevent (`python -c`) with the hub watchdog on, as every gevent server of the
    suite runs it; a report fails the calling test with the stack, whatever the script printed."""
    with tempfile.TemporaryDirectory(prefix="hub-reports-") as scratch:
        reports = Path(scratch) / "reports.jsonl"
        env = {**os.environ, "AGUI_TEST_HUB_REPORTS": str(reports)}
        done = subprocess.run(
            [sys.executable, "-c", PATCHED_PRELUDE + script, *argv],
            capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env, check=False,
        )  # fmt: skip
        found = [json.loads(line) for line in reports.read_text().splitlines()] if reports.exists() else []
    if found:
        described = "\n\n".join(f"hub blocked for {r['blocked_ms']} ms:\n{r['stack']}" for r in found)
        raise AssertionError(f"the hub watchdog reported {len(found)} stall(s) in the script:\n{described}")
    return done
