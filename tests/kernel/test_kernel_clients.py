"""The interop tier's clients against the real iac-code 0.16.0 kernel (gunicorn, 2 gevent workers).

The scripted model plays one kind per turn, so the demo's mixed turn becomes its two halves here
(reasoning then text; a ``write_file`` call that waits for a permission, allowed), and the Pipeline
is the one the scripted model can drive: a question asked in a Pipeline step, answered, after which
the kernel fails the step it cannot conclude (``tests/kernel/test_kernel_turns.py`` says why). Each goes
through @ag-ui/client's HttpAgent, CopilotKit and the Python client on the ``ag-ui-protocol`` models,
with the same checks as ``tests/interop``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.harness import Scenario, drive, node_or_skip, run_outcome
from tests.interop.python_client import play
from tests.kernel.helpers import workspace
from tests.kernel.kernel_harness import Kernel
from tests.support.harness import BridgeServer, bridge_server

SCENARIOS = (
    Scenario("reasoning", "[REASON] think it through", ("success",)),
    Scenario("permission", "[WRITE] a file", ("interrupt", "success"), prefer={"decision": "allow_once"}),
    Scenario(
        "pipeline",
        "[ASK] which size",
        ("interrupt", "error:A2A_EXECUTION_FAILED"),
        iac_code={"runMode": "pipeline"},
        prefer={"selectedId": "m"},
    ),
)


@pytest.fixture(scope="module")
def bridge(kernel: Kernel, kernel_root: Path) -> Iterator[BridgeServer]:
    state = kernel_root / "state-clients"
    with bridge_server(kernel.url, kernel.token, state, kernel_root, workers=2) as server:
        yield server


@pytest.fixture(scope="module")
def ws(kernel_root: Path) -> Path:
    return workspace(kernel_root)


@pytest.fixture(scope="module")
def node() -> str:
    return node_or_skip()


@pytest.fixture(scope="module")
def js_results(node: str, bridge: BridgeServer, ws: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Both JavaScript clients; no bearer on this bridge, so the token is a placeholder it ignores."""
    jobs = [s.job() for s in SCENARIOS]
    return {client: drive(node, client, bridge.url, "unused", ws, jobs) for client in ("httpagent", "copilotkit")}


@pytest.mark.parametrize("client", ["httpagent", "copilotkit"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_javascript_clients_play_the_kernel_turns_as_sent_and_without_warnings(
    js_results: dict[str, dict[str, dict[str, Any]]], client: str, scenario: Scenario
) -> None:
    result = js_results[client][scenario.name]
    assert result["problems"] == [] and result["warnings"] == [], result
    assert [run_outcome(run) for run in result["runs"]] == list(scenario.outcomes), result


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_the_python_client_plays_the_kernel_turns(bridge: BridgeServer, ws: Path, scenario: Scenario) -> None:
    runs = play(bridge.url, "unused", ws, scenario.text, scenario.iac_code, scenario.prefer)
    problems = [f"run {n}: {problem}" for n, run in enumerate(runs, 1) for problem in run.problems]
    assert problems == [], problems
    assert [run.outcome for run in runs] == list(scenario.outcomes)
