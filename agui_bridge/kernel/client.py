"""The A2A 1.0 JSON-RPC client (the only module that imports requests).

One client per process, created after fork (docs/design.md#a2a-transport). Unary calls use a
`requests.Session` blind to proxy variables and netrc, and its urllib3 pool; streaming calls use
kept-alive sockets of the client's own, parsed by `kernel/exchange.py`, since no public API of urllib3
hands a chunked body over a network read at a time (docs/design.md#a2a-stream-batches). Streams use a
(connect, read) timeout whose read part exceeds the kernel's 15 s `: ping`, so long silent turns survive
while a dead peer is still noticed.

Every failure leaves this module as one of the typed errors of `a2a/errors.py`; replies of the
iac-code HTTP extensions are parsed here, so callers see a result or a typed error, never a status.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import uuid
from typing import TYPE_CHECKING, Any

import orjson
import requests
from requests.adapters import HTTPAdapter
from urllib3 import BaseHTTPResponse, Timeout
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.util import parse_url, wait_for_read

from agui_bridge.a2a.errors import (
    BACKUP_NOT_READY,
    CREDENTIALS_REFUSED_STATUSES,
    A2ABackupNotReady,
    A2ABadReply,
    A2ACredentialsRefused,
    A2ARpcError,
    A2ASessionNotFound,
    A2ATransportError,
)
from agui_bridge.a2a.signals import A2AEvent, unwrap
from agui_bridge.config.loopback import normalise_upstream_url
from agui_bridge.kernel.exchange import EXCHANGE_ERRORS, Endpoint, Response, header_lines, request_head
from agui_bridge.kernel.outgoing import direct_session
from agui_bridge.kernel.stream import STREAM_READ_SIZE, A2AStream
from agui_bridge.observability import tracing
from agui_bridge.protocol.sse_parser import decode_data

log = logging.getLogger(__name__)

A2A_VERSION_HEADER = ("A2A-Version", "1.0")
ENSURE_RESTORED_PATH = "iac-code/session/ensure-restored"
PIPELINE_STATE_PATH = "iac-code/pipeline/state"
DEFAULT_PORTS = {"http": 80, "https": 443}
#: Largest JSON answer read whole from a streaming call (an error object, or a task instead of a stream).
MAX_REPLY_BYTES = 1024 * 1024
#: What reading and decoding such an answer may raise (a JSON error is a ValueError).
REPLY_ERRORS: tuple[type[Exception], ...] = (ValueError, *EXCHANGE_ERRORS)


def http_failure(status: int) -> A2ATransportError:
    """The error of a kernel answer with HTTP status >= 400. A refused token is told apart from a kernel
    that is down, and logged for the operator (the token itself never is)."""
    if status in CREDENTIALS_REFUSED_STATUSES:
        log.error(
            "the A2A server refused the bridge's credentials (HTTP %d): check IAC_CODE_AGUI_A2A_TOKEN against "
            "the token the A2A server expects",
            status,
        )
        return A2ACredentialsRefused(status)
    return A2ATransportError(f"A2A answered HTTP {status}")


def _rpc_span(_client: object, method: str, *_args: object, **_kwargs: object) -> str:
    return f"a2a.{method}"


def _rpc_attributes(_client: object, method: str, *_args: object, **_kwargs: object) -> dict[str, str]:
    return {"rpc.system": "jsonrpc", "rpc.method": method}


class A2AClient:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 300.0,
        call_timeout_s: float = 10.0,
        pool_maxsize: int = 1024,
    ) -> None:
        self.base_url = normalise_upstream_url(base_url)  # loopback only, even for a hand-built Settings
        self._stream_timeout = (connect_timeout_s, read_timeout_s)
        self._call_timeout = (connect_timeout_s, call_timeout_s)
        # No HTTP(S)_PROXY, no netrc, no CA bundle from the environment: prompts, tokens and cloud credentials
        # go to the loopback kernel and nowhere else. (No proxy option exists; the upstream is loopback.)
        self._session = direct_session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=pool_maxsize, max_retries=0)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._session.headers.update({A2A_VERSION_HEADER[0]: A2A_VERSION_HEADER[1]})
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"
        # Unary JSON-RPC calls go straight to the session's urllib3 pool (docs/design.md#a2a-rpc-direct): what
        # requests would work out per call (headers, URL, timeouts) is worked out here, once.
        self._adapter = adapter
        url = parse_url(self.base_url)
        self._rpc_path = url.request_uri
        self._rpc_headers = {**self._session.headers, "Content-Type": "application/json"}
        self._rpc_headers["Accept-Encoding"] = "identity"  # the stream is read at the framing level
        self._call_timeouts = Timeout(connect=connect_timeout_s, read=call_timeout_s)
        self._stream_timeouts = Timeout(connect=connect_timeout_s, read=read_timeout_s)
        # Streaming calls use connections of their own, parsed by httptools (docs/design.md#a2a-stream-batches).
        self._endpoint = Endpoint(
            url.scheme or "http", url.host or "", url.port or DEFAULT_PORTS[url.scheme or "http"],
            connect_timeout_s, read_timeout_s,
        )  # fmt: skip
        text_headers = {name: v if isinstance(v, str) else v.decode("latin-1") for name, v in self._rpc_headers.items()}
        self._stream_head = request_head(self._rpc_path, url.netloc or "", text_headers)
        self._idle: list[socket.socket] = []  # kept-alive stream connections, most recent last
        self._idle_lock = threading.Lock()
        self._idle_max = pool_maxsize

    @staticmethod
    def _envelope(method: str, params: dict[str, Any]) -> bytes:
        envelope = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        try:
            return orjson.dumps(envelope)
        except TypeError:  # orjson.JSONEncodeError (a non-string key, an integer beyond 64 bits)
            return json.dumps(envelope, ensure_ascii=False, allow_nan=False).encode("utf-8")

    def _post(self, body: bytes, timeout: Timeout) -> BaseHTTPResponse:
        """POST one unary JSON-RPC call on the session's pooled keep-alive connections; the read response."""
        headers = self._rpc_headers
        traced = tracing.headers()
        if traced:
            headers = {**headers, **traced}
        try:
            pool = self._adapter.poolmanager.connection_from_url(self.base_url)  # a new pool once the old closed
            response: BaseHTTPResponse = pool.urlopen(
                "POST", self._rpc_path, body=body, headers=headers, retries=False, redirect=False,
                assert_same_host=False, timeout=timeout,
            )  # fmt: skip
            return response
        except (Urllib3Error, OSError) as exc:
            raise A2ATransportError(f"A2A request failed: {type(exc).__name__}") from exc

    # ---- streaming calls: connections of their own ------------------------------------------------------

    def _checkout(self) -> socket.socket:
        """A kept-alive stream connection the kernel has not closed meanwhile, else a new one."""
        while True:
            with self._idle_lock:
                sock = self._idle.pop() if self._idle else None
            if sock is None:
                return self._endpoint.connect()
            if not wait_for_read(sock, timeout=0.0):  # readable while idle: closed by the kernel (or junk)
                return sock
            sock.close()

    def _checkin(self, sock: socket.socket) -> None:
        """Keep a connection whose last response was read cleanly to its end, for the next stream."""
        with self._idle_lock:
            if len(self._idle) < self._idle_max:
                self._idle.append(sock)
                return
        sock.close()

    def _send_stream_call(self, body: bytes) -> tuple[Response, socket.socket]:
        """POST a streaming call and read the head of the answer."""
        head = self._stream_head
        traced = tracing.headers()
        sock: socket.socket | None = None
        try:
            if traced:
                head += header_lines(traced)
            head += b"Content-Length: %d\r\n\r\n" % len(body)
            sock = self._checkout()
            sock.sendall(head + body)
            response = Response(sock.recv, STREAM_READ_SIZE)
            response.read_head()
        except BaseException as exc:  # a failure, or a greenlet killed meanwhile: the socket is not kept
            if sock is not None:
                sock.close()
            if isinstance(exc, EXCHANGE_ERRORS):
                raise A2ATransportError(f"A2A request failed: {type(exc).__name__}") from exc
            raise
        return response, sock

    @tracing.traced(_rpc_span, _rpc_attributes, client=True)
    def open_stream(self, method: str, params: dict[str, Any]) -> A2AStream:
        """POST a streaming JSON-RPC call; JSON-RPC errors (HTTP 200 JSON) raise A2ARpcError."""
        response, sock = self._send_stream_call(self._envelope(method, params))
        stream = A2AStream(response, sock, self._checkin)
        if response.status >= 400:
            stream.close()
            raise http_failure(response.status)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding != "identity":  # asked for identity; a compressed stream would need an unbounded inflater
            stream.close()
            raise A2ABadReply(f"A2A answered with content encoding {encoding[:40]!r}")
        if "text/event-stream" not in response.headers.get("content-type", ""):
            try:
                payload = decode_data(response.read_all(MAX_REPLY_BYTES))
            except REPLY_ERRORS as exc:
                raise A2ABadReply("A2A answered with a body that is not JSON") from exc
            finally:
                stream.close()
            unwrap(payload)  # raises A2ARpcError for an error object
            raise A2ABadReply("A2A answered a streaming call without a stream")
        return stream

    @tracing.traced(_rpc_span, _rpc_attributes, client=True)
    def call(self, method: str, params: dict[str, Any], *, long: bool = False) -> A2AEvent:
        """A unary JSON-RPC call; the result is unwrapped like a stream event.

        `long` uses the stream read timeout: a unary `SendMessage` returns only when the turn ends.
        """
        raw = self._post(self._envelope(method, params), self._stream_timeouts if long else self._call_timeouts)
        if raw.status >= 400:
            raise http_failure(raw.status)
        try:
            payload = decode_data(raw.data)
        except ValueError as exc:
            raise A2ABadReply("A2A answered with a body that is not JSON") from exc
        return unwrap(payload)

    def cancel_task(self, task_id: str) -> A2AEvent:
        return self.call("CancelTask", {"id": task_id})

    def get_task(self, task_id: str, history_length: int = 100) -> A2AEvent:
        return self.call("GetTask", {"id": task_id, "historyLength": history_length})

    def send_message(self, params: dict[str, Any]) -> A2AEvent:
        return self.call("SendMessage", params, long=True)

    @tracing.traced("a2a.ensure-restored", client=True)
    def ensure_restored(self, cwd: str, session_id: str, task_id: str) -> None:
        """`POST <base>iac-code/session/ensure-restored`: returns once the session is loaded, else raises
        (docs/design.md#session-restore)."""
        try:
            response = self._session.post(
                self.base_url + ENSURE_RESTORED_PATH,
                json={"cwd": cwd, "sessionId": session_id, "taskId": task_id},
                timeout=self._call_timeout,
                headers=tracing.headers(),
            )
        except requests.RequestException as exc:
            raise A2ATransportError(f"A2A request failed: {type(exc).__name__}") from exc
        try:
            body: object = response.json()
        except ValueError:
            body = None
        check_restore_reply(response.status_code, body)

    @tracing.traced("a2a.pipeline-state", client=True)
    def pipeline_state(self, task_id: str, after_sequence: int) -> object | None:
        """`GET <base>iac-code/pipeline/state` (docs/design.md#pipeline-catch-up): the JSON body, or None on 404."""
        try:
            response = self._session.get(
                self.base_url + PIPELINE_STATE_PATH,
                params={"taskId": task_id, "afterSequence": str(after_sequence)},
                timeout=self._call_timeout,
                headers=tracing.headers(),
            )
        except requests.RequestException as exc:
            raise A2ATransportError(f"A2A request failed: {type(exc).__name__}") from exc
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise http_failure(response.status_code)
        try:
            body: object = response.json()
        except ValueError as exc:
            raise A2ABadReply("A2A answered with a body that is not JSON") from exc
        return body

    def close(self) -> None:
        self._session.close()
        with self._idle_lock:
            idle, self._idle = self._idle, []
            self._idle_max = 0  # a stream that ends later closes its connection instead of keeping it
        for sock in idle:
            sock.close()


