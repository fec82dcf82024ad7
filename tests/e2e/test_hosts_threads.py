"""The bridge on WSGI hosts other than gunicorn+gevent (deploy/README.md "Other WSGI hosts").

Each host runs `wsgi:app` twice (two processes, one thread pool each) over one state directory, as
several workers or several host processes share it, and each promise of the production path is
checked through real HTTP: a normal turn, an interrupt resumed by the other process, events reaching
the client as they are produced (no host buffering), heartbeats, a disconnect that cancels the A2A task,
THREAD_BUSY across processes, and the thread back-end's stream cap (503 + Retry-After).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from agui_bridge.protocol.sse_parser import SseParser
from agui_bridge.testing import answer, resume_input
from tests.support.agui_checks import assert_valid_agui_stream, event_types, sse_comments
from tests.support.eventually import eventually
from tests.support.harness import (
    APACHE_USER,
    WSGI_HOSTS,
    StreamReader,
    WsgiHost,
    apache_unavailable,
    custom,
    new_thread_id,
    read_sse_until,
    run_body,
    wait_for_task_state,
)

pytestmark = pytest.mark.e2e

HEARTBEAT_S = 0.3
#: Loose bound on the delay between the bridge writing an event and the client reading it. Anything a
#: host held back would show up as a delay of at least one gap of the slow turn (0.5 s here).
MAX_LAG_S = 0.45
CLIENT_TOKEN = "client-" + secrets.token_urlsafe(12)
SLOW_GAP_S = 3 / 6  # "slow [SLOW 3]": six deltas, one every 0.5 s


class Pair:
    def __init__(self, a: WsgiHost, b: WsgiHost, root: Path) -> None:
        self.a, self.b, self.root = a, b, root


@contextlib.contextmanager
def host_root(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The allowed workspace root and the state directory's parent. httpd's children run as nobody when
    the tests run as root, so Apache gets a directory they can reach and a state directory they own."""
    if kind != "apache":
        yield tmp_path_factory.mktemp(kind)
        return
    reason = apache_unavailable()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="agui-apache-"))
    try:
        root.chmod(0o755)
        (root / "state").mkdir()
        if os.geteuid() == 0:
            user = pwd.getpwnam(APACHE_USER)
            os.chown(root / "state", user.pw_uid, user.pw_gid)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module", params=WSGI_HOSTS)
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, demo_url: str, demo_token: str
) -> Iterator[Pair]:
    kind = request.param
    with host_root(kind, tmp_path_factory) as root:
        yield from _pair(kind, root, demo_url, demo_token)


def _pair(kind: str, root: Path, demo_url: str, demo_token: str) -> Iterator[Pair]:
    state = root / "state"
    auth = {"IAC_CODE_AGUI_AUTH_TOKEN": CLIENT_TOKEN}
    a = WsgiHost(kind, demo_url, demo_token, state, root, IAC_CODE_AGUI_HEARTBEAT_INTERVAL_S=str(HEARTBEAT_S), **auth)
    b = WsgiHost(kind, demo_url, demo_token, state, root, IAC_CODE_AGUI_MAX_THREAD_STREAMS="1", **auth)
    a.start()
    try:
        b.start()
        try:
            yield Pair(a, b, root)
        finally:
            b.stop()
    finally:
        a.stop()


def timed_events(response: requests.Response) -> list[tuple[float, dict[str, Any]]]:
    """Every event with the wall-clock time its last byte was read."""
    parser = SseParser()
    out: list[tuple[float, dict[str, Any]]] = []
    for chunk in response.iter_content(chunk_size=None):
        arrived = time.time()
        out.extend((arrived, json.loads(message.data)) for message in parser.feed(chunk))
    return out


#: What each host says in its Server header (uWSGI's router sends none).
SERVER_HEADER = {"gthread": "gunicorn", "waitress": "waitress", "uwsgi": None, "apache": "Apache/2"}


def test_a_normal_turn(pair: Pair) -> None:
    server = requests.get(pair.a.url + "health", timeout=5).headers.get("Server")
    expected = SERVER_HEADER[pair.a.kind]
    assert (server is None) if expected is None else (server or "").startswith(expected), server
    events = pair.a.run(run_body(new_thread_id(), "say hi", pair.root), expect="success")
    assert "TEXT_MESSAGE_CONTENT" in event_types(events)
    assert custom(events, "iac-code.session.v1")[0]["value"]["taskId"]
    assert events[-1]["usage"]


def test_the_bearer_token_reaches_the_app(pair: Pair) -> None:
    """The host passes Authorization on (mod_wsgi drops it unless WSGIPassAuthorization is on)."""
    body = run_body(new_thread_id(), "hi", pair.root)
    anonymous = requests.post(pair.a.url, json=body, timeout=30)
    assert (anonymous.status_code, anonymous.json()["error"]["code"]) == (401, "UNAUTHORIZED")
    assert pair.a.post_json(body).status_code == 200


def test_an_interrupt_is_resumed_by_the_other_process(pair: Pair) -> None:
    thread_id = new_thread_id()
    first = pair.a.run(run_body(thread_id, "please write file x.yaml", pair.root), expect="interrupt")
    [permission] = first[-1]["outcome"]["interrupts"]
    assert permission["reason"] == "tool_call"
    body = resume_input(thread_id, pair.root, [answer(permission, {"decision": "allow_once"})])
    second = pair.b.run(body, expect="success")
    results = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert results and results[0]["toolCallId"] == permission["toolCallId"]


