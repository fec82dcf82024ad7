"""Property tests for POST /: whatever arrives, never a 500 (docs/design.md#decision-no-500).

Covers docs/design.md#pre-stream-checks, docs/design.md#error-envelope, docs/design.md#input-validation,
docs/design.md#workspace-cwd and, in the stream, docs/design.md#decision-balanced-spans-and-strict-framing.

The app's upstream is a closed loopback port, so any body that passes every pre-stream check ends at
once with RUN_STARTED + RUN_ERROR(A2A_UNAVAILABLE) (or an in-stream INVALID_INPUT for message
content). Every response must be either a conforming AG-UI stream or a documented JSON error envelope.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from werkzeug.sansio.utils import get_content_length
from werkzeug.test import TestResponse

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.demo.testing import free_port
from tests.support.agui_checks import assert_valid_agui_stream

MAX_BODY = 12 * 1024 * 1024
TOKEN = "s3cret"

#: docs/design.md#error-envelope (POST / only; EXECUTION_NOT_FOUND is the cancel route's) -> HTTP status.
PRESTREAM_STATUS: dict[str, int] = {
    "UNAUTHORIZED": 401,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "REQUEST_TOO_LARGE": 413,
    "INVALID_JSON": 400,
    "INVALID_INPUT": 400,
    "STATE_UNAVAILABLE": 503,
    "EXECUTION_LOST": 409,
    "DUPLICATE_RUN_ID": 409,
    "RUN_ID_CONFLICT": 409,
    "THREAD_BUSY": 409,
    "THREAD_BINDING_CONFLICT": 409,
    "RESUME_REQUIRED": 409,
}
#: RUN_ERROR codes a stream against a dead upstream may end with (Appendix A).
STREAM_CODES = frozenset({"A2A_UNAVAILABLE", "INVALID_INPUT"})

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def dead_upstream_settings(settings: Settings, workspace: Path) -> Settings:
    """The shared test settings, pointed at a closed port so admitted runs end at once."""
    return settings.replace(a2a_url=f"http://127.0.0.1:{free_port()}/", a2a_token="upstream-token")


@pytest.fixture
def fuzz_app(dead_upstream_settings: Settings) -> Flask:
    return create_app(dead_upstream_settings)


@pytest.fixture
def auth_app(dead_upstream_settings: Settings) -> Flask:
    return create_app(dead_upstream_settings.replace(auth_token=TOKEN))


def check_response(response: TestResponse) -> dict[str, Any] | list[dict[str, Any]]:
    """The one property: a valid stream or a documented envelope; never a 500.

    Returns the events (200) or the error document; see ``outcome`` for a statistics label.
    """
    raw = response.get_data()
    assert response.status_code != 500, raw[:2000]
    if response.status_code == 200:
        assert response.mimetype == "text/event-stream", response.headers
        events = assert_valid_agui_stream(raw, capture=False)
        assert events[-1]["type"] == "RUN_ERROR", events
        assert events[-1]["code"] in STREAM_CODES, events[-1]
        return events
    assert response.mimetype == "application/json", (response.status_code, response.headers, raw[:500])
    document = json.loads(raw)
    assert isinstance(document, dict) and set(document) == {"error"}, document
    error = document["error"]
    assert isinstance(error, dict), document
    assert error.get("code") in PRESTREAM_STATUS, document
    assert response.status_code == PRESTREAM_STATUS[error["code"]], (response.status_code, document)
    assert isinstance(error.get("message"), str) and error["message"], document
    assert set(error) <= {"code", "message", "field"}, document
    if "field" in error:
        assert error["code"] == "INVALID_INPUT" and isinstance(error["field"], str), document
    return document


def outcome(result: dict[str, Any] | list[dict[str, Any]]) -> str:
    """Label for ``--hypothesis-show-statistics``: which branch an example reached."""
    if isinstance(result, list):
        return f"200 RUN_ERROR {result[-1]['code']}"
    return f"error {result['error']['code']}"


# ------------------------------------------------------------------------------------------ strategies

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    # NaN / Infinity included: Python's json accepts the literals (JSON check, docs/design.md#pre-stream-checks).
    | st.floats()
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)

#: Key names the schemas know, so that mutations often hit a real rule rather than an unknown key.
KNOWN_KEYS = [
    "threadId",
    "thread_id",
    "runId",
    "parentRunId",
    "state",
    "messages",
    "tools",
    "context",
    "forwardedProps",
    "forwarded_props",
    "resume",
    "protocolVersion",
    "iacCode",
    "iac_code",
    "schemaVersion",
    "rosInvocationId",
    "ros_invocation_id",
    "cwd",
    "model",
    "llmApiKey",
    "llmHeaders",
    "thinking",
    "enabled",
    "effort",
    "budget",
    "userId",
    "channel",
    "preferredLanguage",
    "candidatePresentation",
    "runMode",
    "pipelineName",
    "cleanupOnly",
    "activeGuidance",
    "alibabaCloud",
    "accessKeyId",
    "role",
    "content",
    "id",
    "type",
    "text",
    "source",
    "value",
    "mimeType",
    "toolCalls",
    "interruptId",
    "status",
    "payload",
]
INTERESTING = st.sampled_from(
    [
        "",
        "/",
        "~",
        "relative",
        "zh-CN",
        "ko",
        "pipeline",
        "rich",
        "resolved",
        "cancelled",
        "user",
        "image",
        "url",
        "data",
        "image/png",
        "iVBORw0KGgo=",
        1,
        0,
        -1,
        1.0,
        True,
        False,
        None,
        [],
        {},
        [{"interruptId": "i-1", "status": "resolved", "payload": {"answer": "yes"}}],
        {"type": "data", "value": "aGk=", "mimeType": "image/png"},
        "x" * 300,
        "\ud800",
        "\x00",
    ]
)
#: Drawn values are deep-copied before use: ``sampled_from`` hands out the same (mutable) objects.
mutation_values = INTERESTING | json_values


def base_body(thread_id: str, workspace: Path) -> dict[str, Any]:
    """A valid, feature-rich RunAgentInput (every optional iacCode key, several message kinds)."""
    return {
        "threadId": thread_id,
        "runId": f"run-{uuid.uuid4()}",
        "parentRunId": "run-parent",
        "state": {"k": [1, 2]},
        "messages": [
            {"id": "m-sys", "role": "system", "content": "be brief"},
            {
                "id": "m-asst",
                "role": "assistant",
                "content": "earlier",
                "toolCalls": [{"id": "tc-1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"id": "m-tool", "role": "tool", "content": "result", "toolCallId": "tc-1"},
            {"id": "m-user", "role": "user", "content": [{"type": "text", "text": "hello"}]},
        ],
        "tools": [],
        "context": [{"description": "d", "value": "v"}],
        "forwardedProps": {
            "iacCode": {
                "schemaVersion": 1,
                "rosInvocationId": "invocation-1",
                "cwd": str(workspace),
                "model": "m",
                "llmApiKey": "key",
                "llmHeaders": {"X-H": "v"},
                "thinking": {"enabled": True, "effort": "high", "budget": 10},
                "userId": "user",
                "channel": "web",
                "preferredLanguage": "en",
                "candidatePresentation": "standard",
                "runMode": "normal",
                "pipelineName": "p",
                "cleanupOnly": False,
                "activeGuidance": False,
                "alibabaCloud": {
                    "accessKeyId": "ak",
                    "accessKeySecret": "sk",
                    "securityToken": "sts",
                    "regionId": "cn-hangzhou",
                },
            }
        },
    }


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every node's path (the root excluded), keys for objects and indices for arrays."""
    out: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, child in node.items():
            out.append((*prefix, key))
            out.extend(_paths(child, (*prefix, key)))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            out.append((*prefix, index))
            out.extend(_paths(child, (*prefix, index)))
    return out


