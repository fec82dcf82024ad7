"""Configuration: precedence flag > IAC_CODE_AGUI_* > YAML > default, validation, and `config show`."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.cli import main
from agui_bridge.config import ConfigError, load_settings
from agui_bridge.config.options import MASK, OPTIONS, add_arguments, resolve, worker_environment
from agui_bridge.config.settings import Settings, build_settings, check_settings, unauthenticated_warning
from agui_bridge.config.values import port


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def yaml_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "agui.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("argv", "env", "yaml", "name", "value", "source"),
    [
        ([], {}, "", "port", 8000, "default"),
        ([], {}, "port: 9001\n", "port", 9001, "yaml"),
        ([], {"IAC_CODE_AGUI_PORT": "9002"}, "port: 9001\n", "port", 9002, "env IAC_CODE_AGUI_PORT"),
        (["--port", "9003"], {"IAC_CODE_AGUI_PORT": "9002"}, "port: 9001\n", "port", 9003, "flag"),
        ([], {}, "interrupt-ttl: 60\n", "interrupt_ttl", 60.0, "yaml"),
        (["--interrupt-ttl", "1.5"], {}, "", "interrupt_ttl", 1.5, "flag"),
        ([], {"IAC_CODE_AGUI_LOG_FORMAT": "JSON"}, "", "log_format", "json", "env IAC_CODE_AGUI_LOG_FORMAT"),
        ([], {}, "metrics: false\n", "metrics", False, "yaml"),
        ([], {"IAC_CODE_AGUI_METRICS": "off"}, "metrics: true\n", "metrics", False, "env IAC_CODE_AGUI_METRICS"),
        (["--a2a-url", "http://localhost:41242"], {}, "", "a2a_url", "http://localhost:41242/", "flag"),
        ([], {}, "allowed_cwds: [/a, /b]\n", "allowed_cwds", "/a:/b", "yaml"),
        ([], {"IAC_CODE_AGUI_AUTH_TOKEN": "t-env"}, "auth_token: t-yaml\n", "auth_token", "t-env", "env"),
        ([], {}, "a2a_token: t-yaml\n", "a2a_token", "t-yaml", "yaml"),
        ([], {}, "", "idle_shutdown", 0.0, "default"),
        (["--workers", "4"], {}, "", "workers", 4, "flag"),
    ],
)
def test_precedence(
    tmp_path: Path, argv: list[str], env: dict[str, str], yaml: str, name: str, value: Any, source: str
) -> None:
    if yaml:
        argv = [*argv, "--config", yaml_file(tmp_path, yaml)]
    resolved = resolve(parse(argv), env)
    assert resolved[name] == value
    assert resolved.sources[name].startswith(source)


@pytest.mark.parametrize(
    ("argv", "env", "yaml", "message"),
    [
        (["--port", "0"], {}, "", "--port must be between 1 and 65535."),
        (["--port", "http"], {}, "", "--port must be between 1 and 65535."),
        ([], {"IAC_CODE_AGUI_PORT": "70000"}, "", "IAC_CODE_AGUI_PORT must be between 1 and 65535."),
        ([], {}, "port: true\n", "--port must be between 1 and 65535."),
        (["--agent-check-port", "-1"], {}, "", "--agent-check-port must be between 0 and 65535."),
        ([], {"IAC_CODE_AGUI_AGENT_CHECK_PORT": "70000"}, "", "IAC_CODE_AGUI_AGENT_CHECK_PORT must be between 0 and"),
        ([], {}, "agent_check_port: true\n", "--agent-check-port must be between 0 and 65535."),
        (["--workers", "0"], {}, "", "--workers must be >= 1."),
        ([], {}, "workers: 1.5\n", "--workers must be >= 1."),
        (["--interrupt-ttl", "-1"], {}, "", "--interrupt-ttl must be a positive number of seconds."),
        (["--interrupt-ttl", "nan"], {}, "", "--interrupt-ttl must be a positive number of seconds."),
        (["--idle-shutdown", "-0.5"], {}, "", "--idle-shutdown must be a non-negative number."),
        (["--a2a-url", "http://10.0.0.5:41242/"], {}, "", "The AG-UI adapter may connect only to a loopback A2A"),
        (["--a2a-url", "ftp://127.0.0.1/"], {}, "", "The AG-UI adapter may connect only to a loopback A2A"),
        (["--managed-a2a", "other"], {}, "", "--managed-a2a must be demo or iac-code."),
        (["--log-level", "loud"], {}, "", "--log-level must be debug, info, warning or error."),
        (["--log-format", "xml"], {}, "", "--log-format must be json or text."),
        ([], {}, "state_dir: 7\n", "--state-dir must be a string."),
        ([], {}, "auth_token: 123\n", "auth_token must be a string."),
        ([], {}, "metrics: maybe\n", "--metrics must be true or false."),
        ([], {}, "- a list\n", "AG-UI config file must contain a YAML mapping."),
        ([], {}, "port: [unclosed\n", "Unable to load the AG-UI config file."),
    ],
)
def test_invalid_values_give_one_clear_line(
    tmp_path: Path, argv: list[str], env: dict[str, str], yaml: str, message: str
) -> None:
    if yaml:
        argv = [*argv, "--config", yaml_file(tmp_path, yaml)]
    with pytest.raises(ConfigError) as error:
        resolve(parse(argv), env)
    assert str(error.value).startswith(message)


@pytest.mark.parametrize(
    ("value", "lowest", "expected"),
    [
        ("8000", 1, 8000),
        (65535, 1, 65535),
        ("0", 1, None),
        ("0", 0, 0),
        (-1, 0, None),
        (65536, 0, None),
        (True, 0, None),
        ("http", 0, None),
    ],
)
def test_one_port_converter_serves_ports_and_ports_that_may_be_off(
    value: Any, lowest: int, expected: int | None
) -> None:
    if expected is None:
        with pytest.raises(ValueError):
            port(value, lowest=lowest)
    else:
        assert port(value, lowest=lowest) == expected


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match=r"Unable to load the AG-UI config file\."):
        resolve(parse(["--config", "/nonexistent/agui.yaml"]), {})


def test_cli_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "agui-bridge: --port must be between 1 and 65535.\n"


def test_worker_environment_carries_every_resolved_value(tmp_path: Path) -> None:
    args = parse(["--port", "9100", "--config", yaml_file(tmp_path, "metrics: false\nauth_token: s3cret\n")])
    env = worker_environment(resolve(args, {}), {"UNRELATED": "1"})
    assert env["IAC_CODE_AGUI_PORT"] == "9100" and env["IAC_CODE_AGUI_METRICS"] == "false"
    assert env["IAC_CODE_AGUI_AUTH_TOKEN"] == "s3cret" and env["UNRELATED"] == "1"
    assert "IAC_CODE_AGUI_A2A_URL" not in env  # unset: the managed child is used
    settings = load_settings(env)
    assert (settings.auth_token, settings.metrics_enabled, settings.idle_shutdown_s) == ("s3cret", False, 0.0)


def test_config_show_masks_every_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    monkeypatch.setenv("IAC_CODE_AGUI_AUTH_TOKEN", "bearer-secret-1")
    config = yaml_file(tmp_path, "a2a_token: a2a-secret-2\nport: 9005\n")
    assert main(["config", "show", "--config", config, "--log-level", "debug"]) == 0
    text = capsys.readouterr().out
    assert main(["config", "show", "--config", config, "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    for shown in (text, json.dumps(rows)):
        assert "bearer-secret-1" not in shown and "a2a-secret-2" not in shown
    assert rows["auth_token"]["value"] == MASK and rows["auth_token"]["source"] == "env IAC_CODE_AGUI_AUTH_TOKEN"
    assert rows["a2a_token"]["value"] == MASK and rows["a2a_token"]["source"].startswith("yaml ")
    assert rows["port"]["value"] == "9005" and "log_level" in text and "debug" in text
    assert set(rows) == {option.name for option in OPTIONS}


def test_config_show_prints_the_state_directory_in_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory `serve` and doctor use, not `(not set)`, when nothing names one."""
    monkeypatch.delenv("IAC_CODE_AGUI_STATE_DIR", raising=False)
    monkeypatch.setenv("IAC_CODE_CONFIG_DIR", str(tmp_path / "config"))
    assert main(["config", "show", "--json"]) == 0
    row = next(row for row in json.loads(capsys.readouterr().out) if row["name"] == "state_dir")
    in_use = load_settings(os.environ).state_dir
    assert in_use == (tmp_path / "config" / "agui").resolve()
    assert row["value"].split(" (")[0] == str(in_use) and row["source"] == "default"


