"""RunAgentInput envelope (behaviour.md 2.1) and strict ``forwardedProps.iacCode`` (2.2) validation.

Two phases, in this order: the AG-UI envelope (what ``@ag-ui/client`` 1.0 sends must pass, D9),
then the strict iac-code extension. The first failing rule becomes ``InvalidInput`` with a JSON
Pointer ``field`` and a rule-specific message key (D3). Nothing is ever coerced: a number is not a
string, ``"true"`` is not a boolean, ``true`` is not ``1``.

Every multi-word field is accepted in camelCase (the wire name) and in snake_case (the reference
populates its pydantic models by field name too); giving both spellings of one field is rejected
(``field_conflict``) because the two values could disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from marshmallow import EXCLUDE, RAISE, Schema, ValidationError, fields, post_load, pre_load

from agui_bridge.errors import InvalidInput
from agui_bridge.validation.field_errors import encode_rule, first_error

__all__ = [
    "CloudCredentials",
    "IacCodeProps",
    "PrevalidatedBody",
    "ResumeAnswer",
    "RunInput",
    "ThinkingOptions",
    "parse_run_input",
    "prevalidate",
    "raw_preferred_language",
]

RESUME_STATUSES: Final = ("resolved", "cancelled")
RUN_MODES: Final = ("normal", "pipeline")
CANDIDATE_PRESENTATIONS: Final = ("standard", "rich")
ROS_INVOCATION_ID_MAX: Final = 256


# --------------------------------------------------------------------------------------------
# Public result types


def _hidden(value: object) -> str:
    return "None" if value is None else "'***'"


@dataclass(frozen=True)
class ThinkingOptions:
    enabled: bool
    effort: str | None
    budget: int | None


@dataclass(frozen=True)
class CloudCredentials:
    """Request-local Alibaba Cloud credentials; ``repr`` never shows the secret or the token."""

    access_key_id: str | None
    access_key_secret: str | None
    security_token: str | None
    region_id: str | None

    def __repr__(self) -> str:
        return (
            f"CloudCredentials(access_key_id={self.access_key_id!r}, "
            f"access_key_secret={_hidden(self.access_key_secret)}, "
            f"security_token={_hidden(self.security_token)}, region_id={self.region_id!r})"
        )


@dataclass(frozen=True)
class IacCodeProps:
    """The validated ``forwardedProps.iacCode``; ``repr`` hides the API key, headers and cloud secrets."""

    schema_version: int
    ros_invocation_id: str
    cwd: str
    model: str | None = None
    llm_api_key: str | None = None
    llm_headers: dict[str, str] | None = None
    thinking: ThinkingOptions | None = None
    user_id: str | None = None
    channel: str | None = None
    preferred_language: str | None = None
    candidate_presentation: str | None = None
    run_mode: str | None = None
    pipeline_name: str | None = None
    cleanup_only: bool = False
    active_guidance: bool = False
    alibaba_cloud: CloudCredentials | None = None

    def __repr__(self) -> str:
        headers = None if self.llm_headers is None else {k: "***" for k in self.llm_headers}
        return (
            f"IacCodeProps(schema_version={self.schema_version!r}, "
            f"ros_invocation_id={self.ros_invocation_id!r}, cwd={self.cwd!r}, model={self.model!r}, "
            f"llm_api_key={_hidden(self.llm_api_key)}, llm_headers={headers!r}, "
            f"thinking={self.thinking!r}, user_id={self.user_id!r}, channel={self.channel!r}, "
            f"preferred_language={self.preferred_language!r}, "
            f"candidate_presentation={self.candidate_presentation!r}, run_mode={self.run_mode!r}, "
            f"pipeline_name={self.pipeline_name!r}, cleanup_only={self.cleanup_only!r}, "
            f"active_guidance={self.active_guidance!r}, alibaba_cloud={self.alibaba_cloud!r})"
        )


@dataclass(frozen=True)
class ResumeAnswer:
    """One ``resume[]`` entry. ``has_payload`` is False when ``payload`` is absent or JSON null."""

    interrupt_id: str
    status: str
    payload: object
    has_payload: bool


@dataclass(frozen=True)
class RunInput:
    """A validated request. ``messages`` are the raw message dicts exactly as received."""

    thread_id: str
    run_id: str
    parent_run_id: str | None
    messages: tuple[dict[str, object], ...]
    resume: tuple[ResumeAnswer, ...] | None
    props: IacCodeProps


# --------------------------------------------------------------------------------------------
# Strict leaf fields: each reports an encoded rule string, never marshmallow's English text.

_ErrorMessages = dict[str, str | list[Any] | dict[Any, Any]]


def _messages(invalid_key: str) -> _ErrorMessages:
    """Field error messages as encoded rules (decoded by ``field_errors``)."""
    return {
        "required": encode_rule("field_required"),
        "null": encode_rule("field_null"),
        "invalid": encode_rule(invalid_key),
    }


class _Strict(fields.Field[Any]):
    """Accept a value only if ``_accepts`` says so; no coercion of any kind."""

    invalid_key = "field_invalid"

    def __init__(self, *, allow_none: bool = False, validate: Callable[[Any], Any] | None = None) -> None:
        messages = _messages(self.invalid_key)
        super().__init__(allow_none=allow_none, validate=validate, error_messages=messages)

    def _accepts(self, value: object) -> bool:
        raise NotImplementedError

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if not self._accepts(value):
            raise self.make_error("invalid")
        return value


class _Str(_Strict):
    invalid_key = "field_type_string"

    def _accepts(self, value: object) -> bool:
        return isinstance(value, str)


class _Int(_Strict):
    invalid_key = "field_type_integer"

    def _accepts(self, value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)


class _Bool(_Strict):
    invalid_key = "field_type_boolean"

    def _accepts(self, value: object) -> bool:
        return isinstance(value, bool)


class _AnyObject(_Strict):
    invalid_key = "field_type_object"

    def _accepts(self, value: object) -> bool:
        return isinstance(value, dict)


class _Raw(_Strict):
    """Any JSON value (``state``, ``payload``, part ``metadata``)."""

    def _accepts(self, value: object) -> bool:
        return True


class _StrMap(_Strict):
    """A JSON object of string -> string (``llmHeaders``); a bad value is reported at its own key."""

    invalid_key = "field_type_object"

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if not isinstance(value, dict):
            raise self.make_error("invalid")
        bad = {k: [encode_rule("field_type_string")] for k, v in value.items() if not isinstance(v, str)}
        if bad:
            raise ValidationError(bad)
        return dict(value)


class _Obj(fields.Field[Any]):
    """A JSON object validated by ``schema``; nested errors keep their path."""

    def __init__(self, schema: Schema, *, allow_none: bool = False) -> None:
        messages = _messages("field_type_object")
        super().__init__(allow_none=allow_none, error_messages=messages)
        self.schema = schema

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if not isinstance(value, dict):
            raise self.make_error("invalid")
        try:
            return self.schema.load(value)
        except ValidationError as err:
            raise ValidationError(err.messages) from None


class _Union(fields.Field[Any]):
    """A JSON object discriminated by ``key`` (message ``role``, part ``type``, source ``type``).

    Returns the raw object unchanged: the envelope only checks shapes, later layers read the raw
    (camelCase) dicts.
    """

    def __init__(self, key: str, schemas: Mapping[str, Schema], *, allow_none: bool = False) -> None:
        messages = _messages("field_type_object")
        super().__init__(allow_none=allow_none, error_messages=messages)
        self.key = key
        self.schemas = dict(schemas)
        self.choices = ", ".join(schemas)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if not isinstance(value, dict):
            raise self.make_error("invalid")
        if self.key not in value:
            raise ValidationError({self.key: [encode_rule("field_required")]})
        tag = value[self.key]
        if not isinstance(tag, str) or tag not in self.schemas:
            raise ValidationError({self.key: [encode_rule("field_enum", choices=self.choices)]})
        try:
            self.schemas[tag].load(value)
        except ValidationError as err:
            raise ValidationError(err.messages) from None
        return value


class _ListOf(fields.Field[Any]):
    """A JSON array whose items are checked by ``item``; errors are keyed by int index."""

    def __init__(self, item: fields.Field[Any], *, allow_none: bool = False) -> None:
        messages = _messages("field_type_array")
        super().__init__(allow_none=allow_none, error_messages=messages)
        self.item = item

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if not isinstance(value, list):
            raise self.make_error("invalid")
        out: list[Any] = []
        errors: dict[int, Any] = {}
        for index, element in enumerate(value):
            try:
                out.append(self.item.deserialize(element))
            except ValidationError as err:
                errors[index] = err.messages
        if errors:
            raise ValidationError(errors)
        return out


class _UserContent(fields.Field[Any]):
    """User/tool message ``content``: a string or an array of content parts."""

    def __init__(self, part: fields.Field[Any]) -> None:
        messages = _messages("field_type_content")
        super().__init__(error_messages=messages)
        self.parts = _ListOf(part)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return self.parts.deserialize(value)
        raise self.make_error("invalid")


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value is not None and value not in choices:
            raise ValidationError(encode_rule("field_enum", choices=", ".join(choices)))

    return check


def _length(low: int, high: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not low <= len(value) <= high:
            raise ValidationError(encode_rule("field_length", min=low, max=high))

    return check


def _positive(value: Any) -> None:
    if value is not None and value <= 0:
        raise ValidationError(encode_rule("field_positive"))


class _SchemaVersion(_Strict):
    """Exactly the JSON integer 1: ``true``, ``1.0`` and ``"1"`` are all rejected by the same rule."""

    invalid_key = "schema_version"

    def _accepts(self, value: object) -> bool:
        return type(value) is int and value == 1


# --------------------------------------------------------------------------------------------
# Schemas with camelCase + snake_case names


@dataclass(frozen=True)
class _Spec:
    camel: str
    make: Callable[[], fields.Field[Any]]
    required: bool = False

    @property
    def snake(self) -> str:
        return "".join("_" + c.lower() if c.isupper() else c for c in self.camel)


class _BaseSchema(Schema):
    """Resolves camel/snake aliases: presence and conflicts are decided on the raw object."""

    error_messages = {  # noqa: RUF012 - marshmallow's class-level override point
        "unknown": encode_rule("field_unknown"),
        "type": encode_rule("field_type_object"),
    }
    specs: tuple[_Spec, ...] = ()

    @pre_load
    def _check_names(self, data: Any, **kwargs: Any) -> Any:
        if not isinstance(data, dict):
            return data
        errors: dict[str, list[str]] = {}
        for spec in self.specs:
            has_camel, has_snake = spec.camel in data, spec.snake != spec.camel and spec.snake in data
            if has_camel and has_snake:
                errors[spec.snake] = [encode_rule("field_conflict", other=spec.camel)]
            elif spec.required and not (has_camel or has_snake):
                errors[spec.camel] = [encode_rule("field_required")]
        if errors:
            raise ValidationError(errors)
        return data

    @post_load
    def _merge_names(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for spec in self.specs:
            if spec.camel in data:
                merged[spec.snake] = data[spec.camel]
            elif spec.snake in data:
                merged[spec.snake] = data[spec.snake]
        return merged


def _make_schema(
    name: str,
    specs: list[_Spec],
    *,
    unknown: str = EXCLUDE,
    error_messages: dict[str, str] | None = None,
) -> Schema:
    """Build (and instantiate once) a schema with one field per accepted spelling."""
    attrs: dict[str, Any] = {"specs": tuple(specs)}
    for spec in specs:
        attrs[spec.camel] = spec.make()
        if spec.snake != spec.camel:
            attrs[spec.snake] = spec.make()
    if error_messages:
        attrs["error_messages"] = {**_BaseSchema.error_messages, **error_messages}
    attrs["Meta"] = type("Meta", (), {"unknown": unknown})
    schema_class: type[Schema] = type(name, (_BaseSchema,), attrs)
    return schema_class()


def _s(camel: str, make: Callable[[], fields.Field[Any]], required: bool = False) -> _Spec:
    return _Spec(camel, make, required)


def _opt_str() -> fields.Field[Any]:
    return _Str(allow_none=True)


def _opt_obj() -> fields.Field[Any]:
    return _AnyObject(allow_none=True)


# Content parts and their sources (2.1). Unknown keys inside are allowed, like the pydantic models.
_SOURCE = _Union(
    "type",
    {
        "data": _make_schema("DataSource", [_s("type", _Str), _s("value", _Str, True), _s("mimeType", _Str, True)]),
        "url": _make_schema("UrlSource", [_s("type", _Str), _s("value", _Str, True), _s("mimeType", _opt_str)]),
        "file": _make_schema(
            "FileSource",
            [_s("type", _Str), _s("value", _Str, True), _s("provider", _opt_str), _s("mimeType", _opt_str)],
        ),
    },
)


def _media_part(name: str) -> Schema:
    specs = [_s("type", _Str), _s("id", _opt_str), _s("source", lambda: _SOURCE, True), _s("metadata", _Raw)]
    return _make_schema(name, specs)


_CONTENT_PART = _Union(
    "type",
    {
        "text": _make_schema("TextPart", [_s("type", _Str), _s("id", _opt_str), _s("text", _Str, True)]),
        "image": _media_part("ImagePart"),
        "audio": _media_part("AudioPart"),
        "video": _media_part("VideoPart"),
        "document": _media_part("DocumentPart"),
        # Legacy (pre-1.0) part: passes the envelope, rejected in-stream as unsupported content.
        "binary": _make_schema(
            "BinaryPart",
            [
                _s("type", _Str),
                _s("mimeType", _Str, True),
                _s("id", _opt_str),
                _s("url", _opt_str),
                _s("data", _opt_str),
                _s("filename", _opt_str),
            ],
        ),
    },
)

_TOOL_CALL = _make_schema(
    "ToolCall",
    [
        _s("id", _Str, True),
        _s("type", lambda: _Str(validate=_one_of(("function",)))),
        _s(
            "function",
            lambda: _Obj(
                _make_schema("FunctionCall", [_s("name", _Str, True), _s("arguments", _Str, True)]),
            ),
            True,
        ),
        _s("encryptedValue", _opt_str),
        _s("metadata", _opt_obj),
    ],
)


def _message(name: str, extra: list[_Spec]) -> Schema:
    common = [
        _s("id", _Str, True),
        _s("role", _Str, True),
        _s("subagentRunId", _opt_str),
        _s("encryptedValue", _opt_str),
        _s("metadata", _opt_obj),
    ]
    return _make_schema(name, common + extra)


_MESSAGE = _Union(
    "role",
    {
        "developer": _message("DeveloperMessage", [_s("name", _opt_str), _s("content", _Str, True)]),
        "system": _message("SystemMessage", [_s("name", _opt_str), _s("content", _Str, True)]),
        "assistant": _message(
            "AssistantMessage",
            [
                _s("name", _opt_str),
                _s("content", _opt_str),
                _s("toolCalls", lambda: _ListOf(_Obj(_TOOL_CALL), allow_none=True)),
            ],
        ),
        "user": _message(
            "UserMessage", [_s("name", _opt_str), _s("content", lambda: _UserContent(_CONTENT_PART), True)]
        ),
        "tool": _message(
            "ToolMessage",
            [
                _s("content", lambda: _UserContent(_CONTENT_PART), True),
                _s("toolCallId", _Str, True),
                _s("error", _opt_str),
            ],
        ),
        "activity": _message("ActivityMessage", [_s("activityType", _Str, True), _s("content", _AnyObject, True)]),
        "reasoning": _message("ReasoningMessage", [_s("content", _Str, True)]),
    },
)

_CONTEXT = _make_schema("Context", [_s("description", _Str, True), _s("value", _Str, True)])
_TOOL = _make_schema(
    "Tool",
    [_s("name", _Str, True), _s("description", _Str, True), _s("parameters", _Raw), _s("metadata", _Raw)],
)
_RESUME = _make_schema(
    "ResumeEntry",
    [
        _s("interruptId", _Str, True),
        _s("status", lambda: _Str(validate=_one_of(RESUME_STATUSES)), True),
        _s("payload", lambda: _Raw(allow_none=True)),
        _s("metadata", _opt_obj),
    ],
)

#: The envelope. Unknown top-level keys are allowed (EXCLUDE): they only matter to the digest.
ENVELOPE_SCHEMA: Final = _make_schema(
    "RunAgentInputSchema",
    [
        _s("threadId", _Str, True),
        _s("runId", _Str, True),
        _s("parentRunId", _opt_str),
        _s("protocolVersion", _opt_str),
        _s("state", lambda: _Raw(allow_none=True), True),
        _s("messages", lambda: _ListOf(_MESSAGE), True),
        _s("tools", lambda: _ListOf(_Obj(_TOOL)), True),
        _s("context", lambda: _ListOf(_Obj(_CONTEXT)), True),
        _s("forwardedProps", lambda: _Raw(allow_none=True), True),
        _s("resume", lambda: _ListOf(_Obj(_RESUME), allow_none=True)),
    ],
)

# --------------------------------------------------------------------------------------------
# forwardedProps / iacCode (2.2): strict, unknown keys rejected.

_THINKING = _make_schema(
    "ThinkingSchema",
    [
        _s("enabled", _Bool),
        _s("effort", _opt_str),
        _s("budget", lambda: _Int(allow_none=True, validate=_positive)),
    ],
    unknown=RAISE,
)
_ALIBABA_CLOUD = _make_schema(
    "AlibabaCloudSchema",
    [
        _s("accessKeyId", _opt_str),
        _s("accessKeySecret", _opt_str),
        _s("securityToken", _opt_str),
        _s("regionId", _opt_str),
    ],
    unknown=RAISE,
)
IAC_CODE_SCHEMA: Final = _make_schema(
    "IacCodeSchema",
    [
        _s("schemaVersion", _SchemaVersion, True),
        _s("rosInvocationId", lambda: _Str(validate=_length(1, ROS_INVOCATION_ID_MAX)), True),
        _s("cwd", _Str, True),
        _s("model", _opt_str),
        _s("llmApiKey", _opt_str),
        _s("llmHeaders", lambda: _StrMap(allow_none=True)),
        _s("thinking", lambda: _Obj(_THINKING, allow_none=True)),
        _s("userId", _opt_str),
        _s("channel", _opt_str),
        _s("preferredLanguage", _opt_str),
        _s("candidatePresentation", lambda: _Str(allow_none=True, validate=_one_of(CANDIDATE_PRESENTATIONS))),
        _s("runMode", lambda: _Str(allow_none=True, validate=_one_of(RUN_MODES))),
        _s("pipelineName", _opt_str),
        _s("cleanupOnly", _Bool),
        _s("activeGuidance", _Bool),
        _s("alibabaCloud", lambda: _Obj(_ALIBABA_CLOUD, allow_none=True)),
    ],
    unknown=RAISE,
)
FORWARDED_PROPS_SCHEMA: Final = _make_schema(
    "ForwardedPropsSchema",
    [_s("iacCode", lambda: _Obj(IAC_CODE_SCHEMA), True)],
    unknown=RAISE,
    error_messages={"unknown": encode_rule("forwarded_props_only_iaccode")},
)


# --------------------------------------------------------------------------------------------
# Entry points


def _invalid_input(err: ValidationError, prefix: str = "") -> InvalidInput:
    messages = err.messages if isinstance(err.messages, dict) else {"_schema": err.messages}
    problem = first_error(messages, prefix)
    return InvalidInput(problem.message_key, field=problem.pointer, params=problem.params)


def _alias(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data[camel] if camel in data else data.get(snake)


def raw_preferred_language(raw: dict[str, object]) -> object:
    """``forwardedProps.iacCode.preferredLanguage`` of an unvalidated body, or None if unreachable.

    Used before validation (1.4 step 7) so that even envelope errors are localised by the payload's
    preference; the caller normalises the value.
    """
    if not isinstance(raw, dict):
        return None
    forwarded = _alias(raw, "forwardedProps", "forwarded_props")
    if not isinstance(forwarded, dict):
        return None
    iac_code = _alias(forwarded, "iacCode", "iac_code")
    if not isinstance(iac_code, dict):
        return None
    return _alias(iac_code, "preferredLanguage", "preferred_language")


def _props(data: dict[str, Any]) -> IacCodeProps:
    thinking = data.get("thinking")
    cloud = data.get("alibaba_cloud")
    return IacCodeProps(
        schema_version=data["schema_version"],
        ros_invocation_id=data["ros_invocation_id"],
        cwd=data["cwd"],
        model=data.get("model"),
        llm_api_key=data.get("llm_api_key"),
        llm_headers=data.get("llm_headers"),
        thinking=None
        if thinking is None
        else ThinkingOptions(
            enabled=bool(thinking.get("enabled") or False),
            effort=thinking.get("effort"),
            budget=thinking.get("budget"),
        ),
        user_id=data.get("user_id"),
        channel=data.get("channel"),
        preferred_language=data.get("preferred_language"),
        candidate_presentation=data.get("candidate_presentation"),
        run_mode=data.get("run_mode"),
        pipeline_name=data.get("pipeline_name"),
        cleanup_only=bool(data.get("cleanup_only", False)),
        active_guidance=bool(data.get("active_guidance", False)),
        alibaba_cloud=None
        if cloud is None
        else CloudCredentials(
            access_key_id=cloud.get("access_key_id"),
            access_key_secret=cloud.get("access_key_secret"),
            security_token=cloud.get("security_token"),
            region_id=cloud.get("region_id"),
        ),
    )


class PrevalidatedBody(dict[str, Any]):
    """A decoded body whose validation already ran, off the gevent hub (`web.request_body`).

    `parse_run_input` hands back the kept outcome (the result, or the same InvalidInput raised
    again) instead of validating a second time on the hub, at the point the caller asks for it, so
    the order of checks around it is unchanged.
    """

    outcome: RunInput | InvalidInput


def prevalidate(raw: dict[str, Any]) -> PrevalidatedBody:
    """Validate `raw` now (CPU-bound: run it in a native thread) and keep the outcome."""
    body = PrevalidatedBody(raw)
    try:
        body.outcome = _parse_run_input(raw)
    except InvalidInput as exc:
        body.outcome = exc
    return body


def parse_run_input(raw: dict[str, object]) -> RunInput:
    """Validate a decoded request body; raise ``InvalidInput`` naming the first failing rule.

    Order: envelope (2.1), then ``forwardedProps``/``iacCode`` (2.2), then ``tools`` must be empty
    (2.5). Message *content* rules (2.4) are not checked here: they fail in-stream.
    """
    if isinstance(raw, PrevalidatedBody):
        if isinstance(raw.outcome, InvalidInput):
            raise raw.outcome
        return raw.outcome
    return _parse_run_input(raw)


def _parse_run_input(raw: dict[str, object]) -> RunInput:
    if not isinstance(raw, dict):
        raise InvalidInput("not_an_object")
    try:
        envelope: dict[str, Any] = ENVELOPE_SCHEMA.load(raw)
    except ValidationError as err:
        raise _invalid_input(err) from None

    forwarded_key = "forwardedProps" if "forwardedProps" in raw else "forwarded_props"
    try:
        forwarded: dict[str, Any] = FORWARDED_PROPS_SCHEMA.load(envelope["forwarded_props"])
    except ValidationError as err:
        raise _invalid_input(err, "/" + forwarded_key) from None

    if envelope["tools"]:
        raise InvalidInput("tools_not_supported", field="/tools", params={"field": "tools"})

    resume_raw = envelope.get("resume")
    resume = (
        None
        if resume_raw is None
        else tuple(
            ResumeAnswer(
                interrupt_id=item["interrupt_id"],
                status=item["status"],
                payload=item.get("payload"),
                has_payload=item.get("payload") is not None,
            )
            for item in resume_raw
        )
    )
    return RunInput(
        thread_id=envelope["thread_id"],
        run_id=envelope["run_id"],
        parent_run_id=envelope.get("parent_run_id"),
        messages=tuple(envelope["messages"]),
        resume=resume,
        props=_props(forwarded["iac_code"]),
    )
