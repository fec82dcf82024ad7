"""Every demo scenario through the JavaScript clients people use, against one gunicorn bridge.

* ``@ag-ui/client`` 1.0 ``HttpAgent.runAgent`` with a full subscriber: its history goes back on every
  run, each resume is a new ``runAgent`` with ``resume`` answered from the interrupt's
  ``responseSchema``.
* ``@copilotkit/runtime`` relaying to the bridge (its ``CopilotRuntime`` holding an ``HttpAgent``),
  driven by ``@copilotkit/core``'s ``ProxiedCopilotRuntimeAgent`` over the runtime's REST routes, and
  its ``connect`` replay on a fresh client.
* ``clients/typescript/reattaching-http-agent.ts`` through a proxy that cuts the stream mid-run, and
  its ``connectAgent`` following each run afresh; CopilotKit's runtime holding it, cut from the bridge.

One Node process per client plays every scenario (``drive.mjs``); each test reads its scenario's line.
The driver compares each run's subscriber events with the events on the wire to that client and
records every ``console.warn``/``console.error``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.interop.harness import BY_NAME, SCENARIOS, Bridge, Scenario, drive, interop_bridge, node_or_skip, run_outcome
from tests.support.cutting_proxy import cutting_proxy

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def node() -> str:
    return node_or_skip()


@pytest.fixture(scope="module")
def bridge(node: str, tmp_path_factory: pytest.TempPathFactory, demo_url: str, demo_token: str) -> Iterator[Bridge]:
    with interop_bridge(tmp_path_factory.mktemp("interop"), demo_url, demo_token) as bridge:
        yield bridge


def play(node: str, bridge: Bridge, client: str) -> dict[str, dict[str, Any]]:
    return drive(node, client, bridge.server.url, bridge.token, bridge.workspace, [s.job() for s in SCENARIOS])


@pytest.fixture(scope="module")
def httpagent(node: str, bridge: Bridge) -> dict[str, dict[str, Any]]:
    return play(node, bridge, "httpagent")


@pytest.fixture(scope="module")
def copilotkit(node: str, bridge: Bridge) -> dict[str, dict[str, Any]]:
    return play(node, bridge, "copilotkit")


def assert_played(result: dict[str, Any], scenario: Scenario) -> None:
    why = f"{scenario.name} through {result['client']}: {result}"
    assert result["problems"] == [], why
    assert result["warnings"] == [], why
    assert [run_outcome(run) for run in result["runs"]] == list(scenario.outcomes), why


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_httpagent_runs_every_scenario_to_its_end_as_sent_and_without_warnings(
    httpagent: dict[str, dict[str, Any]], scenario: Scenario
) -> None:
    assert_played(httpagent[scenario.name], scenario)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_copilotkit_relays_every_scenario_unchanged_and_replays_it_on_connect(
    copilotkit: dict[str, dict[str, Any]], scenario: Scenario
) -> None:
    assert_played(copilotkit[scenario.name], scenario)


@pytest.mark.parametrize("client", ["httpagent", "copilotkit"])
def test_a_pipeline_is_resumed_through_the_selection_and_the_sideband_permission(
    httpagent: dict[str, dict[str, Any]], copilotkit: dict[str, dict[str, Any]], client: str
) -> None:
    runs = {"httpagent": httpagent, "copilotkit": copilotkit}[client]["pipeline"]["runs"]
    asked = [[(i["reason"], i["kind"]) for i in run["interrupts"]] for run in runs]
    assert asked[:2] == [[("input_required", "candidate_selection")], [("tool_call", "permission")]], runs
    assert runs[-1]["terminal"] == "RUN_FINISHED" and runs[-1]["outcome"] == "success", runs


def test_copilotkit_replay_shows_the_pipeline_messages_in_their_live_order(
    copilotkit: dict[str, dict[str, Any]],
) -> None:
    """CopilotKit's connect replay puts each message where it ended: a step's messages end with the step."""
    assert copilotkit["pipeline"]["replayKeepsOrder"] is True


def credential_in_header_only(request: bytes) -> bool:
    """The request's head carries the credential in `Ros-Invocation-Id` and nowhere in its request line."""
    head = request.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in head[1:])}
    credential = headers.get("ros-invocation-id", "")
    return bool(credential) and credential not in head[0] and "rosinvocationid" not in head[0].lower()


