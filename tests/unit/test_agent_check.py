"""HAProxy's agent check (docs/design.md#agent-check): the answer, the shared load board, the responder's bounds."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.app import create_app
from agui_bridge.config import ConfigError
from agui_bridge.config.settings import Settings, check_settings
from agui_bridge.runs.registry import RunRegistry
from agui_bridge.web.context import EXTENSION_KEY
from agui_bridge.worker.agent_check import (
    MAX_AGENT_CONNECTIONS,
    AgentResponder,
    LoadBoard,
    MasterAgentCheck,
    WorkerLoad,
    agent_answer,
    free_capacity_percent,
    master_agent_check,
    reload_warning,
)
from agui_bridge.worker.hooks import gunicorn_settings
from tests.support.agent_check import ask_agent
from tests.support.eventually import eventually


@pytest.mark.parametrize(
    ("loads", "workers", "stopping", "percent"),
    [
        pytest.param([WorkerLoad(0, 4), WorkerLoad(0, 4)], 2, False, 100, id="idle host"),
        pytest.param([WorkerLoad(1, 4), WorkerLoad(0, 4)], 2, False, 88, id="one of eight taken: 87.5 rounds up"),
        pytest.param([WorkerLoad(2, 4), WorkerLoad(2, 4)], 2, False, 50, id="half taken"),
        pytest.param([WorkerLoad(999, 1000)], 1, False, 1, id="one free place of a thousand is never 0%"),
        pytest.param([WorkerLoad(4, 4), WorkerLoad(4, 4)], 2, False, 0, id="full"),
        pytest.param([WorkerLoad(9, 4), WorkerLoad(0, 4)], 2, False, 50, id="a worker over its limit frees nothing"),
        pytest.param([WorkerLoad(0, 4, draining=True), WorkerLoad(0, 4)], 2, False, 50, id="one worker draining"),
        pytest.param([WorkerLoad(0, 4, True), WorkerLoad(1, 4, True)], 2, False, 0, id="every worker draining"),
        pytest.param(
            [WorkerLoad(3, 4, True), WorkerLoad(4, 4, True), WorkerLoad(0, 4), WorkerLoad(1, 4)],
            2,
            False,
            88,
            id="a reload: old workers draining beside their replacements",
        ),
        pytest.param([WorkerLoad(0, 4), WorkerLoad(0, 4)], 2, True, 0, id="the master stops: the host drains"),
        pytest.param([WorkerLoad(0, 4)], 2, False, 50, id="a worker not reported yet has no free place"),
        pytest.param([], 2, False, 0, id="no worker reported yet"),
        pytest.param([WorkerLoad(1, 4)] * 4, 4, False, 75, id="several workers"),
        pytest.param([WorkerLoad(0, 0)], 1, False, 0, id="no capacity at all"),
    ],
)
def test_free_capacity_percent(loads: list[WorkerLoad], workers: int, stopping: bool, percent: int) -> None:
    assert free_capacity_percent(loads, workers=workers, worker_limit=4, stopping=stopping) == percent


@pytest.mark.parametrize(("percent", "line"), [(42, b"42%\n"), (0, b"0%\n"), (100, b"100%\n"), (250, b"100%\n")])
def test_the_answer_is_one_weight_percentage_line(percent: int, line: bytes) -> None:
    assert agent_answer(percent) == line


def test_the_board_counts_reported_workers_until_they_are_reaped() -> None:
    board = LoadBoard(2)
    first, second = board.assign(1), board.assign(2)
    assert (first, second, board.assign(3)) == (0, 1, None)  # every slot taken
    assert board.read() == []  # assigned, not reported yet
    assert first is not None and second is not None
    board.write(first, 101, WorkerLoad(3, 8))
    board.write(second, 102, WorkerLoad(1, 8, draining=True))
    assert board.read() == [WorkerLoad(3, 8), WorkerLoad(1, 8, True)]
    board.release(1)  # reaped (after a SIGKILL too): its streams no longer count, its slot is free
    assert board.read() == [WorkerLoad(1, 8, True)]
    assert board.assign(4) == 0


@dataclass
class FakeArbiter:
    """What the agent check reads of gunicorn's arbiter."""

    num_workers: int = 2
    LISTENERS: list[object] = field(default_factory=lambda: [object()])
    reexec_pid: int = 0  # the old master of a USR2 upgrade: its new master's pid
    master_pid: int = 0  # the new master of a USR2 upgrade: the old master's pid
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("fake-arbiter"))


