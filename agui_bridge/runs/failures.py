"""What an A2A failure means to an AG-UI client: the one mapping from `a2a/errors` to `errors`.

Runs, resumes and guidance all end a failed kernel call through `bridge_error`, so one kind of
failure always shows the same code and message (docs/design.md#a2a-errors):

| A2A failure | bridge error |
|---|---|
| `A2ASessionNotFound` (session restore 404) | `EXECUTION_LOST` `session_unavailable` |
| `A2ABackupNotReady` (session restore 409) | `SESSION_BACKUP_NOT_READY`, the kernel's text if it gave one |
| `A2ARpcError` whose data says `SESSION_BACKUP_NOT_READY` | `SESSION_BACKUP_NOT_READY` (translated) |
| `AnswerRejected` (a JSON-RPC error answering an interrupt response) | `A2A_UNAVAILABLE` `a2a_rejected_answer` |
| `A2ACredentialsRefused` (HTTP 401/403: the bridge's token refused) | `A2A_UNAVAILABLE` `a2a_credentials_refused` |
| any other `A2AError` (transport, bad reply, JSON-RPC error) | `A2A_UNAVAILABLE` |
"""

from __future__ import annotations

from agui_bridge.a2a.errors import A2ABackupNotReady, A2ACredentialsRefused, A2AError, A2ARpcError, A2ASessionNotFound
from agui_bridge.errors import A2AUnavailable, BridgeError, ExecutionLost, SessionBackupNotReady


class AnswerRejected(A2AError):
    """The kernel answered an interrupt response with a JSON-RPC error (docs/design.md#sending-answers)."""

    def __init__(self, cause: A2ARpcError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def bridge_error(exc: A2AError) -> BridgeError:
    """The bridge error a failed A2A call ends a stream with."""
    if isinstance(exc, A2ASessionNotFound):
        return ExecutionLost("session_unavailable")
    if isinstance(exc, A2ABackupNotReady):
        return SessionBackupNotReady(raw_message=exc.message)
    rpc = exc.cause if isinstance(exc, AnswerRejected) else exc
    if isinstance(rpc, A2ARpcError) and rpc.session_backup_not_ready:
        return SessionBackupNotReady()
    if isinstance(exc, AnswerRejected):
        return A2AUnavailable("a2a_rejected_answer")
    if isinstance(exc, A2ACredentialsRefused):
        return A2AUnavailable("a2a_credentials_refused")
    return A2AUnavailable()


__all__ = ["AnswerRejected", "bridge_error"]
