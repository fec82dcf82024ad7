"""Bench-only launcher for the reference adapter (`iac-code agui`) with a shorter heartbeat.

`iac_code.agui.app._HEARTBEAT_SECONDS` is a fixed 15 s with no option; the idle-stream benchmark
shortens the bridge's heartbeat to 2 s, so this sets the module attribute from
`BENCH_REF_HEARTBEAT_S` (read at call time by its `_event_stream`) and then runs the same
`iac_code.agui.server.run_server` that `iac-code agui` runs.

Usage: python bench/ref_serve.py --host H --port P --a2a-url URL --state-dir DIR
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--a2a-url", required=True)
    parser.add_argument("--state-dir", default=None)
    args = parser.parse_args(argv)

    import iac_code.agui.app as agui_app
    from iac_code.agui.server import run_server
    from iac_code.utils.log import setup_logging

    setup_logging(session_id="agui-adapter", debug=False, stdout=False)  # as `iac-code agui` does

    heartbeat = os.environ.get("BENCH_REF_HEARTBEAT_S")
    if heartbeat:
        agui_app._HEARTBEAT_SECONDS = float(heartbeat)
    run_server(
        host=args.host,
        port=args.port,
        a2a_url=args.a2a_url,
        state_dir=args.state_dir,
        a2a_token=os.environ.get("IAC_CODE_AGUI_A2A_TOKEN"),
        auth_token=os.environ.get("IAC_CODE_AGUI_AUTH_TOKEN"),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
