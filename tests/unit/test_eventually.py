"""`eventually()` waits for a condition and, when it never holds, says what was still wrong."""

from __future__ import annotations

import pytest

from tests.support.eventually import eventually


def test_returns_the_value_of_the_first_check_that_passes() -> None:
    calls: list[int] = []

    def third_time_lucky() -> int:
        calls.append(1)
        assert len(calls) >= 3, "not yet"
        return len(calls)

    assert eventually(third_time_lucky, timeout_s=5, interval_s=0) == 3


def test_re_raises_the_last_assertion_error_after_the_deadline() -> None:
    attempts: list[int] = []

    def never() -> None:
        attempts.append(1)
        raise AssertionError(f"still wrong after {len(attempts)} attempts")

    with pytest.raises(AssertionError, match=r"still wrong after \d+ attempts") as raised:
        eventually(never, timeout_s=0.05, interval_s=0.001)
    assert str(raised.value) == f"still wrong after {len(attempts)} attempts"
    assert len(attempts) >= 2


def test_other_exceptions_propagate_at_once() -> None:
    attempts: list[int] = []

    def broken() -> None:
        attempts.append(1)
        raise KeyError("no such key")

    with pytest.raises(KeyError):
        eventually(broken, timeout_s=5)
    assert attempts == [1]