def _containers(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = [prefix] if isinstance(node, dict | list) else []
    if isinstance(node, dict):
        for key, child in node.items():
            out.extend(_containers(child, (*prefix, key)))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            out.extend(_containers(child, (*prefix, index)))
    return out


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        node = node[step]
    return node


def mutate(data: st.DataObject, body: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3), label="mutations")):
        operation = data.draw(st.sampled_from(["delete", "replace", "add"]), label="operation")
        if operation == "add":
            where = data.draw(st.sampled_from(_containers(body)), label="container")
            container = _get(body, where)
            value = copy.deepcopy(data.draw(mutation_values, label="value"))
            if isinstance(container, dict):
                key = data.draw(st.sampled_from(KNOWN_KEYS) | st.text(max_size=8), label="key")
                container[key] = value
            else:
                container.insert(data.draw(st.integers(0, len(container)), label="index"), value)
            continue
        paths = _paths(body)
        if not paths:
            break
        path = data.draw(st.sampled_from(paths), label="path")
        parent = _get(body, path[:-1])
        if operation == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(data.draw(mutation_values, label="value"))
    return body


header_text = st.text(st.characters(codec="latin-1", exclude_categories=("Cc",)), max_size=40)
language_tag = st.sampled_from(["en", "zh-CN", "ja-JP", "ko", "*", "de_DE", "pt-br", "", "x" * 20]) | header_text
q_value = st.sampled_from(["", ";q=0", ";q=1", ";q=0.5", ";Q=0.9", ";q=abc", ";q=nan", ";q=inf", ";q=-1", ";q=2"])
accept_language = (
    st.none()
    | header_text
    | st.lists(st.tuples(language_tag, q_value), max_size=4).map(lambda items: ", ".join(tag + q for tag, q in items))
)