def first_refused(option: Any, candidates: tuple[str, ...] = ("abc", "-5", "maybe")) -> str | None:
    """A value the option's converter refuses (None for an option that takes any string)."""
    for bad in candidates:
        try:
            option.convert(bad)
        except (TypeError, ValueError, ConfigError):
            return bad
    return None


#: Every option read from the environment that can refuse a value, with one value it refuses.
REFUSED_FROM_ENV = [(o, bad) for o in OPTIONS if o.env_name and (bad := first_refused(o)) is not None]


@pytest.mark.parametrize(("option", "bad"), REFUSED_FROM_ENV, ids=[o.name for o, _ in REFUSED_FROM_ENV])
def test_a_bad_environment_value_is_reported_under_its_variable_name(option: Any, bad: str) -> None:
    """`IAC_CODE_AGUI_PORT=abc` names IAC_CODE_AGUI_PORT, not a `--port` flag the operator never passed."""
    with pytest.raises(ConfigError) as refused:
        resolve(argparse.Namespace(), {option.env_name: bad})
    assert option.env_name in str(refused.value) and option.flag_name not in str(refused.value)


# ------------------------------------------------------------------ one validated configuration

REPO = Path(__file__).resolve().parents[2]


def test_every_option_fills_a_settings_field() -> None:
    fields = set(Settings.__dataclass_fields__)
    assert {option.field for option in OPTIONS} <= fields
    settings = load_settings(
        {
            "IAC_CODE_AGUI_INTERRUPT_TTL": "60",
            "IAC_CODE_AGUI_METRICS": "off",
            "IAC_CODE_AGUI_MAX_ACTIVE_RUNS": "7",
            "IAC_CODE_AGUI_GRACEFUL_TIMEOUT": "45",
            "IAC_CODE_AGUI_WORKER_CONNECTIONS": "50",
            "IAC_CODE_AGUI_RUNTIME": "threads",
            "IAC_CODE_AGUI_A2A_URL": "http://localhost:41242",
        }
    )
    assert (settings.interrupt_ttl_s, settings.metrics_enabled, settings.max_active_runs_per_worker) == (60, False, 7)
    assert (settings.graceful_timeout_s, settings.worker_connections, settings.runtime_backend) == (45, 50, "threads")
    assert settings.a2a_url == "http://localhost:41242/"


