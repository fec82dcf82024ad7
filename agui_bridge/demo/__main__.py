"""``python -m agui_bridge.demo --host 127.0.0.1 --port N``: run the demo A2A agent.

Same command-line shape as ``iac-code a2a`` so the bridge's managed-child launcher can start either;
the bearer token is read from ``IACCODE_A2A_HTTP_TOKEN`` like the kernel does.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from agui_bridge.demo.server import run_demo_agent, token_from_env

DEFAULT_PORT = 41242


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and serve until interrupted; exit status 2 on a refused host."""
    parser = argparse.ArgumentParser(prog="python -m agui_bridge.demo", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--thinking-exposure",
        default="all",
        help="accepted for command-line parity with `iac-code a2a`; the demo always sends raw thinking",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error("--port must be between 0 and 65535")
    try:
        run_demo_agent(args.host, args.port, token_from_env(os.environ))
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
