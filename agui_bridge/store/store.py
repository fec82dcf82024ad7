"""ThreadStore: one JSON file per AG-UI thread, shared safely by every worker process
(docs/design.md#decision-many-workers-one-truth, #state-write-protocol).

Rules it follows (docs/design.md#state-write-protocol, #state-lock, #state-cache):

* a `flock` per operation on a sidecar `<file>.lock` (`state.flock`: never polled, nothing kept across
  calls or inherited across fork), always with a finite timeout;
* read-modify-write always happens inside the lock, on the file as it is then: re-read, unless its
  `lstat` proves it is the very file this worker last wrote (`state.doc_cache`);
* writes are temp file + `os.replace` (+ file and directory fsync for power-class commits), so lock-free
  readers see the old or the new document, never a torn one; the write itself runs on the worker's
  writer thread (`store.writer`), batched with concurrent commits, never on the gevent hub;
* directories are 0700 and files 0600; nothing is created or read until a thread is first touched.

In front of the file lock sits an in-process lock per thread key, so greenlets (or threads) of one
worker queue in memory instead of each polling `flock`; the file lock stays the source of truth.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agui_bridge.observability import tracing
from agui_bridge.store import flock
from agui_bridge.store.codec import parse as _parse
from agui_bridge.store.codec import serialise as _serialise
from agui_bridge.store.doc_cache import DocumentCache
from agui_bridge.store.document import load_document
from agui_bridge.store.errors import InvalidThreadId, StateCorrupt, StateError, StateLockTimeout, StateWriteFailed
from agui_bridge.store.filewrite import close_file
from agui_bridge.store.keys import thread_file_stem
from agui_bridge.store.model import ThreadState
from agui_bridge.store.writer import Durability, FileSignature, WriteError, file_signature, state_writer
from agui_bridge.worker.fork import after_fork_in_child

__all__ = [
    "Durability",
    "InvalidThreadId",
    "StateCorrupt",
    "StateError",
    "StateLockTimeout",
    "StateWriteFailed",
    "ThreadStore",
    "ThreadTransaction",
]

THREADS_DIR = "threads"
DIR_MODE = 0o700
FILE_MODE = 0o600


@dataclass
class _KeyEntry:
    lock: threading.Lock
    users: int = 0


class _KeyedLocks:
    """Per-key in-process mutexes, created on demand and dropped when unused (bounded memory).

    `threading.Lock` is looked up at call time, so after gevent's monkey-patching these are cooperative
    gevent locks and under the thread back-end real locks. The guard is only held for dict updates,
    never across a blocking call, so it is safe whichever kind it turned out to be.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, _KeyEntry] = {}
        after_fork_in_child(self._forget_after_fork)

    def _forget_after_fork(self) -> None:
        """In a forked child the parent's holders do not exist (docs/design.md#fork-registry)."""
        self._guard, self._entries = threading.Lock(), {}

    @contextmanager
    def hold(self, key: str, timeout_s: float) -> Iterator[None]:
        with self._guard:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _KeyEntry(threading.Lock())
            entry.users += 1
        try:
            if not entry.lock.acquire(timeout=max(timeout_s, 0.0)):
                raise StateLockTimeout("thread is locked by another request of this process")
            try:
                yield
            finally:
                entry.lock.release()
        finally:
            with self._guard:
                entry.users -= 1
                if entry.users == 0 and self._entries.get(key) is entry:
                    del self._entries[key]


