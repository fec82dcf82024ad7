"""What the `agui-bridge chat` end-to-end tests share (a pseudo-terminal's and tmux's): the bridge they talk
to, with a bearer token, and the command line and environment they start `chat` with."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.harness import REPO_ROOT, BridgeServer, bridge_server

#: The bearer token the chat tests' bridge requires and `chat_env` gives the client.
CHAT_TOKEN = "chat-e2e-token"


@contextmanager
def chat_bridge_server(demo_url: str, demo_token: str, state_dir: Path, tmp_path: Path) -> Iterator[BridgeServer]:
    """`agui-bridge serve` in front of the demo agent, requiring `CHAT_TOKEN`."""
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": CHAT_TOKEN}
    with bridge_server(demo_url, demo_token, state_dir, tmp_path, env=env) as server:
        yield server


def chat_env() -> dict[str, str]:
    """This environment for a `chat` child: the checkout importable, the token set, and nothing that would
    change what it shows (NO_COLOR; TMUX, from a test run inside tmux)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["IAC_CODE_AGUI_AUTH_TOKEN"] = CHAT_TOKEN
    env.pop("NO_COLOR", None)
    env.pop("TMUX", None)
    return env


def chat_argv(url: str, workspace: Path, *args: str) -> list[str]:
    """`chat` against `url`, working in `workspace`, with `args` after the options."""
    return [sys.executable, "-m", "agui_bridge.cli", "chat", "--url", url, "--cwd", str(workspace), *args]
