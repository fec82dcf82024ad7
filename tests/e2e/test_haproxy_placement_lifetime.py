"""Placement that lives as long as the bridges keep the thread, on the real haproxy: the shipped config stores each
thread's last request time (gpt0), and the shipped refresher (deploy/haproxy/agui_haproxy_tables.py) renews exactly
the entries younger than the retention past the table's expire. The table's expire is rendered at a few seconds
and the retention is a controlled number, so days pass as seconds. Also the refresher's reload, which never lets a
second reload catch a worker before its peers resync (the tables would be lost).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from agui_bridge.demo.testing import free_port
from tests.support.eventually import eventually
from tests.support.haproxy import THREAD_TABLE, HaproxyProcess, Host, require_haproxy
from tests.support.haproxy_tables import load_tool
from tests.support.stub_hosts import Registry, StubHost

pytestmark = pytest.mark.e2e

ADDRESSES = ("127.0.0.2", "127.0.0.3")
#: The table's expire in this test (24d as shipped): an entry nobody touches is gone after this.
EXPIRE_S = 4
#: The retention the refresher keeps placements for (the bridges' --state-retention-days plus margin).
KEEP_S = 3600
TOOL = load_tool()
SHIPPED_EXPIRY = "shipped expiry"


class ShortExpiryHaproxy(HaproxyProcess):
    """The shipped config with the thread table's expire shortened to EXPIRE_S (nothing else changed)."""

    def write_config(self) -> None:
        super().write_config()
        text = self.config_path.read_text(encoding="utf-8")
        text, count = re.subn(
            r"^(backend st_threads\n    stick-table .*) expire 24d ", rf"\1 expire {EXPIRE_S}s ", text, flags=re.M
        )
        assert count == 1, "the shipped st_threads table no longer has `expire 24d`"
        self.config_path.write_text(text, encoding="utf-8")


@dataclass
class Rig:
    registry: Registry
    haproxy: HaproxyProcess

    def post(self, path: str, body: bytes) -> requests.Response:
        return requests.post(
            self.haproxy.url + path.lstrip("/"), data=body, headers={"Content-Type": "application/json"}, timeout=10
        )

    def start_thread(self, thread_id: str) -> None:
        body = json.dumps({"threadId": thread_id, "runId": "r", "messages": []}, ensure_ascii=False).encode()
        assert self.post("/", body).status_code == 200

    def status(self, thread_id: str) -> int:
        return self.post(f"/extensions/iac-code/v1/threads/{quote(thread_id, safe='')}/status", b"{}").status_code

    def entries(self) -> dict[bytes, object]:
        """The thread table as the refresher reads it: raw key -> its entry."""
        dump = self.haproxy.command(f"show table {THREAD_TABLE}")
        return {entry.key: entry for line in dump.splitlines() if (entry := TOOL.parse_entry(line))}

    def refresh(self) -> None:
        TOOL.refresh(str(self.haproxy.socket_path), THREAD_TABLE, KEEP_S, min_remaining_ms=500)


