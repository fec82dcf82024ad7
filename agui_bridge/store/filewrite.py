"""The system calls of one state-file write, for the writer threads (`store.writer`, docs/design.md#state-writer).

Each function here blocks in the kernel and must only run on a writer or syncer thread, never on the
gevent hub: naming and creating the temporary file, stamping it for the cache, renaming it into place,
and flushing directories or a whole filesystem.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "FILE_MODE",
    "FileSignature",
    "close_file",
    "create_temp",
    "file_signature",
    "fsync_dir",
    "replace",
    "stamp",
    "syncfs_all",
]

FILE_MODE = 0o600
_REPLACE_RETRY_DELAYS_S = (0.01, 0.05, 0.1)


def _plain_close() -> Callable[[int], None]:
    """`os.close` as the C library does it, even after gevent's patching.

    gevent's `os.close` first checks the descriptor with `fcntl` and `fstat` (two more system calls, each
    a GIL release and re-take) so that it can cancel I/O watchers on a socket or pipe, and closes a
    regular file plainly. Everything the state layer closes is a regular file or a directory that no
    watcher ever polled, so the plain close is what gevent does anyway, minus two system calls.
    """
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a hard dependency
        return os.close
    original: Callable[[int], None] = monkey.get_original("os", "close")
    return original


#: Close a state file's, lock file's or directory's descriptor (see `_plain_close`).
close_file = _plain_close()

#: What identifies one write of a thread file: (st_dev, st_ino, st_size, st_mtime_ns, st_mode).
FileSignature = tuple[int, int, int, int, int]


def file_signature(info: os.stat_result) -> FileSignature:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode)


def stamp(fd: int) -> FileSignature | None:
    """Make the file private (0600) and give it a modification time to the nanosecond (the clock's, not the
    filesystem's tick, which every file written in the same few milliseconds shares), then read its
    signature. While the cache (`state.doc_cache`) remembers it, a file whose stat shows the same inode,
    size and time is this very write (docs/design.md#state-cache). None if the filesystem rounded the time."""
    now = time.time_ns()
    os.utime(fd, ns=(now, now))
    info = os.fstat(fd)
    if stat.S_IMODE(info.st_mode) != FILE_MODE:  # created 0600, unless the umask took bits away
        os.fchmod(fd, FILE_MODE)
        info = os.fstat(fd)
    return file_signature(info) if info.st_mtime_ns == now else None


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        close_file(fd)


_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: Names this process has used for temporary files; with the pid, unique among live processes.
_temp_counter = itertools.count()
#: Attempts at a fresh name before giving up (a name is only taken by a file a killed process left).
_TEMP_ATTEMPTS = 100


def create_temp(target: Path) -> tuple[int, str]:
    """Open a new private temporary file beside `target`: `.<name>.<pid>-<n>.tmp`, created with O_EXCL.

    `tempfile.mkstemp` draws random names (and retries) for directories that strangers share; the state
    directory is 0700 and the writer is its only creator in this process, so the pid and a counter
    are unique among live processes, and O_EXCL (with O_NOFOLLOW) refuses a leftover of a killed process
    with the same pid, whose name is then skipped (docs/design.md#state-writer). One `open`, no Python-side
    name drawing: about a fifth of the writer's CPU per write went to `mkstemp` (bench/results).
    """
    prefix = f"{target.parent}/.{target.name}.{os.getpid()}-"
    for _ in range(_TEMP_ATTEMPTS):
        name = f"{prefix}{next(_temp_counter)}.tmp"
        try:
            return os.open(name, _TEMP_FLAGS, FILE_MODE), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary state file name", prefix)


def replace(source: str, target: Path) -> None:
    """`os.replace`, retried briefly on PermissionError (a reader holding the file on some platforms)."""
    for delay in _REPLACE_RETRY_DELAYS_S:
        try:
            os.replace(source, target)
            return
        except PermissionError:
            time.sleep(delay)
    os.replace(source, target)


def _load_syncfs() -> Callable[[int], int] | None:
    """Linux's syncfs(2) through the C library (the os module has none), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


_syncfs = _load_syncfs()


def syncfs_all(deferred: dict[Path, int]) -> bool:
    """One syncfs per filesystem the batch's files are on (a ctypes call: the GIL is released meanwhile),
    then the descriptors closed; False (nothing closed) when syncfs is missing or fails, so the caller
    fsyncs. Thread files live in many directories but nearly always on one filesystem: one call."""
    if _syncfs is None:
        return False
    synced: set[int] = set()
    for directory in sorted({path.parent for path in deferred}):
        try:
            fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return False
        try:
            device = os.fstat(fd).st_dev
            if device not in synced and _syncfs(fd) != 0:
                return False
            synced.add(device)
        except OSError:
            return False
        finally:
            close_file(fd)
    for fd in deferred.values():
        if fd >= 0:
            close_file(fd)
    return True
