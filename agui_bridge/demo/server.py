"""The demo A2A 1.0 JSON-RPC server: a2a-sdk routes + bearer auth + ``/health``, on loopback only.

It is the bridge's upstream in tests and in the default run (``--managed-a2a demo``), so it is
started the way the managed iac-code child is: ``--host 127.0.0.1 --port N`` with the bearer token
in ``IACCODE_A2A_HTTP_TOKEN``; readiness is ``GET /health``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from agui_bridge.demo.executor import DemoAgentExecutor
from agui_bridge.demo.flow import FlowControl
from agui_bridge.demo.handler import BoundedHistoryTaskStore, PacedRequestHandler
from agui_bridge.demo.middleware import HEALTH_PATH as HEALTH_PATH
from agui_bridge.demo.middleware import BearerAuthMiddleware, TraceparentRecorder

TOKEN_ENV = "IACCODE_A2A_HTTP_TOKEN"  # noqa: S105 (a variable name, not a secret)
ENSURE_RESTORED_PATH = "/iac-code/session/ensure-restored"
PIPELINE_STATE_PATH = "/iac-code/pipeline/state"
BACKUP_NOT_READY_MESSAGE = "Session backup is still synchronizing. Retry after 3 seconds."
_LOOPBACK_NAMES = frozenset({"localhost"})
#: Test hook for tracing tests: append every received W3C `traceparent` to this file, one JSON line each.
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
    handler = PacedRequestHandler(
        flow,
        executor,
        task_store=BoundedHistoryTaskStore(executor.task_metadata),
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
