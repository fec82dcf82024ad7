"""`agui-bridge chat` across dropped connections, against a tiny local fake bridge.

The fake serves `POST /` (a run's numbered events, then a cut: a clean end of the body or a broken
chunked transfer) and the reattach route (a replay after `Last-Event-ID`, deliberately starting a
little early so the client must deduplicate), and records what the client sent.
"""

from __future__ import annotations

import io
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from agui_bridge.chat.attach import MAX_RETRY_AFTER_S, RetryPolicy, RunFollower, RunRef, events_url, retry_after_s
from agui_bridge.chat.client import run_chat
from agui_bridge.chat.sse import ChatUsageError, parse_event_id
from agui_bridge.cli.command import build_parser
from agui_bridge.protocol.sse_parser import SseParser

TOKEN = "attach-unit-token"
THREAD, ROS = "thread-a", "ros-a"
REAL_DELAY = RetryPolicy.delay  # the tests below run with a fast backoff


def run_events(run_id: str, *, terminal: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": THREAD, "runId": run_id}]
    events.append({"type": "CUSTOM", "name": "iac-code.session.v1", "value": {"executionId": "exec-1"}})
    events.append({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})
    events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"w{n} "} for n in range(8)]
    events.append({"type": "TEXT_MESSAGE_END", "messageId": "m1"})
    events.append(terminal or {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run_id})
    return events


def frame(position: int | None, event: dict[str, Any]) -> bytes:
    head = f"id: {position}\r\n" if position is not None else ""
    return f"{head}data: {json.dumps(event)}\r\n\r\n".encode()


@dataclass
class Plan:
    """What the fake does; tests change it before the client runs."""

    cut_after: int = 5  # events sent by POST before the cut
    chunked_break: bool = False  # break the chunked transfer instead of ending the body cleanly
    numbered: bool = True
    replay_overlap: int = 2  # the replay starts this many events before the cursor
    attach_status: int = 200
    attach_cuts: list[int] = field(default_factory=list)  # successive reattaches cut after this many events
    terminal: dict[str, Any] | None = None
    gets: list[dict[str, str | None]] = field(default_factory=list)
    run_id: str = ""
    query_only: bool = False  # a bridge that reads the invocation id from the query only
    retry_after: str | None = None  # sent with a refused reattach


