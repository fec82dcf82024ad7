"""The bench guard's pure part: best of the repetitions, the two CPU ratios, the comparison with the baseline.

`bench/guard.py` measures; this module only computes, so `tests/unit/test_bench_guard_rules.py` checks it as a
table of cases (the one bench module the tests import; stdlib only).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The two guarded ratios: key in the measurements and the baseline file -> what it is, for messages.
RATIOS: dict[str, str] = {
    "long_turn_cpu_per_event": "(a) CPU per event of a long turn, bridge / reference",
    "short_turn_cpu_per_turn": "(b) server CPU per 10-delta turn, bridge / reference",
}

#: A ratio fails when it exceeds baseline x margin. Each margin is about 1.25x the widest spread (largest / smallest
#: ratio) measured here over 11 runs, quiet and beside two CPU hogs (bench/README.md#the-ci-guard): 1.40 for (a),
#: whose reference spends less CPU per event when preempted (likely reading bigger batches), 1.26 for (b). So a
#: baseline at one end of the spread and a run at the other still pass, and only a real regression fails.
MARGINS: dict[str, float] = {
    "long_turn_cpu_per_event": 1.75,
    "short_turn_cpu_per_turn": 1.6,
}


def best(values: Sequence[float]) -> float:
    """The smallest finite, positive value: for the bridge, the repetition the machine's other work disturbed
    least (it adds CPU time: cache misses, migrations, more wake-ups); the reference's per-event CPU instead falls
    a little under load, which the margins absorb."""
    usable = [value for value in values if math.isfinite(value) and value > 0]
    if not usable:
        raise ValueError(f"no usable measurement among {list(values)!r}")
    return min(usable)


def best_ratio(bridge: Sequence[float], reference: Sequence[float]) -> float:
    """Bridge / reference, each side its best repetition (both measured in the same run, interleaved)."""
    return best(bridge) / best(reference)


def baseline_of(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The baseline `--record` writes: per ratio, the median over the recorded runs (one odd run moves it little)."""
    if not runs:
        raise ValueError("no run to record a baseline from")
    return {key: statistics.median(run[key] for run in runs) for key in RATIOS}


@dataclass(frozen=True)
class Verdict:
    """One ratio against its baseline: `ok` when `measured <= baseline * margin`."""

    key: str
    measured: float
    baseline: float
    margin: float

    @property
    def allowed(self) -> float:
        return self.baseline * self.margin

    @property
    def ok(self) -> bool:
        return self.measured <= self.allowed

    @property
    def message(self) -> str:
        label = RATIOS.get(self.key, self.key)
        outcome = "ok" if self.ok else "REGRESSED"
        return (
            f"{outcome}: {label}: measured {self.measured:.3f}, baseline {self.baseline:.3f}, "
            f"allowed up to {self.allowed:.3f} ({self.margin:g}x the baseline)"
        )


def judge(
    measured: Mapping[str, float], baseline: Mapping[str, float], margins: Mapping[str, float] = MARGINS
) -> list[Verdict]:
    """A verdict per guarded ratio, in the order of RATIOS; a ratio missing from either side is an error, not a
    pass (a guard that silently stops comparing would stay green forever)."""
    verdicts = []
    for key in RATIOS:
        if key not in measured:
            raise ValueError(f"ratio {key!r} was not measured")
        if key not in baseline:
            raise ValueError(f"ratio {key!r} has no baseline (re-record it: bench/README.md#the-ci-guard)")
        if not baseline[key] > 0:
            raise ValueError(f"baseline of {key!r} is {baseline[key]!r}, not a positive ratio")
        verdicts.append(Verdict(key, measured[key], baseline[key], margins[key]))
    return verdicts


def summary_line(verdicts: Sequence[Verdict]) -> str:
    """The guard's last line: PASS, or FAIL naming every regressed ratio."""
    failed = [verdict for verdict in verdicts if not verdict.ok]
    if not failed:
        return "bench guard: PASS (" + ", ".join(f"{v.key} {v.measured:.3f} <= {v.allowed:.3f}" for v in verdicts) + ")"
    return "bench guard: FAIL: " + "; ".join(verdict.message for verdict in failed)
