"""mod_wsgi entry point: the IAC_CODE_AGUI_* settings from an env file, then the app (thread back-end).

Apache hands neither its own environment (Debian starts it scrubbed) nor SetEnv values to os.environ,
so the settings, tokens included, are read from AGUI_BRIDGE_ENV_FILE (default
/etc/agui-bridge/agui-bridge.env, the file deploy/agui-bridge.env.example documents: KEY=value lines,
`#` comments). Only the bridge's own variables are taken, and a variable already set wins.
"""

import os

ENV_FILE = os.environ.get("AGUI_BRIDGE_ENV_FILE", "/etc/agui-bridge/agui-bridge.env")
NAMES = ("IAC_CODE_AGUI_", "IACCODE_A2A_ALLOWED_CWDS", "IAC_CODE_CONFIG_DIR")


SECRETS = ("IAC_CODE_AGUI_AUTH_TOKEN", "IAC_CODE_AGUI_A2A_TOKEN")


def load_env_file(path: str) -> bool:
    """Take the bridge's variables from `path`; True if the file holds a token."""
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        return False
    holds_secret = False
    with handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep and not key.startswith("#") and key.startswith(NAMES):
                os.environ.setdefault(key.strip(), value.strip())
                holds_secret = holds_secret or (key.strip() in SECRETS and bool(value.strip()))
    return holds_secret


HOLDS_SECRET = load_env_file(ENV_FILE)

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from agui_bridge import create_app  # noqa: E402 - after the environment is complete
from agui_bridge.cli.doctor import startup_problems  # noqa: E402
from agui_bridge.config import ConfigError, load_settings  # noqa: E402
from agui_bridge.config.settings import require_a2a_upstream  # noqa: E402
from agui_bridge.worker.process import configure_process  # noqa: E402

try:  # an invalid value or no A2A URL: one line in the error log, and no app (mod_wsgi answers 500)
    settings = load_settings(os.environ)
    require_a2a_upstream(settings)
except ConfigError as exc:
    sys.stderr.write(f"agui-bridge: {exc}\n")
    sys.stderr.flush()
    raise SystemExit(3) from None
# doctor's permission checks: an env file with a token that others can read stops the app (one line in
# the error log; mod_wsgi then answers 500), a state directory open to others is a warning.
refusals, warnings = startup_problems(settings.state_dir, Path(ENV_FILE) if HOLDS_SECRET else None, "env file")
for line in (*refusals, *warnings):
    sys.stderr.write(f"agui-bridge: {line}\n")
sys.stderr.flush()
if refusals:
    raise SystemExit(3)

configure_process(settings)  # logging and tracing of this daemon process, before its app
application = create_app(settings)
