"""In-process testing of an AG-UI integration: helpers and a pytest plugin (README "Testing your integration").

Installed as the ``agui_bridge`` pytest plugin (entry point ``pytest11``), so a user's tests get, with no
conftest: ``agui_a2a`` (an A2A upstream: the demo agent in a subprocess, or ``--agui-a2a-url``),
``agui_settings``, ``agui_app`` (``create_app``), ``agui_client`` (the Flask test client, SSE read event by
event) and ``agui_workspace`` (an allowed ``cwd``). The app runs on the thread back-end, as on any
unpatched WSGI host. The bridge, Flask and the demo agent are imported inside the fixtures, so loading the
plugin costs nothing and works without the demo agent's packages when an upstream URL is given. Without
either, every test that uses the fixtures fails with `NO_UPSTREAM` (what to install, or which option to
pass): never a skip, which would leave a CI run green.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient
    from werkzeug.test import TestResponse

    from agui_bridge.config.settings import Settings

#: An external A2A upstream for the fixtures instead of the demo agent (the option wins over the variable).
URL_ENV = "IAC_CODE_AGUI_TEST_A2A_URL"
TOKEN_ENV = "IAC_CODE_AGUI_TEST_A2A_TOKEN"  # noqa: S105 - a variable name, not a secret
TERMINAL_TYPES = frozenset({"RUN_FINISHED", "RUN_ERROR"})
#: Why the fixtures fail (never skip) when they have no A2A upstream: a skipped test would leave CI green.
NO_UPSTREAM = (
    "the agui_* fixtures have no A2A upstream: the demo agent needs the 'demo' extra, "
    "pip install 'agui-bridge[demo]', or pass --agui-a2a-url URL (or set IAC_CODE_AGUI_TEST_A2A_URL) "
    "to use your own A2A server"
)


# --------------------------------------------------------------------------------------------- request bodies


def run_input(
    thread_id: str,
    text: str,
    cwd: Path | str,
    *,
    run_id: str | None = None,
    ros_invocation_id: str = "invocation-1",
    **iac_code: Any,
) -> dict[str, Any]:
    """A RunAgentInput with one user message; extra keywords go into ``forwardedProps.iacCode``."""
    props: dict[str, Any] = {"schemaVersion": 1, "rosInvocationId": ros_invocation_id, "cwd": str(cwd), **iac_code}
    return {
        "threadId": thread_id,
        "runId": run_id or f"run-{uuid.uuid4()}",
        "state": {},
        "messages": [{"id": f"message-{uuid.uuid4()}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": props},
    }


def resume_input(
    thread_id: str, cwd: Path | str, answers: list[dict[str, Any]], *, ros_invocation_id: str = "invocation-1"
) -> dict[str, Any]:
    """A RunAgentInput that answers interrupts (``resume``) and sends no message."""
    body = run_input(thread_id, "", cwd, ros_invocation_id=ros_invocation_id)
    body["messages"] = []
    body["resume"] = answers
    return body


def answer(interrupt: Mapping[str, Any], payload: Any = None, status: str = "resolved") -> dict[str, Any]:
    """One resume entry for an announced interrupt (``allow_once``: ``{"decision": "allow_once"}``)."""
    entry: dict[str, Any] = {"interruptId": interrupt["id"], "status": status}
    if payload is not None:
        entry["payload"] = payload
    return entry


# --------------------------------------------------------------------------------------------- reading SSE


class EventStream:
    """One bridge response, read event by event as the app produces it.

    Iterate it (or call ``next_event``/``until``) to consume events; ``events`` holds those read so far,
    ``comments`` the ``: heartbeat`` lines. ``close()`` is a client disconnect. A pre-stream error
    (4xx/5xx JSON) has no events: see ``status_code`` and ``error``.
    """

    def __init__(self, response: TestResponse, body: Mapping[str, Any]) -> None:
        self.response = response
        self.body = dict(body)
        self.status_code = response.status_code
        self.events: list[dict[str, Any]] = []
        self.comments: list[str] = []
        self.raw = b""
        self._pending: list[dict[str, Any]] = []
        from agui_bridge.protocol.sse_parser import SseParser  # the one SSE reader; imported here, see above

        self._parser = SseParser()
        chunks: Iterable[bytes | str] = response.response
        self._chunks: Iterator[bytes | str] | None = iter(chunks) if self.is_stream else None

    @property
    def is_stream(self) -> bool:
        return self.status_code == 200 and self.response.mimetype == "text/event-stream"

    @property
    def error(self) -> dict[str, Any] | None:
        """``{"code", "message", "field"?}`` of a pre-stream error, else None."""
        if self.is_stream:
            return None
        document = json.loads(self.response.get_data())
        return dict(document["error"])

    def _feed(self, chunk: bytes) -> None:
        self.raw += chunk
        from agui_bridge.protocol.sse_parser import SseComment

        for item in self._parser.feed_records(chunk):
            if isinstance(item, SseComment):
                self.comments.append(item.text.decode("utf-8"))
            else:
                self._pending.append(json.loads(item.data))

    def next_event(self) -> dict[str, Any] | None:
        """The next event (blocks until the app sends it), or None when the stream has ended."""
        while not self._pending:
            if self._chunks is None:
                return None
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self._chunks = None
                continue
            self._feed(chunk if isinstance(chunk, bytes) else chunk.encode("utf-8"))
        event = self._pending.pop(0)
        self.events.append(event)
        return event

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while (event := self.next_event()) is not None:
            yield event

    def ending(self) -> str:
        """How the response ended, for an assertion message: a pre-stream error's status, code and message,
        a RUN_ERROR's code and message, or the types of the events read."""
        if not self.is_stream:
            error = self.error or {}
            return f"HTTP {self.status_code} {error.get('code')}: {error.get('message')}"
        last = self.events[-1] if self.events else None
        if last is not None and last["type"] == "RUN_ERROR":
            return f"RUN_ERROR {last.get('code')}: {last.get('message')}"
        return f"events {[e['type'] for e in self.events]}"

    def until(self, event_type: str) -> dict[str, Any]:
        """Read up to and including the first event of `event_type` (or a CUSTOM event of that name)."""
        for event in self:
            if event["type"] == event_type or (event["type"] == "CUSTOM" and event.get("name") == event_type):
                return event
        raise AssertionError(f"the stream ended without {event_type}: {self.ending()}")

    def read_all(self) -> list[dict[str, Any]]:
        """Read to the end of the stream; every event."""
        for _ in self:
            pass
        return self.events

    @property
    def terminal(self) -> dict[str, Any]:
        """RUN_FINISHED or RUN_ERROR (reads to the end first)."""
        events = self.read_all()
        if not events or events[-1]["type"] not in TERMINAL_TYPES:
            raise AssertionError(f"no terminal event: {self.ending()}")
        return events[-1]

    @property
    def outcome(self) -> str:
        """``success``, ``interrupt`` or ``RUN_ERROR``."""
        terminal = self.terminal
        if terminal["type"] == "RUN_ERROR":
            return "RUN_ERROR"
        return str(terminal["outcome"]["type"])

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        """The interrupts announced by RUN_FINISHED (empty unless the outcome is ``interrupt``). A run that
        ended with RUN_ERROR announced none: that is an AssertionError naming its code and message, not an
        empty list."""
        terminal = self.terminal
        if terminal["type"] == "RUN_ERROR":
            raise AssertionError(f"the run announced no interrupts: {self.ending()}")
        outcome = terminal.get("outcome") or {}
        return list(outcome.get("interrupts", []))

    @property
    def text(self) -> str:
        """The assistant text of the events read so far."""
        return "".join(e["delta"] for e in self.events if e["type"] == "TEXT_MESSAGE_CONTENT")

    def close(self) -> None:
        """Go away mid-run, as a browser tab does: the bridge cancels the A2A task."""
        self._chunks = None
        self.response.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AguiClient:
    """The Flask test client of one app, speaking AG-UI: ``run`` returns an ``EventStream``."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.flask: FlaskClient = app.test_client()

    def run(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> EventStream:
        response = self.flask.post("/", json=dict(body), headers=dict(headers or {}), buffered=False)
        return EventStream(response, body)

    def resume(
        self, previous: EventStream, answers: list[dict[str, Any]], headers: Mapping[str, str] | None = None
    ) -> EventStream:
        """Answer `previous`'s interrupts on the same thread, workspace and invocation."""
        iac = previous.body["forwardedProps"]["iacCode"]
        body = resume_input(previous.body["threadId"], iac["cwd"], answers, ros_invocation_id=iac["rosInvocationId"])
        return self.run(body, headers)


