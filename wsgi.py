"""WSGI entry point: `gunicorn -c deploy/gunicorn.conf.py wsgi:app`. No patching, no I/O here.

The app reads the IAC_CODE_AGUI_* environment through the same validation as `agui-bridge serve`
(deploy/gunicorn.conf.py already refused bad values in the master). An invalid value is one line on
stderr and exit status 3, gunicorn's "worker failed to boot", which stops the server.
"""

import sys

from agui_bridge import create_app
from agui_bridge.config import ConfigError

try:
    app = create_app()
except ConfigError as exc:
    sys.stderr.write(f"agui-bridge: {exc}\n")
    sys.stderr.flush()
    raise SystemExit(3) from None
