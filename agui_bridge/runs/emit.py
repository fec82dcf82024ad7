"""The one way out of a stream: every AG-UI event a client is shown passes through `Emitter`.

Runs and guidance hand their events to `Emitter.events`, which numbers them (1 for `RUN_STARTED`,
then one more per event: the event's position in its run's stream), counts them for metrics, frames
them as SSE with `id: <n>` (the cursor a reattaching client sends back, docs/design.md#reattach) and
offers each frame to an optional `FrameSink` (the run's record) before the bytes go to the WSGI server.
Heartbeats are comments, not events: they carry no position and are not offered to the sink
(docs/design.md#stream-pump-heartbeat).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agui_bridge.protocol.events import Event
from agui_bridge.protocol.sse import HEARTBEAT_FRAME, encode_numbered
from agui_bridge.runs.observer import RunObserver


class FrameSink(Protocol):
    """Something that wants every frame a stream shows, in order (a recorder, a test)."""

    def frame(self, position: int, event: Event, data: bytes) -> None: ...


def _flush(sink: FrameSink | None) -> None:
    """A sink may batch the frames of one `events` call (the run record writes them in one syscall)."""
    flush = getattr(sink, "flush", None)
    if flush is not None:
        flush()


class Emitter:
    __slots__ = ("_observer", "_sink", "position")

    def __init__(self, observer: RunObserver, sink: FrameSink | None = None) -> None:
        self._observer = observer
        self._sink = sink
        #: How many events were emitted so far: the position of the last one.
        self.position = 0

    @property
    def sink(self) -> FrameSink | None:
        """Offered every frame, given at construction (a run's record): nobody swaps it mid-run."""
        return self._sink

    def events(self, events: Sequence[Event]) -> bytes:
        """Frame a batch of events as one buffer, so one upstream read becomes one socket write."""
        self._observer.events([event["type"] for event in events])
        sink = self._sink
        position = self.position
        frames = []
        for event in events:
            position += 1
            data = encode_numbered(position, event)
            if sink is not None:
                sink.frame(position, event, data)
            frames.append(data)
        self.position = position
        _flush(sink)  # recorded before the bytes go out
        return frames[0] if len(frames) == 1 else b"".join(frames)

    def record_only(self, events: Sequence[Event]) -> None:
        """Number and offer events to the sink without showing them: the end of a run whose client is
        gone, so its record still ends with a terminal event (docs/design.md#reattach)."""
        sink = self._sink
        for event in events:
            self.position += 1
            if sink is not None:
                sink.frame(self.position, event, encode_numbered(self.position, event))
        _flush(sink)

    def heartbeat(self) -> bytes:
        self._observer.heartbeat()
        return HEARTBEAT_FRAME


__all__ = ["Emitter", "FrameSink"]
