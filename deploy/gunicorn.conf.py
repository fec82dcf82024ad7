# gunicorn -c deploy/gunicorn.conf.py wsgi:app
# Settings come from agui_bridge.gunicorn_config (stdlib-only at import; hooks import lazily), and the
# IAC_CODE_AGUI_* environment (HOST, PORT, WORKERS, A2A_URL, A2A_TOKEN, AUTH_TOKEN, STATE_DIR, ...).
from agui_bridge.gunicorn_config import *  # noqa: F403