def test_events_arrive_as_they_are_produced(pair: Pair) -> None:
    with pair.a.post(run_body(new_thread_id(), "slow [SLOW 3]", pair.root)) as response:
        assert response.status_code == 200
        timed = timed_events(response)
    deltas = [(arrived, event) for arrived, event in timed if event["type"] == "TEXT_MESSAGE_CONTENT"]
    assert [e["delta"] for _, e in deltas] == [f"slow chunk {i}. " for i in range(1, 7)]
    # The bridge stamps each event when it writes it: the host adds whatever lies between that and our read.
    lags = [arrived - event["timestamp"] / 1000 for arrived, event in deltas]
    # The demo sends a delta every SLOW_GAP_S: arrivals must keep that rhythm, not come in a burst.
    drift = [abs(arrived - deltas[0][0] - i * SLOW_GAP_S) for i, (arrived, _) in enumerate(deltas)]
    print(f"{pair.a.kind}: write->read lags (s) {[round(x, 3) for x in lags]}, drift {[round(x, 3) for x in drift]}")
    assert max(lags) < MAX_LAG_S, lags
    assert max(drift) < MAX_LAG_S, drift
    assert timed[-1][1]["type"] == "RUN_FINISHED"


def test_heartbeats_fill_the_silences(pair: Pair) -> None:
    with pair.a.post(run_body(new_thread_id(), "slow [SLOW 2.4]", pair.root)) as response:
        raw = b"".join(response.iter_content(chunk_size=None))
    assert sse_comments(raw).count("heartbeat") >= 3
    assert_valid_agui_stream(raw, expect_terminal="success")


def test_a_disconnect_cancels_the_task_and_frees_the_thread(pair: Pair, demo_url: str, demo_token: str) -> None:
    thread_id = new_thread_id()
    response = pair.a.post(run_body(thread_id, "slow [SLOW 30]", pair.root))
    _, events = read_sse_until(response, lambda evs: bool(custom(evs, "iac-code.session.v1")))
    task_id = custom(events, "iac-code.session.v1")[0]["value"]["taskId"]
    response.close()
    assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED", 10) == "TASK_STATE_CANCELED"
    deadline = time.monotonic() + 10
    while True:  # the lease is released when the stream's cleanup has run
        status = pair.b.post_json(run_body(thread_id, "hi", pair.root))
        if status.status_code != 409 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status.status_code == 200, status.text
    assert_valid_agui_stream(status.content, expect_terminal="success")


def test_thread_busy_across_processes(pair: Pair) -> None:
    thread_id = new_thread_id()
    running = StreamReader(pair.a.post(run_body(thread_id, "slow [SLOW 3]", pair.root)))
    running.until(lambda evs: bool(evs))
    refused = pair.b.post_json(run_body(thread_id, "hi", pair.root))
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "THREAD_BUSY")
    assert_valid_agui_stream(running.rest(), expect_terminal="success")
    running.response.close()


def test_streams_beyond_the_thread_cap_get_503(pair: Pair) -> None:
    running = StreamReader(pair.b.post(run_body(new_thread_id(), "slow [SLOW 3]", pair.root)))
    running.until(lambda evs: bool(evs))
    refused = pair.b.post_json(run_body(new_thread_id(), "hi", pair.root))
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
    assert refused.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
    assert requests.get(pair.b.url + "health", timeout=5).status_code == 200  # a thread is still free
    pair.a.run(run_body(new_thread_id(), "hi", pair.root), expect="success")  # the other process has room
    assert_valid_agui_stream(running.rest(), expect_terminal="success")
    running.response.close()


def assert_connection_refused(port: int) -> None:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return
    raise AssertionError("a new connection was still accepted")


def assert_new_run_gets_503(url: str, root: Path) -> None:
    try:
        refused = requests.post(url, json=run_body(new_thread_id(), "hi", root), timeout=10)
    except requests.ConnectionError as exc:
        raise AssertionError(f"no answer while draining: {exc}") from None
    assert refused.status_code == 503, (refused.status_code, refused.text[:300])
    assert refused.headers["Retry-After"] == "5"
    assert refused.json()["error"]["code"] == "SERVICE_UNAVAILABLE"


@pytest.mark.parametrize("kind", ["gthread", "waitress-drain"])
def test_sigterm_drains(kind: str, tmp_path: Path, demo_url: str, demo_token: str) -> None:
    """SIGTERM to gunicorn gthread or deploy/waitress_serve.py: the open stream ends with RUN_ERROR
    CANCELLED, its A2A task is cancelled, a new connection meanwhile is refused (gthread: gunicorn closes its
    socket) or a new run gets 503 + Retry-After (waitress keeps accepting), and the host exits
    (docs/operations.md#restarts)."""
    host = WsgiHost(kind, demo_url, demo_token, tmp_path / "state", tmp_path, IAC_CODE_AGUI_GRACEFUL_TIMEOUT="12")
    host.start()
    try:
        host.run(run_body(new_thread_id(), "say hi", tmp_path), expect="success")
        response = host.post(run_body(new_thread_id(), "slow [SLOW 30]", tmp_path))
        reader = StreamReader(response)
        events = reader.until(lambda evs: bool(custom(evs, "iac-code.session.v1")))
        task_id = custom(events, "iac-code.session.v1")[0]["value"]["taskId"]
        assert host.process is not None
        host.process.send_signal(signal.SIGTERM)
        if kind == "gthread":  # gunicorn closes its listening socket at once
            eventually(lambda: assert_connection_refused(host.port), timeout_s=10)
        else:  # waitress keeps accepting while the bridge drains
            eventually(lambda: assert_new_run_gets_503(host.url, tmp_path), timeout_s=10)
        events = assert_valid_agui_stream(reader.rest(), expect_terminal="RUN_ERROR")
        assert events[-1]["code"] == "CANCELLED"
        assert wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
        assert host.process.wait(15) == 0
    finally:
        host.stop()
