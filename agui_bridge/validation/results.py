"""What a valid RunAgentInput loads into: frozen dataclasses, their reprs free of secrets.

The schemas of `validation.schemas` build these in their `post_load` hooks; everything after
validation (admission, the run stream, the A2A messages) reads only these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from agui_bridge.protocol.digest import answer_digest

__all__ = [
    "CANDIDATE_PRESENTATIONS",
    "RESUME_STATUSES",
    "ROS_INVOCATION_ID_MAX",
    "RUN_MODES",
    "CloudCredentials",
    "Envelope",
    "IacCodeProps",
    "ResumeAnswer",
    "RunInput",
    "ThinkingOptions",
]

RESUME_STATUSES: Final = ("resolved", "cancelled")
RUN_MODES: Final = ("normal", "pipeline")
CANDIDATE_PRESENTATIONS: Final = ("standard", "rich")
ROS_INVOCATION_ID_MAX: Final = 256


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
    #: `protocol/digest.answer_digest` of this answer, computed with it: in `POST /`'s request step (off the hub
    #: for a large body), so the resume preflight, on the hub, never serialises an answer, not even one the
    #: size bound refuses (docs/design.md#exactly-once).
    digest: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", answer_digest(self.status, self.payload, self.has_payload))


@dataclass(frozen=True)
class RunInput:
    """A validated request. ``messages`` are the raw message dicts exactly as received."""

    thread_id: str
    run_id: str
    parent_run_id: str | None
    messages: tuple[dict[str, object], ...]
    resume: tuple[ResumeAnswer, ...] | None
    props: IacCodeProps


@dataclass(frozen=True)
class Envelope:
    """The AG-UI envelope after phase 1: ``forwardedProps`` is still raw (phase 2 checks it)."""

    thread_id: str
    run_id: str
    parent_run_id: str | None
    messages: tuple[dict[str, object], ...]
    tools: tuple[object, ...]
    resume: tuple[ResumeAnswer, ...] | None
    forwarded_props: object

    def with_props(self, props: IacCodeProps) -> RunInput:
        return RunInput(self.thread_id, self.run_id, self.parent_run_id, self.messages, self.resume, props)