# --------------------------------------------------------------------------------------------- the plugin


@dataclass(frozen=True)
class Upstream:
    """An A2A upstream: ``url`` ends with ``/``; ``token`` is its bearer token, if any."""

    url: str
    token: str | None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agui_bridge", "agui-bridge in-process testing")
    group.addoption(
        "--agui-a2a-url",
        default=None,
        help=f"loopback A2A URL for the agui_* fixtures instead of the demo agent (env {URL_ENV}; token {TOKEN_ENV})",
    )


def _demo_agent() -> Callable[[str | None], AbstractContextManager[str]] | None:
    """`running_demo_agent`, or None when the demo agent's packages (a2a-sdk, uvicorn) are not installed
    (looked up without importing them) or the demo package cannot be imported."""
    from agui_bridge.config.settings import require_demo_extra
    from agui_bridge.config.values import ConfigError

    try:
        require_demo_extra()
        from agui_bridge.demo.testing import running_demo_agent
    except (ConfigError, ImportError):
        return None
    return running_demo_agent


@pytest.fixture(scope="session")
def agui_a2a(request: pytest.FixtureRequest) -> Iterator[Upstream]:
    """The A2A upstream: ``--agui-a2a-url``/``IAC_CODE_AGUI_TEST_A2A_URL``, else the demo agent with a token."""
    url = request.config.getoption("--agui-a2a-url") or os.environ.get(URL_ENV)
    if url:
        from agui_bridge.config.values import normalise_a2a_url

        yield Upstream(normalise_a2a_url(url), os.environ.get(TOKEN_ENV) or None)
        return
    running_demo_agent = _demo_agent()
    if running_demo_agent is None:
        pytest.fail(NO_UPSTREAM, pytrace=False)
    token = "demo-" + secrets.token_urlsafe(16)
    with contextlib.ExitStack() as stack:
        try:
            demo_url = stack.enter_context(running_demo_agent(token))
        except RuntimeError as exc:  # it exited or never answered /health
            pytest.fail(f"{exc} {NO_UPSTREAM}", pytrace=False)
        yield Upstream(demo_url, token)


@pytest.fixture
def agui_workspace(tmp_path: Path) -> Path:
    """A directory a run may use as ``cwd`` (inside the allowed root)."""
    path = tmp_path / "workspace"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def agui_state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def agui_settings(tmp_path: Path, agui_state_dir: Path, agui_a2a: Upstream) -> Settings:
    """Settings for one test: its own state directory, the upstream, the thread back-end, and no reattach
    window (served, a run outlives its reader by 30 s): a stream the test closes cancels its run at once, so
    nothing of one test keeps running into the next; a test of reattach passes a window of its own."""
    from agui_bridge.config.settings import Settings

    return Settings(
        state_dir=agui_state_dir,
        a2a_url=agui_a2a.url,
        a2a_token=agui_a2a.token,
        allowed_cwds=(tmp_path,),
        runtime_backend="threads",
        heartbeat_interval_s=15.0,
        reattach_window_s=0.0,
    )


@pytest.fixture
def agui_app(agui_settings: Settings) -> Flask:
    from agui_bridge.app import create_app

    return create_app(agui_settings)


@pytest.fixture
def agui_client(agui_app: Flask) -> AguiClient:
    return AguiClient(agui_app)
