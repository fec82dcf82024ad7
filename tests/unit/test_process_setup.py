"""Process-wide set-up (logging, tracing, switch interval) belongs to the entry points, not to `create_app`."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.observability import logs, tracing
from agui_bridge.observability.logs import JsonFormatter, TextFormatter, configure_logging
from agui_bridge.worker.process import configure_process
from agui_bridge.worker.readiness import WORKER_READY_LOG, WorkerReadyNotice

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_LOGGER = logging.getLogger("agui_bridge")
#: Every module that owns a serving process, and builds its app only after setting the process up.
ENTRY_POINTS = ("wsgi.py", "deploy/waitress_serve.py", "deploy/apache/agui-bridge.wsgi", "agui_bridge/cli/command.py")


def _bridge_handlers() -> list[logging.Handler]:
    return [handler for handler in PACKAGE_LOGGER.handlers if getattr(handler, "_agui_bridge", False)]


@pytest.fixture
def unconfigured_process() -> Iterator[None]:
    """The package logger and tracing as in a process nothing has set up; restored afterwards."""
    saved_handlers, saved_propagate, saved_level = (
        list(PACKAGE_LOGGER.handlers),
        PACKAGE_LOGGER.propagate,
        PACKAGE_LOGGER.level,
    )
    saved_interval = sys.getswitchinterval()
    for handler in _bridge_handlers():
        PACKAGE_LOGGER.removeHandler(handler)
    PACKAGE_LOGGER.propagate = True
    PACKAGE_LOGGER.setLevel(logging.NOTSET)
    tracing.reset()
    try:
        yield
    finally:
        tracing.reset()
        PACKAGE_LOGGER.handlers[:] = saved_handlers
        PACKAGE_LOGGER.propagate, PACKAGE_LOGGER.level = saved_propagate, saved_level
        sys.setswitchinterval(saved_interval)


def test_the_bare_app_factory_changes_nothing_process_wide(unconfigured_process: None, settings: Settings) -> None:
    interval = sys.getswitchinterval()
    app = create_app(settings.replace(log_level="debug", log_format="json"))
    assert app.test_client().get("/health").status_code == 200
    assert _bridge_handlers() == []
    assert PACKAGE_LOGGER.propagate is True and PACKAGE_LOGGER.level == logging.NOTSET
    assert not tracing._configured
    assert sys.getswitchinterval() == interval


def test_configure_process_sets_up_logging_and_tracing_once(unconfigured_process: None, settings: Settings) -> None:
    configure_process(settings.replace(log_level="debug", log_format="json"))
    configure_process(settings.replace(log_level="warning", log_format="text"))
    (handler,) = _bridge_handlers()
    assert isinstance(handler.formatter, TextFormatter)  # the latest call's format and level
    assert PACKAGE_LOGGER.level == logging.WARNING and PACKAGE_LOGGER.propagate is False
    assert tracing._configured
    configure_logging("info", "text")


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_each_entry_point_sets_the_process_up_before_building_its_app(path: str) -> None:
    source = (ROOT / path).read_text(encoding="utf-8")
    setup, build = source.find("configure_process("), source.find("create_app(")
    assert setup != -1 and build != -1, path
    assert setup < build, f"{path} builds its app before setting the process up"


def test_the_gunicorn_worker_hook_sets_the_process_up(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from agui_bridge.worker import hooks
    from agui_bridge.worker import process as process_mod

    calls: list[str] = []
    monkeypatch.setattr(process_mod, "configure_process", lambda given: calls.append(f"configure {given.log_format}"))
    monkeypatch.setattr(hooks, "post_worker_init", lambda worker: calls.append("post_worker_init"))
    monkeypatch.setattr(WorkerReadyNotice, "worker_ready", lambda self: calls.append("ready notice"))
    hook = hooks.gunicorn_settings(settings.replace(hub_watchdog_ms=0, log_format="json"))["post_worker_init"]

    class Log:
        def info(self, message: str, *args: object) -> None:
            calls.append(message % args)

    hook(SimpleNamespace(log=Log(), pid=4242))
    assert calls == ["configure json", "post_worker_init", f"{WORKER_READY_LOG} 4242", "ready notice"]


_WSGI_PROBE = """
import json, logging, sys
import wsgi
handlers = [h for h in logging.getLogger("agui_bridge").handlers if getattr(h, "_agui_bridge", False)]
print(json.dumps({"formatters": [type(h.formatter).__name__ for h in handlers],
                  "propagate": logging.getLogger("agui_bridge").propagate}))
"""


def test_wsgi_module_sets_up_the_documented_log_format(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("IAC_CODE_AGUI_", "OTEL_"))},
        "IAC_CODE_AGUI_STATE_DIR": str(tmp_path / "state"),
        "IAC_CODE_AGUI_LOG_FORMAT": "json",
        "IAC_CODE_AGUI_A2A_URL": "http://127.0.0.1:9/",  # every entry point needs one to start
    }
    out = subprocess.run(
        [sys.executable, "-c", _WSGI_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "formatters": [JsonFormatter.__name__],
        "propagate": False,
    }


class RecordsKept(logging.Handler):
    """Keeps the records the package logger sees (not the bridge's handler: logging stays unconfigured)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_the_app_factory_warns_once_when_nobody_set_logging_up(
    unconfigured_process: None, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # pytest's own capture counts as a set-up
    monkeypatch.setattr(logs, "_unconfigured_warned", False)
    kept = RecordsKept()
    PACKAGE_LOGGER.addHandler(kept)
    try:
        create_app(settings)
        create_app(settings)
    finally:
        PACKAGE_LOGGER.removeHandler(kept)
    (warning,) = kept.records
    assert warning.levelno == logging.WARNING
    assert "configure_process" in warning.getMessage()


def test_the_app_factory_says_nothing_about_logging_once_configure_process_ran(
    unconfigured_process: None, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    monkeypatch.setattr(logs, "_unconfigured_warned", False)
    configure_process(settings)
    kept = RecordsKept()
    PACKAGE_LOGGER.addHandler(kept)
    try:
        create_app(settings)
    finally:
        PACKAGE_LOGGER.removeHandler(kept)
    assert [record.getMessage() for record in kept.records if "configure_process" in record.getMessage()] == []
