"""The per-run event record that makes a dropped connection not a lost run (docs/design.md#reattach).

One append-only file per run under `<state-dir>/replay/`, named by a digest of (threadId, runId) so no
client text becomes a path. The file is itself a valid SSE stream:

    : record {"v":1,"threadId":..,"runId":..,"ros":<sha256 of rosInvocationId>,"owner":..,"startedMs":..}\\n\\n
    id: 1\\ndata: {"type":"RUN_STARTED",..}\\n\\n
    id: 2\\ndata: ..\\n\\n
    ...                                  (the last frame is RUN_FINISHED or RUN_ERROR)

The owning worker appends every frame before the client is shown it (one `write`, no fsync: the record
serves readers of a live server, and a crash loses at most what the page cache held, which the crash
ended anyway). Any worker reads it: a reattach replays the frames after the reader's cursor, then tails
the file until the terminal frame. Past `max_bytes` the owner stops recording and appends `: truncated`;
such a run answers reattach with 410 REPLAY_EXPIRED. Readers announce themselves with a marker file that
they touch every second (`<name>.readers/<token>`): the owner of a detached run counts them.

Retention (`sweep_records`) turns a finished record older than its retention into a tombstone
(`<name>.gone`, the header only), so a late reattach gets 410 instead of 404; tombstones go with the
thread files' retention. `replay/` as a whole has a budget and leaves a free-space reserve
(`replay_budget`): past either, the oldest ended records go first and a live record stops (`: truncated`).

This module is the writer (the owning worker); the layout is `reattach/format.py`, the readers'
side `reattach/reader.py`, retention `reattach/retention.py`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from agui_bridge.reattach.budget import CHARGE_STEP_BYTES, RecordBudget
from agui_bridge.reattach.format import (
    READERS_SUFFIX,
    RECORD_SUFFIX,
    TERMINAL_TYPES,
    TRUNCATED_FRAME,
    RecordHead,
    ensure_replay_dir,
    record_name,
    replay_dir,
)
from agui_bridge.reattach.reader import (
    readers_present,
)

log = logging.getLogger(__name__)


class RunRecord:
    """The owner's side: an `Emitter` sink that appends every frame before it is shown.

    A failing write never fails the run: recording stops (logged once) and a later reattach gets 410.
    """

    def __init__(
        self, state_dir: Path, head: RecordHead, *, max_bytes: int, budget: RecordBudget | None = None
    ) -> None:
        self.head = head
        self._state_dir = state_dir if isinstance(state_dir, Path) else Path(state_dir)
        self.name = record_name(head.thread_id, head.run_id)
        self.path = replay_dir(self._state_dir) / (self.name + RECORD_SUFFIX)
        self._max_bytes = max_bytes
        self._budget = budget
        self._unasked = 0  # bytes taken since the budget was last asked (docs/design.md#replay-budget)
        self._asked_once = False
        self._uncharged = -1  # bytes written since the budget was last told (-1: nothing written yet)
        self._fd: int | None = None
        self._header = head.encode()
        self._size = len(self._header)
        self._pending: list[bytes] = []  # frames of the current batch, written by `flush`
        self._ending = False  # terminal or truncated: the next flush is the last write
        self.stopped = False  # truncated, failed, or terminal: nothing more is written
        self.last_position = 0
        self.finished = False

    def frame(self, position: int, event: Any, data: bytes) -> None:
        """FrameSink: take `data` (already `id: n`-framed); `flush` writes the batch."""
        if self.stopped or self._ending:
            return
        over_record = self._size + len(data) > self._max_bytes
        if over_record or not self._within_budget(len(data)):
            self._pending.append(TRUNCATED_FRAME)
            self._ending = True
            bound = "its size bound" if over_record else "the replay budget or the free-space reserve"
            log.warning("run record reached %s; reattach to this run is no longer possible", bound)
            self.flush()
            return
        self._pending.append(data)
        self._size += len(data)
        self.last_position = position
        if event.get("type") in TERMINAL_TYPES:
            self.finished = self._ending = True
            self.flush()

    def _within_budget(self, size: int) -> bool:
        """Ask the worker's budget of `replay/` (docs/design.md#replay-budget) at this record's first frame,
        then once per `CHARGE_STEP_BYTES`: False once the budget or the free-space reserve refuses."""
        if self._budget is None:
            return True
        if self._asked_once and self._unasked + size < CHARGE_STEP_BYTES:
            self._unasked += size
            return True
        step = self._unasked + size + (0 if self._asked_once else len(self._header))
        self._asked_once, self._unasked = True, 0
        return self._budget.allows(step)

    def _charge(self, written: int) -> None:
        """Tell the budget what was written: at the first write, then per `CHARGE_STEP_BYTES`, and at the end."""
        if self._budget is None:
            return
        first = self._uncharged == -1
        self._uncharged = max(self._uncharged, 0) + written
        if first or self._ending or self._uncharged >= CHARGE_STEP_BYTES:
            self._budget.charge(self._uncharged)
            self._uncharged = 0

    def flush(self) -> None:
        """FrameSink: one `write` for the batch, before the emitter hands its bytes to the server. The
        file is created by the first flush, its header in the same write (no reader finds it headless)."""
        if self.stopped or not self._pending:
            return
        data, self._pending = b"".join(self._pending), []
        try:
            if self._fd is None:
                self._fd = self._create()
                data = self._header + data
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            log.warning("run record write failed; reattach to this run is no longer possible", exc_info=True)
            self._stop()
            return
        self._charge(len(data))
        if self._ending:
            self._stop()

    def _create(self) -> int:
        """The record file, new; its directory is made only when missing (a `mkdir` on every run's first
        frame would be a path walk and a system call on the hub, docs/design.md#record-dir-once)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        try:
            return os.open(self.path, flags, 0o600)
        except FileNotFoundError:
            ensure_replay_dir(self._state_dir)
            return os.open(self.path, flags, 0o600)

    def _stop(self) -> None:
        self.stopped = True
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self.flush()
        self._stop()

    def readers_present(self, now_s: float | None = None) -> bool:
        """Is some reader (on any worker) following this run now?"""
        return readers_present(replay_dir(self._state_dir) / (self.name + READERS_SUFFIX), now_s)