class FakeBridge(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    plan: Plan

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet
        return

    def _start_sse(self, chunked: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
        self.end_headers()

    def _send(self, frames: list[bytes], chunked: bool, *, broken: bool) -> None:
        for data in frames:
            if chunked:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            else:
                self.wfile.write(data)
            self.wfile.flush()
        if broken:
            self.wfile.write(b"ff\r\npartial")  # a chunk that never completes
        elif chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        plan = self.plan
        plan.run_id = body["runId"]
        events = run_events(plan.run_id, terminal=plan.terminal)
        frames = [frame(n if plan.numbered else None, e) for n, e in enumerate(events, 1)][: plan.cut_after]
        self._start_sse(plan.chunked_break)
        self._send(frames, plan.chunked_break, broken=plan.chunked_break)

    def do_GET(self) -> None:
        plan = self.plan
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        header = None if plan.query_only else self.headers.get("Ros-Invocation-Id")
        queried: list[str | None] = [*query.get("rosInvocationId", []), None]
        ros = header or queried[0]
        plan.gets.append(
            {
                "path": url.path,
                "ros": ros,
                "in": "header" if header else "query",
                "last": self.headers.get("Last-Event-ID"),
                "auth": self.headers.get("Authorization"),
            }
        )
        run_id = url.path.split("/")[-2]
        if ros is None:  # as the bridge answers a reattach without rosInvocationId
            error = {"code": "INVALID_INPUT", "message": "rosInvocationId is required.", "field": "/rosInvocationId"}
            payload = json.dumps({"error": error}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        if plan.attach_status != 200 or ros != ROS:
            status = plan.attach_status if plan.attach_status != 200 else 404
            payload = json.dumps({"error": {"code": "RUN_NOT_FOUND", "message": "No such run."}}).encode()
            self.send_response(status)
            if plan.retry_after is not None:
                self.send_header("Retry-After", plan.retry_after)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        after = int(self.headers.get("Last-Event-ID") or 0)
        events = run_events(run_id, terminal=plan.terminal)
        start = max(0, after - plan.replay_overlap)
        frames = [frame(n, e) for n, e in enumerate(events, 1)][start:]
        cut = plan.attach_cuts.pop(0) if plan.attach_cuts else None
        self._start_sse(False)
        self._send(frames[:cut] if cut is not None else frames, False, broken=False)


@pytest.fixture
def bridge() -> Iterator[tuple[str, Plan]]:
    plan = Plan()
    handler = type("Handler", (FakeBridge,), {"plan": plan})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", plan
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RetryPolicy, "delay", lambda self, attempt: 0.01)


def chat(url: str, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["chat", "--url", url, "--cwd", "/tmp", "--ros", ROS, *argv])
    out, err = io.StringIO(), io.StringIO()
    code = run_chat(args, {"IAC_CODE_AGUI_AUTH_TOKEN": TOKEN}, io.StringIO(), out, err)
    return code, out.getvalue(), err.getvalue()


def json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("chunked_break", [False, True])
def test_a_cut_stream_is_reattached_and_continues_without_duplicates(
    bridge: tuple[str, Plan], chunked_break: bool
) -> None:
    url, plan = bridge
    plan.chunked_break = chunked_break
    code, out, err = chat(url, "--thread", THREAD, "hello")
    assert code == 0, err
    # the stderr notice starts a new line on the terminal; the text itself is complete and once
    assert out.replace("\n", "").count("w0 w1 w2 w3 w4 w5 w6 w7") == 1
    assert "reattaching to run" in err and "reattached to run" in err
    assert TOKEN not in out + err
    [get] = plan.gets
    assert get["last"] == "5" and get["ros"] == ROS and get["auth"] == f"Bearer {TOKEN}"
    assert get["path"] == f"/extensions/iac-code/v1/threads/{THREAD}/runs/{plan.run_id}/events"
    assert get["in"] == "header"  # the run's credential stays out of the URL


def test_a_bridge_without_the_header_form_gets_the_query_form(bridge: tuple[str, Plan]) -> None:
    url, plan = bridge
    plan.query_only = True
    code, out, err = chat(url, "--thread", THREAD, "hello")
    assert code == 0, err
    assert out.replace("\n", "").count("w0 w1 w2 w3 w4 w5 w6 w7") == 1
    refused, accepted = plan.gets
    assert refused["ros"] is None and (accepted["ros"], accepted["in"]) == (ROS, "query")


def test_falling_back_to_the_query_form_warns_once_that_the_credential_goes_in_the_url(
    bridge: tuple[str, Plan],
) -> None:
    url, plan = bridge
    plan.query_only = True
    plan.attach_cuts = [2]  # a second reattach keeps the query form without warning again
    code, _, err = chat(url, "--thread", THREAD, "hello")
    assert code == 0, err
    assert [g["in"] for g in plan.gets if g["ros"] is not None] == ["query", "query"]
    warnings = [line for line in err.splitlines() if "rosInvocationId in the URL" in line]
    assert len(warnings) == 1 and "Ros-Invocation-Id" in warnings[0]
    assert ROS not in err


def test_json_mode_prints_each_event_once_in_order(bridge: tuple[str, Plan]) -> None:
    url, plan = bridge
    plan.cut_after, plan.replay_overlap = 3, 0
    plan.attach_cuts = [4, 1]  # two more cuts during the replay: progress resets the retry budget
    code, out, err = chat(url, "--json", "--thread", THREAD, "--reattach-retries", "1", "hello")
    assert code == 0, err
    events = json_lines(out)
    assert events == run_events(plan.run_id)
    assert [g["last"] for g in plan.gets] == ["3", "7", "8"]


def test_attach_follows_a_run_started_elsewhere_from_its_first_event(bridge: tuple[str, Plan]) -> None:
    url, plan = bridge
    code, out, err = chat(url, "--json", "--attach", f"{THREAD}/run-elsewhere")
    assert code == 0, err
    assert json_lines(out) == run_events("run-elsewhere")
    path = plan.gets[0]["path"]
    assert plan.gets[0]["last"] is None and path is not None and path.endswith("/runs/run-elsewhere/events")


def test_a_cancelled_run_seen_after_a_reattach_keeps_exit_status_3(bridge: tuple[str, Plan]) -> None:
    url, plan = bridge
    plan.terminal = {"type": "RUN_ERROR", "code": "CANCELLED", "message": "Cancelled."}
    code, _, err = chat(url, "--thread", THREAD, "hello")
    assert code == 3 and "CANCELLED" in err


def test_a_4xx_on_reattach_is_final_and_exits_2(bridge: tuple[str, Plan]) -> None:
    url, plan = bridge
    plan.attach_status = 410
    code, _, err = chat(url, "--thread", THREAD, "hello")
    assert code == 2
    assert "cannot reattach" in err and "HTTP 410 RUN_NOT_FOUND" in err
    assert len(plan.gets) == 1


def test_retries_are_bounded(bridge: tuple[str, Plan]) -> None:
    url, plan = bridge
    plan.attach_status = 503
    code, _, err = chat(url, "--thread", THREAD, "--reattach-retries", "3", "hello")
    assert code == 2 and "gave up after 3 reattach attempts" in err
    assert len(plan.gets) == 3
    assert err.count("reattaching to run") == 3


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 0 ", 0.0),
        ("86400", MAX_RETRY_AFTER_S),  # a server cannot park the client for a day
        ("Wed, 02 Dec 2026 06:00:10 GMT", 10.0),  # an HTTP date, from `now`
        ("Wed, 02 Dec 2026 05:00:00 GMT", 0.0),  # already past
        ("", None),
        (None, None),
        ("soon", None),
        ("-5", None),
        ("\u0667", None),  # a non-ASCII digit is no delay-seconds
    ],
)
def test_retry_after_reads_seconds_and_http_dates_within_a_bound(value: str | None, seconds: float | None) -> None:
    now = 1796191200.0  # Wed, 02 Dec 2026 06:00:00 GMT
    assert retry_after_s(value, now) == seconds


