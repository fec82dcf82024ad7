"""The `agui-bridge` command: entry point `agui_bridge.cli:main`, also `python -m agui_bridge.cli`."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Import the command only when it runs, so `agui_bridge.cli.doctor` stays cheap to import."""
    from agui_bridge.cli.command import main as run

    return run(argv)
