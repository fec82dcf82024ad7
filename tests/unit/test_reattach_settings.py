"""The reattach settings (issue 15): one row each in the validated table, and their cross-field rule."""

from __future__ import annotations

import pytest

from agui_bridge.config import BY_NAME, ConfigError, load_settings


def test_defaults_of_a_served_bridge() -> None:
    settings = load_settings({})
    assert settings.reattach_window_s == 30.0
    assert settings.reattach_retention_s == 3600.0
    assert settings.reattach_max_bytes == 64 * 1024 * 1024


def test_environment_sets_them() -> None:
    settings = load_settings(
        {
            "IAC_CODE_AGUI_REATTACH_WINDOW": "0",
            "IAC_CODE_AGUI_REATTACH_RETENTION": "120",
            "IAC_CODE_AGUI_REATTACH_MAX_BYTES": "0",
        }
    )
    assert (settings.reattach_window_s, settings.reattach_retention_s, settings.reattach_max_bytes) == (0.0, 120.0, 0)
    assert BY_NAME["reattach_window"].flag_name == "--reattach-window"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"IAC_CODE_AGUI_REATTACH_WINDOW": "-1"}, "--reattach-window must be a non-negative number of seconds."),
        ({"IAC_CODE_AGUI_REATTACH_WINDOW": "soon"}, "--reattach-window must be a non-negative number of seconds."),
        ({"IAC_CODE_AGUI_REATTACH_RETENTION": "0"}, "--reattach-retention must be a positive number of seconds."),
        ({"IAC_CODE_AGUI_REATTACH_MAX_BYTES": "1.5"}, "--reattach-max-bytes must be a non-negative integer."),
        ({"IAC_CODE_AGUI_REATTACH_MAX_BYTES": "-3"}, "--reattach-max-bytes must be a non-negative integer."),
        (
            {"IAC_CODE_AGUI_REATTACH_WINDOW": "600", "IAC_CODE_AGUI_REATTACH_RETENTION": "60"},
            "--reattach-retention must be at least --reattach-window.",
        ),
    ],
)
def test_invalid_values_stop_the_start(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(env)
    assert message in str(raised.value)
