"""Typed A2A failures: the client's reading of the session-restore reply, and the one mapping to bridge errors."""

from __future__ import annotations

import pytest

from agui_bridge.a2a.errors import (
    A2ABackupNotReady,
    A2ABadReply,
    A2ACredentialsRefused,
    A2AError,
    A2AJsonRpcError,
    A2ARpcError,
    A2ASessionNotFound,
    A2ATransportError,
)
from agui_bridge.a2a.signals import unwrap
from agui_bridge.i18n.language import translate
from agui_bridge.kernel.client import check_restore_reply
from agui_bridge.runs.failures import AnswerRejected, bridge_error


@pytest.mark.parametrize("body", [{"status": "current"}, {"status": "restored", "extra": 1}])
def test_a_loaded_session_is_no_error(body: object) -> None:
    check_restore_reply(200, body)


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (404, {"error": {"code": "SESSION_NOT_FOUND"}}, A2ASessionNotFound, None),
        (404, None, A2ASessionNotFound, None),
        (409, {"error": {"code": "SESSION_BACKUP_NOT_READY", "message": "Backup syncing."}}, A2ABackupNotReady,
         "Backup syncing."),
        (409, {"error": {"code": "SESSION_BACKUP_NOT_READY", "message": ""}}, A2ABackupNotReady, None),
        (409, {"error": {"code": "SESSION_BACKUP_NOT_READY", "message": 7}}, A2ABackupNotReady, None),
        (409, {"error": {"code": "OTHER"}}, A2ABadReply, None),
        (200, {"status": "stale"}, A2ABadReply, None),
        (200, ["current"], A2ABadReply, None),
        (500, None, A2ABadReply, None),
        (401, None, A2ACredentialsRefused, None),
        (403, {"error": {"code": "FORBIDDEN"}}, A2ACredentialsRefused, None),
    ],
)  # fmt: skip
def test_restore_replies_become_typed_errors(status: int, body: object, error: type, message: str | None) -> None:
    with pytest.raises(A2AError) as info:
        check_restore_reply(status, body)
    assert type(info.value) is error
    if isinstance(info.value, A2ABackupNotReady):
        assert info.value.message == message


def test_bad_replies_are_transport_failures_and_the_spec_name_is_the_same_class() -> None:
    assert issubclass(A2ABadReply, A2ATransportError)
    assert A2AJsonRpcError is A2ARpcError
    with pytest.raises(A2ABadReply):
        unwrap(["not", "an", "object"])


BACKUP = {"code": "SESSION_BACKUP_NOT_READY", "retryable": True}


@pytest.mark.parametrize(
    ("failure", "code", "message"),
    [
        (A2ATransportError("refused"), "A2A_UNAVAILABLE", "The local A2A execution service is unavailable."),
        (A2ABadReply("not JSON"), "A2A_UNAVAILABLE", "The local A2A execution service is unavailable."),
        (A2ACredentialsRefused(401), "A2A_UNAVAILABLE",
         "The local A2A execution service refused the adapter's credentials (a wrong or missing A2A token)."),
        (A2ARpcError(-32602, "bad params"), "A2A_UNAVAILABLE", "The local A2A execution service is unavailable."),
        (A2ARpcError(-32603, "x", BACKUP), "SESSION_BACKUP_NOT_READY",
         "Session backup is still synchronizing. Retry after 3 seconds."),
        (AnswerRejected(A2ARpcError(-32602, "permission_resume_invalid")), "A2A_UNAVAILABLE",
         "The local A2A execution service rejected the interrupt response."),
        (AnswerRejected(A2ARpcError(-32603, "x", BACKUP)), "SESSION_BACKUP_NOT_READY",
         "Session backup is still synchronizing. Retry after 3 seconds."),
        (A2ASessionNotFound(), "EXECUTION_LOST", "The iac-code session to resume is unavailable."),
        (A2ABackupNotReady("Backup syncing."), "SESSION_BACKUP_NOT_READY", "Backup syncing."),
        (A2ABackupNotReady(None), "SESSION_BACKUP_NOT_READY",
         "Session backup is still synchronizing. Retry after 3 seconds."),
    ],
)  # fmt: skip
def test_every_a2a_failure_maps_to_one_bridge_error(failure: A2AError, code: str, message: str) -> None:
    error = bridge_error(failure)
    shown = error.raw_message or translate(error.message_key, "en", **error.params)
    assert (str(error.code), shown) == (code, message)


def test_the_kernel_message_of_a_json_rpc_error_is_never_shown() -> None:
    """A JSON-RPC error's text is the kernel's internal wording: only the restore reply's own message is shown."""
    error = bridge_error(A2ARpcError(-32603, "internal: /home/kernel/secret.py line 3", BACKUP))
    assert error.raw_message is None and error.message_key == "session_backup_not_ready"
