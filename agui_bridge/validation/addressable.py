"""Which threadId/runId `POST /` admits: only ids the extension routes can address (docs/design.md#input-validation).

The reattach URL is `.../threads/<threadId>/runs/<runId>/events`: runId is one path segment, so a runId
holding `/` could be admitted but never reattached to; threadId may span segments (`Team/Thread 1`
works, on the status route too), but not begin with `/`, which the URL cannot carry (`threads//x` is
no route). A control character (C0, DEL, C1) has no business in an id that ends up in a URL, a log line
or a terminal, and NUL made two runs share one record name. Pure: used by the schemas, the
common-shape fast path and the extension routes alike.
"""

from __future__ import annotations

from collections.abc import Callable

from agui_bridge.errors import InvalidInput
from agui_bridge.i18n.message_keys import MessageKey
from agui_bridge.protocol.control import ID_CONTROL

__all__ = ["check_addressable_ids", "run_id_problem", "thread_id_problem"]


def thread_id_problem(value: str) -> str | None:
    """The message key of what makes `value` an unaddressable threadId, or None."""
    if ID_CONTROL.search(value) is not None:
        return MessageKey.ID_CONTROL_CHARACTERS
    if value.startswith("/"):
        return MessageKey.THREAD_ID_LEADING_SLASH
    return None


def run_id_problem(value: str) -> str | None:
    """The message key of what makes `value` an unaddressable runId, or None."""
    if ID_CONTROL.search(value) is not None:
        return MessageKey.ID_CONTROL_CHARACTERS
    if "/" in value:
        return MessageKey.RUN_ID_SLASH
    return None


#: wire name -> its rule, for the path ids of the extension routes.
_PROBLEMS: dict[str, Callable[[str], str | None]] = {"threadId": thread_id_problem, "runId": run_id_problem}


def check_addressable_ids(**ids: str) -> None:
    """An extension route's path ids (wire name -> value): the first that `POST /` would refuse is
    INVALID_INPUT at `/<wire name>`, as the same id in a body is."""
    for wire_name, value in ids.items():
        problem = _PROBLEMS[wire_name](value)
        if problem is not None:
            raise InvalidInput(problem, field=f"/{wire_name}", params={"field": wire_name})