@dataclass
class FakeWorker:
    age: int
    pid: int = 0
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("fake-worker"))


@pytest.fixture
def master_agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MasterAgentCheck, FakeArbiter]]:
    monkeypatch.setattr("agui_bridge.worker.agent_check._answered_by_master", False)  # start() sets it
    agent, arbiter = MasterAgentCheck("127.0.0.1", 0, 4), FakeArbiter()
    agent.start(arbiter)
    try:
        yield agent, arbiter
    finally:
        assert agent.responder is not None
        agent.responder.stop()


def agent_port(agent: MasterAgentCheck) -> int:
    assert agent.responder is not None
    port: int = agent.responder.listener.getsockname()[1]
    return port


def test_the_master_answers_from_the_board_and_zero_once_it_stops(
    master_agent: tuple[MasterAgentCheck, FakeArbiter],
) -> None:
    agent, arbiter = master_agent
    workers = [FakeWorker(1), FakeWorker(2)]
    for worker in workers:
        agent.pre_fork(worker)
    board, slot = worker_slot(workers[0])
    board.write(slot, 101, WorkerLoad(1, 4))
    board.write(worker_slot(workers[1])[1], 102, WorkerLoad(0, 4))
    assert ask_agent(agent_port(agent), b"backend/server\n") == b"88%\n"
    agent.child_exit(workers[0])  # reaped: its place counts as not reported (no free place) until it is back
    assert ask_agent(agent_port(agent)) == b"50%\n"
    arbiter.LISTENERS = []  # gunicorn's stop closes its listeners before it signals the workers
    assert ask_agent(agent_port(agent)) == b"0%\n"


def worker_slot(worker: FakeWorker) -> tuple[LoadBoard, int]:
    assigned: tuple[LoadBoard, int] = getattr(worker, "agui_load_slot")  # noqa: B009 - set by pre_fork
    return assigned


def test_garbage_agent_send_gets_one_line_and_a_close(master_agent: tuple[MasterAgentCheck, FakeArbiter]) -> None:
    agent, _ = master_agent
    garbage = bytes(range(256)).replace(b"\n", b"").replace(b"\r", b"") * 10  # no line end, under the read cap
    assert ask_agent(agent_port(agent), garbage) == b"0%\n"


def test_a_huge_agent_send_is_cut_off_and_never_stalls_the_responder(
    master_agent: tuple[MasterAgentCheck, FakeArbiter],
) -> None:
    agent, _ = master_agent
    chunk = b"x" * 65536
    connection = socket.create_connection(("127.0.0.1", agent_port(agent)), timeout=5)
    with connection, pytest.raises(OSError):  # past the read cap the responder closes: the sending fails
        for _ in range(1024):  # 64 MiB at most, far beyond any socket buffer
            connection.sendall(chunk)
    assert ask_agent(agent_port(agent)) == b"0%\n"  # and the next check gets its line at once


def test_a_silent_peer_is_closed_after_its_deadline(master_agent: tuple[MasterAgentCheck, FakeArbiter]) -> None:
    agent, _ = master_agent
    with socket.create_connection(("127.0.0.1", agent_port(agent)), timeout=5) as connection:
        connection.settimeout(5)
        received = b""
        while chunk := connection.recv(4096):  # the line, then the end: the responder closed it itself
            received += chunk
    assert received == b"0%\n"


