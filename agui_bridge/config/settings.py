"""Typed, frozen settings, and how a resolution of the declared options becomes them.

Every field's default comes from its declaration: an option of `config/options.py` (`declared`), or, for the
few values no operator sets, `internal` with its reason. So `Settings()` (tests, embedders, the Flask test
client) holds exactly what `agui-bridge serve` runs with when nothing is set, and a unit test fails if a field
is declared nowhere. Units live in the names; nothing here does I/O beyond reading a mapping. stdlib only
(the gunicorn master builds these before fork).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from agui_bridge._version import __version__
from agui_bridge.config.loopback import is_loopback_host
from agui_bridge.config.options import OPTIONS, Resolved, default_field_value, field_value, option_for_field, resolve
from agui_bridge.config.values import ConfigError
from agui_bridge.i18n.language import SOURCE_LANGUAGE, process_default_language

MIB = 1024 * 1024


def declared(field: str) -> Any:
    """The dataclass field of the option that fills `field`, with that option's default (a derived default is
    computed per instance: the state directory follows HOME)."""
    option = option_for_field(field)
    metadata = {"option": option.name}
    if option.derive is not None:
        return dataclasses.field(default_factory=partial(default_field_value, option), metadata=metadata)
    return dataclasses.field(default=option.default, metadata=metadata)


def internal(default: Any, why: str) -> Any:
    """A field no flag, environment variable or YAML key sets: the bridge's own constant (tests and embedders
    may still pass another value). `why` is its documentation."""
    return dataclasses.field(default=default, metadata={"internal": why})


@dataclass(frozen=True)
class Settings:
    """Everything the app and the server need; built and validated by `agui_bridge.config.load_settings`
    (every entry point), or directly by tests and embedders, with the same defaults."""

    host: str = declared("host")
    port: int = declared("port")
    agent_check_port: int = declared("agent_check_port")  # 0: off (docs/design.md#agent-check)
    workers: int = declared("workers")
    a2a_url: str | None = declared("a2a_url")
    a2a_token: str | None = declared("a2a_token")
    managed_a2a: str = declared("managed_a2a")
    auth_token: str | None = declared("auth_token")
    state_dir: Path = declared("state_dir")  # noqa: RUF009 - declared() returns a dataclasses.field
    allowed_cwds: tuple[Path, ...] | None = declared("allowed_cwds")  # None: cwd + temp dir (runs/workspace.py)
    interrupt_ttl_s: float = declared("interrupt_ttl_s")
    heartbeat_interval_s: float = declared("heartbeat_interval_s")
    upstream_connect_timeout_s: float = internal(5.0, "seconds to connect to the A2A kernel (loopback)")
    upstream_read_timeout_s: float = internal(300.0, "seconds a kernel stream may stay silent (it heartbeats)")
    upstream_call_timeout_s: float = internal(10.0, "seconds of a unary A2A call (cancel, get task)")
    lease_ttl_s: float = declared("lease_ttl_s")
    beacon_interval_s: float = internal(5.0, "each worker republishes the runs it holds (lease liveness)")
    lock_timeout_s: float = internal(10.0, "seconds to wait for a thread file's lock before a retryable error")
    max_request_bytes: int = internal(12 * MIB, "a POST / body; deploy/nginx.conf's client_max_body_size matches")
    max_cancel_bytes: int = internal(64 * 1024, "a cancel body")
    max_active_runs_per_worker: int = declared("max_active_runs_per_worker")
    max_thread_streams_per_worker: int = declared("max_thread_streams_per_worker")
    idle_shutdown_s: float = declared("idle_shutdown_s")
    state_retention_days: float = declared("state_retention_days")
    metrics_enabled: bool = declared("metrics_enabled")
    queue_maxsize: int = internal(256, "events buffered between a run's pump and its response")
    client_stall_timeout_s: float = internal(
        60.0, "seconds a run's pump waits for room in its queue (a reader that stopped reading) before failing"
    )
    runtime_backend: str = declared("runtime_backend")
    default_language: str = internal(
        SOURCE_LANGUAGE, "load_settings takes it from the locale (LANGUAGE, LC_ALL, LC_MESSAGES, LANG)"
    )
    log_level: str = declared("log_level")
    log_format: str = declared("log_format")
    server_version: str = internal(__version__, "the package version, reported by /health and capabilities")
    console_enabled: bool = declared("console_enabled")
    allow_unauthenticated: bool = declared("allow_unauthenticated")
    graceful_timeout_s: int = declared("graceful_timeout_s")
    worker_connections: int = declared("worker_connections")
    worker_tmp_dir: str | None = declared("worker_tmp_dir")
    client_write_timeout_s: float = declared("client_write_timeout_s")
    iac_code_bin: str | None = declared("iac_code_bin")
    reattach_window_s: float = declared("reattach_window_s")
    reattach_retention_s: float = declared("reattach_retention_s")
    reattach_max_bytes: int = declared("reattach_max_bytes")
    reattach_budget_bytes: int = declared("reattach_budget_bytes")
    reattach_min_free_bytes: int = declared("reattach_min_free_bytes")
    hub_watchdog_ms: float = declared("hub_watchdog_ms")  # gevent workers: log hub stalls (docs/design.md#hub-watchdog)

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def build_settings(resolved: Resolved, environ: Mapping[str, str], *, serving: bool = True) -> Settings:
    """The typed `Settings` of resolved values: each option fills its field; then, for a server (not for
    `state prune`, which binds nothing), the cross-field rules."""
    changes: dict[str, Any] = {option.field: field_value(option, resolved.values, environ) for option in OPTIONS}
    changes["default_language"] = process_default_language(environ)
    settings = Settings(**changes)
    if serving:
        check_settings(settings)
    return settings


def check_settings(settings: Settings) -> None:
    """Rules that involve several values. Secure by default: no token means loopback only."""
    if settings.agent_check_port and settings.agent_check_port == settings.port:
        raise ConfigError("--agent-check-port must differ from --port.")
    if settings.reattach_retention_s < settings.reattach_window_s:
        raise ConfigError("--reattach-retention must be at least --reattach-window.")
    if not settings.auth_token and not settings.allow_unauthenticated and not is_loopback_host(settings.host):
        raise ConfigError(
            f"refusing to listen on {settings.host} without a token: set IAC_CODE_AGUI_AUTH_TOKEN, or pass "
            "--allow-unauthenticated (IAC_CODE_AGUI_ALLOW_UNAUTHENTICATED=true) to accept the risk."
        )


#: The one line `serve` (with the demo as its managed upstream) and `demo-agent` print without the extra.
DEMO_EXTRA_HINT = (
    "the demo agent needs the 'demo' extra: pip install 'agui-bridge[demo]' "
    "(or pass --a2a-url to use your own A2A server)"
)
_DEMO_MODULES = ("a2a", "uvicorn")
#: The one line of an entry point that starts no managed child (wsgi.py, the gunicorn configs, waitress)
#: when no A2A URL is set: there is no default URL to fall back on.
NO_A2A_URL = (
    "no A2A upstream: set IAC_CODE_AGUI_A2A_URL to your A2A server's loopback URL "
    "(only `agui-bridge serve` starts one itself without it)"
)


def require_demo_extra() -> None:
    """Raise ConfigError unless the demo agent's dependencies are installed.

    `find_spec` looks the packages up without importing them: this process may become the gunicorn
    master, which must not load a2a-sdk (the demo runs as a child process).
    """
    if any(importlib.util.find_spec(name) is None for name in _DEMO_MODULES):
        raise ConfigError(DEMO_EXTRA_HINT)


def require_a2a_upstream(settings: Settings, *, starts_managed_child: bool = False) -> None:
    """Every entry point's one check that it has an A2A upstream before it serves; ConfigError (one line)
    otherwise, with the exit status of that entry point (docs/configuration.md#exit-codes: 2 for `serve`, 3 for
    `wsgi.py` under gunicorn, 22 under uWSGI). With a URL there is nothing to check. Without one, only an entry
    point that starts a managed child (`serve`) has an upstream, and for the demo agent its packages must be
    installed (docs/design.md#managed-upstream)."""
    if settings.a2a_url is not None:
        return
    if not starts_managed_child:
        raise ConfigError(NO_A2A_URL)
    if settings.managed_a2a == "demo":
        require_demo_extra()


def unauthenticated_warning(settings: Settings) -> str | None:
    """The start-up warning when the operator opted out of the token on a non-loopback address."""
    if settings.auth_token or is_loopback_host(settings.host):
        return None
    return (
        f"listening on {settings.host} WITHOUT a token (--allow-unauthenticated): requests are accepted "
        "only with a loopback Host header (localhost, 127.0.0.1, [::1]); set IAC_CODE_AGUI_AUTH_TOKEN."
    )


def load_settings(environ: Mapping[str, str], args: argparse.Namespace | None = None) -> Settings:
    """The one parse and validation of every entry point; the first bad value raises ConfigError."""
    return build_settings(resolve(args or argparse.Namespace(), environ), environ)