def test_flags_win_over_the_environment_in_load_settings(tmp_path: Path) -> None:
    args = parse(["--heartbeat-interval", "3", "--state-dir", str(tmp_path / "s"), "--allow-unauthenticated"])
    settings = load_settings({"IAC_CODE_AGUI_HEARTBEAT_INTERVAL_S": "9"}, args)
    assert settings.heartbeat_interval_s == 3.0 and settings.state_dir == (tmp_path / "s").resolve()
    assert settings.allow_unauthenticated is True


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"IAC_CODE_AGUI_METRICS": "flase"}, "IAC_CODE_AGUI_METRICS must be true or false."),
        ({"IAC_CODE_AGUI_INTERRUPT_TTL": "-5"}, "IAC_CODE_AGUI_INTERRUPT_TTL must be a positive number of seconds."),
        (
            {"IAC_CODE_AGUI_A2A_URL": "http://10.0.0.5:41242/"},
            "IAC_CODE_AGUI_A2A_URL: The AG-UI adapter may connect only to a loopback",
        ),
        ({"IAC_CODE_AGUI_CONSOLE": "yes please"}, "IAC_CODE_AGUI_CONSOLE must be true or false."),
        ({"IAC_CODE_AGUI_RUNTIME": "fibers"}, "IAC_CODE_AGUI_RUNTIME must be auto, gevent or threads."),
        ({"IAC_CODE_AGUI_WORKER_CONNECTIONS": "0"}, "IAC_CODE_AGUI_WORKER_CONNECTIONS must be >= 1."),
        ({"IAC_CODE_AGUI_AUTH_TOKEN": ""}, "auth_token (IAC_CODE_AGUI_AUTH_TOKEN) is set but empty"),
        ({"IAC_CODE_AGUI_AUTH_TOKEN": " \t "}, "auth_token (IAC_CODE_AGUI_AUTH_TOKEN) is set but empty"),
        ({"IAC_CODE_AGUI_A2A_TOKEN": ""}, "a2a_token (IAC_CODE_AGUI_A2A_TOKEN) is set but empty"),
        ({"IAC_CODE_AGUI_HOST": "0.0.0.0"}, "refusing to listen on 0.0.0.0 without a token"),
        ({"IAC_CODE_AGUI_HOST": "::"}, "refusing to listen on :: without a token"),
        ({"IAC_CODE_AGUI_HOST": "example.org"}, "refusing to listen on example.org without a token"),
        (
            {"IAC_CODE_AGUI_HOST": "0.0.0.0", "IAC_CODE_AGUI_ALLOW_UNAUTHENTICATED": "ja"},
            "IAC_CODE_AGUI_ALLOW_UNAUTHENTICATED must be true or false.",
        ),
    ],
)
def test_invalid_environment_stops_every_entry_point(env: dict[str, str], message: str) -> None:
    """Formerly `METRICS=flase` was read as off and a TTL of -5 accepted on the wsgi/gunicorn path."""
    with pytest.raises(ConfigError) as error:
        load_settings(env)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("env", "warned"),
    [
        ({"IAC_CODE_AGUI_HOST": "0.0.0.0", "IAC_CODE_AGUI_ALLOW_UNAUTHENTICATED": "true"}, True),
        ({"IAC_CODE_AGUI_HOST": "0.0.0.0", "IAC_CODE_AGUI_AUTH_TOKEN": "t"}, False),
        ({"IAC_CODE_AGUI_HOST": "127.0.0.1"}, False),
        ({"IAC_CODE_AGUI_HOST": "localhost"}, False),
        ({"IAC_CODE_AGUI_HOST": "::1"}, False),
    ],
)
def test_only_an_unauthenticated_public_bind_is_warned_in_one_line(env: dict[str, str], warned: bool) -> None:
    settings = load_settings(env)
    warning = unauthenticated_warning(settings)
    assert (warning is not None) is warned
    if warning:
        assert "WITHOUT a token" in warning and "\n" not in warning


