"""Reattach through gunicorn with 4 gevent workers against the demo agent (docs/design.md#reattach).

200 trials, run concurrently in batches: a client is cut at a random event of a run (half of them the
demo's long `[MIXED]` run: reasoning, text, a tool call with progress, an artifact and more text in one
turn; a third a Pipeline run; the rest single-kind runs, among them a slow turn the bridge keeps reading
while nobody is attached), then reattaches on a new connection (any worker) with its last id. The stitched
stream (deduplicated by id) must equal the same scenario read without a cut, event for event apart
from timestamps and generated ids; ids are contiguous; there is exactly one terminal event; the
@ag-ui/client verifier accepts it. Then: the window runs out without a reader (task CANCELED within
window + 2 s, RUN_ERROR CANCELLED replayed), SIGTERM drain of a detached run, and a worker killed
under a detached run (its record is ended by the reader on another worker).
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from agui_bridge.i18n.language import translate
from agui_bridge.protocol.events import ARTIFACT_EVENT, TOOL_PROGRESS_EVENT
from agui_bridge.reattach.format import record_paths
from agui_bridge.reattach.reader import RecordReader
from tests.support.agui_checks import assert_valid_agui_stream, numbered_frames, parse_sse
from tests.support.harness import BridgeServer, bridge_server, new_thread_id, run_body, wait_for_task_state

EVENTS = "/extensions/iac-code/v1/threads/{}/runs/{}/events"
ROS = "invocation-1"
TERMINALS = {"RUN_FINISHED", "RUN_ERROR"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TRIALS = 200
BATCH = 20
#: (name, user text, forwardedProps.iacCode extras)
SCENARIOS: list[tuple[str, str, dict[str, Any]]] = [
    ("mixed", "a [MIXED] run", {}),
    ("pipeline", "sell it", {"runMode": "pipeline"}),
    ("tool", "list files with a tool", {}),
    ("reasoning", "[think] about it", {}),
    ("artifact", "a vpc template please", {}),
    ("slow", "slow [SLOW 1]", {}),
    ("long", "[LONG 80]", {}),
]
MIXED, PIPELINE, SINGLE_KIND = SCENARIOS[0], SCENARIOS[1], SCENARIOS[2:]
#: Most cuts land in the long mixed run, alternating with the Pipeline run; every sixth trial takes the
#: next single-kind scenario, so each one is still cut a few times.
ROTATION = (MIXED, PIPELINE, MIXED, PIPELINE, MIXED, None)


def scenario_of_trial(number: int) -> tuple[str, str, dict[str, Any]]:
    picked = ROTATION[number % len(ROTATION)]
    return picked if picked is not None else SINGLE_KIND[(number // len(ROTATION)) % len(SINGLE_KIND)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_url: str, demo_token: str) -> Iterator[BridgeServer]:
    root = tmp_path_factory.mktemp("reattach")
    with bridge_server(
        demo_url, demo_token, root / "state", root, workers=4, heartbeat_interval=1, reattach_window=10
    ) as running:
        running.root = root  # type: ignore[attr-defined]
        yield running


def normalise(events: list[dict[str, Any]], *, blind: bool = False) -> list[Any]:
    """Timestamps dropped; generated ids (message, tool call, task, run...) renamed by first appearance
    (`blind`: all alike, for the Pipeline, whose two parallel candidates open their messages in either order)."""
    names: dict[str, str] = {}

    class Blind(dict[str, str]):
        def setdefault(self, key: str, default: str | None = None) -> str:
            return "<id>"

    if blind:
        names = Blind()

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items() if k not in ("timestamp", "expiresAt", "createdAt")}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        lowered = key.lower()
        if isinstance(value, str) and (lowered.endswith("id") or lowered.endswith("ids") or lowered == "ts"):
            return names.setdefault(value, f"<id{len(names)}>")
        if isinstance(value, str):  # ids inside text (artifact URIs, echoed task ids)
            return UUID.sub(lambda m: names.setdefault(m.group(0), f"<id{len(names)}>"), value)
        return value

    return [walk(event) for event in events]


def post(server: BridgeServer, body: dict[str, Any]) -> requests.Response:
    session = requests.Session()  # its own connection: gunicorn may hand it to any worker
    response = session.post(server.url, json=body, stream=True, timeout=60)
    assert response.status_code == 200, response.text
    return response


def reattach(server: BridgeServer, thread_id: str, run_id: str, **headers: str) -> requests.Response:
    return requests.get(
        server.url.rstrip("/") + EVENTS.format(thread_id, run_id),
        params={"rosInvocationId": ROS}, headers=headers, stream=True, timeout=60,
    )  # fmt: skip


def body_for(scenario: tuple[str, str, dict[str, Any]], workspace: Path) -> dict[str, Any]:
    _, text, extras = scenario
    return run_body(new_thread_id(), text, workspace, ros_invocation_id=ROS, **extras)


def read_whole(response: requests.Response) -> bytes:
    with response:
        return b"".join(response.iter_content(chunk_size=None))


def cut_at(response: requests.Response, k: int) -> list[tuple[int, bytes]]:
    """Read until k events arrived, keep exactly those k (the rest was lost with the connection), drop it."""
    raw = b""
    try:
        for chunk in response.iter_content(chunk_size=None):
            raw += chunk
            if len(numbered_frames(raw)) >= k:
                break
    finally:
        response.close()
    return numbered_frames(raw)[:k]


def trial(server: BridgeServer, workspace: Path, scenario: tuple[str, str, dict[str, Any]], seed: int,
          reference: dict[str, list[Any]]) -> bytes:  # fmt: skip
    rng = random.Random(seed)
    body = body_for(scenario, workspace)
    length = len(reference[scenario[0]])
    k = rng.randint(1, length - 1)
    kept = cut_at(post(server, body), k)
    assert [position for position, _ in kept] == list(range(1, k + 1))
    rest = read_whole(reattach(server, body["threadId"], body["runId"], **{"Last-Event-ID": str(k)}))
    merged = dict(kept)
    for position, frame in numbered_frames(rest):
        assert position > k, "a reattach shows nothing at or before its cursor"
        assert merged.setdefault(position, frame) == frame
    whole = b"".join(merged[p] for p in sorted(merged))
    events = parse_sse(whole)
    assert sorted(merged) == list(range(1, len(events) + 1)), "ids are contiguous from 1"
    assert sum(1 for e in events if e["type"] in TERMINALS) == 1 and events[-1]["type"] in TERMINALS
    blind = scenario[0] == "pipeline"
    assert normalise(events, blind=blind) == reference[scenario[0]], f"{scenario[0]} cut at {k} differs"
    # and byte for byte what the run itself showed (its whole record, read after the end)
    assert read_whole(reattach(server, body["threadId"], body["runId"])) == whole
    return whole


def assert_mixed(reference: list[Any]) -> None:
    """The mixed run really is one long run of every kind (so the cuts land in all of them)."""
    assert len(reference) >= 60, len(reference)
    kinds = [event.get("name", event["type"]) if event["type"] == "CUSTOM" else event["type"] for event in reference]
    collapsed = [kind for i, kind in enumerate(kinds) if i == 0 or kind != kinds[i - 1]]
    wanted = ["REASONING_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", TOOL_PROGRESS_EVENT,
              "TOOL_CALL_RESULT", "REASONING_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", ARTIFACT_EVENT,
              "TEXT_MESSAGE_CONTENT", "RUN_FINISHED"]  # fmt: skip
    assert [kind for kind in collapsed if kind in wanted] == wanted, collapsed
    assert kinds.count(TOOL_PROGRESS_EVENT) == 4


def test_200_cut_runs_reattach_on_any_worker_and_stitch_to_the_uncut_stream(server: BridgeServer) -> None:
    workspace = server.root  # type: ignore[attr-defined]
    reference = {}
    for scenario in SCENARIOS:
        uncut = read_whole(post(server, body_for(scenario, workspace)))
        events = assert_valid_agui_stream(uncut)
        reference[scenario[0]] = normalise(events, blind=scenario[0] == "pipeline")
    assert_mixed(reference["mixed"])
    seeds = [(scenario_of_trial(i), 1000 + i) for i in range(TRIALS)]
    counts = Counter(scenario[0] for scenario, _ in seeds)
    assert counts["mixed"] == TRIALS // 2 and counts["pipeline"] > TRIALS // 4
    assert all(counts[scenario[0]] >= 5 for scenario in SINGLE_KIND)
    stitched: list[bytes] = []
    with ThreadPoolExecutor(max_workers=BATCH) as pool:
        for start in range(0, TRIALS, BATCH):
            batch = seeds[start : start + BATCH]
            stitched += pool.map(lambda item: trial(server, workspace, item[0], item[1], reference), batch)
    for number, whole in enumerate(stitched):
        # Every stitched stream is valid AG-UI; a sample goes to the session's @ag-ui/client verifier.
        assert_valid_agui_stream(whole, capture=number % 10 == 0)


def test_two_readers_on_other_workers_follow_a_live_run_to_its_end(server: BridgeServer) -> None:
    workspace = server.root  # type: ignore[attr-defined]
    body = body_for(("slow", "slow [SLOW 2]", {}), workspace)
    owner = post(server, body)
    with ThreadPoolExecutor(max_workers=2) as pool:
        readers = [pool.submit(lambda: read_whole(reattach(server, body["threadId"], body["runId"]))) for _ in "ab"]
        shown = read_whole(owner)
        results = [reader.result(30) for reader in readers]
    expected = b"".join(frame for _, frame in numbered_frames(shown))
    assert_valid_agui_stream(expected, expect_terminal="success")
    assert results == [expected, expected]


def test_a_resume_cut_after_its_answer_was_accepted_shows_the_tool_result_on_reattach(server: BridgeServer) -> None:
    workspace = server.root  # type: ignore[attr-defined]
    first = body_for(("permission", "please write file", {}), workspace)
    interrupt = assert_valid_agui_stream(read_whole(post(server, first)), expect_terminal="interrupt")[-1]
    answer = {"interruptId": interrupt["outcome"]["interrupts"][0]["id"], "status": "resolved",
              "payload": {"decision": "allow_once"}}  # fmt: skip
    resume = run_body(first["threadId"], "", workspace, ros_invocation_id=ROS)
    resume["messages"], resume["resume"] = [], [answer]
    kept = cut_at(post(server, resume), 2)  # RUN_STARTED, then the session event: the kernel took the answer
    assert b"iac-code.session.v1" in kept[-1][1]
    rest = read_whole(reattach(server, first["threadId"], resume["runId"], **{"Last-Event-ID": "2"}))
    events = assert_valid_agui_stream(b"".join(frame for _, frame in kept) + rest, expect_terminal="success")
    assert any(e["type"] == "TOOL_CALL_RESULT" for e in events)


def test_no_reattach_cancels_within_the_window_and_replays_run_error_cancelled(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    window_s = 2.0
    with bridge_server(
        demo_url, demo_token, tmp_path / "state", tmp_path, workers=4, heartbeat_interval=0.2, reattach_window=window_s
    ) as server:
        body = body_for(("slow", "slow [SLOW 30]", {}), tmp_path)
        response = post(server, body)
        raw = b""
        for chunk in response.iter_content(chunk_size=None):
            raw += chunk
            if any(e.get("name") == "iac-code.session.v1" for e in parse_sse(raw)):
                break
        task_id = next(e for e in parse_sse(raw) if e.get("name") == "iac-code.session.v1")["value"]["taskId"]
        response.close()
        left = time.monotonic()
        state = wait_for_task_state(demo_url, demo_token, task_id, "TASK_STATE_CANCELED", timeout_s=window_s + 2.5)
        assert state == "TASK_STATE_CANCELED"
        assert time.monotonic() - left <= window_s + 2.0 + 0.3  # the server noticed the cut within a heartbeat
        replay = read_whole(reattach(server, body["threadId"], body["runId"]))
        events = assert_valid_agui_stream(replay, expect_terminal="RUN_ERROR")
        assert events[-1]["code"] == "CANCELLED"
        metrics = requests.get(server.url + "metrics", timeout=5).text
        assert "agui_runs_detached_total 1.0" in metrics and "agui_runs_window_expired_total 1.0" in metrics
        assert "agui_reattaches_total 1.0" in metrics


def detached_run(server: BridgeServer, workspace: Path) -> tuple[dict[str, Any], int]:
    """A slow run whose client left after a few events; returns its body and the last id seen."""
    body = body_for(("slow", "slow [SLOW 30]", {}), workspace)
    kept = cut_at(post(server, body), 3)
    time.sleep(0.5)  # the owner notices the cut at its next heartbeat and detaches
    return body, kept[-1][0]


def test_drain_ends_a_detached_run_with_its_recorded_run_error(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    state = tmp_path / "state"
    server = BridgeServer(
        demo_url, demo_token, state, tmp_path, workers=2, heartbeat_interval=0.2, reattach_window=60
    ).start()
    try:
        body, last = detached_run(server, tmp_path)
    finally:
        server.stop(signal.SIGTERM)
    with bridge_server(demo_url, demo_token, state, tmp_path, workers=2) as restarted:
        rest = read_whole(reattach(restarted, body["threadId"], body["runId"], **{"Last-Event-ID": str(last)}))
    events = parse_sse(rest)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "CANCELLED"
    assert events[-1]["message"] == translate("server_shutdown", "en")
    assert sum(1 for e in events if e["type"] in TERMINALS) == 1


def test_a_killed_worker_s_detached_run_is_ended_by_its_reader(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    with bridge_server(
        demo_url, demo_token, tmp_path / "state", tmp_path, workers=2, heartbeat_interval=0.2, reattach_window=60
    ) as server:
        body, last = detached_run(server, tmp_path)
        record, _, _ = record_paths(tmp_path / "state", body["threadId"], body["runId"])
        reader = RecordReader(record)
        reader.poll()
        assert reader.head is not None
        os.kill(int(reader.head.owner.split(":")[1]), signal.SIGKILL)
        response = reattach(server, body["threadId"], body["runId"], **{"Last-Event-ID": str(last)})
        assert response.status_code == 200
        events = parse_sse(read_whole(response))
    assert events and events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "CANCELLED"
    assert events[-1]["message"] == translate("run_worker_lost", "en")
    assert sum(1 for e in events if e["type"] in TERMINALS) == 1