def test_concurrent_agent_connections_are_bounded_and_all_answered(
    master_agent: tuple[MasterAgentCheck, FakeArbiter],
) -> None:
    agent, _ = master_agent
    port = agent_port(agent)
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(MAX_AGENT_CONNECTIONS + 4)]
    try:
        for connection in held:  # every one gets its line, the ones past the cap once a place is free
            assert connection.recv(16) == b"0%\n"
    finally:
        for connection in held:
            connection.close()
    assert ask_agent(port) == b"0%\n"


def test_a_failed_answer_sends_no_line_and_the_responder_goes_on() -> None:
    answers: Iterator[Exception | bytes] = iter([RuntimeError("board unreadable"), b"7%\n"])

    def answer() -> bytes:
        item = next(answers)
        if isinstance(item, Exception):
            raise item
        return item

    responder = AgentResponder(AgentResponder.bind("127.0.0.1", 0), answer)
    responder.start()
    try:
        port = responder.listener.getsockname()[1]
        assert ask_agent(port) == b""  # HAProxy ignores an incomplete line and keeps the weight it has
        assert ask_agent(port) == b"7%\n"
    finally:
        responder.stop()


def test_hooks_built_again_by_a_reload_reach_the_started_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agui_bridge.worker.agent_check._master_check", None)
    first = master_agent_check("127.0.0.1", 9100, 4)
    assert first is not None
    first.board = LoadBoard(2)  # started: a reload (HUP) builds the hooks again without `when_ready`
    assert master_agent_check("127.0.0.1", 9100, 8) is first and first.worker_limit == 8


def test_a_port_that_cannot_be_bound_stops_the_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        agent = MasterAgentCheck("127.0.0.1", taken.getsockname()[1], 4)
        with pytest.raises(SystemExit) as stopped:
            agent.start(FakeArbiter())
    assert stopped.value.code == 1


def test_a_new_master_binds_the_agent_port_beside_the_old_one() -> None:
    """A USR2 upgrade: the new master starts while the old one still answers."""
    old = AgentResponder.bind("127.0.0.1", 0)
    try:
        new = AgentResponder.bind("127.0.0.1", old.getsockname()[1], beside_old_master=True)
        new.close()
    finally:
        old.close()


def test_a_second_bridge_of_the_same_user_cannot_share_the_agent_port() -> None:
    """SO_REUSEPORT would let it bind beside the first and take half of HAProxy's checks."""
    first = AgentResponder.bind("127.0.0.1", 0)
    try:
        with pytest.raises(OSError):
            AgentResponder.bind("127.0.0.1", first.getsockname()[1]).close()
        agent = MasterAgentCheck("127.0.0.1", first.getsockname()[1], 4)
        with pytest.raises(SystemExit):
            agent.start(FakeArbiter())
    finally:
        first.close()


def test_the_agent_port_must_differ_from_the_http_port() -> None:
    with pytest.raises(ConfigError, match="--agent-check-port must differ from --port"):
        check_settings(Settings(port=8000, agent_check_port=8000))


def test_a_host_that_cannot_answer_the_agent_check_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings: Any = Settings(a2a_url="http://127.0.0.1:9/", state_dir=tmp_path, agent_check_port=9100)
    with caplog.at_level(logging.WARNING, logger="agui_bridge.app"):
        create_app(settings)
    assert any("IAC_CODE_AGUI_AGENT_CHECK_PORT=9100" in r.getMessage() for r in caplog.records)
    caplog.clear()
    monkeypatch.setattr("agui_bridge.worker.agent_check._answered_by_master", True)  # a worker of the master
    with caplog.at_level(logging.WARNING, logger="agui_bridge.app"):
        create_app(settings)
    assert not [r for r in caplog.records if "AGENT_CHECK_PORT" in r.getMessage()]


