"""One knob for capacity: --max-active-runs sizes the worker and gunicorn's worker_connections."""

from __future__ import annotations

import argparse
import os
import resource

import pytest

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


def test_a_worker_needs_two_open_files_per_stream_plus_its_own() -> None:
    spare = open_files_needed(0)
    assert spare > 0  # the listening socket, logs, the state files
    for connections in (1, 800, 5500):
        assert open_files_needed(connections) == 2 * connections + spare  # the client's and the kernel's socket


def test_open_files_limit_is_raised_toward_what_a_full_worker_needs() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # A soft limit below what is asked (lowering it is always allowed), restored below; well above the
    # files open now, so that no other thread of the process runs out meanwhile.
    low = len(os.listdir("/proc/self/fd")) + 512
    if soft == resource.RLIM_INFINITY or (hard != resource.RLIM_INFINITY and hard < low + 16):
        pytest.skip(f"open files limits ({soft}, {hard}) leave no room to raise the soft one")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
        assert raise_open_files_limit(low - 1) == 0  # already enough: untouched
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (low, hard)
        assert raise_open_files_limit(low + 16) == 0  # within the hard limit: raised to exactly what is needed
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (low + 16, hard)
        if hard != resource.RLIM_INFINITY:
            # More than the hard limit allows: raised as far as it goes, and the limit left is reported.
            assert raise_open_files_limit(hard + 1) == hard
            assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
