"""Lightweight asyncio stand-ins for agui-bridge hosts behind HAProxy, and a small keep-alive HTTP client.

Each stub answers the routes HAProxy places as the bridge does, as far as placement can tell: `POST /` is 200
`text/event-stream` with an `Agui-Execution-Id` header (a new thread is recorded on the host that took it), the
status and reattach routes are 200 for a thread this host holds, the cancel route 200 for an execution it
announced, a `threadId` that is not a string is 400 INVALID_INPUT, and any request for a thread or execution
another stub holds is counted as misrouted and answered as a host without the record answers (409
RESUME_REQUIRED / 404 EXECUTION_NOT_FOUND). `/health` is 200 and an agent-check port answers
the host's free capacity as a percentage. Used by tests/e2e/test_haproxy_rules.py and bench/placement_sim.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import unquote

STATUS_PREFIX = "/extensions/iac-code/v1/threads/"
CANCEL_PREFIX = "/extensions/iac-code/v1/executions/"
REASONS = {200: "OK", 404: "Not Found", 409: "Conflict", 400: "Bad Request", 502: "Bad Gateway", 504: "Gateway Timeout"}


@dataclass
class Registry:
    """Which stub holds which thread and execution, shared by all stubs of one process."""

    thread_host: dict[str, str] = field(default_factory=dict)
    execution_host: dict[str, str] = field(default_factory=dict)
    misrouted: Counter[str] = field(default_factory=Counter)
    new_threads: Counter[str] = field(default_factory=Counter)


def response(status: int, body: bytes, content_type: str = "application/json", extra: str = "") -> bytes:
    """A whole HTTP/1.1 response with a content-length, so the connection stays usable."""
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'OK')}\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


def error(status: int, code: str) -> bytes:
    """The bridge's error envelope."""
    return response(status, json.dumps({"error": {"code": code, "message": code}}).encode())


class StubHost:
    """One stub host: an HTTP server and an agent-check server on `address`."""

    def __init__(self, name: str, address: str, registry: Registry, capacity_percent: int = 100) -> None:
        self.name = name
        self.address = address
        self.registry = registry
        self.capacity_percent = capacity_percent
        #: Close each connection when a request arrives, without an answer (a host dying mid-request).
        self.hang_up = False
        #: Answer every request but /health with this status and error code (the bridge's own 502 or 504).
        self.fail_with: tuple[int, str] | None = None
        self.port = 0
        self.agent_port = 0
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self, port: int = 0, agent_port: int = 0) -> StubHost:
        http = await asyncio.start_server(self._serve, self.address, port, backlog=1024)
        agent = await asyncio.start_server(self._agent, self.address, agent_port)
        self._servers = [http, agent]
        self.port = http.sockets[0].getsockname()[1]
        self.agent_port = agent.sockets[0].getsockname()[1]
        return self

    async def kill(self) -> None:
        """Stop answering at once, as a host whose process died: listeners closed, connections reset."""
        for server in self._servers:
            server.close()
        for writer in list(self._connections):
            writer.transport.abort()
        for server in self._servers:
            await server.wait_closed()

    async def _agent(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(f"{self.capacity_percent}%\n".encode())
        with contextlib.suppress(OSError):
            await writer.drain()
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One keep-alive connection: read each request whole, answer it (or hang up, when told to)."""
        self._connections.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    if line[:15].lower() == "content-length:":
                        length = int(line[15:])
                body = await reader.readexactly(length) if length else b""
                if self.hang_up and path != "/health":
                    writer.transport.abort()
                    return
                writer.write(
                    error(*self.fail_with) if self.fail_with and path != "/health" else self.answer(method, path, body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass  # a client gone, or the loop closing: a stub's connection just ends
        finally:
            self._connections.discard(writer)
            writer.close()

    def answer(self, method: str, path: str, body: bytes) -> bytes:
        """What a bridge would answer, as far as placement can tell; counts a request for another host's thread."""
        registry = self.registry
        if path == "/health":
            return response(200, b'{"status":"ok"}')
        if method == "POST" and path == "/":
            thread_id = json.loads(body)["threadId"]
            if not isinstance(thread_id, str):
                return error(400, "INVALID_INPUT")
            holder = registry.thread_host.get(thread_id)
            if holder is None:
                registry.thread_host[thread_id] = holder = self.name
                registry.new_threads[self.name] += 1
            if holder != self.name:
                registry.misrouted[self.name] += 1
                return error(409, "RESUME_REQUIRED")
            execution_id = str(uuid.uuid4())
            registry.execution_host[execution_id] = self.name
            events = b'data: {"type":"RUN_STARTED"}\n\ndata: {"type":"RUN_FINISHED"}\n\n'
            return response(200, events, "text/event-stream", f"agui-execution-id: {execution_id}\r\n")
        if method == "POST" and path.startswith(STATUS_PREFIX) and path.endswith("/status"):
            thread_id = unquote(path[len(STATUS_PREFIX) : -len("/status")])
            return self._held(registry.thread_host.get(thread_id), {"threadId": thread_id})
        if method == "GET" and path.startswith(STATUS_PREFIX) and path.endswith("/events") and "/runs/" in path:
            thread_id = unquote(path[len(STATUS_PREFIX) : path.rindex("/runs/")])
            return self._held(registry.thread_host.get(thread_id), {"threadId": thread_id})
        if method == "POST" and path.startswith(CANCEL_PREFIX) and path.endswith("/cancel"):
            execution_id = unquote(path[len(CANCEL_PREFIX) : -len("/cancel")])
            return self._held(registry.execution_host.get(execution_id), {"status": "cancelled"})
        return error(404, "NOT_FOUND")

    def _held(self, holder: str | None, body: dict[str, str]) -> bytes:
        """200 when this host holds the record; a host without it answers 404 (misrouted if another holds it)."""
        if holder == self.name:
            return response(200, json.dumps(body).encode())
        if holder is not None:
            self.registry.misrouted[self.name] += 1
        return error(404, "EXECUTION_NOT_FOUND")


@dataclass
class Answer:
    """One response read by Client: status, lower-cased headers, body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def code(self) -> str | None:
        """The error envelope's code, if the body is one."""
        with contextlib.suppress(ValueError, KeyError, TypeError):
            return str(json.loads(self.body)["error"]["code"])
        return None


class Client:
    """One keep-alive HTTP/1.1 connection to HAProxy (reopened when HAProxy closes it)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> Answer:
        """Send one request and read its whole answer, reconnecting once if HAProxy closed the idle connection."""
        if self._writer is None or self._reader is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._reader, self._writer
        writer.write(
            f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            await self.close()
            return await self.request(method, path, body)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        payload = await reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return Answer(status, headers, payload)

    async def close(self) -> None:
        """Close the connection; the next request opens a new one."""
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None
