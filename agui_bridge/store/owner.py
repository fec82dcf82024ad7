"""Who holds a run lease, and whether that process still exists (docs/design.md#lease-owner-id).

An owner is `host:pid:start`. The process start time (field 22 of /proc/<pid>/stat, in clock ticks
since boot) makes the id unique across PID reuse, so a lease left by a crashed worker is never
mistaken for one held by an unrelated process that later got the same pid.
"""

from __future__ import annotations

import os
import secrets
import socket

from agui_bridge.worker.fork import after_fork_in_child

_RANDOM_PREFIX = "r"  # start token of a process without /proc: random, checkable only by itself

_cache: str | None = None
_random_token: str | None = None


def _proc_start_time(pid: int | str) -> str | None:
    """Field 22 (starttime) of /proc/<pid>/stat, or None if unavailable or the process is a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    # Field 2 (comm) is parenthesised and may contain spaces or ')': split after the last ')'.
    _, sep, rest = raw.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 20:
        return None
    if fields[0] in {"Z", "X"}:  # field 3: a zombie/dead process can never renew its lease
        return None
    start = fields[19]  # fields[0] is field 3, so field 22 is index 19
    return start if start.isdigit() else None


def _own_random_token() -> str:
    global _random_token
    if _random_token is None:
        _random_token = _RANDOM_PREFIX + secrets.token_hex(8)
    return _random_token


def current_owner() -> str:
    """This process's owner id (its pid is part of it: a forked child computes its own)."""
    global _cache
    if _cache is None:
        pid = os.getpid()
        start = _proc_start_time("self") or _own_random_token()
        _cache = f"{socket.gethostname()}:{pid}:{start}"
    return _cache


def _forget_after_fork() -> None:
    """A forked child has another pid, so another owner id (docs/design.md#fork-registry)."""
    global _cache, _random_token
    _cache = _random_token = None


after_fork_in_child(_forget_after_fork)


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True


def owner_on_this_host(owner: str) -> bool:
    """Does a well-formed owner id name this host (so its pid can be checked here)?"""
    host, sep1, _start = owner.rpartition(":")
    host, sep2, pid_text = host.rpartition(":")
    return bool(sep1 and sep2 and pid_text.isdigit()) and host == socket.gethostname()


def owner_is_alive(owner: str) -> bool:
    """True unless the owner is provably gone.

    Other hosts cannot be checked here, so they count as alive and the lease expiry decides. A malformed
    owner counts as dead, so a lease nobody can identify is reclaimable.
    """
    host, sep1, rest = owner.rpartition(":")
    host, sep2, pid_text = host.rpartition(":")
    start = rest
    if not (sep1 and sep2 and host and pid_text.isdigit() and start):
        return False
    pid = int(pid_text)
    if host != socket.gethostname():
        return True
    if pid <= 0 or not _pid_exists(pid):
        return False
    if pid == os.getpid():
        return owner == current_owner()
    if start.startswith(_RANDOM_PREFIX):
        # Written by a process that had no /proc: the pid exists, PID reuse cannot be ruled out.
        return True
    return _proc_start_time(pid) == start
