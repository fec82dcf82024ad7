"""The reattach settings: one row each in the validated table, and their cross-field rule
(docs/design.md#reattach-bounds)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from agui_bridge.config import ConfigError, load_settings
from agui_bridge.config.options import OPTIONS, add_arguments


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
    assert [o.flag_name for o in OPTIONS if o.name == "reattach_window"] == ["--reattach-window"]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"IAC_CODE_AGUI_REATTACH_WINDOW": "-1"},
            "IAC_CODE_AGUI_REATTACH_WINDOW must be a non-negative number of seconds.",
        ),
        (
            {"IAC_CODE_AGUI_REATTACH_WINDOW": "soon"},
            "IAC_CODE_AGUI_REATTACH_WINDOW must be a non-negative number of seconds.",
        ),
        (
            {"IAC_CODE_AGUI_REATTACH_RETENTION": "0"},
            "IAC_CODE_AGUI_REATTACH_RETENTION must be a positive number of seconds.",
        ),
        (
            {"IAC_CODE_AGUI_REATTACH_MAX_BYTES": "1.5"},
            "IAC_CODE_AGUI_REATTACH_MAX_BYTES must be a non-negative integer.",
        ),
        (
            {"IAC_CODE_AGUI_REATTACH_MAX_BYTES": "-3"},
            "IAC_CODE_AGUI_REATTACH_MAX_BYTES must be a non-negative integer.",
        ),
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


def test_the_replay_budget_and_free_space_reserve_have_a_flag_an_environment_variable_and_a_yaml_key(
    tmp_path: Path,
) -> None:
    defaults = load_settings({})
    assert (defaults.reattach_budget_bytes, defaults.reattach_min_free_bytes) == (1 << 30, 256 << 20)
    by_env = load_settings(
        {"IAC_CODE_AGUI_REATTACH_BUDGET_BYTES": "1000000", "IAC_CODE_AGUI_REATTACH_MIN_FREE_BYTES": "0"}
    )
    assert (by_env.reattach_budget_bytes, by_env.reattach_min_free_bytes) == (1_000_000, 0)
    flags = {o.name: o.flag_name for o in OPTIONS}
    assert (flags["reattach_budget"], flags["reattach_min_free"]) == ("--reattach-budget", "--reattach-min-free")
    config = tmp_path / "bridge.yaml"
    config.write_text("reattach-budget: 2048\nreattach_min_free: 4096\n")
    config.chmod(0o600)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    by_yaml = load_settings({}, parser.parse_args(["--config", str(config)]))
    assert (by_yaml.reattach_budget_bytes, by_yaml.reattach_min_free_bytes) == (2048, 4096)
    by_flag = load_settings({}, parser.parse_args(["--reattach-budget", "7", "--reattach-min-free", "9"]))
    assert (by_flag.reattach_budget_bytes, by_flag.reattach_min_free_bytes) == (7, 9)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"IAC_CODE_AGUI_REATTACH_BUDGET_BYTES": "-1"},
            "IAC_CODE_AGUI_REATTACH_BUDGET_BYTES must be a non-negative integer (bytes).",
        ),
        (
            {"IAC_CODE_AGUI_REATTACH_BUDGET_BYTES": "1GiB"},
            "IAC_CODE_AGUI_REATTACH_BUDGET_BYTES must be a non-negative integer (bytes).",
        ),
        (
            {"IAC_CODE_AGUI_REATTACH_MIN_FREE_BYTES": "2.5"},
            "IAC_CODE_AGUI_REATTACH_MIN_FREE_BYTES must be a non-negative integer (bytes).",
        ),
    ],
)
def test_an_invalid_replay_budget_or_reserve_stops_the_start(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(env)
    assert message in str(raised.value)
