"""Several bridge hosts behind the shipped HAProxy config (deploy/haproxy/haproxy.cfg,
docs/operations.md#several-hosts): every request of a thread reaches the thread's host (the cancel by its
executionId alone), a lost host's threads get THREAD_HOST_UNAVAILABLE at once, an added host takes only new
threads, a reload keeps every placement, a drained host takes no new thread and finishes its runs.

Three hosts on 127.0.0.2, .3 and .4 (a fourth on .5 joins later), each `agui-bridge serve` with its own managed
demo agent and its own state directory, behind the shipped rules on loopback (tests/support/haproxy.py changes
only addresses, ports and the privilege drop). A thread's host is read from its state record, which exists on
exactly one host.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from agui_bridge.demo.testing import free_port
from agui_bridge.protocol.headers import EXECUTION_ID_HEADER
from agui_bridge.store.keys import thread_file_stem
from agui_bridge.testing import answer, resume_input
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.eventually import eventually
from tests.support.haproxy import BACKEND, EXECUTION_TABLE, THREAD_TABLE, HaproxyProcess, Host, require_haproxy
from tests.support.harness import BridgeServer, StreamReader, new_thread_id, run_body

pytestmark = pytest.mark.e2e

ROS = "invocation-1"
THREADS = 50
CONCURRENCY = 8
#: Answers that would mean a request reached a host that does not hold its thread.
MISROUTED = {"RESUME_REQUIRED", "EXECUTION_LOST", "EXECUTION_NOT_FOUND", "RUN_NOT_FOUND"}
HOST_LOST_BOUND_S = 2.0
ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")


@dataclass
class BridgeHost:
    """One `agui-bridge serve` host and its server line."""

    host: Host
    bridge: BridgeServer

    @property
    def threads_dir(self) -> Path:
        return self.bridge.state_dir / "threads"

    def holds(self, thread_id: str) -> bool:
        """Whether this host has the thread's record (a thread's host is where its record is)."""
        return (self.threads_dir / f"{thread_file_stem(thread_id)}.json").exists()


@dataclass
class Cluster:
    """The hosts behind one HAProxy, and what the test saw go wrong or learnt along the way."""

    haproxy: HaproxyProcess
    hosts: dict[str, BridgeHost]
    workspace: Path
    misrouted: list[str] = field(default_factory=list)
    #: Every execution the bridges announced (Agui-Execution-Id), by thread.
    executions: dict[str, list[str]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return self.haproxy.url + path.lstrip("/")

    def owners(self, thread_id: str) -> list[str]:
        """The hosts with a record of the thread."""
        return [name for name, host in self.hosts.items() if host.holds(thread_id)]

    def owner(self, thread_id: str) -> str:
        """The one host with the thread's record."""
        owners = self.owners(thread_id)
        assert len(owners) == 1, f"thread {thread_id} has records on {owners}"
        return owners[0]

    def note(self, thread_id: str, what: str, payload: Any) -> None:
        """Remember any answer that only a host without the thread gives."""
        text = str(payload)
        for code in MISROUTED:
            if code in text:
                self.misrouted.append(f"{thread_id} {what}: {text[:300]}")


def start_host(number: int, root: Path, workspace: Path) -> BridgeHost:
    """Host <number> on its own loopback address, with its own state directory and agent-check port."""
    address = ADDRESSES[number - 1]
    state_dir = root / f"host{number}" / "state"
    state_dir.mkdir(parents=True)
    agent_port = free_port()
    options: dict[str, Any] = {
        "bind_host": address,
        "workers": 1,
        "reattach_window": 10,
        "agent_check_port": agent_port,
    }
    bridge = BridgeServer(None, None, state_dir, workspace, **options).start()
    return BridgeHost(Host(number, address, bridge.port, agent_port), bridge)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_haproxy()
    root = tmp_path_factory.mktemp("haproxy-hosts")
    workspace = root / "workspace"
    workspace.mkdir()
    started: list[BridgeHost] = []
    haproxy: HaproxyProcess | None = None
    try:
        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(start_host, number, root, workspace) for number in (1, 2, 3)]
            for future in futures:
                with contextlib.suppress(Exception):
                    started.append(future.result())
        for future in futures:
            future.result()  # a host that did not start fails the fixture, after the others are recorded
        haproxy = HaproxyProcess(root / "haproxy", free_port(), free_port(), [h.host for h in started]).start()
        running = haproxy
        eventually(lambda: all_up(running, [h.host for h in started]), timeout_s=20, interval_s=0.1)
        hosts = {h.host.name: h for h in started}
        yield Cluster(haproxy, hosts, workspace)
        started = list(hosts.values())  # with any host the test added
    finally:
        if haproxy is not None:
            haproxy.stop()
        for host in started:
            host.bridge.stop(signal.SIGKILL)


