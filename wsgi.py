"""WSGI entry point: `gunicorn -c deploy/gunicorn.conf.py wsgi:app`. No patching, no I/O here."""

from agui_bridge import create_app

app = create_app()
