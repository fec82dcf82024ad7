"""The bounded vocabularies of metric labels, declared once: the runs report with them and
`observability.metrics` exports every value at 0 from the start. Pure: no prometheus here.
"""

from __future__ import annotations

from enum import StrEnum

from agui_bridge.errors import ErrorCode


class InterruptsClosed(StrEnum):
    """How pending interrupts left the pending set: the `how` label of `agui_interrupts_closed_total`."""

    ANSWERED = "answered"
    RECONCILED = "reconciled"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    DROPPED = "dropped"


#: The codes of a run ended by the kernel: the `kind` label of `agui_upstream_errors_total`.
UPSTREAM_ERROR_KINDS = frozenset(
    {ErrorCode.A2A_UNAVAILABLE, ErrorCode.A2A_PROTOCOL_ERROR, ErrorCode.A2A_EXECUTION_FAILED,
     ErrorCode.SESSION_BACKUP_NOT_READY}
)  # fmt: skip

__all__ = ["UPSTREAM_ERROR_KINDS", "InterruptsClosed"]
