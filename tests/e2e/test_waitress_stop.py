"""deploy/waitress_serve.py stops within its graceful time whatever signal dispositions it inherited, and a slow
client still receives the last events of its stream before the connection closes."""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import REPO_ROOT, StreamReader, WsgiHost, custom, new_thread_id, run_body

pytestmark = pytest.mark.e2e

GRACEFUL_S = 12


def ignore_sigint() -> None:
    """What a shell does for a command started in the background (`cmd &` without job control)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_the_waitress_launcher_stops_within_its_graceful_time_with_sigint_ignored(
    tmp_path: Path, demo_url: str, demo_token: str
) -> None:
    host = WsgiHost(
        "waitress-drain", demo_url, demo_token, tmp_path / "state", tmp_path,
        IAC_CODE_AGUI_GRACEFUL_TIMEOUT=str(GRACEFUL_S),
    )  # fmt: skip
    with host.log_path.open("ab") as log:
        host.process = subprocess.Popen(
            host.command(), cwd=REPO_ROOT, env=host.environment(), stdout=log, stderr=log,
            start_new_session=True, preexec_fn=ignore_sigint,
        )  # fmt: skip
    try:
        host.wait_ready()
        response = host.post(run_body(new_thread_id(), "slow [SLOW 30]", tmp_path))
        reader = StreamReader(response)
        reader.until(lambda events: bool(custom(events, "iac-code.session.v1")))
        host.process.send_signal(signal.SIGTERM)
        # The drain's wait, the stop of the stream, then waitress's own close: all inside graceful_timeout.
        assert host.process.wait(GRACEFUL_S) == 0, host.log_path.read_text()[-3000:]
        events = assert_valid_agui_stream(reader.rest(), expect_terminal="RUN_ERROR")
        assert events[-1]["code"] == "CANCELLED"
    finally:
        host.stop()


def load_waitress_launcher() -> ModuleType:
    """deploy/ is no package: the launcher module by its path."""
    spec = importlib.util.spec_from_file_location("waitress_serve", REPO_ROOT / "deploy" / "waitress_serve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BigStreamApp:
    """A WSGI app whose one response (several MB, then a terminal line) outgrows the socket buffers of a
    client that does not read, so that most of it waits in waitress's output buffers."""

    TERMINAL = b"event: RUN_FINISHED\n\n"

    def __init__(self) -> None:
        self.done = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> BigStreamApp:
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        return self

    def __iter__(self) -> Iterator[bytes]:
        for _ in range(64):
            yield b"data: " + b"x" * 65_536 + b"\n\n"
        yield self.TERMINAL

    def close(self) -> None:
        """waitress calls this once the whole response is in its buffers."""
        self.done.set()


def slow_client(port: int) -> socket.socket:
    """A client with a tiny receive window that has sent its request and reads nothing yet."""
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.settimeout(20)
    client.connect(("127.0.0.1", port))
    client.sendall(b"GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return client


def read_to_close(client: socket.socket) -> bytes:
    received = bytearray()
    while chunk := client.recv(1 << 16):
        received += chunk
    return bytes(received)


@dataclass
class HeldStream:
    """The waitress launcher serving one `BigStreamApp` response to a `slow_client` that reads nothing yet."""

    launcher: ModuleType
    app: BigStreamApp
    server: Any
    socket_map: dict[int, Any]
    stop: Any
    loop: threading.Thread
    client: socket.socket

    def stop_launcher(self, flush_deadline: float) -> None:
        """What the launcher's signal handler does: ask the loop to stop, flushing until `flush_deadline`."""
        self.stop.request(flush_deadline=flush_deadline)
        self.server.pull_trigger()


@contextmanager
def held_stream() -> Iterator[HeldStream]:
    """The launcher's serve loop on a thread of its own, and a slow client's request to it (closed after)."""
    launcher = load_waitress_launcher()
    app = BigStreamApp()
    socket_map: dict[int, Any] = {}
    server = launcher.create_server(app, map=socket_map, host="127.0.0.1", port=0, threads=2)
    stop = launcher.StopRequest()
    loop = threading.Thread(target=launcher.serve_until, args=(server, socket_map, stop), daemon=True)
    loop.start()
    client = slow_client(int(server.effective_port))
    try:
        yield HeldStream(launcher, app, server, socket_map, stop, loop, client)
    finally:
        client.close()


def test_a_slow_client_receives_its_streams_last_event_when_the_waitress_launcher_stops() -> None:
    with held_stream() as held:
        assert held.app.done.wait(20), "the app's response never reached waitress's buffers"
        assert held.launcher.output_pending(held.server), "the response should still wait in waitress's buffers"
        held.stop_launcher(flush_deadline=time.monotonic() + 30)
        received = read_to_close(held.client)
    held.loop.join(30)
    assert not held.loop.is_alive()
    assert received.rstrip(b"\r\n0").endswith(BigStreamApp.TERMINAL.rstrip(b"\n")), received[-200:]


def test_a_client_that_never_reads_holds_the_waitress_launcher_no_longer_than_its_flush_deadline() -> None:
    with held_stream() as held:
        assert held.app.done.wait(20)
        held.stop_launcher(flush_deadline=time.monotonic())
        held.loop.join(30)
        assert not held.loop.is_alive()
        assert not held.socket_map, "every socket closes once the flush deadline has passed"