# Cut points: mid tool call in the mixed turn, mid reasoning in the Pipeline's candidates (a cut
# inside an SSE record, so the agent must count only whole events).
CUTS = {"mixed": b'"TOOL_CALL_RES', "pipeline": b'"REASONING_START"'}


@pytest.mark.parametrize("name", list(CUTS))
def test_the_reattaching_agent_turns_a_cut_run_into_one_uninterrupted_run(node: str, bridge: Bridge, name: str) -> None:
    scenario = BY_NAME[name]
    with cutting_proxy(bridge.server.url, CUTS[name]) as proxy:
        job = {**scenario.job(), "proxyUrl": proxy.url}
        result = drive(node, "reattach", bridge.server.url, bridge.token, bridge.workspace, [job])[name]
        assert proxy.cuts == 1, result
        reattaches = [bytes(r) for r in proxy.requests if r.startswith(b"GET ") and b"/events" in r.split(b"\r\n")[0]]
    assert_played(result, scenario)
    # The credential travels in its header only: a URL is what proxies and access logs write down.
    assert reattaches and all(credential_in_header_only(r) for r in reattaches), reattaches
    first = result["runs"][0]
    assert first["reattached"] == 1 and first["httpStatus"] == [200, 200], result
    assert first["types"].count("RUN_STARTED") == 1, result
    # Its connect() seam: a fresh agent's connectAgent followed every run from its first event.
    assert result["connected"] == len(scenario.outcomes), result


def test_copilotkit_holding_the_reattaching_agent_relays_a_cut_run_as_one_run(node: str, bridge: Bridge) -> None:
    """The cut is between the runtime and the bridge: the browser's client must not notice it."""
    scenario = BY_NAME["mixed"]
    with cutting_proxy(bridge.server.url, CUTS["mixed"]) as proxy:
        jobs = [scenario.job()]
        result = drive(node, "copilotkit", bridge.server.url, bridge.token, bridge.workspace, jobs, agentUrl=proxy.url)
        assert proxy.cuts == 1, result
    assert_played(result["mixed"], scenario)
    assert result["mixed"]["runs"][0]["types"].count("RUN_STARTED") == 1


def test_the_reattaching_agent_waits_out_a_503_with_retry_after_and_reattaches(node: str, bridge: Bridge) -> None:
    """The follower cap (or a proxy between deploys) says "later" with 503 + Retry-After: not a lost run."""
    scenario = BY_NAME["mixed"]
    body = b'{"error":{"code":"UNAVAILABLE","message":"too many streams"}}'
    refusal = (
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    )
    with cutting_proxy(bridge.server.url, CUTS["mixed"], refuse_first_reattach=refusal) as proxy:
        job = {**scenario.job(), "proxyUrl": proxy.url}
        result = drive(node, "reattach", bridge.server.url, bridge.token, bridge.workspace, [job])["mixed"]
        assert proxy.cuts == 1 and proxy.refused == 1, result
        gets = [at for at, head in proxy.heads if head.startswith(b"GET ") and b"/events" in head.split(b"\r\n")[0]]
    assert_played(result, scenario)
    first = result["runs"][0]
    assert first["httpStatus"] == [200, 503, 200] and first["reattached"] == 2, result
    # Retry-After (1 s), not the agent's 50 ms backoff, set the pause before the second reattach.
    refused_at, reattached_at = gets[0], gets[1]
    assert reattached_at - refused_at >= 1.0, gets
