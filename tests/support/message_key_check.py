"""Pytest plugin: a test in which the bridge translates an unknown message key fails.

At run time an unknown key only logs an error and shows the localised "internal error" text
(docs/design.md#decision-no-500); in tests the same log record fails the test, so a typo in a key is
caught without the bridge behaving differently under pytest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

UNKNOWN_KEY_MESSAGE = "unknown message key %r"


class _UnknownKeys(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.keys: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == UNKNOWN_KEY_MESSAGE and record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            self.keys.append(str(args[0]))


@pytest.fixture(autouse=True)
def unknown_message_keys() -> Iterator[list[str]]:
    """The unknown keys translated during the test; clear it in a test that asks for one on purpose."""
    handler = _UnknownKeys()
    logger = logging.getLogger("agui_bridge.i18n.language")
    logger.addHandler(handler)
    try:
        yield handler.keys
    finally:
        logger.removeHandler(handler)
    if handler.keys:
        pytest.fail(f"unknown message key(s) translated: {handler.keys}")
