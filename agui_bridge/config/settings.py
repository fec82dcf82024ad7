"""Typed, frozen settings. Units live in the names; nothing here does I/O beyond reading a mapping."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agui_bridge._version import __version__

ENV_PREFIX = "IAC_CODE_AGUI_"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Settings:
    """Everything the app and the server need; built and validated by `agui_bridge.config.load_settings`
    (every entry point), or directly by tests."""

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
    max_active_runs_per_worker: int = 5000
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
    server_version: str = __version__
    console_enabled: bool = False
    allow_unauthenticated: bool = False  # a non-loopback bind without a token (Host stays loopback-only)
    graceful_timeout_s: int = 30
    worker_connections: int = 5500  # config.worker_connections_for(max_active_runs_per_worker)
    worker_tmp_dir: str | None = None
    client_write_timeout_s: float = 60.0  # a stream write not taken by the client in time drops it
    iac_code_bin: str | None = None  # the managed iac-code executable (else PATH); read by managed.py
    #: Seconds a run whose last reader left keeps going (0: cancelled at once, as before reattach existed).
    #: `serve` defaults to 30 (config.py); Settings built directly (embedders, tests) keep the old behaviour.
    reattach_window_s: float = 0.0
    reattach_retention_s: float = 3600.0  # a finished run stays replayable this long
    reattach_max_bytes: int = 64 * MIB  # per-run record bound; 0: no record (no reattach)
    reattach_budget_bytes: int = 1024 * MIB  # all of replay/: oldest ended records go first; 0: no total bound
    reattach_min_free_bytes: int = 256 * MIB  # recorders stop below this much free disk (room for thread files)
    hub_watchdog_ms: float = 0.0  # gunicorn gevent workers: report hub stalls this long (docs/design.md#hub-watchdog)

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def default_state_dir(environ: Mapping[str, str]) -> Path:
    """`<config-dir>/agui`, config-dir = IAC_CODE_CONFIG_DIR or ~/.iac-code (docs/design.md#state-location)."""
    config_dir = environ.get("IAC_CODE_CONFIG_DIR")
    base = Path(os.path.expandvars(os.path.expanduser(config_dir))) if config_dir else Path.home() / ".iac-code"
    return (base / "agui").resolve()


def expand_path(raw: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(raw))).resolve()


def allowed_roots(raw: str) -> tuple[Path, ...]:
    """Allowed workspace roots from an os.pathsep-separated list; entries that are not existing
    directories are ignored (docs/design.md#workspace-cwd)."""
    roots: list[Path] = []
    for entry in raw.split(os.pathsep):
        if not entry.strip():
            continue
        path = Path(os.path.expanduser(entry.strip())).resolve()
        if path.is_dir():
            roots.append(path)
    return tuple(roots)
