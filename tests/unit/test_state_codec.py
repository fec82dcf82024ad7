"""The thread file's bytes are the standard library's, whichever encoder wrote them (docs/design.md#state-document)."""

from __future__ import annotations

import json

import pytest

from agui_bridge.store.codec import parse, serialise
from agui_bridge.store.model import PendingInterrupt, ThreadState, new_thread, to_document
from tests.support.thread_records import full_thread_state


def _stdlib(state: ThreadState) -> bytes:
    return (json.dumps(to_document(state), indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def _with_value(value: object) -> ThreadState:
    state = new_thread("会话", "/工作", None, "ros", "exec")
    state.execution.pending["i"] = PendingInterrupt({"inputId": "i", "displayParameters": value}, False, 5)
    return state


@pytest.mark.parametrize(
    "state",
    [
        new_thread("t", "/w", None, "r", "e"),
        full_thread_state(),
        _with_value({"text": 'quote " back \\ ctl \x01\x1f\n\t del \x7f sep \u2028 é 😀', "n": [0, -1, True, None]}),
        _with_value({"big": 2**70, "small": -(2**63)}),  # beyond 64 bits: the standard library writes it
        _with_value({"float": 1.5, "list": [[], {}]}),
    ],
)
def test_same_bytes_as_the_standard_library(state: ThreadState) -> None:
    data = serialise(state)
    assert data == _stdlib(state)
    assert parse(data) == json.loads(data)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        serialise(_with_value({"nested": [{"x": bad}]}))


def test_lone_surrogate_is_refused() -> None:
    with pytest.raises(ValueError):
        serialise(_with_value("\udc80"))
