"""The common-shape fast path of RunAgentInput validation: whatever it accepts, the schemas accept with the
same result; whatever else, it leaves to the schemas (docs/design.md#input-validation-common-shape)."""

from __future__ import annotations

import copy
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_bridge.errors import InvalidInput
from agui_bridge.validation import run_input
from agui_bridge.validation.common_shape import accept_common_shape
from agui_bridge.validation.results import ROS_INVOCATION_ID_MAX, RunInput


def base() -> dict[str, Any]:
    return {
        "threadId": "thread-1",
        "runId": "run-1",
        "state": {},
        "messages": [{"id": "m-1", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "ros-1", "cwd": "/tmp"}},
    }


def by_schemas(raw: dict[str, Any]) -> RunInput | InvalidInput:
    """What the schemas alone decide (the fast path switched off)."""
    with mock.patch.object(run_input, "accept_common_shape", return_value=None):
        try:
            return run_input._parse_run_input(raw)
        except InvalidInput as exc:
            return exc


VALUES = st.sampled_from(
    [None, "", "x", "user", "assistant", "/tmp", 0, 1, 2, 1.0, True, False, [], {}, ["x"], {"a": 1},
     [{"id": "m", "role": "user", "content": "c"}], "r" * ROS_INVOCATION_ID_MAX, "r" * (ROS_INVOCATION_ID_MAX + 1)]
)  # fmt: skip
KEYS = st.sampled_from(
    ["threadId", "runId", "parentRunId", "protocolVersion", "state", "messages", "tools", "context",
     "forwardedProps", "resume", "thread_id", "run_id", "parent_run_id", "forwarded_props", "unknown"]
)  # fmt: skip
MESSAGE_KEYS = st.sampled_from(["id", "role", "content", "name", "metadata", "encryptedValue", "toolCalls", "x"])
IAC_KEYS = st.sampled_from(
    ["schemaVersion", "rosInvocationId", "cwd", "model", "userId", "channel", "preferredLanguage", "runMode",
     "candidatePresentation", "thinking", "llmHeaders", "activeGuidance", "schema_version", "ros_invocation_id",
     "user_id", "preferred_language", "unknownKey"]
)  # fmt: skip


def _where(body: dict[str, Any], place: str) -> dict[str, Any] | None:
    if place == "envelope":
        return body
    if place == "message":
        messages = body.get("messages")
        return messages[0] if isinstance(messages, list) and messages and isinstance(messages[0], dict) else None
    props = body.get("forwardedProps")
    if place == "forwarded":
        return props if isinstance(props, dict) else None
    iac = props.get("iacCode") if isinstance(props, dict) else None
    return iac if isinstance(iac, dict) else None


MUTATION = st.one_of(
    st.tuples(st.just("envelope"), KEYS, VALUES),
    st.tuples(st.just("message"), MESSAGE_KEYS, VALUES),
    st.tuples(st.just("forwarded"), st.sampled_from(["iacCode", "iac_code", "other"]), VALUES),
    st.tuples(st.just("iac"), IAC_KEYS, VALUES),
    st.tuples(st.sampled_from(["envelope", "message", "iac"]), st.sampled_from(["delete"]), st.just(None)),
    st.tuples(st.just("envelope"), st.sampled_from(["drop:tools", "drop:context", "drop:state"]), st.just(None)),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(MUTATION, max_size=4), st.integers(min_value=0, max_value=3))
def test_whatever_the_fast_path_accepts_the_schemas_accept_identically(
    mutations: list[tuple[str, str, Any]], extra_messages: int
) -> None:
    body = base()
    body["messages"] += [{"id": f"m-{i + 2}", "role": "user", "content": "more"} for i in range(extra_messages)]
    for place, key, value in mutations:
        target = _where(body, place)
        if target is None:
            continue
        if key == "delete":
            if target:
                del target[sorted(target)[0]]
        elif key.startswith("drop:"):
            target.pop(key[len("drop:") :], None)
        else:
            target[key] = copy.deepcopy(value)
    fast = accept_common_shape(copy.deepcopy(body))
    full = by_schemas(body)
    if fast is not None:
        assert isinstance(full, RunInput), full
        assert fast == full


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"parentRunId": "run-0", "protocolVersion": "1.0"},
        {"parentRunId": None},
        {"state": None},
        {"messages": []},
        {"messages": [{"id": "m-1", "role": "user", "content": "hi", "name": "ann"}]},
        {"forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "r", "cwd": "/w", "userId": "u",
                                        "preferredLanguage": "de", "model": None, "channel": "web"}}},
    ],
)  # fmt: skip
def test_the_common_shapes_take_the_fast_path(change: dict[str, Any]) -> None:
    body = {**base(), **change}
    _check_fast_path(body)


@pytest.mark.parametrize("absent", [("tools",), ("context",), ("state",), ("tools", "context", "state")])
def test_absent_tools_context_and_state_take_the_fast_path_as_empty(absent: tuple[str, ...]) -> None:
    body = {k: v for k, v in base().items() if k not in absent}
    _check_fast_path(body)


def _check_fast_path(body: dict[str, Any]) -> None:
    fast = accept_common_shape(body)
    assert fast is not None
    assert fast == by_schemas(body)
    assert len(fast.messages) == len(body["messages"])
    assert all(a is b for a, b in zip(fast.messages, body["messages"], strict=True))  # the raw dicts, as received


@pytest.mark.parametrize(
    "change",
    [
        {"tools": [{"name": "t", "description": "d"}]},  # TOOLS_NOT_SUPPORTED, from the schemas
        {"context": [{"description": "d", "value": "v"}]},
        {"resume": [{"interruptId": "i", "status": "resolved"}]},
        {"thread_id": "thread-1"},  # a second spelling: the conflict is the schemas' to report
        {"messages": [{"id": "m-1", "role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        {"messages": [{"id": "m-1", "role": "assistant", "content": "hi"}]},
        {"forwardedProps": {"iacCode": {"schemaVersion": True, "rosInvocationId": "r", "cwd": "/w"}}},
        {"forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "", "cwd": "/w"}}},
        {"forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "r", "cwd": "/w", "runMode": "chat"}}},
    ],
)  # fmt: skip
def test_anything_else_is_left_to_the_schemas(change: dict[str, Any]) -> None:
    assert accept_common_shape({**base(), **change}) is None
