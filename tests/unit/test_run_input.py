"""RunAgentInput envelope and strict forwardedProps.iacCode validation.

See docs/design.md#input-validation and docs/design.md#decision-agui-1-0-clients.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from ag_ui.core import RunAgentInput, UserMessage
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_bridge.errors import InvalidInput
from agui_bridge.i18n.language import translate
from agui_bridge.validation import run_input
from agui_bridge.validation.run_input import (
    CloudCredentials,
    IacCodeProps,
    ResumeAnswer,
    ThinkingOptions,
    parse_run_input,
    raw_preferred_language,
)
from tests.support.harness import run_body

Body = dict[str, Any]


def base() -> Body:
    return {
        "threadId": "8473547e-c8ed-4aef-a84c-603a6a8d42da",
        "runId": "32c263f2-b0b0-42ac-905c-524a0a9bb652",
        "state": {},
        "messages": [{"id": "message-1", "role": "user", "content": "Create a VPC template"}],
        "tools": [],
        "context": [],
        "forwardedProps": {
            "iacCode": {
                "schemaVersion": 1,
                "rosInvocationId": "invocation-1",
                "cwd": "/workspace/session-1",
                "runMode": "normal",
            }
        },
    }


def agui_client_body() -> Body:
    """Shaped like @ag-ui/client 1.0 HttpAgent.prepareRunAgentInput (checked against client-1.0.0)."""
    return {
        "threadId": "thread-1",
        "runId": "run-2",
        "protocolVersion": "1.0",
        "tools": [],
        "context": [{"description": "page", "value": "/vpc"}],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "inv", "cwd": "/tmp/w"}},
        "state": {"anything": [1, 2, 3]},
        "messages": [
            {"id": "d", "role": "developer", "content": "be terse"},
            {"id": "s", "role": "system", "content": "sys", "name": "sys"},
            {"id": "u1", "role": "user", "content": [{"type": "text", "text": "hi"}], "encryptedValue": "e"},
            {
                "id": "a1",
                "role": "assistant",
                "content": "calling",
                "toolCalls": [
                    {"id": "tc1", "type": "function", "function": {"name": "ls", "arguments": "{}"}, "metadata": {}}
                ],
                "metadata": {"ag-ui": {}},
            },
            {"id": "t1", "role": "tool", "toolCallId": "tc1", "content": "ok", "error": "partial"},
            {"id": "t2", "role": "tool", "toolCallId": "tc1", "content": [{"type": "text", "text": "ok"}]},
            {"id": "r1", "role": "reasoning", "content": "thinking", "encryptedValue": "x"},
            {"id": "act", "role": "activity", "activityType": "PLAN", "content": {"steps": []}},
            {"id": "a2", "role": "assistant", "subagentRunId": "sub-1"},
            {
                "id": "u2",
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"},
                        "metadata": {"filename": "a.png"},
                    },
                    {"type": "image", "source": {"type": "url", "value": "https://x/y.png"}},
                    {"type": "document", "source": {"type": "file", "value": "file-1", "provider": "openai"}},
                    {"type": "audio", "source": {"type": "data", "value": "", "mimeType": "audio/wav"}},
                    {"type": "binary", "mimeType": "image/png", "data": "AAAA"},
                ],
            },
        ],
        "resume": [
            {
                "interruptId": "permission-1",
                "status": "resolved",
                "payload": {"decision": "allow_once"},
                "metadata": {"sig": "s"},
            },
            {"interruptId": "q-1", "status": "cancelled"},
        ],
    }


def test_minimal_reference_example() -> None:
    run = parse_run_input(base())
    assert run.thread_id == "8473547e-c8ed-4aef-a84c-603a6a8d42da"
    assert run.run_id == "32c263f2-b0b0-42ac-905c-524a0a9bb652"
    assert run.parent_run_id is None
    assert run.resume is None
    assert run.messages == ({"id": "message-1", "role": "user", "content": "Create a VPC template"},)
    assert run.props == IacCodeProps(
        schema_version=1, ros_invocation_id="invocation-1", cwd="/workspace/session-1", run_mode="normal"
    )


def test_agui_client_1_0_body_is_accepted() -> None:
    body = agui_client_body()
    run = parse_run_input(copy.deepcopy(body))
    assert run.messages == tuple(body["messages"])
    assert run.resume == (
        ResumeAnswer("permission-1", "resolved", {"decision": "allow_once"}, True),
        ResumeAnswer("q-1", "cancelled", None, False),
    )


def test_a_python_ag_ui_protocol_client_body_without_tools_context_or_state_is_accepted_as_empty() -> None:
    """`ag-ui-protocol` 1.0 models dumped with `exclude_none` leave the three out (AG-UI basic/run-input)."""
    request = RunAgentInput(
        thread_id="thread-1",
        run_id="run-1",
        messages=[UserMessage(id="m-1", role="user", content="hi")],
        forwarded_props={"iacCode": {"schemaVersion": 1, "rosInvocationId": "r", "cwd": "/w"}},
    )
    body = json.loads(request.model_dump_json(by_alias=True, exclude_none=True))
    assert not {"tools", "context", "state"} & set(body)
    run = parse_run_input(body)
    assert (run.thread_id, run.messages) == ("thread-1", ({"id": "m-1", "role": "user", "content": "hi"},))
    with mock.patch.object(run_input, "accept_common_shape", return_value=None):
        assert run_input._parse_run_input(body) == run  # the schemas agree with the fast path


def test_full_iaccode_camel_case() -> None:
    body = base()
    body["parentRunId"] = "run-0"
    body["forwardedProps"]["iacCode"] = {
        "schemaVersion": 1,
        "rosInvocationId": "r" * 256,
        "cwd": "",
        "model": "qwen",
        "llmApiKey": "sk-secret",
        "llmHeaders": {"X-A": "1"},
        "thinking": {"enabled": True, "effort": "high", "budget": 1024},
        "userId": "u",
        "channel": "web",
        "preferredLanguage": "zh-CN",
        "candidatePresentation": "rich",
        "runMode": "pipeline",
        "pipelineName": "selling",
        "cleanupOnly": True,
        "activeGuidance": True,
        "alibabaCloud": {"accessKeyId": "AK", "accessKeySecret": "SECRET", "securityToken": "TOKEN", "regionId": "cn"},
    }
    run = parse_run_input(body)
    assert run.parent_run_id == "run-0"
    assert run.props == IacCodeProps(
        schema_version=1,
        ros_invocation_id="r" * 256,
        cwd="",
        model="qwen",
        llm_api_key="sk-secret",
        llm_headers={"X-A": "1"},
        thinking=ThinkingOptions(enabled=True, effort="high", budget=1024),
        user_id="u",
        channel="web",
        preferred_language="zh-CN",
        candidate_presentation="rich",
        run_mode="pipeline",
        pipeline_name="selling",
        cleanup_only=True,
        active_guidance=True,
        alibaba_cloud=CloudCredentials("AK", "SECRET", "TOKEN", "cn"),
    )
    text = repr(run)
    for secret in ("sk-secret", "SECRET", "TOKEN", "'1'"):
        assert secret not in text
    assert "AK" in text


def test_snake_case_names_are_accepted() -> None:
    body = base()
    del body["threadId"], body["runId"], body["forwardedProps"]
    body.update(
        thread_id="t",
        run_id="r",
        parent_run_id="p",
        forwarded_props={
            "iac_code": {
                "schema_version": 1,
                "ros_invocation_id": "inv",
                "cwd": "/w",
                "llm_api_key": "k",
                "llm_headers": {},
                "thinking": {"enabled": False},
                "user_id": "u",
                "preferred_language": "ja",
                "candidate_presentation": "standard",
                "run_mode": "normal",
                "pipeline_name": "p",
                "cleanup_only": False,
                "active_guidance": False,
                "alibaba_cloud": {
                    "access_key_id": "a",
                    "access_key_secret": "b",
                    "security_token": "c",
                    "region_id": "d",
                },
            }
        },
        resume=[{"interrupt_id": "i", "status": "resolved", "payload": 0}],
    )
    body["messages"] = [{"id": "t", "role": "tool", "tool_call_id": "tc", "content": "x"}]
    run = parse_run_input(body)
    assert (run.thread_id, run.run_id, run.parent_run_id) == ("t", "r", "p")
    assert run.props.ros_invocation_id == "inv"
    assert run.props.alibaba_cloud == CloudCredentials("a", "b", "c", "d")
    assert run.props.thinking == ThinkingOptions(False, None, None)
    assert run.resume == (ResumeAnswer("i", "resolved", 0, True),)


@pytest.mark.parametrize(
    ("resume", "expected"),
    [
        (None, None),
        ([], ()),
        ([{"interruptId": "i", "status": "resolved", "payload": None}], (ResumeAnswer("i", "resolved", None, False),)),
        ([{"interruptId": "i", "status": "resolved", "payload": False}], (ResumeAnswer("i", "resolved", False, True),)),
    ],
)
def test_resume_forms(resume: object, expected: object) -> None:
    body = base()
    body["resume"] = resume
    assert parse_run_input(body).resume == expected


def test_absent_resume_is_none() -> None:
    assert parse_run_input(base()).resume is None


def test_unknown_top_level_keys_and_nulls_allowed() -> None:
    body = base()
    body.update(somethingElse={"x": 1}, state=None, parentRunId=None, protocolVersion=None)
    body["threadId"] = ""
    body["runId"] = ""
    run = parse_run_input(body)
    assert (run.thread_id, run.run_id) == ("", "")


def _set(path: str, value: object) -> Callable[[Body], None]:
    def mutate(body: Body) -> None:
        *parents, last = path.split(".")
        node: Any = body
        for name in parents:
            node = node[int(name)] if isinstance(node, list) else node[name]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _del(path: str) -> Callable[[Body], None]:
    def mutate(body: Body) -> None:
        *parents, last = path.split(".")
        node: Any = body
        for name in parents:
            node = node[int(name)] if isinstance(node, list) else node[name]
        del node[last]

    return mutate


IAC = "forwardedProps.iacCode."
P = "/forwardedProps/iacCode/"

REJECTIONS: list[tuple[str, Callable[[Body], None], str, str, dict[str, str]]] = [
    # --- envelope ---
    ("missing threadId", _del("threadId"), "/threadId", "field_required", {"field": "threadId"}),
    ("numeric threadId", _set("threadId", 5), "/threadId", "field_type_string", {}),
    ("null runId", _set("runId", None), "/runId", "field_null", {}),
    ("missing messages", _del("messages"), "/messages", "field_required", {}),
    ("messages not array", _set("messages", {}), "/messages", "field_type_array", {}),
    ("missing forwardedProps", _del("forwardedProps"), "/forwardedProps", "field_required", {}),
    ("null tools", _set("tools", None), "/tools", "field_null", {}),
    ("context not array", _set("context", {}), "/context", "field_type_array", {}),
    ("parentRunId number", _set("parentRunId", 1), "/parentRunId", "field_type_string", {}),
    ("protocolVersion number", _set("protocolVersion", 1), "/protocolVersion", "field_type_string", {}),
    ("both spellings", _set("thread_id", "x"), "/thread_id", "field_conflict", {"other": "threadId"}),
    ("message not object", _set("messages.0", "hi"), "/messages/0", "field_type_object", {}),
    ("message without id", _del("messages.0.id"), "/messages/0/id", "field_required", {"field": "messages[0].id"}),
    ("message numeric id", _set("messages.0.id", 1), "/messages/0/id", "field_type_string", {}),
    ("message without role", _del("messages.0.role"), "/messages/0/role", "field_required", {}),
    (
        "unknown role",
        _set("messages.0.role", "robot"),
        "/messages/0/role",
        "field_enum",
        {"choices": "developer, system, assistant, user, tool, activity, reasoning"},
    ),
    ("user content number", _set("messages.0.content", 3), "/messages/0/content", "field_type_content", {}),
    ("user content missing", _del("messages.0.content"), "/messages/0/content", "field_required", {}),
    (
        "unknown part type",
        _set("messages.0.content", [{"type": "sticker"}]),
        "/messages/0/content/0/type",
        "field_enum",
        {"choices": "text, image, audio, video, document, binary"},
    ),
    (
        "text part no text",
        _set("messages.0.content", [{"type": "text"}]),
        "/messages/0/content/0/text",
        "field_required",
        {},
    ),
    (
        "image no source",
        _set("messages.0.content", [{"type": "image"}]),
        "/messages/0/content/0/source",
        "field_required",
        {},
    ),
    (
        "unknown source type",
        _set("messages.0.content", [{"type": "image", "source": {"type": "ftp", "value": "x"}}]),
        "/messages/0/content/0/source/type",
        "field_enum",
        {"choices": "data, url, file"},
    ),
    (
        "data source without mimeType",
        _set("messages.0.content", [{"type": "image", "source": {"type": "data", "value": "AAAA"}}]),
        "/messages/0/content/0/source/mimeType",
        "field_required",
        {},
    ),
    (
        "tool message without toolCallId",
        _set("messages.0", {"id": "t", "role": "tool", "content": "x"}),
        "/messages/0/toolCallId",
        "field_required",
        {},
    ),
    (
        "system content missing",
        _set("messages.0", {"id": "s", "role": "system"}),
        "/messages/0/content",
        "field_required",
        {},
    ),
    (
        "activity content not object",
        _set("messages.0", {"id": "a", "role": "activity", "activityType": "x", "content": "s"}),
        "/messages/0/content",
        "field_type_object",
        {},
    ),
    (
        "assistant toolCalls bad",
        _set("messages.0", {"id": "a", "role": "assistant", "toolCalls": [{"id": "c", "function": {"name": "n"}}]}),
        "/messages/0/toolCalls/0/function/arguments",
        "field_required",
        {},
    ),
    ("context item", _set("context", [{"description": "d"}]), "/context/0/value", "field_required", {}),
    ("tool item", _set("tools", [{"name": "n"}]), "/tools/0/description", "field_required", {}),
    ("resume not array", _set("resume", {}), "/resume", "field_type_array", {}),
    (
        "resume bad status",
        _set("resume", [{"interruptId": "i", "status": "ok"}]),
        "/resume/0/status",
        "field_enum",
        {"choices": "resolved, cancelled"},
    ),
    ("resume no id", _set("resume", [{"status": "cancelled"}]), "/resume/0/interruptId", "field_required", {}),
    (
        "resume metadata",
        _set("resume", [{"interruptId": "i", "status": "cancelled", "metadata": 1}]),
        "/resume/0/metadata",
        "field_type_object",
        {},
    ),
    # --- forwardedProps / iacCode ---
    ("forwardedProps null", _set("forwardedProps", None), "/forwardedProps", "field_type_object", {}),
    ("forwardedProps list", _set("forwardedProps", []), "/forwardedProps", "field_type_object", {}),
    (
        "forwardedProps sibling",
        _set("forwardedProps.other", 1),
        "/forwardedProps/other",
        "forwarded_props_only_iaccode",
        {"field": "forwardedProps.other"},
    ),
    ("iacCode missing", _del("forwardedProps.iacCode"), "/forwardedProps/iacCode", "field_required", {}),
    ("iacCode not object", _set("forwardedProps.iacCode", "x"), "/forwardedProps/iacCode", "field_type_object", {}),
    (
        "unknown iacCode key",
        _set(IAC + "bogus", 1),
        P + "bogus",
        "field_unknown",
        {"field": "forwardedProps.iacCode.bogus"},
    ),
    ("schemaVersion string", _set(IAC + "schemaVersion", "1"), P + "schemaVersion", "schema_version", {}),
    ("schemaVersion true", _set(IAC + "schemaVersion", True), P + "schemaVersion", "schema_version", {}),
    ("schemaVersion 1.0", _set(IAC + "schemaVersion", 1.0), P + "schemaVersion", "schema_version", {}),
    ("schemaVersion 2", _set(IAC + "schemaVersion", 2), P + "schemaVersion", "schema_version", {}),
    ("schemaVersion missing", _del(IAC + "schemaVersion"), P + "schemaVersion", "field_required", {}),
    ("rosInvocationId missing", _del(IAC + "rosInvocationId"), P + "rosInvocationId", "field_required", {}),
    (
        "rosInvocationId 257",
        _set(IAC + "rosInvocationId", "x" * 257),
        P + "rosInvocationId",
        "field_length",
        {"min": "1", "max": "256"},
    ),
    ("rosInvocationId empty", _set(IAC + "rosInvocationId", ""), P + "rosInvocationId", "field_length", {}),
    ("rosInvocationId number", _set(IAC + "rosInvocationId", 7), P + "rosInvocationId", "field_type_string", {}),
    ("cwd missing", _del(IAC + "cwd"), P + "cwd", "field_required", {"field": "forwardedProps.iacCode.cwd"}),
    ("cwd null", _set(IAC + "cwd", None), P + "cwd", "field_null", {}),
    ("runMode bad", _set(IAC + "runMode", "fast"), P + "runMode", "field_enum", {"choices": "normal, pipeline"}),
    (
        "candidatePresentation bad",
        _set(IAC + "candidatePresentation", "fancy"),
        P + "candidatePresentation",
        "field_enum",
        {"choices": "standard, rich"},
    ),
    ("cleanupOnly string", _set(IAC + "cleanupOnly", "true"), P + "cleanupOnly", "field_type_boolean", {}),
    ("cleanupOnly int", _set(IAC + "cleanupOnly", 1), P + "cleanupOnly", "field_type_boolean", {}),
    ("cleanupOnly null", _set(IAC + "cleanupOnly", None), P + "cleanupOnly", "field_null", {}),
    ("activeGuidance string", _set(IAC + "activeGuidance", "false"), P + "activeGuidance", "field_type_boolean", {}),
    ("model number", _set(IAC + "model", 3), P + "model", "field_type_string", {}),
    ("llmHeaders list", _set(IAC + "llmHeaders", []), P + "llmHeaders", "field_type_object", {}),
    ("llmHeaders value", _set(IAC + "llmHeaders", {"X/Y": 1}), P + "llmHeaders/X~1Y", "field_type_string", {}),
    (
        "thinking extra key",
        _set(IAC + "thinking", {"enabled": True, "extra": 1}),
        P + "thinking/extra",
        "field_unknown",
        {},
    ),
    ("thinking not object", _set(IAC + "thinking", True), P + "thinking", "field_type_object", {}),
    (
        "thinking enabled string",
        _set(IAC + "thinking", {"enabled": "yes"}),
        P + "thinking/enabled",
        "field_type_boolean",
        {},
    ),
    ("thinking budget zero", _set(IAC + "thinking", {"budget": 0}), P + "thinking/budget", "field_positive", {}),
    ("thinking budget float", _set(IAC + "thinking", {"budget": 1.5}), P + "thinking/budget", "field_type_integer", {}),
    ("thinking budget bool", _set(IAC + "thinking", {"budget": True}), P + "thinking/budget", "field_type_integer", {}),
    (
        "alibabaCloud extra",
        _set(IAC + "alibabaCloud", {"accessKeyId": "a", "password": "p"}),
        P + "alibabaCloud/password",
        "field_unknown",
        {},
    ),
    (
        "alibabaCloud number",
        _set(IAC + "alibabaCloud", {"regionId": 1}),
        P + "alibabaCloud/regionId",
        "field_type_string",
        {},
    ),
    (
        "camel and snake",
        _set(IAC + "ros_invocation_id", "y"),
        P + "ros_invocation_id",
        "field_conflict",
        {"other": "rosInvocationId"},
    ),
    ("snake bool string", _set(IAC + "cleanup_only", "true"), P + "cleanup_only", "field_type_boolean", {}),
    # --- tools (after iacCode) ---
    (
        "non-empty tools",
        _set("tools", [{"name": "n", "description": "d"}]),
        "/tools",
        "tools_not_supported",
        {"field": "tools"},
    ),
]


@pytest.mark.parametrize(
    ("mutate", "pointer", "key", "params"), [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS]
)
def test_rejections(mutate: Callable[[Body], None], pointer: str, key: str, params: dict[str, str]) -> None:
    body = base()
    mutate(body)
    with pytest.raises(InvalidInput) as info:
        parse_run_input(body)
    error = info.value
    assert (error.field, error.message_key) == (pointer, key)
    assert "field" in error.params
    for name, value in params.items():
        assert error.params[name] == value
    for language in ("en", "zh", "ja", "es", "fr", "de", "pt"):
        text = translate(error.message_key, language, **error.params)
        assert "{" not in text, text


def test_envelope_errors_come_before_iaccode_errors() -> None:
    body = base()
    body["forwardedProps"]["iacCode"]["bogus"] = 1
    body["tools"] = [{"name": "n", "description": "d"}]
    body["runId"] = 1
    with pytest.raises(InvalidInput) as info:
        parse_run_input(body)
    assert info.value.field == "/runId"
    del body["runId"]
    body["runId"] = "r"
    with pytest.raises(InvalidInput) as info:
        parse_run_input(body)
    assert info.value.field == P + "bogus"


@pytest.mark.parametrize("raw", [[], "x", 1, None, True])
def test_non_object_body(raw: object) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_run_input(raw)  # type: ignore[arg-type]
    assert info.value.message_key == "not_an_object"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"forwardedProps": {"iacCode": {"preferredLanguage": "ja"}}}, "ja"),
        ({"forwardedProps": {"iacCode": {"preferred_language": "de"}}}, "de"),
        ({"forwarded_props": {"iac_code": {"preferredLanguage": "fr"}}}, "fr"),
        ({"forwardedProps": {"iacCode": {"preferredLanguage": 5}}}, 5),
        ({"forwardedProps": {"iacCode": "x"}}, None),
        ({"forwardedProps": None}, None),
        ({}, None),
        ([], None),
    ],
)
def test_raw_preferred_language(raw: Any, expected: object) -> None:
    assert raw_preferred_language(raw) == expected


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(
    [
        "threadId",
        "runId",
        "state",
        "messages",
        "tools",
        "context",
        "forwardedProps",
        "resume",
        "parentRunId",
        "thread_id",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(JSON, st.dictionaries(KEYS, JSON)))
def test_arbitrary_json_raises_only_invalid_input(raw: Any) -> None:
    try:
        parse_run_input(raw)
    except InvalidInput as error:
        assert error.message_key


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(
        st.fixed_dictionaries(
            {"id": st.text(max_size=3), "role": st.sampled_from(["user", "tool", "assistant", "x"])},
            optional={"content": JSON, "toolCalls": JSON, "toolCallId": JSON},
        ),
        max_size=3,
    ),
    iac=st.dictionaries(
        st.sampled_from(
            ["schemaVersion", "rosInvocationId", "cwd", "thinking", "alibabaCloud", "llmHeaders", "runMode", "x"]
        ),
        JSON,
    ),
    resume=st.none()
    | st.lists(st.dictionaries(st.sampled_from(["interruptId", "status", "payload"]), JSON), max_size=2),
)
def test_structured_fuzz_raises_only_invalid_input(messages: Any, iac: Any, resume: Any) -> None:
    body = base()
    body.update(messages=messages, resume=resume)
    body["forwardedProps"]["iacCode"] = iac
    try:
        parse_run_input(body)
    except InvalidInput as error:
        assert error.field is not None


@pytest.mark.parametrize("key", ["²", "٣", "1"])
def test_digit_like_unknown_keys_are_invalid_input_not_a_crash(tmp_path: Path, key: str) -> None:
    """Found by the fuzz test: `'²'.isdigit()` is True but int('²') fails while sorting field errors."""
    body = run_body("thread-1", "hi", tmp_path)
    body["forwardedProps"][key] = 1
    body["forwardedProps"]["iacCode"][key] = 1
    with pytest.raises(InvalidInput):
        parse_run_input(body)
