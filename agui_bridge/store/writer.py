"""The worker's state writer: every thread-file write runs on one real OS thread, batched (group commit).

Under gevent a blocking system call (write, fsync, rename) stops every greenlet of the worker, so a burst
of N commits would stall all streams for N fsyncs (docs/design.md#commit-durability). Here the greenlet that commits
hands a prepared write to a writer thread (one per durability class) and waits cooperatively; the writer
takes every write that is pending, performs them in order, fsyncs the power-class files (several at once,
docs/design.md#store-mechanisms) before renaming them, then each of their directories once, and only then
wakes the waiters. A waiter therefore still returns only after its fact is
where its class says it must be, so the fail-closed order of the commit points is unchanged.

Crash-class writes are visible (renamed) before their waiter wakes; their fsync is deferred by about a
second (at once when too many are outstanding), skipped for a file that a later write has replaced, and done
by a second thread (the syncer), so no commit ever waits behind a sync it did not ask for.
A thread's writes land in the order made: each waits, under the thread's lock, until it is done.

The waiting side works under both back-ends (`state.handoff`): in a gevent-patched process the waiter parks
its greenlet until the hub's async watcher (safe to signal from another thread) wakes it; otherwise it waits
on a native lock.
"""

from __future__ import annotations

import enum
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from agui_bridge.store.filewrite import FileSignature, file_signature
from agui_bridge.store.filewrite import close_file as _close
from agui_bridge.store.filewrite import create_temp as _create_temp
from agui_bridge.store.filewrite import fsync_dir as _fsync_dir
from agui_bridge.store.filewrite import replace as _replace
from agui_bridge.store.filewrite import stamp as _stamp
from agui_bridge.store.filewrite import syncfs_all as _syncfs_all
from agui_bridge.store.handoff import Waiter, native_primitives, new_waiter
from agui_bridge.worker.fork import after_fork_in_child

__all__ = [
    "Durability",
    "FileSignature",
    "StateWriter",
    "WriteError",
    "file_signature",
    "forget_state_writer",
    "state_writer",
]

#: A crash-class write is fsynced in the background once it is this old and still current: most are
#: replaced sooner (admission by the identity commit of the same run) and then need no sync at all.
SYNC_DELAY_S = 1.0
#: ... or at once, whatever their age, when this many are waiting (bounds open descriptors).
MAX_DEFERRED_SYNCS = 256
#: A deferred-sync batch this large is made durable by one syncfs(2) of its filesystem instead of an fsync
#: per file and directory (docs/design.md#state-writer); smaller ones keep the per-file fsyncs.
SYNCFS_MIN_FILES = 8
#: Aged writes are handed to the syncer at most this often (unless `MAX_DEFERRED_SYNCS` are waiting), so
#: a burst's writes reach it in batches rather than one or two at a time.
SYNC_BATCH_INTERVAL_S = 0.25
#: A power-class batch's files are fsynced by up to this many threads at once (the lane's and helpers).
PARALLEL_FSYNCS = 8
#: The writer wakes at least this often to hand aged writes to the syncer.
IDLE_POLL_S = 0.5


class Durability(enum.Enum):
    """What a commit must survive before what depends on it is shown (docs/design.md#commit-durability)."""

    #: fsynced (file, then its directory) before the commit returns.
    POWER = "power"
    #: written and renamed (visible to every process, survives a process crash) before it returns.
    CRASH = "crash"


