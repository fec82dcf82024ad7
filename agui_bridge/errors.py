"""Error codes and the one exception tree every layer raises.

Each subclass carries its wire code, HTTP status (for pre-stream errors) and the i18n key of its
default message, so web handlers and the stream renderer never need a lookup table::

    BridgeError
    ├── Unauthorized                 401 UNAUTHORIZED
    ├── HostNotAllowed               403 HOST_NOT_ALLOWED       (no token and a non-loopback Host)
    ├── UnsupportedMediaType         415 UNSUPPORTED_MEDIA_TYPE
    ├── RequestTooLarge              413 REQUEST_TOO_LARGE
    ├── InvalidJson                  400 INVALID_JSON
    ├── InvalidInput                 400 INVALID_INPUT          (carries a JSON Pointer `field`)
    ├── StateUnavailable             503 STATE_UNAVAILABLE
    ├── ServiceUnavailable           503 SERVICE_UNAVAILABLE    (draining / over capacity)
    ├── ExecutionLost                409 EXECUTION_LOST
    ├── DuplicateRunId               409 DUPLICATE_RUN_ID
    ├── RunIdConflict                409 RUN_ID_CONFLICT
    ├── ThreadBusy                   409 THREAD_BUSY
    ├── ThreadBindingConflict        409 THREAD_BINDING_CONFLICT
    ├── ResumeRequired               409 RESUME_REQUIRED
    ├── ExecutionNotFound            404 EXECUTION_NOT_FOUND
    ├── RunNotFound                  404 RUN_NOT_FOUND          (reattach: unknown run, or not this thread's)
    ├── ReplayExpired                410 REPLAY_EXPIRED         (reattach: the run's record is no longer kept)
    ├── ReplayCursorOutOfRange       416 REPLAY_CURSOR_OUT_OF_RANGE
    └── in-stream only (RUN_ERROR):  INCOMPLETE_RESUME, UNKNOWN_INTERRUPT, RESUME_PAYLOAD_INVALID,
        RESUME_ALREADY_APPLIED, EXECUTION_EXPIRED, STATE_PERSISTENCE_FAILED, SESSION_BACKUP_NOT_READY,
        A2A_UNAVAILABLE, A2A_PROTOCOL_ERROR, A2A_EXECUTION_FAILED, CANCELLED
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar


class ErrorCode(StrEnum):
    UNAUTHORIZED = "UNAUTHORIZED"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    INVALID_JSON = "INVALID_JSON"
    INVALID_INPUT = "INVALID_INPUT"
    STATE_UNAVAILABLE = "STATE_UNAVAILABLE"
    SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE"
    EXECUTION_LOST = "EXECUTION_LOST"
    DUPLICATE_RUN_ID = "DUPLICATE_RUN_ID"
    RUN_ID_CONFLICT = "RUN_ID_CONFLICT"
    THREAD_BUSY = "THREAD_BUSY"
    THREAD_BINDING_CONFLICT = "THREAD_BINDING_CONFLICT"
    RESUME_REQUIRED = "RESUME_REQUIRED"
    EXECUTION_NOT_FOUND = "EXECUTION_NOT_FOUND"
    INCOMPLETE_RESUME = "INCOMPLETE_RESUME"
    UNKNOWN_INTERRUPT = "UNKNOWN_INTERRUPT"
    RESUME_PAYLOAD_INVALID = "RESUME_PAYLOAD_INVALID"
    RESUME_ALREADY_APPLIED = "RESUME_ALREADY_APPLIED"
    EXECUTION_EXPIRED = "EXECUTION_EXPIRED"
    STATE_PERSISTENCE_FAILED = "STATE_PERSISTENCE_FAILED"
    SESSION_BACKUP_NOT_READY = "SESSION_BACKUP_NOT_READY"
    A2A_UNAVAILABLE = "A2A_UNAVAILABLE"
    A2A_PROTOCOL_ERROR = "A2A_PROTOCOL_ERROR"
    A2A_EXECUTION_FAILED = "A2A_EXECUTION_FAILED"
    CANCELLED = "CANCELLED"
    HOST_NOT_ALLOWED = "HOST_NOT_ALLOWED"
    RUN_NOT_FOUND = "RUN_NOT_FOUND"
    REPLAY_EXPIRED = "REPLAY_EXPIRED"
    REPLAY_CURSOR_OUT_OF_RANGE = "REPLAY_CURSOR_OUT_OF_RANGE"


class BridgeError(Exception):
    """Base of every error the bridge reports to a client.

    `message_key` names an entry of the i18n catalogue; `raw_message` is a server-provided text that
    is passed through untranslated (docs/design.md#error-envelope); `field` is a JSON Pointer
    (docs/design.md#decision-field-specific-errors).
    """

    code: ClassVar[ErrorCode] = ErrorCode.A2A_UNAVAILABLE
    http_status: ClassVar[int] = 500
    default_key: ClassVar[str] = "a2a_unavailable"

    def __init__(
        self,
        message_key: str | None = None,
        *,
        field: str | None = None,
        raw_message: str | None = None,
        params: dict[str, str] | None = None,
    ) -> None:
        self.message_key = message_key or self.default_key
        self.field = field
        self.raw_message = raw_message
        self.params = params or {}
        super().__init__(f"{self.code}: {self.message_key}")


class Unauthorized(BridgeError):
    code, http_status, default_key = ErrorCode.UNAUTHORIZED, 401, "unauthorized"


class UnsupportedMediaType(BridgeError):
    code, http_status, default_key = ErrorCode.UNSUPPORTED_MEDIA_TYPE, 415, "unsupported_media_type"


class RequestTooLarge(BridgeError):
    code, http_status, default_key = ErrorCode.REQUEST_TOO_LARGE, 413, "request_too_large"


class InvalidJson(BridgeError):
    code, http_status, default_key = ErrorCode.INVALID_JSON, 400, "invalid_json"


class InvalidInput(BridgeError):
    code, http_status, default_key = ErrorCode.INVALID_INPUT, 400, "invalid_envelope"


class StateUnavailable(BridgeError):
    code, http_status, default_key = ErrorCode.STATE_UNAVAILABLE, 503, "state_unavailable"


class ServiceUnavailable(BridgeError):
    code, http_status, default_key = ErrorCode.SERVICE_UNAVAILABLE, 503, "service_unavailable"


class ExecutionLost(BridgeError):
    code, http_status, default_key = ErrorCode.EXECUTION_LOST, 409, "execution_lost"


class DuplicateRunId(BridgeError):
    code, http_status, default_key = ErrorCode.DUPLICATE_RUN_ID, 409, "run_id_used"


class RunIdConflict(BridgeError):
    code, http_status, default_key = ErrorCode.RUN_ID_CONFLICT, 409, "run_id_used"


class ThreadBusy(BridgeError):
    code, http_status, default_key = ErrorCode.THREAD_BUSY, 409, "thread_busy"


class ThreadBindingConflict(BridgeError):
    code, http_status, default_key = ErrorCode.THREAD_BINDING_CONFLICT, 409, "thread_binding_conflict"


class ResumeRequired(BridgeError):
    code, http_status, default_key = ErrorCode.RESUME_REQUIRED, 409, "resume_required"


class ExecutionNotFound(BridgeError):
    code, http_status, default_key = ErrorCode.EXECUTION_NOT_FOUND, 404, "execution_not_found"


class StatePersistenceFailed(BridgeError):
    code, http_status, default_key = ErrorCode.STATE_PERSISTENCE_FAILED, 500, "task_mapping_failed"


class A2AUnavailable(BridgeError):
    code, http_status, default_key = ErrorCode.A2A_UNAVAILABLE, 503, "a2a_unavailable"


class A2AProtocolError(BridgeError):
    code, http_status, default_key = ErrorCode.A2A_PROTOCOL_ERROR, 502, "context_changed"


class A2AExecutionFailed(BridgeError):
    code, http_status, default_key = ErrorCode.A2A_EXECUTION_FAILED, 502, "execution_failed"


class SessionBackupNotReady(BridgeError):
    code, http_status, default_key = ErrorCode.SESSION_BACKUP_NOT_READY, 409, "session_backup_not_ready"


class Cancelled(BridgeError):
    code, http_status, default_key = ErrorCode.CANCELLED, 409, "cancelled"


class IncompleteResume(BridgeError):
    code, http_status, default_key = ErrorCode.INCOMPLETE_RESUME, 409, "resume_incomplete"


class UnknownInterrupt(BridgeError):
    code, http_status, default_key = ErrorCode.UNKNOWN_INTERRUPT, 409, "unknown_interrupt"


class ResumePayloadInvalid(BridgeError):
    code, http_status, default_key = ErrorCode.RESUME_PAYLOAD_INVALID, 400, "resume_payload_invalid"


class ResumeAlreadyApplied(BridgeError):
    code, http_status, default_key = ErrorCode.RESUME_ALREADY_APPLIED, 409, "resume_already_applied"


class ExecutionExpired(BridgeError):
    code, http_status, default_key = ErrorCode.EXECUTION_EXPIRED, 410, "execution_expired"


class HostNotAllowed(BridgeError):
    code, http_status, default_key = ErrorCode.HOST_NOT_ALLOWED, 403, "host_not_allowed"


class RunNotFound(BridgeError):
    code, http_status, default_key = ErrorCode.RUN_NOT_FOUND, 404, "run_not_found"


class ReplayExpired(BridgeError):
    code, http_status, default_key = ErrorCode.REPLAY_EXPIRED, 410, "replay_expired"


class ReplayCursorOutOfRange(BridgeError):
    code, http_status, default_key = ErrorCode.REPLAY_CURSOR_OUT_OF_RANGE, 416, "replay_cursor_out_of_range"