def all_up(haproxy: HaproxyProcess, hosts: list[Host]) -> None:
    """Raises until HAProxy sees every host's health check pass (for `eventually`)."""
    state = haproxy.command(f"show servers state {BACKEND}")
    for host in hosts:
        line = next((row for row in state.splitlines() if f" {host.name} " in row), "")
        assert line.split()[5:6] == ["2"], f"{host.name} not up yet: {line}"


# ------------------------------------------------------------------------------------------------ one thread's life


def post_run(cluster: Cluster, body: dict[str, Any]) -> requests.Response:
    """A turn through HAProxy, answered 200; remembers the execution the bridge announced."""
    response = requests.post(cluster.url("/"), json=body, stream=True, timeout=30)
    if response.status_code != 200:
        cluster.note(body["threadId"], "POST /", response.text)
    assert response.status_code == 200, response.text
    cluster.executions.setdefault(body["threadId"], []).append(response.headers[EXECUTION_ID_HEADER])
    return response


def whole_run(cluster: Cluster, body: dict[str, Any], expect: str) -> list[dict[str, Any]]:
    """A turn read to its end, which must be `expect`."""
    with post_run(cluster, body) as response:
        events = assert_valid_agui_stream(StreamReader(response).rest(), expect_terminal=expect)
    cluster.note(body["threadId"], "run", events[-1])
    return events


def status(cluster: Cluster, thread_id: str, timeout_s: float = 10) -> requests.Response:
    """The status route of the thread through HAProxy."""
    response = requests.post(
        cluster.url(f"/extensions/iac-code/v1/threads/{quote(thread_id, safe='')}/status"),
        json={"rosInvocationId": ROS},
        timeout=timeout_s,
    )
    cluster.note(thread_id, "status", response.text)
    return response


def interrupt_status_resume(cluster: Cluster, thread_id: str) -> None:
    """An interrupt, the status route showing it pending, and the resume that answers it."""
    events = whole_run(cluster, run_body(thread_id, "write file please", cluster.workspace), "RUN_FINISHED")
    interrupts = events[-1]["outcome"]["interrupts"]
    pending = status(cluster, thread_id)
    assert pending.status_code == 200 and [p["id"] for p in pending.json()["pending"]] == [i["id"] for i in interrupts]
    resume = resume_input(thread_id, cluster.workspace, [answer(i, {"decision": "allow_once"}) for i in interrupts])
    finished = whole_run(cluster, resume, "RUN_FINISHED")
    assert finished[-1]["outcome"]["type"] == "success", finished[-1]


def cancel_by_execution(cluster: Cluster, thread_id: str) -> None:
    """A later turn cancelled by its executionId alone: the client leaves after RUN_STARTED (the run goes on,
    detached), the thread's entry is cleared, so only the execution's entry (learnt from the Agui-Execution-Id
    header) can bring the cancel to the thread's host; the cancel's answer then stores the thread's entry again.
    The client leaves first because HAProxy keeps an entry that an open stream tracks (the last-request time the
    placement refresher reads) until that stream ends: such an entry cannot be cleared."""
    owner = cluster.owner(thread_id)
    body = run_body(thread_id, "slow [SLOW 30]", cluster.workspace)
    with post_run(cluster, body) as response:
        execution_id = response.headers[EXECUTION_ID_HEADER]
        reader = StreamReader(response)
        reader.until(lambda events: any(e["type"] == "RUN_STARTED" for e in events))
    assert reader.last_event_id is not None, reader.raw[-400:]
    assert cluster.haproxy.table(EXECUTION_TABLE).get(execution_id) == owner

    def thread_entry_cleared() -> None:
        cluster.haproxy.command(f"clear table {THREAD_TABLE} key {thread_id}")
        assert thread_id not in cluster.haproxy.table()

    # HAProxy ends the stream at the run's next event (the slow turn sends one every 5 s) after the client left.
    eventually(thread_entry_cleared, timeout_s=20)
    cancel = requests.post(
        cluster.url(f"/extensions/iac-code/v1/executions/{execution_id}/cancel"),
        json={"threadId": thread_id, "rosInvocationId": ROS},
        timeout=10,
    )
    cluster.note(thread_id, "cancel", cancel.text)
    assert cancel.status_code == 200 and cancel.json()["status"] == "cancelled", cancel.text
    assert cluster.haproxy.table().get(thread_id) == owner
    tail = reattach_rest(cluster, thread_id, body["runId"], reader.last_event_id)
    assert '"code":"CANCELLED"' in tail and '"type":"RUN_ERROR"' in tail, tail[-400:]