class ThreadTransaction:
    """One locked read-modify-write of a thread; only valid inside `ThreadStore.transaction`."""

    def __init__(self, store: ThreadStore, thread_id: str, path: Path, state: ThreadState | None) -> None:
        self.thread_id = thread_id
        self.path = path
        #: The thread as read from disk under the lock (None: no file), then as last committed.
        self.state = state
        self._store = store
        self._open = True

    def commit(self, state: ThreadState, durability: Durability = Durability.POWER) -> None:
        """Atomically write `state`; may be called more than once. Raises `StateWriteFailed`.

        Returns once the write has the `durability` asked for (docs/design.md#commit-durability): POWER (the default)
        is fsynced, CRASH is renamed into place (visible to every worker) and fsynced later.
        """
        self._check_open()
        if state.thread_id != self.thread_id:
            raise ValueError("state belongs to another thread")
        self._store._write(self.path, state, durability)
        self.state = state

    def delete(self) -> None:
        """Remove the thread file (retention); a later `commit` in this block recreates it."""
        self._check_open()
        self._store._unlink(self.path)
        self.state = None

    def _check_open(self) -> None:
        if not self._open:
            raise RuntimeError("transaction is closed: the thread lock is no longer held")

    def _close(self) -> None:
        self._open = False


class StoreObserver(Protocol):
    """Timings for metrics (`agui_bridge.observability.metrics.PrometheusObserver`); the store works without one."""

    def lock_wait(self, seconds: float) -> None: ...
    def state_write(self, seconds: float) -> None: ...


