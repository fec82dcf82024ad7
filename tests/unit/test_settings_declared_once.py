"""Each setting is declared once (`config/options.py`): `Settings()`, `serve`, the flags, the environment, the
YAML file and the README's configuration table all follow that one declaration."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.cli import main
from agui_bridge.config import ConfigError, load_settings
from agui_bridge.config.options import (
    OPTIONS,
    Option,
    add_arguments,
    option_for_field,
    resolve,
    shown_value,
    worker_connections_for,
)
from agui_bridge.config.settings import Settings

REPO = Path(__file__).resolve().parents[2]
TABLE_HEADER = "| flag | environment | default | meaning |"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_settings_built_without_arguments_hold_what_serve_runs_with_when_nothing_is_set() -> None:
    assert Settings() == load_settings({})
    assert Settings().reattach_window_s == 30.0  # the documented window, also for the Flask test client path


def test_every_settings_field_is_filled_by_one_option_or_documented_as_internal() -> None:
    undeclared = []
    for field in dataclasses.fields(Settings):
        if "option" in field.metadata:
            assert option_for_field(field.name).name == field.metadata["option"]
        elif not field.metadata.get("internal"):
            undeclared.append(field.name)
    assert undeclared == []
    filled = [option.field for option in OPTIONS]
    assert len(filled) == len(set(filled))
    assert set(filled) <= {field.name for field in dataclasses.fields(Settings)}


def expected_field_default(option: Option) -> Any:
    """What the declaration says `Settings()` holds, written out independently of the derivation code."""
    if option.name == "state_dir":
        return (Path.home() / ".iac-code" / "agui").resolve()
    if option.name == "worker_connections":
        return worker_connections_for(option_for_field("max_active_runs_per_worker").default)
    return option.default


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.name)
def test_the_settings_default_of_each_option_is_its_declared_default(option: Option) -> None:
    assert getattr(Settings(), option.field) == expected_field_default(option)


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.default is not None], ids=lambda option: option.name)
def test_each_declared_default_passes_its_converter_and_survives_the_environment(option: Option) -> None:
    """The default is a valid value, and reads back the same when `serve` hands it to a worker as a variable."""
    assert option.convert(option.default) == option.default
    assert option.convert(shown_value(option.default)) == option.default


def test_a_bad_environment_value_names_the_variable_and_a_bad_flag_names_the_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=r"^IAC_CODE_AGUI_PORT must be between 1 and 65535\.$"):
        load_settings({"IAC_CODE_AGUI_PORT": "abc"})
    with pytest.raises(ConfigError, match=r"^--port must be between 1 and 65535\.$"):
        load_settings({}, parse(["--port", "abc"]))
    with pytest.raises(ConfigError, match=r"^IAC_CODE_AGUI_RUNTIME must be auto, gevent or threads\.$"):
        load_settings({"IAC_CODE_AGUI_RUNTIME": "fibers"})  # an option without a flag names its variable too
    monkeypatch.setenv("IAC_CODE_AGUI_PORT", "abc")
    assert main(["config", "show"]) == 2
    assert capsys.readouterr().err == "agui-bridge: IAC_CODE_AGUI_PORT must be between 1 and 65535.\n"


def test_the_documented_older_allowed_cwds_name_is_read_after_the_yaml_file_and_shown_as_the_source(
    tmp_path: Path,
) -> None:
    legacy = {"IACCODE_A2A_ALLOWED_CWDS": "/legacy"}
    alone = resolve(parse([]), legacy)
    assert (alone["allowed_cwds"], alone.sources["allowed_cwds"]) == ("/legacy", "env IACCODE_A2A_ALLOWED_CWDS")
    config = tmp_path / "bridge.yaml"
    config.write_text("allowed_cwds: [/from-yaml]\n", encoding="utf-8")
    assert resolve(parse(["--config", str(config)]), legacy)["allowed_cwds"] == "/from-yaml"
    primary = resolve(parse([]), {**legacy, "IAC_CODE_AGUI_ALLOWED_CWDS": "/primary"})
    assert primary["allowed_cwds"] == "/primary"


def test_each_flag_help_ends_with_its_declared_default() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert "--port PORT port to bind [8000] --workers" in text
    assert "(0: cancel at once) [30.0] --reattach-retention" in text
    assert "(default: a managed child) --managed-a2a" in text  # no declared default: nothing appended


def configuration_table() -> dict[str, tuple[str, str]]:
    """The configuration table of the README (or of the docs page it moved to): environment -> (flag, default)."""
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        lines = path.read_text(encoding="utf-8").splitlines()
        if TABLE_HEADER not in lines:
            continue
        rows: dict[str, tuple[str, str]] = {}
        for line in lines[lines.index(TABLE_HEADER) + 2 :]:
            if not line.startswith("|"):
                break
            flag, env, default = (cell.strip() for cell in line.strip("|").split("|")[:3])
            rows[env.strip("`")] = (flag.strip("`"), default)
        return rows
    raise AssertionError(f"no configuration table ({TABLE_HEADER}) in README.md or docs/")


def documented(value: Any) -> str:
    """A default as the table writes it: `30`, not `30.0`."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{shown_value(value)}`"


def test_the_readme_configuration_table_lists_every_option_with_its_flag_and_declared_default() -> None:
    table = configuration_table()
    assert set(table) == {option.env_name for option in OPTIONS}
    for option in OPTIONS:
        flag, default = table[str(option.env_name)]
        assert flag == (option.flag_name if option.flag else ""), option.name
        if option.default is not None:
            assert default == documented(option.default), option.name
        else:
            assert default, f"{option.name}: say what happens when it is not set"