@pytest.fixture
def rig(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """Two stub hosts behind the shipped config; the thread table's expire is EXPIRE_S unless a test asks for the
    shipped one (`SHIPPED_EXPIRY`), which the tests that wait for a peers resync (about 5 s) need."""
    require_haproxy()
    shipped_expiry = getattr(request, "param", None) == SHIPPED_EXPIRY
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    registry = Registry()
    stubs: list[StubHost] = []
    haproxy: HaproxyProcess | None = None
    try:
        for number, address in enumerate(ADDRESSES, 1):
            stub = StubHost(f"host{number}", address, registry)
            stubs.append(asyncio.run_coroutine_threadsafe(stub.start(), loop).result(10))
        hosts = [Host(n, s.address, s.port, s.agent_port) for n, s in enumerate(stubs, 1)]
        kind = HaproxyProcess if shipped_expiry else ShortExpiryHaproxy
        haproxy = kind(tmp_path / "haproxy", free_port(), free_port(), hosts).start()
        yield Rig(registry, haproxy)
    finally:
        if haproxy is not None:
            haproxy.stop()
        for stub in stubs:
            asyncio.run_coroutine_threadsafe(stub.kill(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_every_answered_request_stores_the_time_of_the_threads_last_request(rig: Rig) -> None:
    before = int(time.time())
    rig.start_thread("stamped")
    stamped = rig.entries()[b"stamped"]
    assert before <= stamped.last_request_s <= int(time.time()) + 1  # type: ignore[attr-defined]
    rig.haproxy.command(f"set table {THREAD_TABLE} key stamped data.gpt0 1")
    assert rig.status("stamped") == 200
    assert rig.entries()[b"stamped"].last_request_s >= before  # type: ignore[attr-defined]


def test_a_placement_younger_than_the_retention_outlives_the_table_expire_and_an_older_one_expires(rig: Rig) -> None:
    kept = ["kept", "Team/Thread 1", "café=x\\y;z"]
    for thread_id in [*kept, "retired"]:
        rig.start_thread(thread_id)
    placed = {key: entry.server for key, entry in rig.entries().items()}  # type: ignore[attr-defined]
    assert sorted(placed) == sorted(t.encode() for t in [*kept, "retired"])
    created = time.monotonic()
    # "retired": its last request is older than the retention (a controlled time in its gpt0).
    long_ago = int(time.time()) - KEEP_S - 60
    rig.haproxy.command(f"set table {THREAD_TABLE} key retired data.gpt0 {long_ago}")

    def retired_gone() -> None:
        rig.refresh()
        assert b"retired" not in rig.entries()

    eventually(retired_gone, timeout_s=EXPIRE_S + 15, interval_s=0.3)
    # No request touched the kept threads since they were placed, for longer than the table's expire.
    assert time.monotonic() - created > EXPIRE_S
    entries = rig.entries()
    assert {key: entry.server for key, entry in entries.items()} == {  # type: ignore[attr-defined]
        thread_id.encode(): placed[thread_id.encode()] for thread_id in kept
    }
    for thread_id in kept:
        assert rig.status(thread_id) == 200
    assert not rig.registry.misrouted
    # The retired thread comes back as a new thread (load-balanced), as it would to a single bridge.
    rig.start_thread("retired")
    assert rig.registry.new_threads.total() == len(kept) + 1


@pytest.mark.parametrize("rig", [SHIPPED_EXPIRY], indirect=True)
def test_the_reload_command_returns_once_the_new_worker_holds_the_tables(rig: Rig) -> None:
    for index in range(5):
        rig.start_thread(f"reloaded-{index}")
    before = rig.haproxy.table()
    old_worker = rig.haproxy.worker_pid()
    assert rig.haproxy.process is not None
    socket_path = str(rig.haproxy.socket_path)
    TOOL.reload(socket_path, "agui_peers", rig.haproxy.process.pid, timeout_s=30)
    assert rig.haproxy.worker_pid() != old_worker
    assert TOOL.resync_done(socket_path, "agui_peers")
    assert rig.haproxy.table() == before
    # A second reload at once is safe now: the new worker has its tables.
    TOOL.reload(socket_path, "agui_peers", rig.haproxy.process.pid, timeout_s=30)
    assert rig.haproxy.table() == before


@pytest.mark.parametrize("rig", [SHIPPED_EXPIRY], indirect=True)
def test_the_shipped_command_line_renews_and_reports(rig: Rig, capsys: pytest.CaptureFixture[str]) -> None:
    rig.start_thread("from-the-timer")
    socket_path = str(rig.haproxy.socket_path)
    assert TOOL.main(["--socket", socket_path, "wait-resync", "--timeout", "30"]) == 0
    assert TOOL.main(["--socket", socket_path, "refresh", "--retention-days", "30"]) == 0
    assert capsys.readouterr().out == "renewed 1, left 0, skipped 0\n"
    assert TOOL.main(["--socket", str(rig.haproxy.prefix / "absent.sock"), "refresh", "--retention-days", "30"]) == 1
