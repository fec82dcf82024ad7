"""The interop tier's shared parts: the demo scenarios as data, and running the Node driver.

Each scenario is what a user types (the demo agent picks its script from the text, see
``agui_bridge/demo/scenarios.py``), what a generic client prefers when it answers an interrupt from
its ``responseSchema``, and the outcome of every run until the conversation is done. The Node driver
(``drive.mjs``) plays them through @ag-ui/client's HttpAgent, through CopilotKit, or through the
reattaching agent; ``python_client.py`` plays them with the ``ag-ui-protocol`` models.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.conformance import in_ci
from tests.support.harness import BridgeServer, bridge_server

INTEROP_DIR = Path(__file__).resolve().parent
DRIVER = INTEROP_DIR / "drive.mjs"
NODE_MODULES = INTEROP_DIR / "node_modules"
#: Per run inside the driver; the whole driver gets a bound derived from its scenario count.
RUN_TIMEOUT_S = 40


@dataclass(frozen=True)
class Scenario:
    name: str
    text: str
    #: One entry per run: "success", "interrupt", "cancelled" or "error:<code>".
    outcomes: tuple[str, ...]
    iac_code: dict[str, Any] = field(default_factory=dict)
    prefer: dict[str, Any] = field(default_factory=dict)
    cancel: bool = False  # cancel the execution through the bridge as soon as its session event arrives
    long_ids: bool = False  # threadId and runIds of the input cap's length (200 characters)

    def job(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "text": self.text,
            "iacCode": self.iac_code,
            "prefer": self.prefer,
            "cancel": self.cancel,
            "longIds": self.long_ids,
        }


ALLOW = {"decision": "allow_once"}
PIPELINE = {"runMode": "pipeline"}
SCENARIOS = (
    Scenario("plain", "hello there", ("success",)),
    Scenario("template", "show me a vpc template", ("success",)),
    Scenario("reasoning", "[think] why is the sky blue", ("success",)),
    Scenario("tool", "list files please", ("success",)),
    Scenario("mixed", "[mixed] everything at once", ("success",)),
    Scenario("permission-allow", "please write file x.yaml", ("interrupt", "success"), prefer=ALLOW),
    Scenario("permission-deny", "please write file x.yaml", ("interrupt", "success"), prefer={"decision": "deny"}),
    Scenario("two-tools", "use two tools", ("interrupt", "success"), prefer=ALLOW),
    Scenario("question", "ask me a question about the size", ("interrupt", "success")),
    Scenario("choose", "choose one of the candidates", ("interrupt", "success")),
    # The candidate selection, then the sideband permission of the deploy step, then the end.
    Scenario("pipeline", "deploy a small web app", ("interrupt", "interrupt", "success"), PIPELINE, ALLOW),
    # Every id the bridge derives from 200-character ids must come back in the history and be accepted.
    Scenario(
        "pipeline-long-ids",
        "deploy a small web app",
        ("interrupt", "interrupt", "success"),
        PIPELINE,
        ALLOW,
        long_ids=True,
    ),
    Scenario("fail", "please fail now", ("error:A2A_EXECUTION_FAILED",)),
    Scenario("cancel", "slow [SLOW 20]", ("error:CANCELLED",), cancel=True),
)
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


def node_or_skip() -> str:
    """The node binary; skipped locally and a failure in CI without node or ``npm ci`` of this tier."""
    node = shutil.which("node")
    missing = None
    if node is None:
        missing = "node is not on PATH"
    elif not (NODE_MODULES / "@ag-ui" / "client").is_dir() or not (NODE_MODULES / "tsx").is_dir():
        missing = f"{NODE_MODULES} is missing (npm ci --prefix tests/interop)"
    if missing is not None:
        message = f"the interop tier cannot run: {missing}"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    assert node is not None
    return node


def node_environment() -> dict[str, str]:
    """No telemetry, nothing silenced, and the tier's packages resolvable from ``clients/typescript``."""
    env = dict(os.environ)
    env.pop("SUPPRESS_TRANSFORMATION_WARNINGS", None)
    env.update(
        COPILOTKIT_TELEMETRY_DISABLED="true",
        DO_NOT_TRACK="1",
        SCARF_ANALYTICS="false",
        NODE_PATH=str(NODE_MODULES),
    )
    return env


def run_node(node: str, script: Path, job: dict[str, Any], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [node, "--import", "tsx", str(script)],
        input=json.dumps(job),
        cwd=INTEROP_DIR,
        env=node_environment(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def drive(
    node: str, client: str, url: str, token: str, cwd: Path, scenarios: Iterable[dict[str, Any]], **extra: Any
) -> dict[str, dict[str, Any]]:
    """Run the driver once for many scenarios; the result line of each, by scenario name."""
    jobs = list(scenarios)
    job = {"client": client, "url": url, "token": token, "cwd": str(cwd), "timeoutS": RUN_TIMEOUT_S, "scenarios": jobs}
    job.update(extra)
    proc = run_node(node, DRIVER, job, timeout_s=60 + 20 * len(jobs))
    results: dict[str, dict[str, Any]] = {}
    stray = []  # anything else a client or the runtime printed (a logger writing to stdout, a warning)
    for line in proc.stdout.splitlines():
        parsed = json.loads(line) if line.startswith("{") else None
        if isinstance(parsed, dict) and "scenario" in parsed:
            results[parsed["scenario"]] = parsed
        else:
            stray.append(line)
    why = f"driver exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0 and len(results) == len(jobs), why
    assert stray == [] and proc.stderr == "", why
    return results


def run_outcome(run: dict[str, Any]) -> str:
    """A run as the scenario table names it."""
    if run["terminal"] == "RUN_ERROR":
        return f"error:{run['code']}"
    return str(run["outcome"])


@dataclass
class Bridge:
    """A bridge with the demo agent behind it, its bearer token and a workspace inside its allowed roots."""

    server: BridgeServer
    token: str
    workspace: Path


@contextlib.contextmanager
def interop_bridge(root: Path, demo_url: str, demo_token: str) -> Iterator[Bridge]:
    """Two gevent workers with a bearer token and a reattach window, so a cut connection leaves the run to its
    reattach (docs/design.md#reattach), as the clients under test expect of a production bridge."""
    workspace = root / "workspace"
    workspace.mkdir()
    token = "agui-" + secrets.token_urlsafe(24)
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": token}
    with bridge_server(demo_url, demo_token, root / "state", root, workers=2, reattach_window=30, env=env) as server:
        yield Bridge(server, token, workspace)
