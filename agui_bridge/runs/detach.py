"""`Detacher`: a run's reattach side, detach instead of cancel (docs/design.md#reattach).

A `RunStream` owns one. It holds the run's record (the emitter's sink, both built by `runs/context.py`) and
decides what happens when the client leaves mid-run: with a reattach window the run keeps going in a background
task that records every frame, watched for readers on any worker; without one it ends, and the record still gets
its end. The tie is one way: the stream uses the detacher, and the detacher knows of the run only what it is
given (its id, its record, its mailbox, whether it has ended), never the admission, the ending or the pump.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from agui_bridge.config.settings import Settings
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.events import Event
from agui_bridge.reattach.budget import record_budget
from agui_bridge.reattach.format import RecordHead, ros_digest
from agui_bridge.reattach.record import RunRecord
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.mailbox import Mailbox
from agui_bridge.runs.observer import RunObserver
from agui_bridge.worker.runtime import Runtime

log = logging.getLogger(__name__)

#: How often a detached run looks for readers (docs/design.md#reattach): at most once a second, and four
#: times per window for a short one. A reader's marker stays fresh for `READER_FRESH_S` (3 s), so none is
#: missed; a thousand detached runs looked four times a second cost a third of the hub (bench/results).
_DETACHED_CHECK_S = 0.25
_DETACHED_CHECK_MAX_S = 1.0


def check_interval(window_s: float) -> float:
    """The detached run's polling period for its reattach window."""
    return min(_DETACHED_CHECK_MAX_S, max(_DETACHED_CHECK_S, window_s / 4))


def new_record(settings: Settings, thread_id: str, run_id: str, ros_invocation_id: str, owner: str) -> RunRecord | None:
    """The run's record, or None when reattach is off (`--reattach-max-bytes 0`)."""
    if settings.reattach_max_bytes <= 0:
        return None
    head = RecordHead(thread_id, run_id, ros_digest(ros_invocation_id), owner, ev.now_ms())
    budget = record_budget(
        settings.state_dir, budget_bytes=settings.reattach_budget_bytes,
        min_free_bytes=settings.reattach_min_free_bytes, beacon_interval_s=settings.beacon_interval_s,
        grace_s=settings.lease_ttl_s,
    )  # fmt: skip
    return RunRecord(settings.state_dir, head, max_bytes=settings.reattach_max_bytes, budget=budget)


class Ending(Protocol):
    """What the detacher reads of the run's ending (`runs/ending.RunEnd`)."""

    @property
    def finished(self) -> bool: ...


class Detacher:
    """Detach instead of cancel: the record, the departure, the background driver and the reader watch.

    The run is live from its body's first step until `close_record` (its clean-up): only a live run detaches.
    """

    __slots__ = (
        "_began", "_closed", "_emitter", "_end", "_mailbox", "_observer", "_record", "_run_id", "_runtime",
        "_window_s", "departed", "detached", "window_expired",
    )  # fmt: skip

    def __init__(
        self, window_s: float, record: RunRecord | None, *, run_id: str, end: Ending, mailbox: Mailbox,
        emitter: Emitter, runtime: Runtime, observer: RunObserver,
    ) -> None:  # fmt: skip
        self._window_s = window_s
        self._record = record
        self._run_id = run_id
        self._end = end
        self._mailbox = mailbox
        self._emitter = emitter
        self._runtime = runtime
        self._observer = observer
        self._began = False  # the body took its first step
        self._closed = False  # the run's clean-up closed the record
        self.window_expired = False  # a detached run's window ran out: it ends RUN_ERROR CANCELLED
        self.detached = False
        self.departed = False  # the client's socket reached EOF (client_departed)

    @property
    def record(self) -> RunRecord | None:
        """The run's record (None when recording is off): the emitter's sink, given at construction."""
        return self._record

    def _live(self) -> bool:
        return self._began and not self._closed

    def can_detach(self) -> bool:
        """The client went away mid-run and a reader may come back: keep the run going instead."""
        record = self._record
        return (
            self._window_s > 0
            and self._live()
            and not self._end.finished
            and not self.detached
            and not self._mailbox.stop_requested
            and record is not None
            and not record.stopped
        )

    def client_departed(self) -> None:
        """The client closed its socket (`runtime.watch_client_eof`): act now, as a disconnect would at the next
        write, instead of at the next heartbeat. With a reattach window the run detaches (the body hands it to
        the stream's `close()`); without one it ends and its task is cancelled."""
        if self.departed or self.detached or self._end.finished:
            return  # already acted on: a detached run goes on without its client
        self.departed = True
        self._mailbox.request_depart()

    def body(self, frames: Iterator[bytes]) -> Iterator[bytes]:
        """What the server writes. When the client's socket closed and the run may detach, stop here without
        closing `frames`: the server then calls `close()`, which hands `frames` to the detached driver."""
        self._began = True
        for frame in frames:
            if self.departed and self.can_detach():
                return
            yield frame

    def detach(self, generator: Iterator[bytes], cleanup: Callable[[], None]) -> None:
        """Hand the generator to a background task that drives it (recording every frame) until the run
        ends, or until the window passes with no reader on any worker, which cancels it."""
        self.detached = True
        self._mailbox.forget_departure()  # a departure noticed before a failed write is handled by this detach
        self._observer.run_detached()
        run_id = self._run_id
        log.info("client left a live run: detached", extra={"run_id": run_id})
        self._runtime.spawn(self._watch_readers, name=f"detached-watch:{run_id}")
        self._runtime.spawn(self._drive, generator, cleanup, name=f"detached:{run_id}")

    def _drive(self, generator: Iterator[bytes], cleanup: Callable[[], None]) -> None:
        try:
            for _ in generator:
                pass  # every frame was recorded by the emitter's sink; nobody is connected to show it
        except Exception:
            log.exception("detached run failed", extra={"run_id": self._run_id})
        finally:
            cleanup()

    def _watch_readers(self) -> None:
        """Cancel the run once no reader was seen for the whole window, or at once when its record stopped
        (no reader can ever reattach to it then)."""
        record = self._record
        assert record is not None
        last_seen = self._runtime.monotonic()
        interval_s = check_interval(self._window_s)
        while self._live() and not self._end.finished:
            self._runtime.sleep(interval_s)
            now = self._runtime.monotonic()
            if record.stopped and not record.finished:
                expired = True  # truncated or unwritable: every reattach is 410, no reader can come
            elif record.readers_present():
                last_seen = now
                expired = False
            else:
                expired = now - last_seen >= self._window_s
            if expired:
                self.window_expired = True
                self._observer.window_expired()
                log.info("no reader within the reattach window: cancelling", extra={"run_id": self._run_id})
                self._mailbox.request_stop()
                return

    def close_record(self, abandoned_end: Callable[[], Sequence[Event]] | None = None) -> None:
        """End the record at clean-up. A run that started and ended without a terminal event (the client left,
        window 0 or no detach) passes `abandoned_end`, the events that end it, so the record still ends and a
        reattach gets RUN_ERROR CANCELLED instead of waiting."""
        self._closed = True
        record = self._record
        if record is None:
            return
        if abandoned_end is not None:
            try:
                self._emitter.record_only(abandoned_end())
            except Exception:  # the run is over either way; only the record misses its end
                log.warning("the end of an abandoned run was not recorded", exc_info=True)
        record.close()


__all__ = ["Detacher", "check_interval", "new_record"]
