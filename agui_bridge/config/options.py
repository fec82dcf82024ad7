"""The serve configuration as one table: flag > IAC_CODE_AGUI_* environment > YAML > default.

Like gunicorn's `Setting` classes (one per setting: name, `cli`, `validator`, `default`, `desc`), every
setting is declared once here, as one `Option` row: name (also the YAML key), flag, environment name and
documented fallbacks, default, converter and error, help, secret or not, the `Settings` field it fills.
Everything else is derived from the table: the argparse flags, the resolution with the source of each value
(`agui-bridge config show`), the environment a `serve` worker and the managed child inherit, the defaults of
the `Settings` dataclass (`config/settings.py`, which also turns a resolution into `Settings`), and the
configuration table of docs/configuration.md (a unit test reads it against this table). Tokens are
environment/YAML only and never printed. stdlib only at import (this runs in the gunicorn master before
fork). The value converters live in `config/values.py`, the YAML file reading in `config/yaml_file.py`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agui_bridge.config.values import ConfigError, allowed_roots, default_state_dir, expand_path, normalise_a2a_url
from agui_bridge.config.values import boolean as _boolean
from agui_bridge.config.values import choice as _choice
from agui_bridge.config.values import host as _host
from agui_bridge.config.values import non_negative as _non_negative
from agui_bridge.config.values import non_negative_int as _non_negative_int
from agui_bridge.config.values import paths as _paths
from agui_bridge.config.values import port as _port
from agui_bridge.config.values import port_or_off as _port_or_off
from agui_bridge.config.values import positive as _positive
from agui_bridge.config.values import positive_int as _positive_int
from agui_bridge.config.values import string as _string
from agui_bridge.config.values import token as _token
from agui_bridge.config.yaml_file import load_yaml_config

ENV_PREFIX = "IAC_CODE_AGUI_"
MASK = "********"

#: What an option whose default is derived (`Option.derive`) computes its `Settings` value from: the resolved
#: values by option name, and the environment.
Derive = Callable[[Mapping[str, Any], Mapping[str, str]], Any]


# --------------------------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Option:
    name: str  # snake_case; also the YAML key (kebab-case accepted)
    env: str | None  # suffix after IAC_CODE_AGUI_
    default: Any  # None: unset (the Settings field is None, or `derive` computes it)
    convert: Callable[[Any], Any]
    error: str  # names the flag; `resolve` names the environment variable instead when the value came from there
    help: str
    flag: bool = True  # False: environment/YAML only (tokens)
    secret: bool = False
    setting: str | None = None  # the Settings field it fills (default: the same name)
    switch: bool = False  # a flag without a value (--allow-unauthenticated); env/YAML still take true/false
    #: documented older environment names (full names), read after the YAML file, before the default
    env_fallbacks: tuple[str, ...] = ()
    #: the Settings value when nothing sets the option (computed from other values or the environment)
    derive: Derive | None = None
    #: the Settings value of a value that is set, when the field's type differs from the option's
    to_field: Callable[[Any], Any] | None = None

    @property
    def field(self) -> str:
        return self.setting or self.name

    @property
    def env_name(self) -> str | None:
        return ENV_PREFIX + self.env if self.env else None

    @property
    def flag_name(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def yaml_key(self) -> str:
        return self.name


#: Connections a worker keeps free beyond its streams: /health and /metrics probes, the extensions (cancel,
#: status, capabilities), the console, and the quick 503s of runs refused at the limit.
CONNECTION_HEADROOM_MIN = 128
CONNECTION_HEADROOM_FRACTION = 0.10


def worker_connections_for(max_active_runs: int) -> int:
    """gunicorn's `worker_connections` for `--max-active-runs`: when gevent's pool is full the worker stops
    accepting, so without headroom a full worker could not even answer `/health` (docs/operations.md#capacity)."""
    return max_active_runs + max(CONNECTION_HEADROOM_MIN, int(max_active_runs * CONNECTION_HEADROOM_FRACTION))


def _derived_worker_connections(values: Mapping[str, Any], environ: Mapping[str, str]) -> int:
    return worker_connections_for(values["max_active_runs"])


def _derived_state_dir(values: Mapping[str, Any], environ: Mapping[str, str]) -> Path:
    return default_state_dir(environ)


OPTIONS: tuple[Option, ...] = (
    Option("host", "HOST", "127.0.0.1", _host, "--host must be an address.", "address to bind"),
    Option("port", "PORT", 8000, _port, "--port must be between 1 and 65535.", "port to bind"),
    Option("workers", "WORKERS", 2, _positive_int, "--workers must be >= 1.", "gunicorn gevent worker processes"),
    Option(
        "a2a_url", "A2A_URL", None, normalise_a2a_url, "--a2a-url must be a string.",
        "external loopback A2A kernel (default: a managed child)",
    ),
    Option(
        "managed_a2a", "MANAGED_A2A", "demo", _choice("demo", "iac-code"), "--managed-a2a must be demo or iac-code.",
        "managed upstream when no --a2a-url: demo or iac-code",
    ),
    Option(
        "iac_code_bin", "IAC_CODE_BIN", None, _string, "--iac-code-bin must be a path.",
        "iac-code executable for --managed-a2a iac-code (default: iac-code on PATH)",
    ),
    Option(
        "state_dir", "STATE_DIR", None, _string, "--state-dir must be a string.",
        "state directory (default <IAC_CODE_CONFIG_DIR or ~/.iac-code>/agui)",
        derive=_derived_state_dir, to_field=expand_path,
    ),
    Option(
        "interrupt_ttl", "INTERRUPT_TTL", 540.0, _positive, "--interrupt-ttl must be a positive number of seconds.",
        "seconds until an announced interrupt expires", setting="interrupt_ttl_s",
    ),
    Option(
        "heartbeat_interval", "HEARTBEAT_INTERVAL_S", 15.0, _positive,
        "--heartbeat-interval must be a positive number of seconds.", "seconds of silence before ': heartbeat'",
        setting="heartbeat_interval_s",
    ),
    Option(
        "idle_shutdown", "IDLE_SHUTDOWN", 0.0, _non_negative, "--idle-shutdown must be a non-negative number.",
        "exit after this many idle seconds (0: never)", setting="idle_shutdown_s",
    ),
    Option(
        "state_retention_days", "STATE_RETENTION_DAYS", 30.0, _positive,
        "--state-retention-days must be a positive number.", "prune idle thread files after this many days",
    ),
    Option(
        "max_active_runs", "MAX_ACTIVE_RUNS", 5000, _positive_int, "--max-active-runs must be >= 1.",
        "active streams per worker before new runs get 503 (also sizes gunicorn's worker_connections)",
        setting="max_active_runs_per_worker",
    ),
    Option(
        "max_thread_streams", "MAX_THREAD_STREAMS", 16, _positive_int, "--max-thread-streams must be >= 1.",
        "thread back-end (WSGI hosts other than gunicorn gevent): open streams per process before 503",
        setting="max_thread_streams_per_worker",
    ),
    Option(
        "graceful_timeout", "GRACEFUL_TIMEOUT", 30, _positive_int, "--graceful-timeout must be >= 1.",
        "seconds a stopping worker has; active runs get all but the last 10", setting="graceful_timeout_s",
    ),
    Option(
        "lease_ttl", "LEASE_TTL", 20.0, _positive, "--lease-ttl must be a positive number of seconds.",
        "grace seconds of a new run's lease before its worker's beacon must list it", setting="lease_ttl_s",
    ),
    Option(
        "metrics", "METRICS", True, _boolean, "--metrics must be true or false.", "serve Prometheus /metrics",
        setting="metrics_enabled",
    ),
    Option(
        "console", "CONSOLE", False, _boolean, "--console must be true or false.",
        "serve the web console at /console", setting="console_enabled",
    ),
    Option(
        "log_level", "LOG_LEVEL", "info", _choice("debug", "info", "warning", "error"),
        "--log-level must be debug, info, warning or error.", "debug, info, warning or error",
    ),
    Option(
        "log_format", "LOG_FORMAT", "text", _choice("text", "json"), "--log-format must be json or text.",
        "text or json",
    ),
    Option(
        "allowed_cwds", "ALLOWED_CWDS", None, _paths, "allowed_cwds must be a path list.",
        "workspace roots a run may use", flag=False,
        env_fallbacks=("IACCODE_A2A_ALLOWED_CWDS",), to_field=allowed_roots,
    ),
    Option("auth_token", "AUTH_TOKEN", None, _token("auth_token"), "auth_token must be a string.",
           "bearer token clients send", flag=False, secret=True),
    Option("a2a_token", "A2A_TOKEN", None, _token("a2a_token"), "a2a_token must be a string.",
           "bearer token for --a2a-url", flag=False, secret=True),
    Option(
        "allow_unauthenticated", "ALLOW_UNAUTHENTICATED", False, _boolean,
        "--allow-unauthenticated must be true or false.",
        "bind a non-loopback address without a token (Host must still be a loopback name)", switch=True,
    ),
    Option(
        "worker_connections", "WORKER_CONNECTIONS", None, _positive_int, "worker_connections must be >= 1.",
        "gunicorn connections per gevent worker (default: derived from --max-active-runs)", flag=False,
        derive=_derived_worker_connections,
    ),
    Option(
        "worker_tmp_dir", "WORKER_TMP_DIR", None, _string, "worker_tmp_dir must be a string.",
        "gunicorn heartbeat files (a tmpfs when / is read-only)", flag=False,
    ),
    Option(
        "runtime", "RUNTIME", "auto", _choice("auto", "gevent", "threads"), "runtime must be auto, gevent or threads.",
        "stream runtime (auto: gevent when patched)", flag=False, setting="runtime_backend",
    ),
    Option(
        "client_write_timeout", "CLIENT_WRITE_TIMEOUT", 60.0, _non_negative,
        "--client-write-timeout must be a non-negative number of seconds.",
        "seconds a client may leave a stream write unread before it is dropped (0: never)",
        setting="client_write_timeout_s",
    ),
    Option(
        "reattach_window", "REATTACH_WINDOW", 30.0, _non_negative,
        "--reattach-window must be a non-negative number of seconds.",
        "seconds a run keeps going after its last reader left, for a reattach (0: cancel at once)",
        setting="reattach_window_s",
    ),
    Option(
        "reattach_retention", "REATTACH_RETENTION", 3600.0, _positive,
        "--reattach-retention must be a positive number of seconds.",
        "seconds a finished run stays replayable (at least the reattach window)", setting="reattach_retention_s",
    ),
    Option(
        "reattach_max_bytes", "REATTACH_MAX_BYTES", 64 * 1024 * 1024, _non_negative_int,
        "--reattach-max-bytes must be a non-negative integer.",
        "bytes recorded per run for reattach; past it reattach answers 410 (0: no record)",
    ),
    Option(
        "reattach_budget", "REATTACH_BUDGET_BYTES", 1024 * 1024 * 1024, _non_negative_int,
        "--reattach-budget must be a non-negative integer (bytes).",
        "bytes all run records may take together; past it the oldest finished go first (0: no total bound)",
        setting="reattach_budget_bytes",
    ),
    Option(
        "reattach_min_free", "REATTACH_MIN_FREE_BYTES", 256 * 1024 * 1024, _non_negative_int,
        "--reattach-min-free must be a non-negative integer (bytes).",
        "free disk bytes kept for thread files: below it run records stop growing (0: no reserve)",
        setting="reattach_min_free_bytes",
    ),
    Option(
        "hub_watchdog_ms", "HUB_WATCHDOG_MS", 0.0, _non_negative,
        "--hub-watchdog-ms must be a non-negative number of milliseconds.",
        "log (WARNING, with the stack) any greenlet that holds a gevent worker's hub this long (0: off)",
    ),
    Option(
        "agent_check_port", "AGENT_CHECK_PORT", 0, _port_or_off, "--agent-check-port must be between 0 and 65535.",
        "gunicorn: answer HAProxy's agent-check with the free capacity on this port of --host (0: off)",
    ),
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of every option that has one, plus --config; each help ends with its default, as gunicorn's."""
    for option in OPTIONS:
        shown = "" if option.default is None else f" [{shown_value(option.default)}]"
        if option.switch:
            parser.add_argument(
                option.flag_name, dest=option.name, action="store_const", const=True, help=option.help + shown
            )
        elif option.flag:
            parser.add_argument(option.flag_name, dest=option.name, help=option.help + shown)
    parser.add_argument("--config", help="YAML file with the same keys (snake_case or kebab-case)")


@dataclass(frozen=True)
class Resolved:
    values: dict[str, Any]
    sources: dict[str, str]  # "flag", "env IAC_CODE_AGUI_X", "yaml <path>", "default"
    #: the --config file when it holds a token (used or overridden): its mode must keep it private
    secret_file: str | None = None

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> Resolved:
    """Every option's value and where it came from; the first invalid value raises ConfigError."""
    config_path: str | None = getattr(args, "config", None)
    yaml_config = load_yaml_config(config_path)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in OPTIONS:
        candidates: list[tuple[Any, str]] = []
        if option.flag:
            candidates.append((getattr(args, option.name, None), "flag"))
        if option.env_name:
            candidates.append((environ.get(option.env_name), "env " + option.env_name))
        candidates.append((yaml_config.get(option.yaml_key), f"yaml {config_path}"))
        candidates.extend((environ.get(name), "env " + name) for name in option.env_fallbacks)
        values[option.name], sources[option.name] = option.default, "default"
        for raw, source in candidates:
            if raw is None:
                continue
            try:
                values[option.name] = option.convert(raw)
            except ConfigError as exc:  # a converter's own message (the A2A URL's rules): say where it came from
                raise ConfigError(named_by_variable(str(exc), source)) from None
            except (TypeError, ValueError):
                raise ConfigError(error_message(option, source)) from None
            sources[option.name] = source
            break
    holds_secret = any(yaml_config.get(option.yaml_key) for option in OPTIONS if option.secret)
    return Resolved(values, sources, config_path if holds_secret else None)


def error_message(option: Option, source: str) -> str:
    """The option's error, naming the environment variable when the bad value came from there (an operator
    who set `IAC_CODE_AGUI_PORT=abc` should not go looking for a `--port` flag)."""
    subject, _, rest = option.error.partition(" ")
    if source.startswith("env ") and subject in (option.flag_name, option.name):
        return f"{source.removeprefix('env ')} {rest}"
    return option.error


def named_by_variable(message: str, source: str) -> str:
    """A converter's message about a value from the environment, prefixed with the variable unless it names it."""
    variable = source.removeprefix("env ")
    if not source.startswith("env ") or variable in message:
        return message
    return f"{variable}: {message}"


def worker_environment(resolved: Resolved, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment plus every resolved value as IAC_CODE_AGUI_* (what the managed child inherits)."""
    env = dict(environ)
    for option in OPTIONS:
        value = resolved[option.name]
        if option.env_name is None or value is None:
            continue
        env[option.env_name] = shown_value(value)
    return env


def shown_value(value: Any) -> str:
    """A value as the environment and `config show` write it (true/false, floats as Python reads them back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


# --------------------------------------------------------------------------------------- the Settings side


def option_for_field(field: str) -> Option:
    """The one option that fills `Settings.<field>`; KeyError when none does."""
    for option in OPTIONS:
        if option.field == field:
            return option
    raise KeyError(field)


def field_value(option: Option, values: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
    """The `Settings` value of a resolved option: derived when unset, converted to the field's type when set."""
    value = values[option.name]
    if value is None:
        return option.derive(values, environ) if option.derive is not None else None
    return option.to_field(value) if option.to_field is not None else value


#: Every option at its declared default, as `resolve` gives them when nothing is set.
DEFAULT_VALUES: Mapping[str, Any] = {option.name: option.default for option in OPTIONS}


def default_field_value(option: Option) -> Any:
    """What `Settings()` holds for the option's field: what `agui-bridge serve` gets with nothing set (and no
    IAC_CODE_CONFIG_DIR)."""
    return field_value(option, DEFAULT_VALUES, {})


#: How `config show` names where a derived default comes from (the value shown is the one in use).
DERIVED_FROM = {"worker_connections": "from max_active_runs", "state_dir": "from IAC_CODE_CONFIG_DIR or ~/.iac-code"}


def describe(resolved: Resolved, environ: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """Rows for `config show`: name, value (secrets masked), source, env variable. An option whose default is
    derived shows the value in use (`state_dir`: the directory `serve` and doctor use), as `environ` gives it."""
    rows = []
    for option in OPTIONS:
        value = resolved[option.name]
        if option.secret:
            shown = MASK if value else "(not set)"
        elif value is None and option.derive is not None:
            shown = f"{option.derive(resolved.values, environ or {})} ({DERIVED_FROM[option.name]})"
        elif value is None:
            shown = "(not set)"
        else:
            shown = shown_value(value) if isinstance(value, bool) else str(value)
        rows.append({"name": option.name, "value": shown, "source": resolved.sources[option.name],
                     "env": option.env_name or ""})  # fmt: skip
    return rows
