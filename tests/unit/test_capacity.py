"""One knob for capacity: --max-active-runs sizes the worker and gunicorn's worker_connections."""

from __future__ import annotations

import argparse
import resource

from agui_bridge.config import load_settings
from agui_bridge.config.options import describe, resolve, worker_connections_for
from agui_bridge.worker.hooks import gunicorn_settings, open_files_needed, raise_open_files_limit


def test_default_holds_five_thousand_streams_with_headroom() -> None:
    settings = load_settings({})
    assert settings.max_active_runs_per_worker == 5000
    assert settings.worker_connections == 5500
    assert gunicorn_settings(settings)["worker_connections"] == 5500


def test_worker_connections_follow_max_active_runs() -> None:
    settings = load_settings({"IAC_CODE_AGUI_MAX_ACTIVE_RUNS": "800"})
    assert settings.worker_connections == worker_connections_for(800) == 928
    # Small workers still keep room for probes and extensions.
    assert worker_connections_for(10) == 138
    for runs in (1, 50, 1000, 20000):
        assert worker_connections_for(runs) - runs >= max(128, runs // 10)


def test_explicit_worker_connections_still_wins() -> None:
    settings = load_settings({"IAC_CODE_AGUI_MAX_ACTIVE_RUNS": "800", "IAC_CODE_AGUI_WORKER_CONNECTIONS": "50"})
    assert settings.worker_connections == 50


def test_config_show_names_the_derived_value() -> None:
    rows = describe(resolve(argparse.Namespace(), {"IAC_CODE_AGUI_MAX_ACTIVE_RUNS": "100"}))
    row = next(r for r in rows if r["name"] == "worker_connections")
    assert row["value"] == "228 (from max_active_runs)" and row["source"] == "default"


def test_open_files_limit_is_raised_toward_what_a_full_worker_needs() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert open_files_needed(5500) == 11256
    assert raise_open_files_limit(min(soft, 64)) == 0  # already enough: untouched
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (soft, hard)
    wanted = soft + 16 if hard == resource.RLIM_INFINITY else min(soft + 16, hard)
    try:
        left = raise_open_files_limit(wanted)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= min(wanted, hard) or left
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
