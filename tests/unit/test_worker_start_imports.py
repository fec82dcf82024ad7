"""What a worker imports at start: only what serving needs (docs/operations.md#worker-start).

The terminal chat, the demo agent, the web console's rendering and the tracing SDK (when tracing is off)
are imported where they are used, so a new worker does not pay for them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Imported by nothing a worker runs at start (tracing is off here).
NOT_AT_START = (
    "rich",
    "pygments",
    "markdown_it",
    "opentelemetry.sdk",
    "a2a",
    "uvicorn",
    "yaml",
    "agui_bridge.demo",
    "agui_bridge.chat",
)
LOADED_AT_START = """
import sys
import wsgi
print(" ".join(sorted(sys.modules)))
"""


def test_the_wsgi_module_loads_nothing_a_worker_does_not_use() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IAC_CODE_AGUI_", "OTEL_"))}
    env.update(PYTHONPATH=str(REPO_ROOT), IAC_CODE_AGUI_A2A_URL="http://127.0.0.1:9/")
    result = subprocess.run(
        [sys.executable, "-c", LOADED_AT_START], capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded = set(result.stdout.split())
    assert "agui_bridge.app" in loaded
    assert [name for name in NOT_AT_START if name in loaded] == []
