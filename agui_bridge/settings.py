"""Typed, frozen settings. Units live in the names; nothing here does I/O beyond reading a mapping."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agui_bridge.i18n import process_default_language

ENV_PREFIX = "IAC_CODE_AGUI_"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Settings:
    """Everything the app and the server need; built once per process by `cli` or `create_app`."""

    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 2
    a2a_url: str | None = None
    a2a_token: str | None = None
    managed_a2a: str = "demo"
    auth_token: str | None = None
    state_dir: Path = Path("~/.iac-code/agui")
    allowed_cwds: tuple[Path, ...] | None = None
    interrupt_ttl_s: float = 540.0
    heartbeat_interval_s: float = 15.0
    upstream_connect_timeout_s: float = 5.0
    upstream_read_timeout_s: float = 300.0
    upstream_call_timeout_s: float = 10.0
    lease_ttl_s: float = 20.0
    beacon_interval_s: float = 5.0  # each worker republishes the runs it holds (lease liveness)
    lock_timeout_s: float = 10.0
    max_request_bytes: int = 12 * MIB
    max_cancel_bytes: int = 64 * 1024
    max_active_runs_per_worker: int = 800
    max_thread_streams_per_worker: int = 16  # thread back-end only: a host thread + a pump thread each
    idle_shutdown_s: float = 0.0
    state_retention_days: float = 30.0
    metrics_enabled: bool = True
    queue_maxsize: int = 256
    client_stall_timeout_s: float = 60.0
    runtime_backend: str = "auto"
    default_language: str = "en"
    log_level: str = "info"
    log_format: str = "text"
    server_version: str = "0.1.0"
    console_enabled: bool = False

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def default_state_dir(environ: Mapping[str, str]) -> Path:
    """`<config-dir>/agui`, config-dir = IAC_CODE_CONFIG_DIR or ~/.iac-code (behaviour.md 8.1)."""
    config_dir = environ.get("IAC_CODE_CONFIG_DIR")
    base = Path(os.path.expandvars(os.path.expanduser(config_dir))) if config_dir else Path.home() / ".iac-code"
    return (base / "agui").resolve()


def expand_path(raw: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(raw))).resolve()


def allowed_cwds_from_env(environ: Mapping[str, str]) -> tuple[Path, ...] | None:
    """Allowed workspace roots: IAC_CODE_AGUI_ALLOWED_CWDS, else IACCODE_A2A_ALLOWED_CWDS, else None.

    Entries that are not existing directories are ignored (behaviour.md 2.3).
    """
    raw = environ.get(ENV_PREFIX + "ALLOWED_CWDS")
    if raw is None:
        raw = environ.get("IACCODE_A2A_ALLOWED_CWDS")
    if raw is None:
        return None
    roots: list[Path] = []
    for entry in raw.split(os.pathsep):
        if not entry.strip():
            continue
        path = Path(os.path.expanduser(entry.strip())).resolve()
        if path.is_dir():
            roots.append(path)
    return tuple(roots)


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


#: IAC_CODE_AGUI_<suffix> -> (Settings field, parser). `agui_bridge.config` validates the same
#: variables for the CLI and writes them for the workers; here they are only read back.
_ENV_FIELDS: tuple[tuple[str, str, Callable[[str], object]], ...] = (
    ("AUTH_TOKEN", "auth_token", str),
    ("A2A_TOKEN", "a2a_token", str),
    ("A2A_URL", "a2a_url", str),
    ("STATE_DIR", "state_dir", expand_path),
    ("HEARTBEAT_INTERVAL_S", "heartbeat_interval_s", float),
    ("INTERRUPT_TTL", "interrupt_ttl_s", float),
    ("RUNTIME", "runtime_backend", str),
    ("LOG_LEVEL", "log_level", str),
    ("LOG_FORMAT", "log_format", str),
    ("CONSOLE", "console_enabled", _flag),
    ("LEASE_TTL", "lease_ttl_s", float),
    ("IDLE_SHUTDOWN", "idle_shutdown_s", float),
    ("STATE_RETENTION_DAYS", "state_retention_days", float),
    ("MAX_ACTIVE_RUNS", "max_active_runs_per_worker", int),
    ("MAX_THREAD_STREAMS", "max_thread_streams_per_worker", int),
    ("METRICS", "metrics_enabled", _flag),
)


def settings_from_env(environ: Mapping[str, str], base: Settings | None = None) -> Settings:
    """Overlay the documented IAC_CODE_AGUI_* variables on `base` (used by wsgi.py and workers)."""
    settings = base or Settings(state_dir=default_state_dir(environ))
    changes: dict[str, object] = {}
    for suffix, field_name, parse in _ENV_FIELDS:
        if raw := environ.get(ENV_PREFIX + suffix):
            changes[field_name] = parse(raw)
    roots = allowed_cwds_from_env(environ)
    if roots is not None:
        changes["allowed_cwds"] = roots
    changes["default_language"] = process_default_language(environ)
    return settings.replace(**changes)
