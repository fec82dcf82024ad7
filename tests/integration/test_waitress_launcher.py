"""deploy/waitress_serve.py takes its settings from `load_settings`, like every other entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_waitress_launcher_refuses_an_invalid_environment_with_one_line_and_status_2(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("IAC_CODE_AGUI_")}
    env.update(HOME=str(tmp_path), IAC_CODE_AGUI_PORT="abc", IAC_CODE_AGUI_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run(
        [sys.executable, "deploy/waitress_serve.py", "--threads", "4"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (2, "agui-bridge: IAC_CODE_AGUI_PORT must be between 1 and 65535.\n")