class WriteError(Exception):
    """A write failed; `reason` is the store's message for it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Job:
    __slots__ = ("done", "durability", "error", "path", "payload", "replaced_fd", "signature", "waiter")

    def __init__(self, path: Path, payload: bytes | None, durability: Durability, waiter: Waiter) -> None:
        self.path = path
        #: None: remove the file (retention).
        self.payload = payload
        self.durability = durability
        self.waiter = waiter
        self.error: WriteError | None = None
        self.signature: FileSignature | None = None
        self.done = False
        #: The descriptor of the write this one replaced (kept for its deferred sync), closed after the wake.
        self.replaced_fd = -1

    def finish(self) -> None:
        """Wake the waiter (once)."""
        if not self.done:
            self.done = True
            self.waiter.complete()


class _Lane:
    """One writer thread and its queue: one for each durability class."""

    def __init__(self, durability: Durability, lock: Callable[[], Any]) -> None:
        self.durability = durability
        self.jobs: deque[_Job] = deque()
        self.signal = lock()  # a binary semaphore: released = "work may be pending"
        self.signal.acquire()

    def wake(self) -> None:
        with suppress(RuntimeError):  # already released: the thread is awake anyway
            self.signal.release()


class StateWriter:
    """One per process (`state_writer()`); started on first use, re-created in a forked child.

    Two writer threads, one per durability class, so a crash-class commit (an admission: what the time
    to RUN_STARTED waits for) never queues behind another run's fsyncs. Their order needs no care: a
    commit returns only when done and holds its thread's lock meanwhile, so no path ever has two writes
    in flight, in one lane or across both.
    """

    def __init__(self) -> None:
        lock, start_thread, patched = native_primitives()
        self._patched = patched
        self._lock_factory = lock
        self._start_thread = start_thread
        self._lanes = {durability: _Lane(durability, lock) for durability in Durability}
        #: Crash-class files renamed into place but not yet fsynced: path -> (open descriptor, written at).
        self._deferred: dict[Path, tuple[int, float]] = {}
        self._last_handoff = 0.0  # when `_sync_deferred` last handed a batch to the syncer (monotonic)
        self._deferred_lock = lock()  # both lanes forget entries; the crash lane adds and hands them on
        #: Deferred syncs handed to the syncer thread, which fsyncs them without delaying any commit.
        self._to_sync: deque[dict[Path, int]] = deque()
        self._sync_signal = lock()
        self._sync_signal.acquire()
        #: Test hook: called by a writer thread with each batch before writing it (holds that lane back).
        self.before_batch: Callable[[list[_Job]], None] | None = None
        for durability, lane in self._lanes.items():
            start_thread(self._run, (lane,), f"agui-state-writer-{durability.value}")
        start_thread(self._run_syncer, (), "agui-state-syncer")

    # -------------------------------------------------------------------------------- submitting side

    def submit(self, path: Path, payload: bytes | None, durability: Durability) -> FileSignature | None:
        """Write (or, with `payload` None, remove) `path` and wait until done; raises `WriteError`.

        Returns the written file's signature (`file_signature`), or None for a removal or a filesystem
        that did not keep the exact modification time this write gave the file.
        """
        job = _Job(path, payload, durability, new_waiter(self._patched, self._lock_factory))
        lane = self._lanes[durability]
        lane.jobs.append(job)
        lane.wake()
        job.waiter.wait()
        if job.error is not None:
            raise job.error
        return job.signature

    def pending(self, durability: Durability) -> int:
        """Writes of this class waiting for their lane (tests and diagnostics)."""
        return len(self._lanes[durability].jobs)

    # -------------------------------------------------------------------------------- writer threads

    def _run(self, lane: _Lane) -> None:
        while True:
            lane.signal.acquire(timeout=IDLE_POLL_S)
            batch: list[_Job] = []
            while lane.jobs:
                batch.append(lane.jobs.popleft())
            if batch:
                hook = self.before_batch
                if hook is not None:
                    hook(batch)
                try:
                    self._write_batch(batch)
                except BaseException as exc:  # never leave a waiter parked
                    for job in batch:
                        job.error = job.error or WriteError("thread state write failed")
                        job.finish()
                    if not isinstance(exc, Exception):
                        raise
                finally:
                    self._release_replaced(batch)
            if lane.durability is Durability.CRASH:
                self._sync_deferred()

    @staticmethod
    def _release_replaced(batch: list[_Job]) -> None:
        """Close the descriptors of the writes this batch replaced, after `_write_batch` (and its wakes):
        the rename no longer held the last reference to the inode it replaced, so freeing that inode
        (about 50 us on ext4) is off the commit's path."""
        for job in batch:
            if job.replaced_fd >= 0:
                with suppress(OSError):
                    _close(job.replaced_fd)
                job.replaced_fd = -1

    def _write_batch(self, batch: list[_Job]) -> None:
        durable: list[_Job] = []
        staged: list[tuple[_Job, int, str]] = []  # power-class files written, not yet fsynced or renamed
        for job in batch:
            job.replaced_fd = self._forget_deferred(job.path)
            if job.durability is Durability.POWER and job.payload is not None:
                entry = self._write_temp(job)
                if entry is None:
                    job.finish()
                else:
                    staged.append((job, *entry))
                continue
            fd = self._perform(job)
            if job.error is not None:
                job.finish()
            elif job.durability is Durability.POWER:
                durable.append(job)
                if fd is not None:
                    _close(fd)
            else:
                with self._deferred_lock:  # an unlink (no fd) only needs its directory synced
                    self._deferred[job.path] = (-1 if fd is None else fd, time.monotonic())
                job.finish()
        durable += self._sync_and_rename(staged)
        failed_dirs: set[Path] = set()
        for directory in sorted({job.path.parent for job in durable}):
            try:
                _fsync_dir(directory)
            except OSError:
                failed_dirs.add(directory)
        for job in durable:
            if job.path.parent in failed_dirs:
                # The new file is visible but may not survive a crash: report it, the caller fails closed.
                job.error = WriteError("thread state directory sync failed")
            job.finish()

    def _write_temp(self, job: _Job) -> tuple[int, str] | None:
        """A write up to its rename: the temporary file beside `job.path` written and stamped, returned as
        (descriptor, name); None when that failed (`job.error` says why, the file is gone). Both classes
        start here: a power-class one is fsynced next, a crash-class one renamed at once."""
        assert job.payload is not None
        try:
            fd, tmp_name = _create_temp(job.path)
        except OSError:
            job.error = WriteError("cannot create a temporary state file")
            return None
        try:
            view = memoryview(job.payload)
            while view:
                view = view[os.write(fd, view) :]
            job.signature = _stamp(fd)
        except OSError:
            self._discard(fd, tmp_name)
            job.error = WriteError("thread state write failed")
            return None
        return fd, tmp_name

    def _sync_and_rename(self, staged: list[tuple[_Job, int, str]]) -> list[_Job]:
        """fsync the batch's power-class files, several at once, then rename each into place in order.

        One thread fsyncing a batch's files one after another waited for one journal commit per file; files
        fsynced concurrently share the filesystem's commits (docs/design.md#store-mechanisms). Returns the
        jobs whose file is in place (their directories are synced next); the others are finished failed.
        """
        errors = self._fsync_all([fd for _, fd, _ in staged])
        done: list[_Job] = []
        for (job, fd, tmp_name), error in zip(staged, errors, strict=True):
            if error is None:
                try:
                    _replace(tmp_name, job.path)
                except OSError as exc:
                    error = exc
            if error is not None:
                self._discard(fd, tmp_name)
                job.error = WriteError("thread state write failed")
                job.finish()
                continue
            _close(fd)
            done.append(job)
        return done

    def _fsync_all(self, fds: list[int]) -> list[OSError | None]:
        """fsync each descriptor: this thread and up to `PARALLEL_FSYNCS - 1` short-lived native helpers
        take them from one queue. A failure is returned in its place."""
        results: list[OSError | None] = [None] * len(fds)
        queue = deque(enumerate(fds))

        def drain() -> None:
            while True:
                try:
                    index, fd = queue.popleft()
                except IndexError:
                    return
                try:
                    os.fsync(fd)
                except OSError as exc:
                    results[index] = exc

        finished = []
        for _ in range(min(len(fds), PARALLEL_FSYNCS) - 1):
            helper_done = self._lock_factory()
            helper_done.acquire()

            def helper(done: Any = helper_done) -> None:
                try:
                    drain()
                finally:
                    done.release()

            try:
                self._start_thread(helper, (), "agui-state-fsync")
            except RuntimeError:  # no thread to be had now: this one does the rest
                break
            finished.append(helper_done)
        drain()
        for helper_done in finished:
            helper_done.acquire()
        return results

    @staticmethod
    def _discard(fd: int, tmp_name: str) -> None:
        _close(fd)
        with suppress(OSError):
            os.unlink(tmp_name)

    def _perform(self, job: _Job) -> int | None:
        """Unlink a job's file (either class), or write and rename a crash-class one and return its fd."""
        if job.payload is None:
            try:
                os.unlink(job.path)
            except FileNotFoundError:
                pass
            except OSError:
                job.error = WriteError("thread state delete failed")
            return None
        entry = self._write_temp(job)
        if entry is None:
            return None
        fd, tmp_name = entry
        try:
            _replace(tmp_name, job.path)
        except OSError:
            self._discard(fd, tmp_name)
            job.error = WriteError("thread state write failed")
            return None
        return fd

    def _forget_deferred(self, path: Path) -> int:
        """A new write replaces `path`: the old inode's pending sync no longer matters. Returns its open
        descriptor (-1 if none), for the caller to close once the new file has replaced it."""
        with self._deferred_lock:
            entry = self._deferred.pop(path, None)
        return -1 if entry is None else entry[0]

    def _sync_deferred(self) -> None:
        """Hand crash-class writes older than `SYNC_DELAY_S` (all of them past `MAX_DEFERRED_SYNCS`) to the
        syncer thread, which makes them durable too (bounds the window) while the writer goes on: a commit
        never waits behind a sync it did not ask for."""
        now = time.monotonic()
        with self._deferred_lock:
            if not self._deferred:
                return
            if len(self._deferred) >= MAX_DEFERRED_SYNCS:
                due, self._deferred = self._deferred, {}
            else:
                if now - self._last_handoff < SYNC_BATCH_INTERVAL_S:
                    return
                # Entries are in the order written (a rewrite pops its path first), so the aged ones
                # are a prefix: stop at the first that is not.
                cutoff = now - SYNC_DELAY_S
                due = {}
                for path, entry in self._deferred.items():
                    if entry[1] > cutoff:
                        break
                    due[path] = entry
                if not due:
                    return
                for path in due:
                    del self._deferred[path]
            self._last_handoff = now
        self._to_sync.append({path: fd for path, (fd, _) in due.items()})
        with suppress(RuntimeError):
            self._sync_signal.release()

    # -------------------------------------------------------------------------------- syncer thread

    def _run_syncer(self) -> None:
        while True:
            self._sync_signal.acquire()
            while self._to_sync:
                self._sync(self._to_sync.popleft())

    @staticmethod
    def _sync(deferred: dict[Path, int]) -> None:
        """Make a batch of crash-class writes durable: one `syncfs` of their filesystem for a batch of at
        least `SYNCFS_MIN_FILES` (it flushes every file's data, inode and directory entry there, so it is
        at least as strong as the fsyncs it replaces), else each file and then its directory."""
        if len(deferred) >= SYNCFS_MIN_FILES and _syncfs_all(deferred):
            return
        for fd in deferred.values():
            if fd >= 0:
                with suppress(OSError):
                    os.fsync(fd)
                _close(fd)
        for directory in sorted({path.parent for path in deferred}):
            with suppress(OSError):
                _fsync_dir(directory)


_writer: StateWriter | None = None
_writer_guard = threading.Lock()


def state_writer() -> StateWriter:
    """This process's writer, started on first use."""
    global _writer
    writer = _writer
    if writer is not None:
        return writer
    with _writer_guard:
        if _writer is None:
            _writer = StateWriter()
        return _writer


def forget_state_writer() -> None:
    """The next `state_writer()` starts a new writer (tests that need one no earlier write reaches). The
    forgotten writer keeps its threads: they finish what they hold, then idle."""
    global _writer
    with _writer_guard:
        _writer = None


def _forget_after_fork() -> None:
    """In a forked child: the parent's writer threads do not exist here and its guard may have been copied
    while held (docs/design.md#fork-registry)."""
    global _writer, _writer_guard
    _writer, _writer_guard = None, threading.Lock()


after_fork_in_child(_forget_after_fork)
