from __future__ import annotations

import pytest

from agui_bridge.a2a.signals import A2ARpcError, A2ATransportError, normalise_state, unwrap


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("TASK_STATE_INPUT_REQUIRED", "input-required"),
        ("TASK_STATE_WORKING", "working"),
        ("TASK_STATE_CANCELED", "canceled"),
        ("TASK_STATE_AUTH_REQUIRED", "auth-required"),
        ("input-required", "input-required"),
        ("TASK_STATE_UNSPECIFIED", None),
        ("", None),
        (None, None),
        (3, None),
    ],
)
def test_normalise_state(raw: object, expected: str | None) -> None:
    assert normalise_state(raw) == expected


def test_status_update_is_unwrapped() -> None:
    event = unwrap(
        {
            "result": {
                "statusUpdate": {
                    "taskId": "t1",
                    "contextId": "c1",
                    "status": {"state": "TASK_STATE_WORKING"},
                    "metadata": {"iac_code": {"iacCodeSessionId": "s1"}},
                }
            },
            "id": "rpc-1",
            "jsonrpc": "2.0",
        }
    )
    assert (event.kind, event.task_id, event.context_id, event.state) == ("statusUpdate", "t1", "c1", "working")
    assert event.iac == {"iacCodeSessionId": "s1"}


def test_task_snapshot_uses_its_id() -> None:
    event = unwrap({"result": {"task": {"id": "t9", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}}})
    assert (event.kind, event.task_id, event.state) == ("task", "t9", "submitted")


def test_flat_result_is_accepted() -> None:
    event = unwrap({"result": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}})
    assert (event.kind, event.task_id, event.state) == ("result", "t", "completed")


def test_jsonrpc_error_is_never_taken_for_a_task() -> None:
    """The request id of an error payload must not become a task id.

    See docs/design.md#decision-jsonrpc-errors-on-every-call.
    """
    with pytest.raises(A2ARpcError) as info:
        unwrap({"jsonrpc": "2.0", "id": "rpc-7", "error": {"code": -32001, "message": "Task x is not active"}})
    assert info.value.code == -32001


def test_session_backup_not_ready_is_recognised() -> None:
    error = A2ARpcError(-32000, "busy", {"code": "SESSION_BACKUP_NOT_READY"})
    assert error.session_backup_not_ready


def test_non_object_payload_is_a_transport_error() -> None:
    with pytest.raises(A2ATransportError):
        unwrap([1, 2])
