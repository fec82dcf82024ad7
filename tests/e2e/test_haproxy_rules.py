"""The shipped HAProxy config's edge rules on the real haproxy, in front of stub hosts (tests/support/stub_hosts.py):
the request buffer json_query reads threadId from, the escapes it misreads (in the top-level threadId only), the
thread of a status or reattach path, keys as long as the bridge allows, a lost host that refuses or stays silent,
the bridge's own 502/504, the agent-check weight. docs/operations.md#several-hosts documents each;
tests/e2e/test_haproxy_hosts.py runs the real bridges.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
import requests

from agui_bridge.demo.testing import free_port
from tests.support.eventually import eventually
from tests.support.haproxy import BACKEND, CONFIG, HaproxyProcess, Host, require_haproxy
from tests.support.stub_hosts import Registry, StubHost

pytestmark = pytest.mark.e2e

T = TypeVar("T")
ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
HOST_LOST_BOUND_S = 2.0
#: A history long enough to push a body well past HAProxy's 16 KiB request buffer.
LONG_HISTORY = [{"id": f"m{i}", "role": "user", "content": "x" * 500} for i in range(120)]


@dataclass
class Rig:
    loop: asyncio.AbstractEventLoop
    registry: Registry
    stubs: dict[str, StubHost]
    haproxy: HaproxyProcess

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    def post(self, path: str, body: bytes, timeout_s: float = 10) -> requests.Response:
        return requests.post(
            self.haproxy.url + path.lstrip("/"),
            data=body,
            headers={"Content-Type": "application/json"},
            timeout=timeout_s,
        )


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    require_haproxy()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    registry = Registry()
    stubs: dict[str, StubHost] = {}
    haproxy: HaproxyProcess | None = None
    try:
        for number, address in enumerate(ADDRESSES, 1):
            stub = StubHost(f"host{number}", address, registry)
            asyncio.run_coroutine_threadsafe(stub.start(), loop).result(10)
            stubs[stub.name] = stub
        hosts = [Host(n, s.address, s.port, s.agent_port) for n, s in enumerate(stubs.values(), 1)]
        haproxy = HaproxyProcess(tmp_path / "haproxy", free_port(), free_port(), hosts).start()
        yield Rig(loop, registry, stubs, haproxy)
    finally:
        if haproxy is not None:
            haproxy.stop()
        for stub in stubs.values():
            asyncio.run_coroutine_threadsafe(stub.kill(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def body(thread_id: str, *, first: bool = True, history: list[dict[str, Any]] | None = None) -> bytes:
    """A RunAgentInput-shaped body with threadId first (as @ag-ui/client and ag-ui-protocol write it) or last."""
    rest = {"runId": "run-1", "messages": history or [{"id": "m", "role": "user", "content": "hi"}]}
    ordered = {"threadId": thread_id, **rest} if first else {**rest, "threadId": thread_id}
    return json.dumps(ordered).encode()


def status_path(thread_id: str) -> str:
    """The status route of a thread id, as given (percent-encode it first if it must be)."""
    return f"/extensions/iac-code/v1/threads/{thread_id}/status"


def reattach_path(thread_id: str, run_id: str = "run-1") -> str:
    """The reattach route of a thread id, as given."""
    return f"/extensions/iac-code/v1/threads/{thread_id}/runs/{run_id}/events"


def test_a_body_larger_than_the_buffer_is_routed_by_a_threadId_that_comes_first(rig: Rig) -> None:
    large = body("thread-long-history", history=LONG_HISTORY)
    assert len(large) > 4 * 16384
    for _ in range(4):
        assert rig.post("/", large).status_code == 200
    assert rig.post(status_path("thread-long-history"), b"{}").status_code == 200
    assert sum(rig.registry.new_threads.values()) == 1 and not rig.registry.misrouted


def test_a_threadId_past_the_buffer_is_refused_never_load_balanced(rig: Rig) -> None:
    answer = rig.post("/", body("thread-at-the-end", first=False, history=LONG_HISTORY))
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "THREAD_ID_UNREADABLE"
    assert not rig.registry.new_threads
    # Within the buffer the position does not matter.
    assert rig.post("/", body("thread-at-the-end", first=False)).status_code == 200


@pytest.mark.parametrize(
    "raw_body",
    [
        b'{"threadId":"caf\\u00e9","runId":"r","messages":[]}',
        b'{"threadId":"a\\/b","runId":"r","messages":[]}',
        b'{"threadId":null,"runId":"r","messages":[]}',
        b'{"threadId":"","runId":"r","messages":[]}',
        b'{"state":{"a":[1,{"b":"} ]\\"x"}],"threadId":"ok"},"runId":"r","threadId":"caf\\u00e9"}',
    ],
    ids=["escaped-non-ascii", "escaped-slash", "null", "empty", "escaped-after-nested-members"],
)
def test_a_threadId_haproxy_cannot_read_as_the_bridge_does_is_refused(rig: Rig, raw_body: bytes) -> None:
    answer = rig.post("/", raw_body)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "THREAD_ID_UNREADABLE"
    assert not rig.registry.new_threads


@pytest.mark.parametrize(
    "raw_body",
    [
        b'{"threadId":"plain-1","state":{"threadId":"caf\\u00e9"},"messages":[]}',
        b'{"state":{"threadId":"caf\\u00e9","n":[{"threadId":"a\\/b"}]},"runId":"r","threadId":"plain-1"}',
        b'{"forwardedProps":"\\"threadId\\":\\"caf\\u00e9\\"","threadId":"plain-1"}',
    ],
    ids=["nested-after", "nested-before", "inside-a-string"],
)
def test_an_escaped_threadId_that_is_not_the_top_level_one_does_not_refuse_the_body(rig: Rig, raw_body: bytes) -> None:
    answer = rig.post("/", raw_body)
    assert answer.status_code == 200, answer.text
    assert rig.registry.new_threads.total() == 1 and rig.haproxy.table() == {
        "plain-1": rig.registry.thread_host["plain-1"]
    }


@pytest.mark.parametrize("raw_thread_id", [b"123", b"true"], ids=["number", "boolean"])
def test_a_threadId_that_is_not_a_string_reaches_a_bridge_which_refuses_it_and_places_nothing(
    rig: Rig, raw_thread_id: bytes
) -> None:
    answer = rig.post("/", b'{"threadId":' + raw_thread_id + b',"runId":"r","messages":[]}')
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "INVALID_INPUT"
    assert rig.haproxy.table() == {}


def test_thread_ids_as_long_as_the_bridge_allows_get_an_entry_each(rig: Rig) -> None:
    # 200 characters, 399 bytes of UTF-8 each, alike in their first 396 bytes.
    thread_ids = ["é" * 198 + suffix for suffix in ("-a", "-b")]
    for thread_id in thread_ids:
        assert rig.post("/", json.dumps({"threadId": thread_id}, ensure_ascii=False).encode()).status_code == 200
    assert sorted(rig.haproxy.table().values()) == sorted(rig.registry.thread_host[t] for t in thread_ids)
    assert len(rig.haproxy.table()) == 2


@pytest.mark.parametrize("encode", [True, False], ids=["percent-encoded", "raw-slashes"])
def test_a_thread_id_that_looks_like_a_route_is_read_whole_from_the_status_and_reattach_paths(
    rig: Rig, encode: bool
) -> None:
    thread_id = "x/runs/y/events"
    assert rig.post("/", body("x")).status_code == 200
    assert rig.post("/", body(thread_id)).status_code == 200
    in_path = quote(thread_id, safe="") if encode else thread_id
    for _ in range(6):
        assert rig.post(status_path(in_path), b"{}").json() == {"threadId": thread_id}
        assert requests.get(rig.haproxy.url + reattach_path(in_path).lstrip("/"), timeout=10).status_code == 200
    assert not rig.registry.misrouted


def test_a_raw_utf8_threadId_reaches_its_host_from_the_body_and_the_encoded_path(rig: Rig) -> None:
    thread_id = "café-线程"
    assert rig.post("/", json.dumps({"threadId": thread_id}, ensure_ascii=False).encode()).status_code == 200
    for _ in range(3):
        assert rig.post(status_path(quote(thread_id, safe="")), b"{}").status_code == 200
    assert not rig.registry.misrouted


class Silenced:
    """A listener on the dead host's port whose accept queue is full: SYNs go unanswered, as from a machine that
    is off or cut off (a connect times out instead of being refused)."""

    def __init__(self, address: str, port: int) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((address, port))
        self.listener.listen(0)
        self.fillers = []
        for _ in range(4):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            filler.connect_ex((address, port))
            self.fillers.append(filler)
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.settimeout(0.3)
        with pytest.raises(OSError):
            probe.connect((address, port))
        probe.close()

    def close(self) -> None:
        for filler in self.fillers:
            filler.close()
        self.listener.close()


@pytest.mark.parametrize("how", ["refused", "silent"])
def test_a_placed_thread_whose_host_is_gone_gets_thread_host_unavailable_at_once(rig: Rig, how: str) -> None:
    thread_ids = [f"thread-{n}" for n in range(6)]
    for thread_id in thread_ids:
        assert rig.post("/", body(thread_id)).status_code == 200
    gone = rig.registry.thread_host[thread_ids[0]]
    stub = rig.stubs[gone]
    rig.run(stub.kill())
    silenced = Silenced(stub.address, stub.port) if how == "silent" else None
    try:
        for thread_id in thread_ids:
            for path, payload in (("/", body(thread_id)), (status_path(thread_id), b"{}")):
                answer = rig.post(path, payload, timeout_s=HOST_LOST_BOUND_S)
                if rig.registry.thread_host[thread_id] == gone:
                    assert answer.status_code == 503, answer.text
                    assert answer.json()["error"]["code"] == "THREAD_HOST_UNAVAILABLE"
                else:
                    assert answer.status_code == 200, answer.text
        # A new thread still finds a live host, and none got a fresh context elsewhere.
        assert rig.post("/", body("thread-new")).status_code == 200
        assert rig.registry.thread_host["thread-new"] != gone
        assert not rig.registry.misrouted
    finally:
        if silenced is not None:
            silenced.close()


def test_a_placed_thread_whose_host_hangs_up_mid_request_gets_thread_host_unavailable(rig: Rig) -> None:
    assert rig.post("/", body("thread-hung-up")).status_code == 200
    host = rig.stubs[rig.registry.thread_host["thread-hung-up"]]
    host.hang_up = True
    answer = rig.post("/", body("thread-hung-up"), timeout_s=HOST_LOST_BOUND_S)
    assert answer.status_code == 503, answer.text  # HAProxy's 502, turned into the documented answer
    assert answer.json()["error"]["code"] == "THREAD_HOST_UNAVAILABLE"
    assert "agui-lb-error" not in {name.lower() for name in answer.headers}
    host.hang_up = False
    assert rig.post("/", body("thread-new")).status_code == 200


@pytest.mark.parametrize(("status", "code"), [(502, "A2A_EXECUTION_FAILED"), (504, "UPSTREAM_TIMEOUT")])
def test_a_placed_thread_gets_its_bridges_own_502_and_504_unchanged(rig: Rig, status: int, code: str) -> None:
    assert rig.post("/", body("thread-failing")).status_code == 200
    rig.stubs[rig.registry.thread_host["thread-failing"]].fail_with = (status, code)
    for path in ("/", status_path("thread-failing")):
        answer = rig.post(path, body("thread-failing"))
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), answer.text


def test_a_host_answering_zero_percent_takes_no_new_thread_but_keeps_its_own(rig: Rig) -> None:
    assert rig.post("/", body("thread-kept")).status_code == 200
    full = rig.registry.thread_host["thread-kept"]
    rig.stubs[full].capacity_percent = 0

    def weight_zero() -> None:
        state = rig.haproxy.command(f"show servers state {BACKEND}")
        line = next(row for row in state.splitlines() if f" {full} " in row)
        assert line.split()[7] == "0", line  # srv_uweight

    eventually(weight_zero, timeout_s=10, interval_s=0.1)
    for number in range(12):
        assert rig.post("/", body(f"thread-after-{number}")).status_code == 200
        assert rig.registry.thread_host[f"thread-after-{number}"] != full
    assert rig.post(status_path("thread-kept"), b"{}").status_code == 200
    assert not rig.registry.misrouted


def test_the_shipped_config_runs_its_workers_as_debians_haproxy_user_in_a_chroot() -> None:
    text = CONFIG.read_text(encoding="utf-8")
    global_section = text[text.index("\nglobal\n") : text.index("\npeers ")]
    lines = {line.strip() for line in global_section.splitlines()}
    assert {"user haproxy", "group haproxy", "chroot /var/lib/haproxy"} <= lines
