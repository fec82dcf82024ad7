# gunicorn -c deploy/gunicorn.conf.py wsgi:app
# The IAC_CODE_AGUI_* environment (HOST, PORT, WORKERS, A2A_URL, A2A_TOKEN, AUTH_TOKEN, STATE_DIR, ...) is parsed
# and validated here exactly as `agui-bridge serve` does: an invalid value stops the start with one line.
# wsgi.py's create_app() reads the same environment in each worker through the same validation.
from agui_bridge.gunicorn_config import config_from_environment

globals().update(config_from_environment())
