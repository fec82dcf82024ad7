"""The demo A2A 1.0 JSON-RPC server: a2a-sdk routes + bearer auth + ``/health``, on loopback only.

It is the bridge's upstream in tests and in the default run (``--managed-a2a demo``), so it is
started the way the managed iac-code child is: ``--host 127.0.0.1 --port N`` with the bearer token
in ``IACCODE_A2A_HTTP_TOKEN``; readiness is ``GET /health``.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    SendMessageRequest,
    Task,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agui_bridge.demo.executor import DemoAgentExecutor, FlowControl

TOKEN_ENV = "IACCODE_A2A_HTTP_TOKEN"  # noqa: S105 (a variable name, not a secret)
HEALTH_PATH = "/health"
#: Task history kept per task (first message + the most recent ones): a ``[LONG 100000]`` turn
#: would otherwise make every event copy an ever-growing history (quadratic time).
HISTORY_LIMIT = 200
_LOOPBACK_NAMES = frozenset({"localhost"})


def token_from_env(environ: Mapping[str, str]) -> str | None:
    """The bearer token from ``IACCODE_A2A_HTTP_TOKEN`` (the kernel's variable); empty = none."""
    token = environ.get(TOKEN_ENV, "").strip()
    return token or None


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (``127.0.0.0/8``, ``::1``)."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _BoundedHistoryTaskStore(InMemoryTaskStore):
    """InMemoryTaskStore that trims each saved task's history in place (see HISTORY_LIMIT)."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        excess = len(task.history) - HISTORY_LIMIT
        if excess > 0:
            # In place on purpose: the SDK's TaskManager keeps this very object as its snapshot.
            del task.history[1 : 1 + excess]
        await super().save(task, context)


class _PacedRequestHandler(DefaultRequestHandler):
    """DefaultRequestHandler that reports each streamed event to the executor's FlowControl."""

    def __init__(self, flow: FlowControl, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._flow = flow

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        stream = object()
        task_id: str | None = None
        try:
            async for event in super().on_message_send_stream(params, context):
                if task_id is None:
                    task_id = str(event.id if isinstance(event, Task) else event.task_id)
                    self._flow.open_stream(task_id, stream)
                yield event
                self._flow.delivered(task_id, stream)
        finally:
            if task_id is not None:
                self._flow.close_stream(task_id, stream)


class BearerAuthMiddleware:
    """Require ``Authorization: Bearer <token>`` on every HTTP route except ``/health``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") == HEALTH_PATH:
            await self._app(scope, receive, send)
            return
        supplied = b""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                supplied = value
                break
        if hmac.compare_digest(supplied, self._expected):
            await self._app(scope, receive, send)
            return
        body = json.dumps({"error": {"code": "UNAUTHORIZED", "message": "Missing or invalid bearer token."}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def build_agent_card(url: str = "http://127.0.0.1/") -> AgentCard:
    """The demo agent's card (JSON-RPC, A2A 1.0, streaming)."""
    return AgentCard(
        name="agui-bridge demo agent",
        description="Scripted A2A agent imitating the iac-code kernel's wire dialect.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="demo",
                name="Scripted demo turns",
                description="Plain, IaC, reasoning, tool, slow, failing and long turns chosen by keyword.",
                tags=["demo", "iac"],
            )
        ],
    )


async def _health(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def create_demo_app(token: str | None) -> ASGIApp:
    """The demo agent as an ASGI app: JSON-RPC at ``/``, the agent card, ``GET /health``."""
    flow = FlowControl()
    card = build_agent_card()
    handler = _PacedRequestHandler(
        flow,
        agent_executor=DemoAgentExecutor(flow),
        task_store=_BoundedHistoryTaskStore(),
        agent_card=card,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    routes = [
        Route(HEALTH_PATH, _health, methods=["GET"]),
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/"),
    ]
    app: ASGIApp = Starlette(routes=routes, lifespan=lifespan)
    if token:
        app = BearerAuthMiddleware(app, token)
    return app


def run_demo_agent(host: str, port: int, token: str | None) -> None:
    """Serve the demo agent with uvicorn until interrupted; loopback hosts only."""
    if not is_loopback_host(host):
        raise ValueError(
            f"The demo A2A agent may only listen on a loopback address (127.0.0.1, ::1, localhost), not {host!r}."
        )
    import uvicorn

    uvicorn.run(
        create_demo_app(token),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
