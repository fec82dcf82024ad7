"""`python -m agui_bridge.cli`: the `agui-bridge` command."""

import sys

from agui_bridge.cli import main

sys.exit(main())
