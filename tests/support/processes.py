"""Looking at another process from outside, through /proc: its environment and whether it is gone."""

from __future__ import annotations

import time
from pathlib import Path


def process_environment(pid: int) -> dict[str, str]:
    """The environment `pid` was started with (what a secret must never be part of)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def running(pid: int) -> bool:
    """The process exists and has not exited (a zombie nobody reaped yet has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != b"Z"


def gone(pid: int, timeout_s: float = 10.0) -> bool:
    """The process no longer exists (or is a zombie nobody reaped yet)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not running(pid):
            return True
        time.sleep(0.1)
    return False
