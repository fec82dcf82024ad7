"""Users' gunicorn configs written against the former module layout keep loading."""

from __future__ import annotations

import importlib
import io
import logging
import logging.config

import pytest

#: Every public name of `agui_bridge.gunicorn_config` a deployment may use; it aliases `agui_bridge.worker.hooks`.
FORMER_PUBLIC_NAMES = [
    "TIMEOUT_S",
    "KEEPALIVE_S",
    "FORMATTERS",
    "logconfig",
    "OPEN_FILES_SPARE",
    "open_files_needed",
    "raise_open_files_limit",
    "gunicorn_settings",
    "config_from_environment",
    "DRAIN_MARGIN_S",
    "post_worker_init",
    "child_exit",
    "drain_worker",
    "worker_abort",
]


@pytest.mark.parametrize("name", FORMER_PUBLIC_NAMES)
def test_gunicorn_config_alias_still_exports_each_former_public_name(name: str) -> None:
    alias = importlib.import_module("agui_bridge.gunicorn_config")
    hooks = importlib.import_module("agui_bridge.worker.hooks")
    assert getattr(alias, name) is getattr(hooks, name)


@pytest.mark.parametrize("class_path", ["agui_bridge.logs.JsonFormatter", "agui_bridge.logs.TextFormatter"])
def test_a_logconfig_naming_the_former_formatter_path_still_redacts(class_path: str) -> None:
    """A `logconfig_dict` copied from an earlier release names the formatters by their former path."""
    stream = io.StringIO()
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"bridge": {"()": class_path}},
            "handlers": {"out": {"class": "logging.StreamHandler", "formatter": "bridge", "stream": stream}},
            "loggers": {"former-layout": {"handlers": ["out"], "level": "INFO", "propagate": False}},
        }
    )
    logging.getLogger("former-layout").info("Authorization: Bearer s3cret-token\nforged line")
    written = stream.getvalue()
    assert "s3cret-token" not in written
    assert written.count("\n") == 1