def test_check_settings_is_the_rule_of_directly_built_settings() -> None:
    check_settings(Settings(host="127.0.0.1"))
    check_settings(Settings(host="0.0.0.0", auth_token="t"))
    with pytest.raises(ConfigError):
        check_settings(Settings(host="0.0.0.0"))


def test_build_settings_uses_the_legacy_allowed_cwds_fallback(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    legacy = {"IACCODE_A2A_ALLOWED_CWDS": f"{tmp_path / 'root'}:{tmp_path / 'missing'}"}
    assert build_settings(resolve(parse([]), legacy), legacy).allowed_cwds == ((tmp_path / "root").resolve(),)
    assert load_settings({}).allowed_cwds is None


def test_serve_refuses_a_public_bind_without_a_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in [key for key in os.environ if key.startswith("IAC_CODE_AGUI_")]:
        monkeypatch.delenv(key)
    assert main(["serve", "--host", "0.0.0.0", "--port", "8123"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agui-bridge: refusing to listen on 0.0.0.0 without a token") and err.count("\n") == 1


def test_settings_reach_workers_without_rewriting_the_environment() -> None:
    """No `os.environ.clear()` + `importlib.reload`: the CLI hands the Settings object to the app factory."""
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "agui_bridge").rglob("*.py")
        if "os.environ.clear" in path.read_text(encoding="utf-8")
        or "importlib.reload" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_state_prune_binds_nothing_so_the_bind_rule_does_not_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("IAC_CODE_AGUI_HOST", "0.0.0.0")
    monkeypatch.delenv("IAC_CODE_AGUI_AUTH_TOKEN", raising=False)
    assert main(["state", "prune", "--dry-run", "--state-dir", str(tmp_path / "state")]) == 0
    assert "would remove 0 of 0 thread file(s)" in capsys.readouterr().out
    monkeypatch.setenv("IAC_CODE_AGUI_METRICS", "flase")  # still validated
    assert main(["state", "prune", "--dry-run", "--state-dir", str(tmp_path / "state")]) == 2


def test_the_master_side_of_the_configuration_stays_stdlib_only() -> None:
    """load_settings + gunicorn_settings run in the unpatched gunicorn master before fork."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from agui_bridge.config import load_settings\n"
        "from agui_bridge.worker.hooks import gunicorn_settings\n"
        "gunicorn_settings(load_settings({'IAC_CODE_AGUI_AUTH_TOKEN': 't', 'IAC_CODE_AGUI_HOST': '0.0.0.0'}))\n"
        "heavy = ('flask', 'werkzeug', 'gevent', 'greenlet', 'requests', 'urllib3', 'filelock', 'yaml')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stdout.strip() == "[]", done.stdout