def test_a_worker_reports_every_place_its_stream_cap_counts(tmp_path: Path) -> None:
    settings = Settings(a2a_url="http://127.0.0.1:9/", state_dir=tmp_path, max_thread_streams_per_worker=5)
    service = create_app(settings).extensions[EXTENSION_KEY]
    registry = RunRegistry()
    service.registry = registry  # a registry of its own, not the process's
    assert service.stream_load() == (0, 5, False)  # the thread back-end's cap in this process
    assert registry.reserve(5)  # an admission under way
    release = registry.admit_follower(5)  # a reattach follower
    assert release is not None
    assert service.stream_load() == (2, 5, False)
    service.begin_drain()
    assert service.stream_load() == (2, 5, True)
    release()
    registry.unreserve()
    assert service.stream_load()[0] == 0


def test_a_reaped_worker_releases_its_slot_even_when_the_metrics_clean_up_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("agui_bridge.worker.agent_check._master_check", None)
    started = master_agent_check("127.0.0.1", 9100, 4)
    assert started is not None
    started.board = LoadBoard(2)  # started by `when_ready`
    hooks = gunicorn_settings(Settings(agent_check_port=9100))
    worker = FakeWorker(1)
    hooks["pre_fork"](FakeArbiter(), worker)
    board, slot = worker_slot(worker)
    board.write(slot, 101, WorkerLoad(4, 4))

    def failing_metrics_clean_up(server: object, worker: object) -> None:
        raise OSError("multiprocess directory gone")

    monkeypatch.setattr("agui_bridge.worker.hooks.child_exit", failing_metrics_clean_up)
    with pytest.raises(OSError):
        hooks["child_exit"](FakeArbiter(), worker)
    assert board.read() == []  # its streams no longer count
    assert board.assign(2) == slot


def test_an_unexpected_responder_failure_is_logged_once_and_the_responder_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    responder = AgentResponder(AgentResponder.bind("127.0.0.1", 0), lambda: b"9%\n")
    accept = responder._accept
    failures = iter([RuntimeError("selector state lost")] * 3)

    def accept_failing_at_first() -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        accept()

    monkeypatch.setattr(responder, "_accept", accept_failing_at_first)
    with caplog.at_level(logging.ERROR, logger="agui_bridge.worker.agent_check"):
        responder.start()
        try:
            assert ask_agent(responder.listener.getsockname()[1]) == b"9%\n"  # answered after three failures
        finally:
            responder.stop()
    logged = [record for record in caplog.records if record.exc_info]
    assert len(logged) == 1 and "selector state lost" in caplog.text


@pytest.mark.parametrize(
    ("old_arbiter", "new_arbiter", "stops"),
    [
        pytest.param(FakeArbiter(reexec_pid=4242), FakeArbiter(master_pid=4241), "old", id="the upgrade completes"),
        pytest.param(
            FakeArbiter(reexec_pid=4242), FakeArbiter(master_pid=os.getppid()), "new", id="the upgrade is backed out"
        ),
    ],
)
def test_a_master_that_stops_beside_another_one_leaves_every_check_to_it(
    monkeypatch: pytest.MonkeyPatch, old_arbiter: FakeArbiter, new_arbiter: FakeArbiter, stops: str
) -> None:
    """A USR2 upgrade: both masters listen on the agent port; the stopping one's 0% would take half the checks."""
    monkeypatch.setattr("agui_bridge.worker.agent_check._answered_by_master", False)
    old = MasterAgentCheck("127.0.0.1", 0, 4)
    old.start(old_arbiter)
    new = MasterAgentCheck("127.0.0.1", agent_port(old), 4)
    try:
        new.start(new_arbiter)
        for index, agent in enumerate([old, new]):  # both idle: 100%
            assert agent.board is not None
            for worker in range(2):
                agent.board.write(agent.board.assign(worker) or 0, 100 * index + worker + 1, WorkerLoad(0, 4))
        stopping = old_arbiter if stops == "old" else new_arbiter
        stopping.LISTENERS = []  # gunicorn's stop, on TERM
        port = agent_port(old)

        def every_check_reaches_the_other_master() -> None:
            try:
                lines = [ask_agent(port) for _ in range(20)]
            except OSError as exc:  # queued on the listener as it closed: HAProxy keeps the weight it has
                raise AssertionError(f"a check was cut: {exc}") from exc
            assert lines == [b"100%\n"] * 20

        eventually(every_check_reaches_the_other_master)
    finally:
        for agent in (old, new):
            if agent.responder is not None:
                agent.responder.stop()


