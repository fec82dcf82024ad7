"""Declarative schemas of RunAgentInput and ``forwardedProps.iacCode`` (docs/design.md#input-validation).

Each schema says what its object is: its fields under their wire names (``data_key``), ``validate``
rules, and a ``post_load`` that builds the result type of `validation.results`. Shared conventions:

* nothing is coerced: a number is not a string, ``"true"`` is not a boolean, ``true`` is not ``1``;
* every multi-word field is accepted in camelCase (the wire name) and in snake_case (the reference
  populates its models by field name too); both spellings of one field is ``field_conflict``, as the
  two could disagree. `AliasedSchema` moves a snake_case key to the wire name before loading, and
  `field_errors` spells an error's pointer back the way the client sent it;
* every error is a `Rule` (a catalogue key and its parameters), never marshmallow's English text;
* the envelope only checks shapes (whatever ``@ag-ui/client`` 1.0 sends passes, unknown keys
  included); the iac-code extension is strict (unknown keys rejected).

The schema objects are built once, at import.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from marshmallow import fields, post_load

from agui_bridge.i18n.message_keys import MessageKey as K
from agui_bridge.validation.addressable import run_id_problem, thread_id_problem
from agui_bridge.validation.field_errors import rule
from agui_bridge.validation.results import (
    CANDIDATE_PRESENTATIONS,
    RESUME_STATUSES,
    ROS_INVOCATION_ID_MAX,
    RUN_MODES,
    CloudCredentials,
    Envelope,
    IacCodeProps,
    ResumeAnswer,
    ThinkingOptions,
)
from agui_bridge.validation.strict import (
    AliasedSchema,
    StrictSchema,
    StringMap,
    Tagged,
    TextOrParts,
    addressable,
    any_json,
    array,
    boolean,
    integer,
    json_object,
    length,
    nested,
    one_of,
    positive,
    rule_messages,
    schema_version_one,
    string,
)

__all__ = ["ENVELOPE_SCHEMA", "FORWARDED_PROPS_SCHEMA"]


# --- content parts and their sources (unknown keys inside are allowed, like the reference's models)


class _Source(AliasedSchema):
    type = string()
    value = string(required=True)


class DataSourceSchema(_Source):
    mime_type = string(data_key="mimeType", required=True)


class UrlSourceSchema(_Source):
    mime_type = string(data_key="mimeType", allow_none=True)


class FileSourceSchema(_Source):
    provider = string(allow_none=True)
    mime_type = string(data_key="mimeType", allow_none=True)


SOURCES: Final = {"data": DataSourceSchema(), "url": UrlSourceSchema(), "file": FileSourceSchema()}


class TextPartSchema(AliasedSchema):
    type = string()
    id = string(allow_none=True)
    text = string(required=True)


class MediaPartSchema(AliasedSchema):
    """image, audio, video and document parts."""

    type = string()
    id = string(allow_none=True)
    source = Tagged("type", SOURCES, required=True)
    metadata = any_json()


class BinaryPartSchema(AliasedSchema):
    """The pre-1.0 part: passes the envelope, refused in the stream as unsupported content."""

    type = string()
    mime_type = string(data_key="mimeType", required=True)
    id = string(allow_none=True)
    url = string(allow_none=True)
    data = string(allow_none=True)
    filename = string(allow_none=True)


CONTENT_PART: Final = Tagged(
    "type",
    {
        "text": TextPartSchema(),
        "image": MediaPartSchema(),
        "audio": MediaPartSchema(),
        "video": MediaPartSchema(),
        "document": MediaPartSchema(),
        "binary": BinaryPartSchema(),
    },
)


# --- messages


class FunctionCallSchema(AliasedSchema):
    name = string(required=True)
    arguments = string(required=True)


class ToolCallSchema(AliasedSchema):
    id = string(required=True)
    type = string(validate=one_of(("function",)))
    function = nested(FunctionCallSchema(), required=True)
    encrypted_value = string(data_key="encryptedValue", allow_none=True)
    metadata = json_object(allow_none=True)


class _Message(AliasedSchema):
    id = string(required=True)
    role = string(required=True)
    subagent_run_id = string(data_key="subagentRunId", allow_none=True)
    encrypted_value = string(data_key="encryptedValue", allow_none=True)
    metadata = json_object(allow_none=True)


class TextMessageSchema(_Message):
    """developer and system messages."""

    name = string(allow_none=True)
    content = string(required=True)


class AssistantMessageSchema(_Message):
    name = string(allow_none=True)
    content = string(allow_none=True)
    tool_calls = array(nested(ToolCallSchema()), data_key="toolCalls", allow_none=True)


class UserMessageSchema(_Message):
    name = string(allow_none=True)
    content = TextOrParts(CONTENT_PART, required=True)


class ToolMessageSchema(_Message):
    content = TextOrParts(CONTENT_PART, required=True)
    tool_call_id = string(data_key="toolCallId", required=True)
    error = string(allow_none=True)


class ActivityMessageSchema(_Message):
    activity_type = string(data_key="activityType", required=True)
    content = json_object(required=True)


class ReasoningMessageSchema(_Message):
    content = string(required=True)


MESSAGE: Final = Tagged(
    "role",
    {
        "developer": TextMessageSchema(),
        "system": TextMessageSchema(),
        "assistant": AssistantMessageSchema(),
        "user": UserMessageSchema(),
        "tool": ToolMessageSchema(),
        "activity": ActivityMessageSchema(),
        "reasoning": ReasoningMessageSchema(),
    },
)


# --- the envelope


class ContextSchema(AliasedSchema):
    description = string(required=True)
    value = string(required=True)


class ToolSchema(AliasedSchema):
    name = string(required=True)
    description = string(required=True)
    parameters = any_json()
    metadata = any_json()


class ResumeEntrySchema(AliasedSchema):
    interrupt_id = string(data_key="interruptId", required=True)
    status = string(required=True, validate=one_of(RESUME_STATUSES))
    payload = any_json(allow_none=True)
    metadata = json_object(allow_none=True)

    @post_load
    def _answer(self, data: dict[str, Any], **kwargs: Any) -> ResumeAnswer:
        payload = data.get("payload")
        return ResumeAnswer(data["interrupt_id"], data["status"], payload, payload is not None)


class EnvelopeSchema(AliasedSchema):
    """The AG-UI ``RunAgentInput``; unknown top-level keys are allowed (they only matter to the digest).

    ``tools``, ``context`` and ``state`` may be left out (a Python client's ``exclude_none`` does that);
    present, they must have their type.
    """

    thread_id = string(data_key="threadId", required=True, validate=addressable(thread_id_problem))
    run_id = string(data_key="runId", required=True, validate=addressable(run_id_problem))
    parent_run_id = string(data_key="parentRunId", allow_none=True)
    protocol_version = string(data_key="protocolVersion", allow_none=True)
    # AG-UI 1.0 (basic/run-input): an absent `tools`/`context` is an empty one, an absent `state` is `{}`.
    state = any_json(allow_none=True, load_default=dict)
    messages = array(MESSAGE, required=True)
    tools = array(nested(ToolSchema()), load_default=list)
    context = array(nested(ContextSchema()), load_default=list)
    forwarded_props = any_json(data_key="forwardedProps", required=True, allow_none=True)
    resume = array(nested(ResumeEntrySchema()), allow_none=True)

    @post_load
    def _envelope(self, data: dict[str, Any], **kwargs: Any) -> Envelope:
        resume = data.get("resume")
        return Envelope(
            thread_id=data["thread_id"],
            run_id=data["run_id"],
            parent_run_id=data.get("parent_run_id"),
            messages=tuple(data["messages"]),
            tools=tuple(data["tools"]),
            resume=None if resume is None else tuple(resume),
            forwarded_props=data["forwarded_props"],
        )


# --- forwardedProps.iacCode: strict


class ThinkingSchema(StrictSchema):
    enabled = boolean()
    effort = string(allow_none=True)
    budget = integer(allow_none=True, validate=positive)

    @post_load
    def _options(self, data: dict[str, Any], **kwargs: Any) -> ThinkingOptions:
        return ThinkingOptions(enabled=data.get("enabled", False), effort=data.get("effort"), budget=data.get("budget"))


class AlibabaCloudSchema(StrictSchema):
    access_key_id = string(data_key="accessKeyId", allow_none=True)
    access_key_secret = string(data_key="accessKeySecret", allow_none=True)
    security_token = string(data_key="securityToken", allow_none=True)
    region_id = string(data_key="regionId", allow_none=True)

    @post_load
    def _credentials(self, data: dict[str, Any], **kwargs: Any) -> CloudCredentials:
        return CloudCredentials(
            access_key_id=data.get("access_key_id"),
            access_key_secret=data.get("access_key_secret"),
            security_token=data.get("security_token"),
            region_id=data.get("region_id"),
        )


class IacCodeSchema(StrictSchema):
    schema_version = fields.Integer(
        data_key="schemaVersion",
        required=True,
        strict=True,
        validate=schema_version_one,
        error_messages=rule_messages(K.SCHEMA_VERSION),
    )
    ros_invocation_id = string(data_key="rosInvocationId", required=True, validate=length(1, ROS_INVOCATION_ID_MAX))
    cwd = string(required=True)
    model = string(allow_none=True)
    llm_api_key = string(data_key="llmApiKey", allow_none=True)
    llm_headers = StringMap(data_key="llmHeaders", allow_none=True)
    thinking = nested(ThinkingSchema(), allow_none=True)
    user_id = string(data_key="userId", allow_none=True)
    channel = string(allow_none=True)
    preferred_language = string(data_key="preferredLanguage", allow_none=True)
    candidate_presentation = string(
        data_key="candidatePresentation", allow_none=True, validate=one_of(CANDIDATE_PRESENTATIONS)
    )
    run_mode = string(data_key="runMode", allow_none=True, validate=one_of(RUN_MODES))
    pipeline_name = string(data_key="pipelineName", allow_none=True)
    cleanup_only = boolean(data_key="cleanupOnly")
    active_guidance = boolean(data_key="activeGuidance")
    alibaba_cloud = nested(AlibabaCloudSchema(), data_key="alibabaCloud", allow_none=True)

    @post_load
    def _props(self, data: dict[str, Any], **kwargs: Any) -> IacCodeProps:
        return IacCodeProps(**data)


class ForwardedPropsSchema(StrictSchema):
    """``forwardedProps`` holds nothing but ``iacCode``."""

    error_messages: ClassVar[dict[str, Any]] = {  # type: ignore[misc]
        "unknown": rule(K.FORWARDED_PROPS_ONLY_IACCODE),
        "type": rule(K.FIELD_TYPE_OBJECT),
    }

    iac_code = nested(IacCodeSchema(), data_key="iacCode", required=True)

    @post_load
    def _props(self, data: dict[str, Any], **kwargs: Any) -> IacCodeProps:
        props: IacCodeProps = data["iac_code"]
        return props


ENVELOPE_SCHEMA: Final = EnvelopeSchema()
FORWARDED_PROPS_SCHEMA: Final = ForwardedPropsSchema()