def check_restore_reply(status: int, body: object) -> None:
    """An `ensure-restored` reply (docs/design.md#session-restore): return if the session is loaded.

    404 is `A2ASessionNotFound`; 401 and 403 are `A2ACredentialsRefused`; 409 `SESSION_BACKUP_NOT_READY` is
    `A2ABackupNotReady` with the kernel's message; any other status, or a 200 with another `status`, is
    `A2ABadReply`.
    """
    if status == 200 and isinstance(body, dict) and body.get("status") in ("current", "restored"):
        return
    if status in CREDENTIALS_REFUSED_STATUSES:
        raise http_failure(status)
    if status == 404:
        raise A2ASessionNotFound("the iac-code session is unknown to the kernel")
    error = body.get("error") if isinstance(body, dict) else None
    if status == 409 and isinstance(error, dict) and error.get("code") == BACKUP_NOT_READY:
        message = error.get("message")
        raise A2ABackupNotReady(message if isinstance(message, str) and message else None)
    raise A2ABadReply(f"A2A answered the session restore with HTTP {status}")


if TYPE_CHECKING:  # mypy proves here that the real client satisfies the port (the dialect never imports the client)
    from agui_bridge.a2a.port import A2APort

    def _real_client_is_a_port(client: A2AClient) -> A2APort:
        return client


__all__ = ["A2AClient", "A2ARpcError", "A2AStream", "A2ATransportError", "check_restore_reply"]
