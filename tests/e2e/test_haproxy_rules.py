"""The shipped HAProxy config's edge rules on the real haproxy, in front of stub hosts (tests/support/stub_hosts.py):
the request buffer json_query reads threadId from, a lost host that refuses or stays silent, the agent-check
weight. deploy/README.md "Several hosts" documents each; tests/e2e/test_haproxy_hosts.py runs the real bridges.
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
from tests.support.haproxy import BACKEND, HaproxyProcess, Host, require_haproxy
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
    return f"/extensions/iac-code/v1/threads/{thread_id}/status"


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
    "raw_thread_id",
    ['"caf\\u00e9"', '"a\\/b"', "null", '""'],
    ids=["escaped-non-ascii", "escaped-slash", "null", "empty"],
)
def test_a_threadId_haproxy_cannot_read_as_the_bridge_does_is_refused(rig: Rig, raw_thread_id: str) -> None:
    answer = rig.post("/", b'{"threadId":' + raw_thread_id.encode() + b',"runId":"r","messages":[]}')
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "THREAD_ID_UNREADABLE"
    assert not rig.registry.new_threads


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
    host.hang_up = False
    assert rig.post("/", body("thread-new")).status_code == 200


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
