"""Hypothesis strategies for what a client can send to `POST /`: a feature-rich valid body and its
mutations, and the headers (bearer token, content type and length, preferred language) around it."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any, Literal

from hypothesis import strategies as st
from werkzeug.sansio.utils import get_content_length

#: The request body limit of the app under test (the documented default).
MAX_BODY = 12 * 1024 * 1024
#: The bearer token the `authorization` strategy presents (mostly as it should).
TOKEN = "s3cret"

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


CONTROL_CHARACTERS: tuple[Literal["Cc"]] = ("Cc",)
header_text = st.text(st.characters(codec="latin-1", exclude_categories=CONTROL_CHARACTERS), max_size=40)
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
