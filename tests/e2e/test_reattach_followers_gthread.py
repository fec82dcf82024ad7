"""Reattach followers on gunicorn gthread hold host threads, so they count in the stream cap
(docs/design.md#reattach): a run and more followers than the cap leave threads for `/health` and `POST /`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import requests

from tests.support.harness import HOST_THREADS, WsgiHost, new_thread_id, run_body

EVENTS = "/extensions/iac-code/v1/threads/{}/runs/{}/events"
ROS = "invocation-1"  # run_body's rosInvocationId
#: deploy/gunicorn-gthread.conf.py keeps two host threads spare.
STREAM_CAP = HOST_THREADS - 2
#: Liveness only: a host with every thread held by a stream never answers these.
ANSWER_DEADLINE_S = 10.0


@contextlib.contextmanager
def gthread_host(root: Path, demo_url: str, demo_token: str) -> Iterator[WsgiHost]:
    host = WsgiHost("gthread", demo_url, demo_token, root / "state", root, IAC_CODE_AGUI_REATTACH_WINDOW="5")
    host.start()
    try:
        yield host
    finally:
        host.stop()


def test_followers_beyond_the_stream_cap_get_503_and_leave_threads_for_health_and_runs(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    with gthread_host(tmp_path, demo_url, demo_token) as host:
        thread_id = new_thread_id()
        body = run_body(thread_id, "slow [SLOW 4]", tmp_path)
        with contextlib.ExitStack() as streams:
            owner = streams.enter_context(host.post(body))
            assert owner.status_code == 200
            url = host.url.rstrip("/") + EVENTS.format(thread_id, body["runId"])
            statuses = []
            for _ in range(HOST_THREADS - 1):  # the run and followers for every other host thread
                follower = streams.enter_context(
                    requests.get(url, params={"rosInvocationId": ROS}, stream=True, timeout=ANSWER_DEADLINE_S)
                )
                statuses.append(follower.status_code)
            assert statuses.count(200) == STREAM_CAP - 1, statuses
            assert statuses.count(503) == HOST_THREADS - STREAM_CAP, statuses
            assert requests.get(host.url + "health", timeout=ANSWER_DEADLINE_S).status_code == 200
            other = host.post_json(run_body(new_thread_id(), "hello", tmp_path))
            assert other.status_code == 503 and other.headers["Retry-After"] == "5"
