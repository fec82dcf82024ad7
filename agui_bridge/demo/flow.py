"""Back-pressure between a demo turn's producer and the SSE streams that carry it (the demo's own pacing;
see agui_bridge/demo/README.md)."""

from __future__ import annotations

import asyncio

#: A stream may fall this many events behind before the producer waits for it (the SDK evicts a
#: subscriber that is 1024 events behind, which would truncate a fast ``[LONG n]`` turn).
PACING_WINDOW = 256


class FlowControl:
    """Back-pressure between a turn's producer and the SSE streams that carry it.

    a2a-sdk drops a subscriber whose queue fills up; a scripted agent can emit far faster than a
    client reads, so the executor waits while the slowest open stream is too far behind.
    """

    def __init__(self, window: int = PACING_WINDOW) -> None:
        self._window = window
        self._produced: dict[str, int] = {}
        self._streams: dict[str, dict[object, int]] = {}
        self._changed: dict[str, asyncio.Event] = {}

    def _event(self, task_id: str) -> asyncio.Event:
        return self._changed.setdefault(task_id, asyncio.Event())

    def open_stream(self, task_id: str, stream: object) -> None:
        """Register a stream that has just delivered its first event of ``task_id``."""
        # The first event is already produced and delivered, so the stream starts level.
        self._streams.setdefault(task_id, {})[stream] = self._produced.get(task_id, 0)

    def delivered(self, task_id: str, stream: object) -> None:
        """Count one more event handed to the client by ``stream``."""
        streams = self._streams.get(task_id)
        if streams is not None and stream in streams:
            streams[stream] += 1
            self._event(task_id).set()

    def close_stream(self, task_id: str, stream: object) -> None:
        """Forget a finished or disconnected stream (a gone client must not stall the turn)."""
        streams = self._streams.get(task_id)
        if streams is not None:
            streams.pop(stream, None)
            if not streams:
                del self._streams[task_id]
        self._event(task_id).set()

    def lag(self, task_id: str) -> int:
        """How far the slowest open stream is behind the producer (0 with no stream)."""
        streams = self._streams.get(task_id)
        if not streams:
            return 0
        return self._produced.get(task_id, 0) - min(streams.values())

    async def produced(self, task_id: str) -> None:
        """Count one produced event and wait while a stream lags more than the window."""
        self._produced[task_id] = self._produced.get(task_id, 0) + 1
        while self.lag(task_id) > self._window:
            event = self._event(task_id)
            event.clear()
            await event.wait()
        # Let the consumer and the streams run: an enqueue into a non-full queue never yields.
        await asyncio.sleep(0)

    def holds(self, task_id: str) -> bool:
        """True while any counter of ``task_id`` is kept."""
        return task_id in self._produced or task_id in self._streams or task_id in self._changed

    def forget(self, task_id: str) -> None:
        """Drop the counters of a task whose streams are all gone."""
        if task_id not in self._streams:
            self._produced.pop(task_id, None)
            self._changed.pop(task_id, None)