def reattach_rest(cluster: Cluster, thread_id: str, run_id: str, last_event_id: str) -> str:
    """The rest of a run after `last_event_id`, read through the reattach route (HAProxy keys it by the path)."""
    path = f"/extensions/iac-code/v1/threads/{quote(thread_id, safe='')}/runs/{quote(run_id, safe='')}/events"
    with requests.get(
        cluster.url(path), headers={"Ros-Invocation-Id": ROS, "Last-Event-ID": last_event_id}, stream=True, timeout=30
    ) as reattached:
        if reattached.status_code != 200:
            cluster.note(thread_id, "reattach", reattached.text)
        assert reattached.status_code == 200, reattached.text
        tail = StreamReader(reattached).rest().decode()
    cluster.note(thread_id, "reattach", tail[-400:])
    return tail


def cut_and_reattach(cluster: Cluster, thread_id: str) -> None:
    """A run whose connection is cut after RUN_STARTED, read to its end through the reattach route."""
    body = run_body(thread_id, "slow [SLOW 2]", cluster.workspace)
    with post_run(cluster, body) as response:
        reader = StreamReader(response)
        reader.until(lambda events: any(e["type"] == "RUN_STARTED" for e in events))
    assert reader.last_event_id is not None, reader.raw[-400:]
    tail = reattach_rest(cluster, thread_id, body["runId"], reader.last_event_id)
    assert '"type":"RUN_FINISHED"' in tail, tail[-400:]


def whole_life(cluster: Cluster, thread_id: str) -> None:
    """Every route of a thread, in the order a client meets them: an interrupt, the status route showing it, the
    resume, a later turn cancelled by its executionId, a turn cut and read to its end through reattach."""
    interrupt_status_resume(cluster, thread_id)
    cancel_by_execution(cluster, thread_id)
    cut_and_reattach(cluster, thread_id)


def run_threads(cluster: Cluster, thread_ids: list[str]) -> None:
    """Every thread's whole life, CONCURRENCY threads at a time."""
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        for future in [pool.submit(whole_life, cluster, t) for t in thread_ids]:
            future.result()


def new_threads(cluster: Cluster, count: int) -> list[str]:
    """`count` new threads, one after the other (so least-connections spreads them), each one turn."""
    thread_ids = [new_thread_id() for _ in range(count)]
    for thread_id in thread_ids:
        whole_run(cluster, run_body(thread_id, "hello", cluster.workspace), "RUN_FINISHED")
    return thread_ids


# ------------------------------------------------------------------------------------------------------------ phases


def every_thread_reached_its_host(cluster: Cluster) -> dict[str, str]:
    """THREADS threads through their whole life: no misrouted answer, one record each, and both tables naming
    the thread's host (every execution of a thread included)."""
    thread_ids = [new_thread_id() for _ in range(THREADS)]
    run_threads(cluster, thread_ids)
    assert cluster.misrouted == []
    placement = {thread_id: cluster.owner(thread_id) for thread_id in thread_ids}
    assert cluster.haproxy.table() == placement
    assert len(set(placement.values())) == 3, placement
    executions = cluster.haproxy.table(EXECUTION_TABLE)
    for thread_id in thread_ids:
        assert len(cluster.executions[thread_id]) == 4
        assert {executions.get(e) for e in cluster.executions[thread_id]} == {placement[thread_id]}
    return placement


def lost_host_answers_at_once(cluster: Cluster, placement: dict[str, str]) -> str:
    """SIGKILL the host with the most threads: each route of its threads answers THREAD_HOST_UNAVAILABLE within
    the bound, the other threads are untouched, new threads go elsewhere."""
    lost = max(cluster.hosts, key=lambda name: sum(owner == name for owner in placement.values()))
    victim = cluster.hosts[lost]
    assert victim.bridge.process is not None
    os.killpg(victim.bridge.process.pid, signal.SIGKILL)
    victim.bridge.process.wait(10)
    eventually(lambda: refused(victim.host), timeout_s=10, interval_s=0.05)

    def host_lost(thread_id: str) -> None:
        run_id = f"run-after-loss-{thread_id}"
        for answer_ in (
            status(cluster, thread_id, timeout_s=HOST_LOST_BOUND_S),
            requests.post(
                cluster.url("/"), json=run_body(thread_id, "hello", cluster.workspace), timeout=HOST_LOST_BOUND_S
            ),
            requests.post(
                cluster.url(f"/extensions/iac-code/v1/executions/{cluster.executions[thread_id][-1]}/cancel"),
                json={"threadId": thread_id, "rosInvocationId": ROS},
                timeout=HOST_LOST_BOUND_S,
            ),
            requests.get(
                cluster.url(f"/extensions/iac-code/v1/threads/{quote(thread_id, safe='')}/runs/{run_id}/events"),
                headers={"Ros-Invocation-Id": ROS},
                timeout=HOST_LOST_BOUND_S,
            ),
        ):
            assert answer_.status_code == 503, answer_.text
            assert answer_.json()["error"]["code"] == "THREAD_HOST_UNAVAILABLE", answer_.text

    lost_threads = [t for t, owner in placement.items() if owner == lost]
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(host_lost, lost_threads))

    def untouched(thread_id: str) -> None:
        answered = status(cluster, thread_id)
        assert answered.status_code == 200 and answered.json()["threadId"] == thread_id, answered.text

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(untouched, [t for t, owner in placement.items() if owner != lost]))
    fresh = new_threads(cluster, 4)
    assert all(cluster.owner(t) != lost for t in fresh)
    assert {t: cluster.owner(t) for t in placement} == placement, "no record moved"
    placement.update({t: cluster.owner(t) for t in fresh})
    return lost


