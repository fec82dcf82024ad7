"""The demo A2A 1.0 JSON-RPC server: a2a-sdk routes + bearer auth + ``/health``, on loopback only.

It is the bridge's upstream in tests and in the default run (``--managed-a2a demo``), so it is
started the way the managed iac-code child is: ``--host 127.0.0.1 --port N`` with the bearer token
in ``IACCODE_A2A_HTTP_TOKEN``; readiness is ``GET /health``.
"""

from __future__ import annotations

import contextlib
import copy
import hmac
import ipaddress
import json
import os
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
    CancelTaskRequest,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from a2a.utils.task import apply_history_length
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agui_bridge.demo.executor import DemoAgentExecutor, FlowControl

TOKEN_ENV = "IACCODE_A2A_HTTP_TOKEN"  # noqa: S105 (a variable name, not a secret)
HEALTH_PATH = "/health"
ENSURE_RESTORED_PATH = "/iac-code/session/ensure-restored"
PIPELINE_STATE_PATH = "/iac-code/pipeline/state"
#: States that end a turn: a ``SubscribeToTask`` stream stops after the first event in one of them.
_TURN_ENDING_STATES = frozenset(
    {
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
#: Terminal states: the SDK itself refuses to cancel a task in one of them.
_TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
BACKUP_NOT_READY_MESSAGE = "Session backup is still synchronizing. Retry after 3 seconds."
#: Task history kept per task (first message + the most recent ones): a ``[LONG 100000]`` turn
#: would otherwise make every event copy an ever-growing history (quadratic time).
HISTORY_LIMIT = 200
_LOOPBACK_NAMES = frozenset({"localhost"})
#: Test hook (issue 16): append every received W3C `traceparent` to this file, one JSON line each.
TRACEPARENT_LOG_ENV = "AGUI_DEMO_TRACEPARENT_LOG"


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

    def apply_overlay(self, task: Task) -> None:
        """Replace ``task.metadata`` (in place) by the executor's current task-level view, if any."""
        overlay = self._task_metadata.get(task.id)
        if overlay is not None:
            task.metadata.Clear()
            task.metadata.update({"iac_code": copy.deepcopy(overlay)})

    async def save(self, task: Task, context: ServerCallContext) -> None:
        excess = len(task.history) - HISTORY_LIMIT
        if excess > 0:
            # In place on purpose: the SDK's TaskManager keeps this very object as its snapshot.
            del task.history[1 : 1 + excess]
        self.apply_overlay(task)
        await super().save(task, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        # A copy (InMemoryTaskStore copies): refreshed with the view as it is *now*, e.g. the empty
        # ``pendingPermissions`` right after a sideband answer, before the next event is saved.
        task = await super().get(task_id, context)
        if task is not None:
            self.apply_overlay(task)
        return task


class _PacedRequestHandler(DefaultRequestHandler):
    """DefaultRequestHandler that reports each streamed event to the executor's FlowControl.

    It also answers like the kernel where a2a-sdk differs: a permission answer is validated before
    any stream starts (JSON-RPC -32602), and ``SubscribeToTask`` on a task with no running turn is
    ``-32001 "Task <id> is not active"``; on a running turn it ends after the first event whose
    state ends the turn (the SDK's would stay open after INPUT_REQUIRED).

    Sideband Pipeline answers: a2a-sdk runs the messages of one task one at a time (the next
    ``execute`` starts only after the running one returned), so a permission answer for a turn
    that is *still running* (waiting in ``WaitSideband``) would queue behind the very turn it has to
    unblock. Such an answer is therefore taken here, before the SDK sees it: it is validated,
    handed to the parked script (``DemoAgentExecutor.take_sideband_answer``) and the request is
    answered at once with the current Task (unary) or a one-event stream of it (streaming).
    """

    def __init__(
        self, flow: FlowControl, executor: DemoAgentExecutor, task_store: _BoundedHistoryTaskStore, **kwargs: Any
    ) -> None:
        super().__init__(agent_executor=executor, task_store=task_store, **kwargs)
        self._flow = flow
        self._demo = executor
        self._store = task_store

    async def _current_task(self, task_id: str, params: SendMessageRequest, context: ServerCallContext) -> Task:
        task = await self._store.get(task_id, context)
        if task is None:
            raise TaskNotFoundError(message=f"Task {task_id} not found")
        return apply_history_length(task, params.configuration)

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        sideband_task = self._demo.take_sideband_answer(params.message)
        if sideband_task is not None:
            return await self._current_task(sideband_task, params, context)
        self._demo.validate_answer(params.message)
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """As the kernel: an unknown task is "Task <id> not found"; a task whose turn has ended (not
        running, nothing waiting) is -32002 "Task cannot be canceled" and stays INPUT_REQUIRED."""
        task = await self._store.get(params.id, context)
        if task is None:
            raise TaskNotFoundError(message=f"Task {params.id} not found")
        if task.status.state not in _TERMINAL_STATES and not self._demo.is_cancelable(params.id):
            raise TaskNotCancelableError()
        result: Task | None = await super().on_cancel_task(params, context)
        return result

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        task_id = params.id
        if not self._demo.is_running(task_id):
            raise TaskNotFoundError(message=f"Task {task_id} is not active")
        stream = object()
        attached = False
        try:
            async with contextlib.aclosing(super().on_subscribe_to_task(params, context)) as events:
                async for event in events:
                    if attached:
                        yield event
                        self._flow.delivered(task_id, stream)
                    else:
                        # The first event is the SDK's snapshot, sent after its queue tap exists:
                        # from here on this stream sees every new event of the turn.
                        attached = True
                        self._demo.subscriber_attached(task_id)
                        self._flow.open_stream(task_id, stream)
                        if isinstance(event, Task):
                            # The SDK hands out its shared snapshot object: copy, then refresh.
                            snapshot = Task()
                            snapshot.CopyFrom(event)
                            self._store.apply_overlay(snapshot)
                            event = snapshot
                        yield event
                    if isinstance(event, Task | TaskStatusUpdateEvent) and event.status.state in _TURN_ENDING_STATES:
                        return
        finally:
            if attached:
                self._demo.subscriber_detached(task_id)
                self._flow.close_stream(task_id, stream)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        sideband_task = self._demo.take_sideband_answer(params.message)
        if sideband_task is not None:
            yield await self._current_task(sideband_task, params, context)
            return
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


class TraceparentRecorder:
    """Test hook: record the `traceparent` header of each HTTP request (path and value, nothing else)."""

    def __init__(self, app: ASGIApp, path: str) -> None:
        self._app = app
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope.get("headers", []):
                if name == b"traceparent":
                    line = json.dumps({"path": scope.get("path"), "traceparent": value.decode("latin-1")}) + "\n"
                    with open(self._path, "a", encoding="utf-8") as handle:
                        handle.write(line)
        await self._app(scope, receive, send)


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
                description="Plain, IaC, reasoning, tool, interrupt, Pipeline, slow, failing, long turns by keyword.",
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


def _pipeline_state_endpoint(executor: DemoAgentExecutor) -> Callable[[Request], Awaitable[Response]]:
    """``GET /iac-code/pipeline/state?taskId=&afterSequence=``: 200 snapshot + events / 404 / 400."""

    async def pipeline_state(request: Request) -> Response:
        task_id = request.query_params.get("taskId", "")
        if not task_id:
            return JSONResponse({"error": {"code": "INVALID_REQUEST", "message": "taskId is required."}}, 400)
        try:
            after = int(request.query_params.get("afterSequence", "0"))
        except ValueError:
            error = {"code": "INVALID_REQUEST", "message": "afterSequence must be an integer."}
            return JSONResponse({"error": error}, 400)
        state = executor.pipeline_state(task_id, after)
        if state is None:
            error = {"code": "PIPELINE_NOT_FOUND", "message": f"Task {task_id} has no pipeline."}
            return JSONResponse({"error": error}, 404)
        return JSONResponse(state)

    return pipeline_state


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
        Route(PIPELINE_STATE_PATH, _pipeline_state_endpoint(executor), methods=["GET"]),
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/"),
    ]
    app: ASGIApp = Starlette(routes=routes, lifespan=lifespan)
    if token:
        app = BearerAuthMiddleware(app, token)
    if record_to := os.environ.get(TRACEPARENT_LOG_ENV):
        app = TraceparentRecorder(app, record_to)
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
