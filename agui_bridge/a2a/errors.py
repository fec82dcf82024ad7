"""The failures the A2A client raises, typed by what went wrong (pure: no HTTP library here).

The client turns every way a kernel call can fail into one of these; what each means to an AG-UI
client (its error code and message) is decided in one place, `runs/failures.py`
(docs/design.md#a2a-errors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BACKUP_NOT_READY = "SESSION_BACKUP_NOT_READY"


class A2AError(Exception):
    """Base of upstream failures seen by the bridge."""


class A2ATransportError(A2AError):
    """The kernel could not be reached or the connection broke: refused, reset, timed out, HTTP >= 400."""


class A2ABadReply(A2ATransportError):
    """The kernel answered, but not in its dialect: a body that is not JSON or not an object, a
    streaming call answered without a stream, an unknown session-restore answer."""


#: The statuses of a kernel that refuses the bridge's credentials (no token, or another one than it expects).
CREDENTIALS_REFUSED_STATUSES = frozenset({401, 403})


class A2ACredentialsRefused(A2ATransportError):
    """The kernel answered HTTP 401 or 403: it is up, but does not accept the bridge's A2A token (wrong, or
    none configured); distinct from a kernel that is down (docs/design.md#a2a-errors)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"A2A refused the bridge's credentials (HTTP {status})")
        self.status = status


#: JSON-RPC code of CancelTask on a task that cannot be cancelled any more (docs/design.md#cancellation).
TASK_NOT_CANCELABLE = -32002


@dataclass
class A2ARpcError(A2AError):
    """A JSON-RPC error object returned by the kernel (HTTP 200, docs/design.md#kernel-wire-behaviour)."""

    code: int
    message: str
    data: Any = None

    def __post_init__(self) -> None:
        super().__init__(f"JSON-RPC error {self.code}: {self.message}")

    @property
    def task_not_cancelable(self) -> bool:
        """-32002: the task already ended (terminal, or its turn is over with nothing waiting)."""
        return self.code == TASK_NOT_CANCELABLE

    @property
    def session_backup_not_ready(self) -> bool:
        data = self.data
        if isinstance(data, dict):
            return data.get("code") == BACKUP_NOT_READY or data.get("reason") == BACKUP_NOT_READY
        return BACKUP_NOT_READY in self.message


#: The name the A2A specification uses for the same thing.
A2AJsonRpcError = A2ARpcError


class A2ASessionNotFound(A2AError):
    """`ensure-restored` answered 404: the kernel has no such iac-code session (docs/design.md#session-restore)."""


class A2ABackupNotReady(A2AError):
    """`ensure-restored` answered 409 `SESSION_BACKUP_NOT_READY`; `message` is the kernel's own text, if any."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__("session backup not ready")
        self.message = message


__all__ = [
    "A2ABackupNotReady",
    "A2ABadReply",
    "A2ACredentialsRefused",
    "A2AError",
    "A2AJsonRpcError",
    "A2ARpcError",
    "A2ASessionNotFound",
    "A2ATransportError",
]
