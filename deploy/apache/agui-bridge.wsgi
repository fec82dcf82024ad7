"""mod_wsgi entry point: the IAC_CODE_AGUI_* settings from an env file, then the app (thread back-end).

Apache hands neither its own environment (Debian starts it scrubbed) nor SetEnv values to os.environ,
so the settings, tokens included, are read from AGUI_BRIDGE_ENV_FILE (default
/etc/agui-bridge/agui-bridge.env, the file deploy/agui-bridge.env.example documents: KEY=value lines,
`#` comments). Only the bridge's own variables are taken, and a variable already set wins.
"""

import os

ENV_FILE = os.environ.get("AGUI_BRIDGE_ENV_FILE", "/etc/agui-bridge/agui-bridge.env")
NAMES = ("IAC_CODE_AGUI_", "IACCODE_A2A_ALLOWED_CWDS", "IAC_CODE_CONFIG_DIR")


def load_env_file(path: str) -> None:
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        return
    with handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep and not key.startswith("#") and key.startswith(NAMES):
                os.environ.setdefault(key.strip(), value.strip())


load_env_file(ENV_FILE)

from agui_bridge import create_app  # noqa: E402 - after the environment is complete

application = create_app()
