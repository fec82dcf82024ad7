"""`Detacher`: a run's reattach side, detach instead of cancel (docs/design.md#reattach).

A `RunStream` owns one. It holds the run's record (the emitter's sink) and decides what happens when the
client leaves mid-run: with a reattach window the run keeps going in a background task that records every
frame, watched for readers on any worker; without one it ends, and the record still gets its end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from agui_bridge.config.settings import Settings
from agui_bridge.errors import Cancelled
from agui_bridge.protocol import events as ev
from agui_bridge.reattach.budget import record_budget
from agui_bridge.reattach.format import RecordHead, ros_digest
from agui_bridge.reattach.record import RunRecord
from agui_bridge.runs.admission import RunTicket
from agui_bridge.runs.emit import Emitter
from agui_bridge.runs.ending import RunEnd
from agui_bridge.runs.observer import RunObserver
from agui_bridge.runs.pump import Pacer
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


def new_record(settings: Settings, ticket: RunTicket) -> RunRecord | None:
    """The run's record, or None when reattach is off (`--reattach-max-bytes 0`)."""
    if settings.reattach_max_bytes <= 0:
        return None
    head = RecordHead(ticket.thread_id, ticket.run_id, ros_digest(ticket.ros_invocation_id), ticket.owner, ev.now_ms())
    budget = record_budget(
        settings.state_dir, budget_bytes=settings.reattach_budget_bytes,
        min_free_bytes=settings.reattach_min_free_bytes, beacon_interval_s=settings.beacon_interval_s,
        grace_s=settings.lease_ttl_s,
    )  # fmt: skip
    return RunRecord(settings.state_dir, head, max_bytes=settings.reattach_max_bytes, budget=budget)


class Detacher:
    """Detach instead of cancel: the record, the departure, the background driver and the reader watch.

    `live()` is the stream's answer to "is the generator started and not yet cleaned up?".
    """

    def __init__(
        self, settings: Settings, ticket: RunTicket, end: RunEnd, pacer: Pacer, emitter: Emitter,
        *, runtime: Runtime, live: Callable[[], bool], observer: RunObserver,
    ) -> None:  # fmt: skip
        self._window_s = settings.reattach_window_s
        self._ticket = ticket
        self._end = end
        self._pacer = pacer
        self._emitter = emitter
        self._runtime = runtime
        self._live = live
        self._observer = observer
        self.record = new_record(settings, ticket)
        emitter.sink = self.record
        self.window_expired = False  # a detached run's window ran out: it ends RUN_ERROR CANCELLED
        self.detached = False
        self.departed = False  # the client's socket reached EOF (client_departed)
        pacer.detaches_on_departure = self.can_detach  # yield to `body` (detach) or end the run

    def can_detach(self) -> bool:
        """The client went away mid-run and a reader may come back: keep the run going instead."""
        record = self.record
        return (
            self._window_s > 0
            and self._live()
            and not self._end.finished
            and not self.detached
            and not self._pacer.stop_requested
            and record is not None
            and not record.stopped
        )

    def client_departed(self) -> None:
        """The client closed its socket: with a window the run detaches, without one it ends."""
        if self.departed or self.detached or self._end.finished:
            return  # already acted on: a detached run goes on without its client
        self.departed = True
        self._pacer.request_depart()

    def body(self, frames: Iterator[bytes]) -> Iterator[bytes]:
        """What the server writes. When the client's socket closed and the run may detach, stop here without
        closing `frames`: the server then calls `close()`, which hands `frames` to the detached driver."""
        for frame in frames:
            if self.departed and self.can_detach():
                return
            yield frame

    def detach(self, generator: Iterator[bytes], client_socket: Any, cleanup: Callable[[], None]) -> None:
        """Hand the generator to a background task that drives it (recording every frame) until the run
        ends, or until the window passes with no reader on any worker, which cancels it."""
        self.detached = True
        self._pacer.client_gone = False  # a departure noticed before a failed write is handled by this detach
        if client_socket is not None:  # the connection is gone: give the socket back its own timeout now
            sock, previous = client_socket
            try:
                sock.settimeout(previous)
            except OSError:
                log.debug("client socket timeout not restored", exc_info=True)
        self._observer.run_detached()
        log.info("client left a live run: detached", extra={"run_id": self._ticket.run_id})
        run_id = self._ticket.run_id
        self._runtime.spawn(self._watch_readers, name=f"detached-watch:{run_id}")
        self._runtime.spawn(self._drive, generator, cleanup, name=f"detached:{run_id}")

    def _drive(self, generator: Iterator[bytes], cleanup: Callable[[], None]) -> None:
        try:
            for _ in generator:
                pass  # every frame was recorded by the emitter's sink; nobody is connected to show it
        except Exception:
            log.exception("detached run failed", extra={"run_id": self._ticket.run_id})
        finally:
            cleanup()

    def _watch_readers(self) -> None:
        """Cancel the run once no reader was seen for the whole window, or at once when its record stopped
        (no reader can ever reattach to it then)."""
        record = self.record
        assert record is not None
        last_seen = time.monotonic()
        interval_s = check_interval(self._window_s)
        while self._live() and not self._end.finished:
            self._runtime.sleep(interval_s)
            now = time.monotonic()
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
                log.info("no reader within the reattach window: cancelling", extra={"run_id": self._ticket.run_id})
                self._pacer.request_stop()
                return

    def close_record(self, *, abandoned: bool) -> None:
        """End the record at clean-up; an `abandoned` run (started, no terminal event) gets one recorded."""
        if self.record is None:
            return
        if abandoned:
            self._record_abandon()
        self.record.close()

    def _record_abandon(self) -> None:
        """The client left and the run was cancelled without a terminal event (window 0, or it could
        not detach): the record still ends, so a reattach gets RUN_ERROR CANCELLED instead of waiting."""
        shown_code = self._end.error_code  # the trace reports what the client was shown, not this
        try:
            self._emitter.record_only(self._end.error_events(Cancelled("client_disconnected")))
        except Exception:  # the run is over either way; only the record misses its end
            log.warning("the end of an abandoned run was not recorded", exc_info=True)
        finally:
            self._end.error_code = shown_code


__all__ = ["Detacher", "check_interval", "new_record"]
