"""The test harness's own hygiene: starting a bridge leaves no file of ours open."""

from __future__ import annotations

import gc
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.harness import BridgeServer


class RunningProcess:
    """A Popen stand-in that is up at once (no real server: only the harness's file handling is tested)."""

    pid = -1

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def poll(self) -> int | None:
        return None


class Healthy:
    status_code = 200


def test_starting_a_bridge_leaves_its_log_file_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "Popen", RunningProcess)
    monkeypatch.setattr(requests, "get", lambda *_a, **_k: Healthy())
    (tmp_path / "state").mkdir()
    server = BridgeServer(None, None, tmp_path / "state", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert server.start() is server
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert server.log_path.exists()
    server.process = None  # a stand-in: nothing to stop
