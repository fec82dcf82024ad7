"""The README's HttpAgent snippet, extracted and run as written against a bridge that cuts the resume.

The snippet goes into a scratch directory next to a copy of ``clients/typescript/
reattaching-http-agent.ts`` (as a user copies it), with ``BRIDGE_URL``/``TOKEN``/``WORKSPACE`` defined
before it and one line after it that prints what it ended with. The bridge is reached through a proxy
that drops the resume's connection mid-stream: the snippet must still end with the tool allowed.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from pathlib import Path

import pytest

from tests.interop.harness import NODE_MODULES, node_environment, node_or_skip
from tests.support.cutting_proxy import cutting_proxy
from tests.support.harness import REPO_ROOT, bridge_server

pytestmark = pytest.mark.e2e

AGENT_SOURCE = REPO_ROOT / "clients" / "typescript" / "reattaching-http-agent.ts"


def readme_snippet() -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- interop: httpagent snippet -->\n```ts\n(.*?)```", readme, re.S)
    assert match, "the README must show the HttpAgent snippet after its marker"
    return match.group(1)


def scratch_app(directory: Path, url: str, token: str, workspace: Path) -> Path:
    """The snippet as a user's ES module, with the agent file copied next to it."""
    (directory / "package.json").write_text('{"type": "module"}\n', encoding="utf-8")
    (directory / "node_modules").symlink_to(NODE_MODULES, target_is_directory=True)
    (directory / "reattaching-http-agent.ts").write_text(AGENT_SOURCE.read_text(encoding="utf-8"), encoding="utf-8")
    snippet = readme_snippet()
    imports = "".join(line + "\n" for line in snippet.splitlines() if line.startswith("import "))
    body = "".join(line + "\n" for line in snippet.splitlines() if not line.startswith("import "))
    settings = f"const BRIDGE_URL = {json.dumps(url)};\nconst TOKEN = {json.dumps(token)};\n"
    settings += f"const WORKSPACE = {json.dumps(str(workspace))};\n"
    report = "console.log(JSON.stringify({ text, pending: agent.pendingInterrupts.length, "
    report += "reattached: agent.reattachCount }));\n"
    app = directory / "app.ts"
    app.write_text(imports + settings + body + report, encoding="utf-8")
    return app


def test_the_readme_httpagent_snippet_resumes_through_a_cut_and_allows_the_tool(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    node = node_or_skip()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    token = "agui-" + secrets.token_urlsafe(24)
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": token}
    (tmp_path / "app").mkdir()
    with (
        bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, reattach_window=30, env=env) as server,
        cutting_proxy(server.url, b'"TEXT_MESSAGE_CONTENT"', request_has=b'"resume"') as proxy,
    ):
        app = scratch_app(tmp_path / "app", proxy.url, token, workspace)
        proc = subprocess.run(
            [node, "--import", "tsx", str(app)],
            cwd=app.parent,
            env=node_environment(),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        cuts = proxy.cuts
    why = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0 and proc.stderr == "", why
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert cuts == 1 and result["reattached"] == 1, why
    assert result["pending"] == 0 and "all done." in result["text"], why
