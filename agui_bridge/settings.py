"""Typed, frozen settings. Units live in the names; nothing here does I/O beyond reading a mapping."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
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


def settings_from_env(environ: Mapping[str, str], base: Settings | None = None) -> Settings:
    """Overlay the documented IAC_CODE_AGUI_* variables on `base` (used by wsgi.py and workers)."""
    settings = base or Settings(state_dir=default_state_dir(environ))
    changes: dict[str, object] = {}
    if token := environ.get(ENV_PREFIX + "AUTH_TOKEN"):
        changes["auth_token"] = token
    if token := environ.get(ENV_PREFIX + "A2A_TOKEN"):
        changes["a2a_token"] = token
    if url := environ.get(ENV_PREFIX + "A2A_URL"):
        changes["a2a_url"] = url
    if state_dir := environ.get(ENV_PREFIX + "STATE_DIR"):
        changes["state_dir"] = expand_path(state_dir)
    roots = allowed_cwds_from_env(environ)
    if roots is not None:
        changes["allowed_cwds"] = roots
    if heartbeat := environ.get(ENV_PREFIX + "HEARTBEAT_INTERVAL_S"):
        changes["heartbeat_interval_s"] = float(heartbeat)
    if ttl := environ.get(ENV_PREFIX + "INTERRUPT_TTL"):
        changes["interrupt_ttl_s"] = float(ttl)
    if backend := environ.get(ENV_PREFIX + "RUNTIME"):
        changes["runtime_backend"] = backend
    if level := environ.get(ENV_PREFIX + "LOG_LEVEL"):
        changes["log_level"] = level
    if console := environ.get(ENV_PREFIX + "CONSOLE"):
        changes["console_enabled"] = console.strip().lower() in ("1", "true", "yes", "on")
    if log_format := environ.get(ENV_PREFIX + "LOG_FORMAT"):
        changes["log_format"] = log_format
    if lease_ttl := environ.get(ENV_PREFIX + "LEASE_TTL"):
        changes["lease_ttl_s"] = float(lease_ttl)
    if idle := environ.get(ENV_PREFIX + "IDLE_SHUTDOWN"):
        changes["idle_shutdown_s"] = float(idle)
    if retention := environ.get(ENV_PREFIX + "STATE_RETENTION_DAYS"):
        changes["state_retention_days"] = float(retention)
    if max_runs := environ.get(ENV_PREFIX + "MAX_ACTIVE_RUNS"):
        changes["max_active_runs_per_worker"] = int(max_runs)
    if metrics := environ.get(ENV_PREFIX + "METRICS"):
        changes["metrics_enabled"] = metrics.strip().lower() in ("1", "true", "yes", "on")
    changes["default_language"] = process_default_language(environ)
    return settings.replace(**changes) if changes else settings