def test_a_master_that_stops_alone_answers_zero_until_it_exits(
    master_agent: tuple[MasterAgentCheck, FakeArbiter],
) -> None:
    agent, arbiter = master_agent
    arbiter.LISTENERS = []
    assert agent.responder is not None and agent.keep_listening(arbiter)
    assert [ask_agent(agent_port(agent)) for _ in range(3)] == [b"0%\n"] * 3


@pytest.fixture
def started_check(monkeypatch: pytest.MonkeyPatch) -> MasterAgentCheck:
    """The process's agent check as `when_ready` left it on port 9100 (no socket: the hooks only need its board)."""
    monkeypatch.setattr("agui_bridge.worker.agent_check._master_check", None)
    started = master_agent_check("127.0.0.1", 9100, 4)
    assert started is not None
    started.board = LoadBoard(4)
    return started


def test_a_reload_that_turns_the_agent_check_off_keeps_the_started_one_counting(
    started_check: MasterAgentCheck, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The responder answers until the master exits: its board must keep following the workers."""
    arbiter, old_worker, new_worker = FakeArbiter(), FakeWorker(1), FakeWorker(2)
    gunicorn_settings(Settings(agent_check_port=9100))["pre_fork"](arbiter, old_worker)
    old_board, old_slot = worker_slot(old_worker)
    old_board.write(old_slot, 101, WorkerLoad(4, 4))
    reloaded = gunicorn_settings(Settings(agent_check_port=0, hub_watchdog_ms=0))  # HUP: the hooks built again
    with caplog.at_level(logging.WARNING, logger="fake-arbiter"):
        reloaded["on_reload"](arbiter)
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and "until a restart" in warnings[0] and "127.0.0.1:9100" in warnings[0]

    reloaded["pre_fork"](arbiter, new_worker)  # the new worker gets a slot of the same board
    assert worker_slot(new_worker)[0] is started_check.board
    published: list[object] = []
    monkeypatch.setattr("agui_bridge.worker.process.configure_process", lambda settings: None)
    monkeypatch.setattr("agui_bridge.worker.hooks.post_worker_init", lambda worker: None)
    monkeypatch.setattr("agui_bridge.worker.hooks.publish_load", published.append)
    reloaded["post_worker_init"](new_worker)
    assert published == [new_worker]  # and reports there
    reloaded["child_exit"](arbiter, old_worker)  # the old worker, drained and reaped, stops counting
    assert old_board.read() == []


@pytest.mark.parametrize(
    ("started", "host", "port", "warning"),
    [
        pytest.param(False, "127.0.0.1", 0, None, id="off before and after"),
        pytest.param(True, "127.0.0.1", 9100, None, id="unchanged"),
        pytest.param(False, "127.0.0.1", 9100, "--agent-check-port 9100 needs a restart", id="turned on"),
        pytest.param(True, "127.0.0.1", 0, "answers on 127.0.0.1:9100 until a restart", id="turned off"),
        pytest.param(True, "127.0.0.1", 9200, "now name 127.0.0.1:9200", id="another port"),
        pytest.param(True, "0.0.0.0", 9100, "answers on 127.0.0.1:9100 until a restart", id="another host"),
    ],
)
def test_a_reload_that_changes_the_agent_check_says_a_restart_is_needed(
    monkeypatch: pytest.MonkeyPatch, started: bool, host: str, port: int, warning: str | None
) -> None:
    monkeypatch.setattr("agui_bridge.worker.agent_check._master_check", None)
    if started:
        check = master_agent_check("127.0.0.1", 9100, 4)
        assert check is not None
        check.board = LoadBoard(2)
    message = reload_warning(host, port)
    if warning is None:
        assert message is None
    else:
        assert message is not None and warning in message