def refused(host: Host) -> None:
    """Raises until the host's port refuses connections (for `eventually`)."""
    try:
        socket.create_connection((host.address, host.port), timeout=1).close()
    except ConnectionRefusedError:
        return
    raise AssertionError(f"{host.name} still accepts connections")


def added_host_takes_only_new_threads(cluster: Cluster, placement: dict[str, str], root: Path, lost: str) -> str:
    """A fourth host added by a reload: both tables survive it, every surviving thread's next turn reaches its
    host (never the new one), and the new host takes some new threads."""
    fourth = start_host(4, root, cluster.workspace)
    cluster.hosts[fourth.host.name] = fourth
    before = cluster.haproxy.table()
    executions_before = cluster.haproxy.table(EXECUTION_TABLE)
    cluster.haproxy.reload([h.host for h in cluster.hosts.values()])
    # The new worker learns both tables from the old one through the local peer.
    eventually(lambda: check_equal(cluster.haproxy.table(), before), timeout_s=10, interval_s=0.1)
    assert cluster.haproxy.table(EXECUTION_TABLE) == executions_before
    eventually(lambda: all_up(cluster.haproxy, [fourth.host]), timeout_s=20, interval_s=0.1)

    surviving = [t for t, owner in placement.items() if owner != lost]
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        for future in [pool.submit(one_more_turn, cluster, t) for t in surviving]:
            future.result()
    assert {t: cluster.owner(t) for t in surviving} == {t: placement[t] for t in surviving}
    assert not any(fourth.holds(t) for t in placement), "an existing thread moved to the added host"

    fresh = new_threads(cluster, 9)
    assert any(cluster.owner(t) == fourth.host.name for t in fresh), "the added host took no new thread"
    assert not any(fourth.holds(t) for t in placement), "an existing thread moved to the added host"
    placement.update({t: cluster.owner(t) for t in fresh})
    return fourth.host.name


def one_more_turn(cluster: Cluster, thread_id: str) -> None:
    """A turn of an existing thread, answered 200 and finished."""
    whole_run(cluster, run_body(thread_id, "hello again", cluster.workspace), "RUN_FINISHED")


def check_equal(actual: dict[str, str], expected: dict[str, str]) -> None:
    """Raises unless equal (for `eventually`)."""
    assert actual == expected


def drained_host_takes_no_new_thread(cluster: Cluster, placement: dict[str, str], drained: str) -> None:
    """A host drained while one of its runs streams: the run finishes, new threads go elsewhere, its threads
    still reach it."""
    in_flight = next(t for t, owner in placement.items() if owner == drained)
    with post_run(cluster, run_body(in_flight, "slow [SLOW 3]", cluster.workspace)) as response:
        reader = StreamReader(response)
        reader.until(lambda events: any(e["type"] == "RUN_STARTED" for e in events))
        cluster.haproxy.command(f"set server {BACKEND}/{drained} state drain")
        fresh = new_threads(cluster, 6)
        assert_valid_agui_stream(reader.rest(), expect_terminal="RUN_FINISHED")
    assert not any(cluster.hosts[drained].holds(t) for t in fresh)
    for thread_id in [t for t, owner in placement.items() if owner == drained]:
        answered = status(cluster, thread_id)
        assert answered.status_code == 200 and answered.json()["threadId"] == thread_id, answered.text


def test_threads_stay_on_their_host_through_loss_addition_reload_and_drain(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    placement = every_thread_reached_its_host(cluster)
    lost = lost_host_answers_at_once(cluster, placement)
    added_host_takes_only_new_threads(cluster, placement, tmp_path_factory.mktemp("added"), lost)
    survivor = next(name for name in ("host1", "host2", "host3") if name != lost)
    drained_host_takes_no_new_thread(cluster, placement, survivor)
    assert cluster.misrouted == []
