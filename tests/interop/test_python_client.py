"""Every demo scenario through a Python client built on the ``ag-ui-protocol`` 1.0 models.

The client (``python_client.py``) reads every event with Python warnings as errors, and reports any
event the models cannot describe whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from tests.interop.harness import BY_NAME, SCENARIOS, Bridge, Scenario, interop_bridge
from tests.interop.python_client import play
from tests.support.agui_checks import parse_sse
from tests.support.cutting_proxy import cutting_proxy

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory, demo_url: str, demo_token: str) -> Iterator[Bridge]:
    with interop_bridge(tmp_path_factory.mktemp("interop-python"), demo_url, demo_token) as bridge:
        yield bridge


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_a_python_client_on_the_protocol_models_plays_every_scenario(bridge: Bridge, scenario: Scenario) -> None:
    runs = play(
        bridge.server.url,
        bridge.token,
        bridge.workspace,
        scenario.text,
        scenario.iac_code,
        scenario.prefer,
        cancel_it=scenario.cancel,
        long_ids=scenario.long_ids,
    )
    problems = [f"run {n}: {problem}" for n, run in enumerate(runs, 1) for problem in run.problems]
    assert problems == [], problems
    assert [run.outcome for run in runs] == list(scenario.outcomes)
    for run in runs:
        assert run.events[0].type == "RUN_STARTED" and sum(e.type == "RUN_STARTED" for e in run.events) == 1


def test_a_python_client_reattaches_a_cut_run_and_reads_exactly_the_recorded_run(bridge: Bridge) -> None:
    scenario = BY_NAME["mixed"]
    with cutting_proxy(bridge.server.url, b'"TOOL_CALL_RES') as proxy:
        (run,) = play(proxy.url, bridge.token, bridge.workspace, scenario.text, scenario.iac_code, scenario.prefer)
        assert proxy.cuts == 1
    assert run.problems == [] and run.outcome == "success" and run.reattached == 1, run.problems
    started = run.events[0]
    ros = [e.value["rosInvocationId"] for e in run.events if e.type == "CUSTOM" and e.name == "iac-code.session.v1"]
    route = f"{bridge.server.url}extensions/iac-code/v1/threads/{started.thread_id}/runs/{started.run_id}/events"
    auth = {"Authorization": f"Bearer {bridge.token}"}
    recorded = requests.get(route, params={"rosInvocationId": ros[0]}, headers=auth, timeout=10)
    assert recorded.status_code == 200
    dumped = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in run.events]
    assert dumped == parse_sse(recorded.content)  # every event once, in order
