"""The CI bench guard's comparison (bench/guard_rules.py): best of the repetitions, the ratios, the verdicts and
the messages a failing CI run shows."""

from __future__ import annotations

import math

import pytest

from bench.guard_rules import MARGINS, RATIOS, Verdict, baseline_of, best, best_ratio, judge, summary_line


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([3.0, 2.0, 4.0], 2.0),
        ([5.5], 5.5),
        ([0.0, 7.0, 6.0], 6.0),  # a zero reading (no tick elapsed) is no measurement
        ([math.nan, 8.0, math.inf], 8.0),
        ([-1.0, 2.5], 2.5),
    ],
)
def test_best_is_the_smallest_usable_repetition(values: list[float], expected: float) -> None:
    assert best(values) == expected


@pytest.mark.parametrize("values", [[], [0.0], [math.nan, -3.0]])
def test_best_refuses_a_side_without_any_usable_repetition(values: list[float]) -> None:
    with pytest.raises(ValueError, match="no usable measurement"):
        best(values)


@pytest.mark.parametrize(
    ("bridge", "reference", "expected"),
    [
        ([10.0, 12.0, 11.0], [80.0, 76.0, 90.0], 10.0 / 76.0),
        ([4.0], [8.0], 0.5),
        ([3.5, 3.2, 3.6], [6.0, 5.5, 5.9], 3.2 / 5.5),  # each side its own best, not the best pair
    ],
)
def test_best_ratio_divides_each_sides_best(bridge: list[float], reference: list[float], expected: float) -> None:
    assert best_ratio(bridge, reference) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("measured", "baseline", "margin", "ok"),
    [
        (0.126, 0.126, 1.5, True),
        (0.189, 0.126, 1.5, True),  # exactly at the limit still passes
        (0.19, 0.126, 1.5, False),
        (0.05, 0.126, 1.5, True),  # faster than the baseline never fails
        (0.9, 0.585, 1.5, False),
    ],
)
def test_a_ratio_fails_only_past_baseline_times_margin(
    measured: float, baseline: float, margin: float, ok: bool
) -> None:
    verdict = Verdict("long_turn_cpu_per_event", measured, baseline, margin)
    assert verdict.ok is ok
    assert verdict.allowed == pytest.approx(baseline * margin)


def test_a_regressed_ratio_message_names_the_ratio_the_values_and_the_margin() -> None:
    message = Verdict("long_turn_cpu_per_event", 0.412, 0.126, 1.5).message
    assert message == (
        "REGRESSED: (a) CPU per event of a long turn, bridge / reference: measured 0.412, baseline 0.126, "
        "allowed up to 0.189 (1.5x the baseline)"
    )


def test_judge_gives_one_verdict_per_guarded_ratio_with_its_margin() -> None:
    verdicts = judge(
        {"long_turn_cpu_per_event": 0.5, "short_turn_cpu_per_turn": 0.6},
        {"long_turn_cpu_per_event": 0.126, "short_turn_cpu_per_turn": 0.585},
    )
    assert [(v.key, v.margin, v.ok) for v in verdicts] == [
        ("long_turn_cpu_per_event", MARGINS["long_turn_cpu_per_event"], False),
        ("short_turn_cpu_per_turn", MARGINS["short_turn_cpu_per_turn"], True),
    ]
    assert set(MARGINS) == set(RATIOS)


@pytest.mark.parametrize(
    ("measured", "baseline", "error"),
    [
        (
            {"long_turn_cpu_per_event": 0.1},
            {"long_turn_cpu_per_event": 0.1, "short_turn_cpu_per_turn": 0.5},
            "not measured",
        ),
        (
            {"long_turn_cpu_per_event": 0.1, "short_turn_cpu_per_turn": 0.5},
            {"short_turn_cpu_per_turn": 0.5},
            "no baseline",
        ),
        (
            {"long_turn_cpu_per_event": 0.1, "short_turn_cpu_per_turn": 0.5},
            {"long_turn_cpu_per_event": 0.0, "short_turn_cpu_per_turn": 0.5},
            "not a positive ratio",
        ),
    ],
)
def test_judge_refuses_a_ratio_it_cannot_compare(
    measured: dict[str, float], baseline: dict[str, float], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        judge(measured, baseline)


def test_ratios_within_their_margins_pass_the_guard() -> None:
    """The pass path of `bench/guard.py`: every verdict ok, and the PASS line lists each ratio with its limit."""
    baseline = {"long_turn_cpu_per_event": 0.129, "short_turn_cpu_per_turn": 0.636}
    measured = {key: baseline[key] * MARGINS[key] for key in RATIOS}  # each exactly at its limit
    verdicts = judge(measured, baseline)
    assert all(verdict.ok for verdict in verdicts)
    assert summary_line(verdicts) == (
        "bench guard: PASS (long_turn_cpu_per_event 0.226 <= 0.226, short_turn_cpu_per_turn 1.018 <= 1.018)"
    )


def test_summary_line_passes_or_names_every_regressed_ratio() -> None:
    fine = Verdict("long_turn_cpu_per_event", 0.13, 0.126, 1.5)
    slow_a = Verdict("long_turn_cpu_per_event", 0.4, 0.126, 1.5)
    slow_b = Verdict("short_turn_cpu_per_turn", 1.2, 0.585, 1.5)
    assert summary_line([fine]).startswith("bench guard: PASS (long_turn_cpu_per_event 0.130 <= 0.189")
    failed = summary_line([slow_a, slow_b])
    assert failed.startswith("bench guard: FAIL: REGRESSED: (a) CPU per event of a long turn")
    assert "(b) server CPU per 10-delta turn, bridge / reference: measured 1.200" in failed


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        (
            [
                {"long_turn_cpu_per_event": 0.12, "short_turn_cpu_per_turn": 0.70},
                {"long_turn_cpu_per_event": 0.16, "short_turn_cpu_per_turn": 0.60},
                {"long_turn_cpu_per_event": 0.13, "short_turn_cpu_per_turn": 0.64},
            ],
            {"long_turn_cpu_per_event": 0.13, "short_turn_cpu_per_turn": 0.64},
        ),
        (
            [{"long_turn_cpu_per_event": 0.2, "short_turn_cpu_per_turn": 0.5}],
            {"long_turn_cpu_per_event": 0.2, "short_turn_cpu_per_turn": 0.5},
        ),
    ],
)
def test_a_recorded_baseline_is_each_ratios_median_over_the_runs(
    runs: list[dict[str, float]], expected: dict[str, float]
) -> None:
    assert baseline_of(runs) == pytest.approx(expected)


def test_no_baseline_is_recorded_from_no_run() -> None:
    with pytest.raises(ValueError, match="no run"):
        baseline_of([])
