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
import time
from dataclasses import dataclass, field
from pathlib import Path

from agui_bridge.hub_watchdog import REPORT_MESSAGE

#: The threshold of every gevent server in the tests (the production default is off).
THRESHOLD_MS = 100
ENV_NAME = "IAC_CODE_AGUI_HUB_WATCHDOG_MS"
LOGGER = "agui_bridge.hub_watchdog"
#: How agui_bridge.logs.TextFormatter indents the lines of a record's stack.
CONTINUATION = "    "


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


def parse_report(lines: list[str], log_path: Path) -> HubReport | None:
    """A watchdog record out of a log line (JSON), or a line and its indented continuation (text format);
    None for any other record."""
    line = lines[0]
    if LOGGER not in line or REPORT_MESSAGE not in line:
        return None
    if line.lstrip().startswith("{"):
        try:
            document = json.loads(line)
        except ValueError:
            return None
        return HubReport(
            log_path, int(document.get("blocked_ms", 0)), float(document.get("blocked_since", 0.0)),
            str(document.get("stack", "")), line,
        )  # fmt: skip
    stack = "\n".join(continued[len(CONTINUATION) :] for continued in lines[1:])
    return HubReport(
        log_path, int(_text_field(line, "blocked_ms") or 0), float(_text_field(line, "blocked_since") or 0.0),
        stack, "\n".join(lines),
    )  # fmt: skip


def records(text: str) -> list[list[str]]:
    """Log lines grouped per record: a text record's continuation lines are indented (agui_bridge.logs)."""
    grouped: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith(CONTINUATION) and grouped:
            grouped[-1].append(line)
        else:
            grouped.append([line])
    return grouped


def _text_field(line: str, name: str) -> object:
    """`name=value` of agui_bridge.logs.TextFormatter: a quoted value is a JSON string."""
    marker = f" {name}="
    start = line.find(marker)
    if start < 0:
        return None
    rest = line[start + len(marker) :]
    if rest.startswith('"'):
        value, _ = json.JSONDecoder().raw_decode(rest)
        return value
    return rest.split(" ", 1)[0]


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
                for record in records(complete.decode("utf-8", "replace")):
                    report = parse_report(record, path)
                    if report is not None:
                        reports.append(report)
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
