"""Which threadId/runId the extension URLs can address (docs/design.md#input-validation): a pure table."""

from __future__ import annotations

import pytest

from agui_bridge.validation.addressable import run_id_problem, thread_id_problem

CONTROL = "id_control_characters"


@pytest.mark.parametrize(
    ("value", "thread_problem", "run_problem"),
    [
        ("run-1", None, None),
        ("Team/Thread 1 ü", None, "run_id_slash"),  # a path segment for runId, any path for threadId
        ("a/", None, "run_id_slash"),
        ("/a", "thread_id_leading_slash", "run_id_slash"),
        ("a\x00b", CONTROL, CONTROL),
        ("a\tb", CONTROL, CONTROL),
        ("a\x1f", CONTROL, CONTROL),
        ("\x7f", CONTROL, CONTROL),
        ("a\x80b", CONTROL, CONTROL),
        ("a\x9fb", CONTROL, CONTROL),
        ("a\xa0b ~ \\ é 日本", None, None),  # NBSP and anything printable stay valid
        ("/\x00", CONTROL, CONTROL),  # control characters are named first
    ],
)
def test_unaddressable_ids(value: str, thread_problem: str | None, run_problem: str | None) -> None:
    assert thread_id_problem(value) == thread_problem
    assert run_id_problem(value) == run_problem