def test_a_503_with_retry_after_is_waited_out_before_the_next_reattach(bridge: tuple[str, Plan]) -> None:
    """The follower cap says "later" with 503 + Retry-After: the follower waits that long, not its backoff."""
    import requests

    url, plan = bridge
    plan.attach_status, plan.retry_after = 503, "7"
    waits: list[float] = []
    follower = RunFollower(
        requests.Session(),
        url,
        RunRef(THREAD, "run-capped", ROS),
        headers=lambda: {"Authorization": f"Bearer {TOKEN}"},
        notify=lambda line: None,
        policy=RetryPolicy(attempts=2),
        sleep=waits.append,
    )
    with pytest.raises(ChatUsageError, match="gave up after 2 reattach attempts"):
        list(follower.follow(None))
    assert waits == [7.0, 7.0] and len(plan.gets) == 3


def test_reattach_off_keeps_the_old_behaviour(bridge: tuple[str, Plan]) -> None:
    url, plan = bridge
    code, _, err = chat(url, "--thread", THREAD, "--reattach-retries", "0", "hello")
    assert code == 2 and "without a terminal event" in err and not plan.gets


def test_unnumbered_events_are_not_reattached(bridge: tuple[str, Plan]) -> None:
    url, plan = bridge
    plan.numbered = False
    code, _, err = chat(url, "--thread", THREAD, "hello")
    assert code == 2 and "does not number its events" in err and not plan.gets


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--attach", "no-slash"), "THREAD/RUN"),
        (("--attach", "a/b/c"), "THREAD/RUN"),
        (("--attach", "t/r", "hello"), "not both"),
        (("--attach", "/r"), "threadId of --attach"),
        (("--reattach-retries", "99", "hello"), "--reattach-retries"),
    ],
)
def test_bad_attach_options_exit_2(argv: tuple[str, ...], needle: str) -> None:
    code, _, err = chat("http://127.0.0.1:9/", *argv)
    assert code == 2 and needle in err


def test_attach_needs_the_ros_invocation_id() -> None:
    args = build_parser().parse_args(["chat", "--attach", "t/r"])
    err = io.StringIO()
    assert run_chat(args, {}, io.StringIO(), io.StringIO(), err) == 2
    assert "--ros" in err.getvalue()


def test_record_ids_become_positions_across_split_chunks_and_line_ends() -> None:
    parser = SseParser()
    stream = b': heartbeat\r\n\r\nid: 1\r\ndata: {"a":\r\ndata: 1}\r\n\r\nid: 2\rdata: x\r\rdata: no-id\n\nid: 3\n'
    records = [r for i in range(len(stream)) for r in parser.feed(stream[i : i + 1])]
    positions = [parse_event_id(r.event_id) if r.event_id is not None else None for r in records]
    assert list(zip(positions, [r.data for r in records], strict=True)) == [
        (1, b'{"a":\n1}'),
        (2, b"x"),
        (None, b"no-id"),
    ]  # the unterminated `id: 3` record is not read: the client never closes the parser, a reattach replays it
    assert [parse_event_id(v) for v in (b" 7", b"0", b"-1", b"x", b"1" * 19)] == [7, None, None, None, None]


def test_events_url_quotes_ids_and_never_expands_them() -> None:
    ref = RunRef("t/../x", "r?y", "ros&z=1")
    url = events_url("http://h/base/", ref)
    assert url == "http://h/base/extensions/iac-code/v1/threads/t%2F..%2Fx/runs/r%3Fy/events"  # no credential
    assert (
        events_url("http://h/base/", ref, ros_in_query=True)
        == "http://h/base/extensions/iac-code/v1/threads/t%2F..%2Fx/runs/r%3Fy/events?rosInvocationId=ros%26z%3D1"
    )
    assert [REAL_DELAY(RetryPolicy(), n) for n in (1, 2, 5, 9)] == [0.5, 1, 8, 8]


def test_chat_never_goes_through_proxy_variables(bridge: tuple[str, Plan], monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy on loopback named by every proxy variable: chat's POST and reattach go to the bridge directly."""
    proxy = socket.create_server(("127.0.0.1", 0))
    proxied: list[int] = []

    def refuse() -> None:  # close at once, so a proxied request fails fast instead of waiting
        while True:
            try:
                connection, _ = proxy.accept()
            except OSError:
                return  # the test closed the listener
            proxied.append(1)
            connection.close()

    accepter = threading.Thread(target=refuse, daemon=True)
    accepter.start()
    proxy_url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy_url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    url, plan = bridge
    try:
        code, _out, err = chat(url, "--thread", THREAD, "hello")
    finally:
        proxy.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (Linux)
        proxy.close()
        accepter.join(timeout=5)
    assert code == 0, err
    assert len(plan.gets) == 1 and not proxied
