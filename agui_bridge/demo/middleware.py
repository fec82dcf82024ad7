"""ASGI middleware of the demo agent: the bearer check every route but ``/health`` needs, and the test hook
that records each received W3C ``traceparent``.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

#: The one route served without a token (readiness).
HEALTH_PATH = "/health"


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
