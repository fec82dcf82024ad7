"""`GET /extensions/iac-code/v1/threads/<threadId>/runs/<runId>/events`: reattach to a run (docs/design.md#reattach).

Same bearer as `POST /` (the app's guard). `rosInvocationId` is the `Ros-Invocation-Id` header (wins) or a
query parameter, for clients that cannot set headers; the cursor is `Last-Event-ID` or `?after=`. Refusals are
JSON envelopes before the stream (docs/design.md#reattach).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from flask import Blueprint, Response, request

from agui_bridge.protocol.headers import ROS_INVOCATION_ID_HEADER, ROS_INVOCATION_ID_QUERY
from agui_bridge.protocol.sse import SSE_CONTENT_TYPE, SSE_RESPONSE_HEADERS
from agui_bridge.reattach.follow import Reattach, follow, open_reattach, parse_cursor
from agui_bridge.runs.connection import bound_client_socket, release_client_socket
from agui_bridge.validation.addressable import check_addressable_ids
from agui_bridge.web.context import get_service, get_worker
from agui_bridge.web.http_errors import request_language

bp = Blueprint("iac_code_reattach", __name__)

REATTACH_PATH = "/extensions/iac-code/v1/threads/<path:thread_id>/runs/<run_id>/events"


class _Lookup(Protocol):
    """Request headers or query arguments (werkzeug's or a plain dict)."""

    def get(self, key: str) -> str | None: ...


def ros_invocation_id_from(headers: _Lookup, args: _Lookup) -> str | None:
    """The header when it is set and non-empty, else `?rosInvocationId=`. WSGI hands header bytes over as
    Latin-1: a value that is valid UTF-8 is read as UTF-8, as the query form's percent-encoding is."""
    header = headers.get(ROS_INVOCATION_ID_HEADER)
    if header:
        try:
            return header.encode("latin-1").decode("utf-8")
        except UnicodeError:
            return header
    return args.get(ROS_INVOCATION_ID_QUERY)


@bp.get(REATTACH_PATH)
def reattach_view(thread_id: str, run_id: str) -> Response:
    service = get_service()
    settings = service.settings
    language = request_language(settings.default_language)
    cursor = parse_cursor(request.headers.get("Last-Event-ID"), request.args.get("after"))
    check_addressable_ids(threadId=thread_id, runId=run_id)  # POST / admits no other: 400, not 404
    attach = open_reattach(settings, thread_id, run_id, ros_invocation_id_from(request.headers, request.args), cursor)
    try:
        release_slot = service.admit_follower()  # 503 + Retry-After past the stream cap
    except BaseException:
        attach.reader.close()
        raise
    # The same write deadline as POST /: a client that stops reading is dropped (docs/design.md#reattach).
    bound = bound_client_socket(request.environ.get("gunicorn.socket"), settings.client_write_timeout_s)

    ended = False

    def on_end() -> None:
        nonlocal ended
        if not ended:
            ended = True
            release_client_socket(bound)
            release_slot()

    attach.on_end = on_end
    service.observer.reattached()
    store = service.store

    def run_over() -> bool:
        """The run no longer holds its thread's lease (a lock-free read; a failed read decides nothing)."""
        try:
            state = store.read(thread_id)
        except Exception:  # noqa: BLE001 - unreadable now: keep following
            return False
        lease = state.active_run if state is not None else None
        return lease is None or lease.run_id != run_id

    body = _FollowBody(attach, follow(attach, get_worker().runtime, settings, language, run_over))
    response = Response(body, status=200, content_type=SSE_CONTENT_TYPE, direct_passthrough=True)
    for name, value in SSE_RESPONSE_HEADERS:
        response.headers[name] = value
    return response


class _FollowBody:
    """The response body: closing it gives back the follower's slot and the socket's deadline even when
    the server closes it before its first iteration (a generator's `finally` would not run then)."""

    def __init__(self, attach: Reattach, body: Iterator[bytes]) -> None:
        self._attach = attach
        self._body = body

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self._body)

    def close(self) -> None:
        close = getattr(self._body, "close", None)
        try:
            if close is not None:
                close()
        finally:
            self._attach.reader.close()
            self._attach.on_end()
