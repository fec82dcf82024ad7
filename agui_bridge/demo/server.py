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
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
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
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
)
from a2a.utils.errors import TaskNotFoundError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agui_bridge.demo.executor import DemoAgentExecutor, FlowControl

TOKEN_ENV = "IACCODE_A2A_HTTP_TOKEN"  # noqa: S105 (a variable name, not a secret)
HEALTH_PATH = "/health"
ENSURE_RESTORED_PATH = "/iac-code/session/ensure-restored"
BACKUP_NOT_READY_MESSAGE = "Session backup is still synchronizing. Retry after 3 seconds."
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
    """InMemoryTaskStore that trims each saved task's history in place (see HISTORY_LIMIT).

    For a task that has asked for input, the saved ``metadata.iac_code`` is the executor's
    task-level view (``input``, ``permission``, ``executionControl``...), which later turns do not
    clear: ``GetTask`` after the answer still shows the old input, as the kernel's does.
    """

    def __init__(self, task_metadata: Mapping[str, dict[str, Any]] | None = None) -> None:
        super().__init__()
        self._task_metadata: Mapping[str, dict[str, Any]] = task_metadata if task_metadata is not None else {}

    async def save(self, task: Task, context: ServerCallContext) -> None:
        excess = len(task.history) - HISTORY_LIMIT
        if excess > 0:
            # In place on purpose: the SDK's TaskManager keeps this very object as its snapshot.
            del task.history[1 : 1 + excess]
        overlay = self._task_metadata.get(task.id)
        if overlay is not None:
            task.metadata.Clear()
            task.metadata.update({"iac_code": overlay})
        await super().save(task, context)


class _PacedRequestHandler(DefaultRequestHandler):
    """DefaultRequestHandler that reports each streamed event to the executor's FlowControl.

    It also answers like the kernel where a2a-sdk differs: a permission answer is validated before
    any stream starts (JSON-RPC -32602), and ``SubscribeToTask`` on a task with no running turn is
    ``-32001 "Task <id> is not active"``.
    """

    def __init__(self, flow: FlowControl, executor: DemoAgentExecutor, **kwargs: Any) -> None:
        super().__init__(agent_executor=executor, **kwargs)
        self._flow = flow
        self._demo = executor

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        self._demo.validate_answer(params.message)
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        if not self._demo.is_running(params.id):
            raise TaskNotFoundError(message=f"Task {params.id} is not active")
        async for event in super().on_subscribe_to_task(params, context):
            yield event

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        self._demo.validate_answer(params.message)
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
                description="Plain, IaC, reasoning, tool, interrupt, slow, failing and long turns by keyword.",
                tags=["demo", "iac"],
            )
        ],
    )


async def _health(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def _ensure_restored_endpoint(executor: DemoAgentExecutor) -> Callable[[Request], Awaitable[Response]]:
    """``POST /iac-code/session/ensure-restored``: 200 current / 404 unknown / 409 backup not ready."""

    async def ensure_restored(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        session_id = body.get("sessionId") if isinstance(body, dict) else None
        if not isinstance(session_id, str) or not session_id:
            return JSONResponse({"error": {"code": "INVALID_REQUEST", "message": "sessionId is required."}}, 400)
        status = executor.session_status(session_id)
        if status == "current":
            return JSONResponse({"status": "current"})
        if status == "backup_not_ready":
            error = {"code": "SESSION_BACKUP_NOT_READY", "message": BACKUP_NOT_READY_MESSAGE, "retryable": True}
            return JSONResponse({"error": error}, 409)
        return JSONResponse({"error": {"code": "SESSION_NOT_FOUND", "message": "Session not found."}}, 404)

    return ensure_restored


def create_demo_app(token: str | None) -> ASGIApp:
    """The demo agent as an ASGI app: JSON-RPC at ``/``, the agent card, ``GET /health``."""
    flow = FlowControl()
    card = build_agent_card()
    executor = DemoAgentExecutor(flow)
    handler = _PacedRequestHandler(
        flow,
        executor,
        task_store=_BoundedHistoryTaskStore(executor.task_metadata),
        agent_card=card,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    routes = [
        Route(HEALTH_PATH, _health, methods=["GET"]),
        Route(ENSURE_RESTORED_PATH, _ensure_restored_endpoint(executor), methods=["POST"]),
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