def mostly(good: object, others: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` about two times in three, so that later checks (and the stream) are reached too."""
    return st.sampled_from([True, True, False]).flatmap(lambda use_good: st.just(good) if use_good else others)


authorization = mostly(
    f"Bearer {TOKEN}",
    st.none()
    | st.sampled_from(
        [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER {TOKEN}", f"Bearer  {TOKEN}", f"Bearer{TOKEN}", "Bearer ", " "]
    )
    | header_text
    | header_text.map(lambda t: "Bearer " + t),
)
content_type = mostly(
    "application/json",
    st.none()
    | st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            " APPLICATION/JSON ;charset=latin-1",
            "application/json;",
            "text/plain",
            "application/jsonx",
            "multipart/form-data; boundary=x",
            ";application/json",
        ]
    )
    | header_text,
)
content_length = mostly(
    None,
    st.integers(min_value=-5, max_value=4096).map(str)
    | st.integers(min_value=MAX_BODY + 1, max_value=2**63).map(str)
    | st.sampled_from([str(MAX_BODY), str(MAX_BODY + 1), "13_000_000", " 99999999999 ", "+1", "0x10", "1e9", ""])
    | header_text,
)


def pad_to_declared_length(declared: str, body: bytes) -> bytes:
    """Pad ``body`` with JSON whitespace up to a Content-Length that announces more than it holds.

    A shorter body would be a client that hung up mid-body: over real HTTP the server just waits for
    the missing bytes, while the in-process test client raises werkzeug's ClientDisconnected (a plain
    text 400). A declared length below the real one truncates the body, which is a legitimate case.
    """
    try:
        app_view = int(declared)
    except ValueError:
        app_view = -1
    if app_view > MAX_BODY:
        return body  # rejected from the header alone (size check, docs/design.md#pre-stream-checks)
    werkzeug_view = get_content_length(declared)
    if werkzeug_view is not None and werkzeug_view > len(body):
        return body + b" " * (werkzeug_view - len(body))
    return body


# ------------------------------------------------------------------------------------------ properties


@FUZZ
@given(value=json_values)
def test_random_json_bodies_never_500(fuzz_app: Flask, value: Any) -> None:
    body = json.dumps(value).encode()
    event(outcome(check_response(fuzz_app.test_client().post("/", data=body, content_type="application/json"))))


@FUZZ
@given(data=st.data())
def test_mutated_run_inputs_never_500(fuzz_app: Flask, tmp_path: Path, data: st.DataObject) -> None:
    body = mutate(data, base_body(str(uuid.uuid4()), tmp_path / "workspace"))
    payload = json.dumps(body).encode()
    event(outcome(check_response(fuzz_app.test_client().post("/", data=payload, content_type="application/json"))))


def test_the_unmutated_base_body_reaches_the_stream(fuzz_app: Flask, tmp_path: Path) -> None:
    """Guard for the mutation property: the base body is valid, so mutations start from a 200."""
    body = base_body(str(uuid.uuid4()), tmp_path / "workspace")
    events = check_response(fuzz_app.test_client().post("/", json=body))
    assert isinstance(events, list) and [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "A2A_UNAVAILABLE"


@FUZZ
@given(
    auth=authorization,
    ctype=content_type,
    length=content_length,
    language=accept_language,
    valid_body=st.booleans(),
)
def test_random_headers_never_500(
    auth_app: Flask,
    tmp_path: Path,
    auth: str | None,
    ctype: str | None,
    length: str | None,
    language: str | None,
    valid_body: bool,
) -> None:
    body = json.dumps(base_body(str(uuid.uuid4()), tmp_path / "workspace") if valid_body else [1]).encode()
    headers = {name: value for name, value in (("Authorization", auth), ("Accept-Language", language)) if value}
    environ: dict[str, str] = {}
    if ctype is not None:
        environ["CONTENT_TYPE"] = ctype
    if length is not None:
        body = pad_to_declared_length(length, body)
        environ["CONTENT_LENGTH"] = length
    response = auth_app.test_client().post("/", data=body, headers=headers, environ_overrides=environ)
    result = check_response(response)
    event(outcome(result))
    if isinstance(result, dict) and result["error"]["code"] == "UNAUTHORIZED":
        assert auth is None or auth.partition(" ")[2] != TOKEN or auth.partition(" ")[0].lower() != "bearer"