class ThreadStore:
    """Per-thread JSON files under `<root>/threads/`, locked across processes with `flock`."""

    def __init__(self, root: Path, lock_timeout_s: float = 10.0, observer: StoreObserver | None = None) -> None:
        if not lock_timeout_s > 0:
            raise ValueError("lock_timeout_s must be a positive, finite number of seconds")
        self._observer = observer
        self.root = Path(root)
        self.threads_dir = self.root / THREADS_DIR
        self.lock_timeout_s = float(lock_timeout_s)
        self._local_locks = _KeyedLocks()
        self._cache = DocumentCache()

    def path_for(self, thread_id: str) -> Path:
        """`<root>/threads/<stem>.json`; raises `InvalidThreadId` for an empty id."""
        return self.threads_dir / f"{thread_file_stem(thread_id)}.json"

    # ----------------------------------------------------------------------------------------- reading

    def read(self, thread_id: str) -> ThreadState | None:
        """Lock-free snapshot (safe because writers use `os.replace`); never use it to decide a write."""
        return self._read(self.path_for(thread_id), thread_id)

    def _read(self, path: Path, thread_id: str) -> ThreadState | None:
        raw = self._read_json(path)
        if raw is None:
            return None
        return load_document(raw, thread_id)

    @staticmethod
    def _read_json(path: Path) -> object | None:
        """Parsed JSON of `path`, None if missing. Symlinks and non-regular files are refused (8.3)."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StateCorrupt("thread file is a symlink") from None
            raise StateError(f"thread file unreadable ({errno.errorcode.get(exc.errno or 0, '?')})") from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise StateCorrupt("thread file is not a regular file")
            if stat.S_IMODE(info.st_mode) != FILE_MODE and info.st_uid == os.geteuid():
                with suppress(OSError):
                    os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read()
        except OSError as exc:
            raise StateError("thread file unreadable") from exc
        finally:
            close_file(fd)
        return _parse(data)

    # ----------------------------------------------------------------------------------------- locking

    @contextmanager
    def transaction(self, thread_id: str) -> Iterator[ThreadTransaction]:
        """Hold the thread's lock, yield its freshly read state; write only what is committed.

        Never nest transactions (same or other thread): a nested one on the same thread times out.
        """
        path = self.path_for(thread_id)
        started = time.monotonic()
        deadline = started + self.lock_timeout_s
        with self._local_locks.hold(path.name, self.lock_timeout_s):
            fd = self._acquire_file_lock(path, deadline)
            if self._observer is not None:
                self._observer.lock_wait(time.monotonic() - started)
            try:
                txn = ThreadTransaction(self, thread_id, path, self._read_locked(path, thread_id))
                try:
                    yield txn
                finally:
                    txn._close()
            finally:
                flock.release(fd)

    def _acquire_file_lock(self, path: Path, deadline: float) -> int:
        """The thread's file lock (`state.flock`); the directories are made on first use."""
        lock_path = f"{path}.lock"
        try:
            return flock.acquire(lock_path, deadline)
        except FileNotFoundError:
            self._ensure_dirs()
        try:
            return flock.acquire(lock_path, deadline)
        except FileNotFoundError as exc:
            raise StateError("thread file lock unavailable") from exc

    def _read_locked(self, path: Path, thread_id: str) -> ThreadState | None:
        """The thread as it is on disk now (under its lock): this worker's own last write if the file's
        `lstat` proves it is still that write (docs/design.md#state-cache), else read and validated."""
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return None
        except OSError:
            return self._read(path, thread_id)  # reports the error as a read does
        cached = self._cache.get(str(path), file_signature(info))
        if cached is not None:
            return cached
        return self._read(path, thread_id)

    def exists(self, thread_id: str) -> bool:
        """Whether the thread has a file, without taking (or creating) its lock: refusals that only
        need "no such thread" must not leave a lock file behind: state stays bounded
        (docs/design.md#decision-bounded-state)."""
        try:
            return os.path.lexists(self.path_for(thread_id))
        except ValueError as exc:
            raise StateError("thread file path unusable") from exc

    def delete(self, thread_id: str) -> None:
        """Remove a thread's file under its lock. The empty `.lock` sidecar stays (see `_unlink`)."""
        with self.transaction(thread_id) as txn:
            if txn.state is not None or os.path.lexists(txn.path):
                txn.delete()

    def iter_thread_ids(self) -> Iterator[str]:
        """threadId of every readable thread file; unreadable or misplaced files are skipped."""
        try:
            names = sorted(
                entry.name
                for entry in os.scandir(self.threads_dir)
                if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False)
            )
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StateError("state directory unreadable") from exc
        for name in names:
            try:
                raw = self._read_json(self.threads_dir / name)
            except StateError:
                continue
            thread_id = raw.get("threadId") if isinstance(raw, dict) else None
            if not isinstance(thread_id, str) or not thread_id:
                continue
            try:
                if f"{thread_file_stem(thread_id)}.json" != name:
                    continue
            except InvalidThreadId:
                continue
            yield thread_id

    # ----------------------------------------------------------------------------------------- writing

    def _ensure_dirs(self) -> None:
        """Create root and threads/ as 0700 on first use (never at construction)."""
        try:
            for directory in (self.root, self.threads_dir):
                if not directory.is_dir():
                    with suppress(FileExistsError):
                        directory.mkdir(mode=DIR_MODE, parents=True)
                        os.chmod(directory, DIR_MODE)  # mkdir's mode is filtered by the umask
        except OSError as exc:
            raise StateError("state directory unavailable") from exc

    @tracing.traced(
        "agui.state.commit",
        lambda _self, _path, state, durability: {
            "agui.thread_id": state.thread_id,
            "agui.durability": durability.value,
        },
    )
    def _write(self, path: Path, state: ThreadState, durability: Durability) -> None:
        started = time.monotonic()
        try:
            signature = self._write_file(path, state, durability)
        except BaseException:
            self._cache.drop(str(path))
            raise
        self._cache.put(str(path), signature, state)
        if self._observer is not None:
            self._observer.state_write(time.monotonic() - started)

    @staticmethod
    def _write_file(path: Path, state: ThreadState, durability: Durability) -> FileSignature | None:
        """Serialise here (a failure touches no file), write on the writer thread (`store.writer`)."""
        try:
            payload = _serialise(state)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise StateWriteFailed("thread state is not serialisable") from exc
        try:
            return state_writer().submit(path, payload, durability)
        except WriteError as exc:
            raise StateWriteFailed(exc.reason) from None

    def _unlink(self, path: Path) -> None:
        """Remove a thread file (crash class, docs/design.md#commit-durability). The sidecar lock file is kept on
        purpose: a waiter may already hold a descriptor on it, and unlinking it would let a newcomer lock
        a different inode."""
        self._cache.drop(str(path))
        try:
            state_writer().submit(path, None, Durability.CRASH)
        except WriteError as exc:
            raise StateWriteFailed(exc.reason) from None
