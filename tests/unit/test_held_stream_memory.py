"""A held stream keeps nothing it has handed over, and no more than it needs (docs/design.md#stream-memory).

An idle stream waits for the kernel's next read in three places (the A2A stream reader, the run's `Upstream`,
the pump) and for the pump's next item in one (the run's read loop); what any of them still referenced while
waiting (the last batch, its events, the call's params) would stay in memory for the whole wait, once per
held stream.
"""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent.queue
import pytest

from agui_bridge.a2a.signals import A2AEvent
from agui_bridge.kernel import stream as kernel_stream
from agui_bridge.kernel.exchange import Endpoint, literal_family
from agui_bridge.kernel.stream import A2AStream
from agui_bridge.runs.pump import read_into
from agui_bridge.runs.upstream import Upstream
from agui_bridge.worker.runtime import GeventRuntime

RECORD = b'data: {"result": {"task": {"id": "t"}}}\r\n\r\n'


class Event:
    """Stands in for a decoded A2A event: can be weakly referenced, so the test sees when it is freed."""

    state = "working"


class Message:
    """Stands in for a parsed SSE record."""


class Params(dict[str, Any]):
    """A call's params that can be weakly referenced."""


class ScriptedResponse:
    """`kernel/exchange.Response` reading a scripted list of payloads; `on_read` runs before each read."""

    def __init__(self, payloads: list[bytes], on_read: list[Any]) -> None:
        self._payloads = payloads
        self._on_read = on_read
        self.done = False
        self.clean = False

    def read(self) -> bytes:
        for check in self._on_read:
            check()
        data = self._payloads.pop(0)
        self.done = not self._payloads
        return data


class ClosedSocket:
    def close(self) -> None:
        pass


def _freed(ref: weakref.ref[Any]) -> bool:
    gc.collect()
    return ref() is None


def test_the_a2a_stream_reader_keeps_no_handed_over_batch_while_it_reads_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refs: list[weakref.ref[Any]] = []

    class Parser:
        """One record per payload, each a weakly referenced object."""

        def feed(self, data: bytes) -> list[Message]:
            message = Message()
            refs.append(weakref.ref(message))
            return [message]

        def close(self) -> list[Message]:
            return []

    monkeypatch.setattr(kernel_stream, "SseParser", Parser)
    monkeypatch.setattr(kernel_stream, "decode_message", lambda message: Event())
    freed_before_read: list[bool] = []
    response = ScriptedResponse(
        [RECORD, RECORD], [lambda: freed_before_read.extend(_freed(ref) for ref in refs)]
    )  # fmt: skip
    batches = A2AStream(response, ClosedSocket(), lambda sock: None).batches()  # type: ignore[arg-type]
    first = next(batches)
    refs.append(weakref.ref(first[0]))
    del first
    assert len(next(batches)) == 1
    assert freed_before_read == [True, True]


def test_the_upstream_keeps_neither_the_params_sent_nor_a_handed_over_batch() -> None:
    refs: list[weakref.ref[Any]] = []
    freed_before_read: list[bool] = []

    class OneStream:
        def batches(self) -> Iterator[list[A2AEvent]]:
            yield [Event()]  # type: ignore[list-item]
            freed_before_read.extend(_freed(ref) for ref in refs)
            yield [Event()]  # type: ignore[list-item]

        def abort(self) -> None:
            pass

        def close(self) -> None:
            pass

    class Client:
        def open_stream(self, method: str, params: dict[str, Any]) -> OneStream:
            return OneStream()

    params = Params(message="hello")
    refs.append(weakref.ref(params))
    items = iter(Upstream(Client()).new_run(params))  # type: ignore[arg-type]
    del params
    first = next(items)
    assert isinstance(first, list)
    refs.append(weakref.ref(first[0]))
    del first
    next(items)
    assert freed_before_read == [True, True]


def test_the_pump_keeps_no_queued_item_while_it_reads_the_next() -> None:
    refs: list[weakref.ref[Any]] = []
    freed_before_read: list[bool] = []

    class Gate:
        def acquire(self, timeout: float, *, urgent: bool = True) -> bool:
            return True

        def release(self) -> None:
            pass

    class Runtime:
        start_gate = Gate()

        def queue_put(self, queue: list[Any], item: Any, timeout: float | None) -> None:
            if isinstance(item, Event):
                refs.append(weakref.ref(item))  # taken by the stream at once: the queue keeps nothing

    def items() -> Iterator[Event]:
        yield Event()
        freed_before_read.extend(_freed(ref) for ref in refs)

    read_into(items(), [], Runtime(), 1.0)  # type: ignore[arg-type]
    assert freed_before_read == [True]


def test_a_gevent_stream_queue_is_bounded_and_has_no_join_bookkeeping() -> None:
    """gevent's `Queue` adds `join()`/`task_done()` and an event for them to `SimpleQueue`; no stream uses them."""
    runtime = GeventRuntime()
    queue = runtime.make_queue(1)
    runtime.queue_put(queue, "first", 0)
    with pytest.raises(gevent.queue.Full):
        runtime.queue_put(queue, "second", 0)
    assert runtime.queue_get(queue, 0) == "first"
    assert not hasattr(queue, "task_done")


_TREE_SCRIPT = """
import sys
if sys.argv[1] == "patched":
    from gevent import monkey
    monkey.patch_all()
import gevent
from agui_bridge.config.settings import Settings
from agui_bridge.worker.process import configure_process
configure_process(Settings())
print(gevent.config.track_greenlet_tree)
"""


@pytest.mark.parametrize(
    ("mode", "operator_setting", "tracked"),
    [("patched", None, False), ("patched", "true", True), ("plain", None, True)],
)
def test_a_gevent_worker_does_not_record_each_greenlets_spawning_stack(
    mode: str, operator_setting: str | None, tracked: bool
) -> None:
    """Only in a patched process, and not when the operator set `GEVENT_TRACK_GREENLET_TREE` themselves."""
    env = {k: v for k, v in os.environ.items() if k != "GEVENT_TRACK_GREENLET_TREE"}
    if operator_setting is not None:
        env["GEVENT_TRACK_GREENLET_TREE"] = operator_setting
    command = [sys.executable, "-c", _TREE_SCRIPT, mode]
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True, env=env, cwd=root)
    assert out.stdout.strip() == str(tracked)


def test_an_ip_literal_upstream_is_connected_without_a_name_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under gevent a lookup of even a literal is a hand-off to the resolver's thread pool (and a deeper frame
    stack kept by the pump's greenlet); a name still goes through `create_connection`."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    looked_up: list[str] = []

    def create_connection(address: tuple[str, int], timeout: float) -> socket.socket:
        looked_up.append(address[0])
        return socket.socket()

    monkeypatch.setattr(socket, "create_connection", create_connection)
    with server:
        sock = Endpoint("http", "127.0.0.1", port, 5.0, 5.0).connect()
        sock.close()
        assert looked_up == []
        Endpoint("http", "localhost", port, 5.0, 5.0).connect().close()
    assert looked_up == ["localhost"]


@pytest.mark.parametrize(
    ("host", "family"),
    [("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6), ("localhost", None), ("fe80::1%eth0", None)],
)
def test_only_an_ip_literal_without_a_zone_skips_the_lookup(host: str, family: socket.AddressFamily | None) -> None:
    assert literal_family(host) == family
