"""WSGI entry point: `gunicorn -c deploy/gunicorn.conf.py wsgi:app`. No patching, no I/O here.

Logging and tracing are set up for the process first (`configure_process`), then the app is built;
uWSGI (deploy/uwsgi.ini) loads this module too. The app reads the IAC_CODE_AGUI_* environment through
the same validation as `agui-bridge serve` (deploy/gunicorn.conf.py already refused bad values in the
master). An invalid value, or no A2A URL (there is no default one, and no managed child here), is one
line on stderr and an exit status that stops the server (gunicorn's "worker failed to boot", uWSGI's
"failed loading app"). A state directory open to group or others is one warning line, as with
`agui-bridge serve` (docs/design.md#state-location).
"""

import os
import sys

from agui_bridge import create_app
from agui_bridge.cli.doctor import startup_problems
from agui_bridge.config import ConfigError, load_settings
from agui_bridge.config.settings import require_a2a_upstream
from agui_bridge.worker.process import configure_process

#: The exit status that stops the host rather than having it start the worker again: gunicorn's "worker failed
#: to boot" (3), or under uWSGI its "failed loading app" (22), which with deploy/uwsgi.ini's need-app and
#: lazy-apps ends the instance.
BOOT_FAILED = 22 if "uwsgi" in sys.modules else 3

try:
    settings = load_settings(os.environ)
    require_a2a_upstream(settings)  # this entry point starts no managed child: no URL, no start
except ConfigError as exc:
    sys.stderr.write(f"agui-bridge: {exc}\n")
    sys.stderr.flush()
    raise SystemExit(BOOT_FAILED) from None
# The same permission checks as `agui-bridge serve` and doctor (only the environment: no config file here).
for line in startup_problems(settings.state_dir, None)[1]:
    sys.stderr.write(f"agui-bridge: {line}\n")
sys.stderr.flush()
configure_process(settings)  # logging, tracing, switch interval: the process's, before its app
app = create_app(settings)
