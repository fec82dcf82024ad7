"""WSGI entry point: `gunicorn -c deploy/gunicorn.conf.py wsgi:app`. No patching, no I/O here.

Logging and tracing are set up for the process first (`configure_process`), then the app is built;
uWSGI (deploy/uwsgi.ini) loads this module too. The app reads the IAC_CODE_AGUI_* environment through
the same validation as `agui-bridge serve` (deploy/gunicorn.conf.py already refused bad values in the
master). An invalid value is one line on
stderr and exit status 3, gunicorn's "worker failed to boot", which stops the server. A state directory
open to group or others is one warning line, as with `agui-bridge serve` (docs/design.md#state-location).
"""

import os
import sys

from agui_bridge import create_app
from agui_bridge.cli.doctor import startup_problems
from agui_bridge.config import ConfigError, load_settings
from agui_bridge.worker.process import configure_process

try:
    settings = load_settings(os.environ)
except ConfigError as exc:
    sys.stderr.write(f"agui-bridge: {exc}\n")
    sys.stderr.flush()
    raise SystemExit(3) from None
# The same permission checks as `agui-bridge serve` and doctor (only the environment: no config file here).
for line in startup_problems(settings.state_dir, None)[1]:
    sys.stderr.write(f"agui-bridge: {line}\n")
sys.stderr.flush()
configure_process(settings)  # logging, tracing, switch interval: the process's, before its app
app = create_app(settings)
