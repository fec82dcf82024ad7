"""The CI bench guard: fails when the bridge's CPU cost regresses against the reference adapter's.

Run through `bash bench/guard` (what `.ci/run` does after the test suite); bench/README.md#the-ci-guard says
what it measures, its margins and how to re-record the baseline. One short run (about 30 s):

* the replay upstream, `agui-bridge serve --workers 1` (the project's .venv, the checkout's `agui_bridge` or
  `--repo-root`) and the reference adapter `iac-code agui` (the real-kernel tier's venv, `AGUI_KERNEL_VENV`);
* per repetition, interleaved: one long turn through each (server CPU per event) and a series of 10-delta
  turns through each, a new connection per turn (server CPU per turn); utime + stime from /proc, never wall time;
* the two ratios bridge / reference, each side its best repetition, against `bench/guard-baseline.json`
  (`--record` writes it: the median of three such runs).

Exit status: 0 pass (or skipped locally: no reference), 1 a ratio regressed, 2 nothing comparable measured
(a server failed; no reference under CI).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import guard_rules as rules
import harness as h
import loadgen as lg

T = TypeVar("T")
KERNEL_VERSION = "0.16.0"
BASELINE = h.BENCH_DIR / "guard-baseline.json"
LAST = h.BENCH_DIR / "guard-last.json"
EXIT_PASS, EXIT_REGRESSED, EXIT_ERROR = 0, 1, 2
#: Settle time after a measured turn: its clean-up (release commit, log line) is part of its cost.
CLEANUP_S = 0.15
#: A measured turn (or series of short turns) that takes longer is a hung server, not a slow one: exit 2.
STEP_TIMEOUT_S = 180.0
#: What `iac-code agui` imports to serve (`iac_code.agui.server.run_server`, which serves `iac_code.agui.app`):
#: the probe of the reference venv; scripts/install-kernel probes a cached venv with the same statement.
REFERENCE_IMPORTS = "import iac_code.agui.app, iac_code.agui.server"


class ReferenceUnavailable(RuntimeError):
    """The reference adapter cannot run here: skipped locally, fatal under CI."""


def ci_is_set() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def reference_venv() -> Path:
    """The real-kernel tier's venv, where scripts/install-kernel puts it (AGUI_KERNEL_VENV overrides)."""
    given = os.environ.get("AGUI_KERNEL_VENV")
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "agui-bridge" / f"kernel-venv-{KERNEL_VERSION}"


def check_reference(venv: Path) -> None:
    """Raise ReferenceUnavailable with the reason when `iac-code agui` cannot start from `venv`."""
    cli = venv / "bin" / "iac-code"
    if not os.access(cli, os.X_OK):
        raise ReferenceUnavailable(f"{cli} is missing (scripts/install-kernel installs it)")
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", REFERENCE_IMPORTS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise ReferenceUnavailable(f"`iac-code agui` cannot start from {venv}: {last}")


def use_reference_venv(venv: Path) -> None:
    h.REF_VENV = venv
    h.REF_PY = venv / "bin" / "python"
    h.REF_CLI = venv / "bin" / "iac-code"


def bounded(what: str, step: Coroutine[Any, Any, T]) -> T:
    """Run one measured step under STEP_TIMEOUT_S, so a hung server fails the guard instead of stalling CI."""
    try:
        return asyncio.run(asyncio.wait_for(step, STEP_TIMEOUT_S))
    except TimeoutError as exc:
        raise RuntimeError(f"{what} did not finish within {STEP_TIMEOUT_S:g} s") from exc


def long_turn_us_per_event(port: int, pid: int, ws: str, deltas: int, turns: int = 1) -> float:
    """Server CPU (all threads) per AG-UI event of `turns` consecutive turns of `deltas` text deltas each.

    /proc counts CPU in clock ticks (10 ms): the bridge's turn is cheap, so it runs several to span enough of them.
    """
    cpu0 = h.cpu_seconds(pid)
    events = 0
    for _ in range(turns):
        request = lg.agui_request(port, f"[DELTAS {deltas}] guard long turn", ws)
        rec = bounded(f"long turn on port {port}", lg.sse_stream(port, request))
        if rec.terminal != "RUN_FINISHED" or rec.events < deltas:
            raise RuntimeError(f"long turn on port {port} ended {rec.terminal} ({rec.error}, {rec.events} events)")
        events += rec.events
    time.sleep(CLEANUP_S)
    return (h.cpu_seconds(pid) - cpu0) / events * 1e6


def short_turns_ms_per_turn(port: int, pid: int, ws: str, turns: int) -> float:
    """Server CPU (all threads) per 10-delta turn, `turns` in sequence, each on a new connection and thread."""
    cpu0 = h.cpu_seconds(pid)
    recs = bounded(
        f"{turns} short turns on port {port}",
        lg.sequential_turns(port, lambda: lg.agui_request(port, "[DELTAS 10] guard turn", ws), turns),
    )
    time.sleep(CLEANUP_S)
    cpu1 = h.cpu_seconds(pid)
    failed = [rec for rec in recs if rec.terminal != "RUN_FINISHED"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {turns} short turns on port {port} failed: {failed[0].error}")
    return (cpu1 - cpu0) / turns * 1000


def warm(port: int, ws: str) -> None:
    for text in ("[DELTAS 50] warm-up", "[DELTAS 50] warm-up", "[DELTAS 2000] warm-up"):
        rec = bounded(f"warm-up turn on port {port}", lg.sse_stream(port, lg.agui_request(port, text, ws)))
        if rec.terminal != "RUN_FINISHED":
            raise RuntimeError(f"warm-up turn on port {port} failed: {rec.error} {rec.body[:300]!r}")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Start the three servers, run the repetitions, stop everything; every value per repetition.

    The replay upstream and the bridge come from `harness.bridge_on_upstream` (its temporary directory, token and
    clean-up); the reference runs beside the bridge on the same upstream and workspace root.
    """
    values: dict[str, list[float]] = {
        "bridge_long_us_per_event": [],
        "reference_long_us_per_event": [],
        "bridge_short_ms_per_turn": [],
        "reference_short_ms_per_turn": [],
    }

    def replay(log_dir: Path, token: str) -> h.Replay:
        return h.Replay(log_dir, token, deltas=args.deltas)

    with h.bridge_on_upstream("guard", replay, keep_tmp=args.keep_tmp) as started:
        bridge = started.bridge
        ws_dir = started.workspace / "ws"
        ws_dir.mkdir()
        ws = str(ws_dir)
        try:
            reference = h.Reference(
                started.tmp / "logs",
                "reference",
                a2a_url=started.upstream.url,
                a2a_token=started.upstream.token,
                state_dir=started.tmp / "state-reference",
                cwd_root=started.workspace,
            )
        except RuntimeError as exc:
            raise ReferenceUnavailable(f"`iac-code agui` did not start: {str(exc)[-400:]}") from exc
        try:
            warm(bridge.port, ws)
            warm(reference.port, ws)
            for rep in range(args.reps):
                values["bridge_long_us_per_event"].append(
                    long_turn_us_per_event(bridge.port, bridge.pid, ws, args.deltas, args.bridge_long_turns)
                )
                values["reference_long_us_per_event"].append(
                    long_turn_us_per_event(reference.port, reference.pid, ws, args.deltas)
                )
                values["bridge_short_ms_per_turn"].append(
                    short_turns_ms_per_turn(bridge.port, bridge.pid, ws, args.turns)
                )
                values["reference_short_ms_per_turn"].append(
                    short_turns_ms_per_turn(reference.port, reference.pid, ws, args.turns)
                )
                last = {key: vals[-1] for key, vals in values.items()}
                h.log(
                    f"guard rep {rep + 1}/{args.reps}: long turn us/event bridge"
                    f" {last['bridge_long_us_per_event']:.1f} reference {last['reference_long_us_per_event']:.1f};"
                    f" 10-delta turn ms bridge {last['bridge_short_ms_per_turn']:.2f}"
                    f" reference {last['reference_short_ms_per_turn']:.2f}"
                )
        finally:
            with contextlib.suppress(Exception):
                reference.stop()
    return {k: [round(v, 3) for v in vals] for k, vals in values.items()}


def ratios_of(values: dict[str, list[float]]) -> dict[str, float]:
    return {
        "long_turn_cpu_per_event": rules.best_ratio(
            values["bridge_long_us_per_event"], values["reference_long_us_per_event"]
        ),
        "short_turn_cpu_per_turn": rules.best_ratio(
            values["bridge_short_ms_per_turn"], values["reference_short_ms_per_turn"]
        ),
    }


def git_commit() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["git", "-C", str(h.REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if out.returncode == 0:
            return out.stdout.strip()
    return None


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="repetitions; each ratio takes each side's best")
    parser.add_argument("--deltas", type=int, default=20_000, help="text deltas of the long turn")
    parser.add_argument(
        "--bridge-long-turns", type=int, default=3, help="long turns per repetition through the bridge (summed)"
    )
    parser.add_argument("--turns", type=int, default=150, help="10-delta turns per repetition")
    parser.add_argument("--baseline", type=Path, default=BASELINE, help="the committed baseline ratios")
    parser.add_argument("--record", action="store_true", help="write the measured ratios as the new baseline")
    parser.add_argument("--record-runs", type=int, default=3, help="--record: runs whose median is the baseline")
    parser.add_argument("--out", type=Path, default=LAST, help="where this run's measurements go (JSON)")
    parser.add_argument("--repo-root", type=Path, default=None, help="the checkout whose agui_bridge is measured")
    parser.add_argument("--reference-venv", type=Path, default=None, help="venv with `iac-code agui`")
    parser.add_argument("--keep-tmp", action="store_true", help="keep logs and state under /tmp/agui-bench-guard-*")
    args = parser.parse_args(argv)
    if min(args.reps, args.turns, args.bridge_long_turns, args.record_runs) < 1 or args.deltas < 100:
        parser.error("--reps, --turns, --bridge-long-turns and --record-runs must be >= 1, --deltas >= 100")

    h.BENCH_PY = Path(sys.executable)  # the project's venv: what CI installed, nothing built here
    if args.repo_root is not None:
        h.REPO_ROOT = args.repo_root.resolve()
    venv = args.reference_venv or reference_venv()
    use_reference_venv(venv)
    started = time.monotonic()
    report: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "measured": {**h.source_digest(), "commit": git_commit()},
        "reference_venv": str(venv),
        "options": {
            "reps": args.reps,
            "deltas": args.deltas,
            "bridge_long_turns": args.bridge_long_turns,
            "turns": args.turns,
        },
        "machine": {"cpus": os.cpu_count(), "loadavg_start": h.loadavg()},
    }

    try:
        check_reference(venv)
        runs = [measure(args) for _ in range(args.record_runs if args.record else 1)]
        run_ratios = [ratios_of(values) for values in runs]
    except ReferenceUnavailable as exc:
        report["status"] = "error" if ci_is_set() else "skipped"
        report["reason"] = str(exc)
        report["reference_unavailable"] = True
        write_json(args.out, report)
        if ci_is_set():
            print(f"bench guard: ERROR: {exc}; CI is set, so the guard may not be skipped", flush=True)
            return EXIT_ERROR
        print(f"bench guard: SKIPPED: {exc}", flush=True)
        return EXIT_PASS
    except (RuntimeError, OSError, ValueError) as exc:
        report["status"] = "error"
        report["reason"] = str(exc)[-1500:]
        write_json(args.out, report)
        print(f"bench guard: ERROR: nothing comparable measured: {str(exc)[-800:]}", flush=True)
        return EXIT_ERROR

    ratios = rules.baseline_of(run_ratios) if args.record else run_ratios[0]
    report["values"] = runs[0] if len(runs) == 1 else runs
    report["ratios"] = {k: round(v, 4) for k, v in ratios.items()}
    report["machine"]["loadavg_end"] = h.loadavg()
    report["wall_s"] = round(time.monotonic() - started, 1)
    for key, value in report["ratios"].items():
        print(f"bench guard: {rules.RATIOS[key]}: {value:.3f}", flush=True)

    if args.record:
        report["run_ratios"] = [{k: round(v, 4) for k, v in run.items()} for run in run_ratios]
        write_json(args.baseline, {"ratios": report["ratios"], "recorded": report})
        write_json(args.out, {**report, "status": "recorded"})
        print(
            f"bench guard: baseline (median of {len(runs)} runs) recorded in {args.baseline} ({report['wall_s']} s)",
            flush=True,
        )
        return EXIT_PASS

    try:
        baseline = {k: float(v) for k, v in json.loads(args.baseline.read_text())["ratios"].items()}
        verdicts = rules.judge(ratios, baseline)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        report["status"] = "error"
        report["reason"] = f"baseline {args.baseline}: {exc}"
        write_json(args.out, report)
        print(f"bench guard: ERROR: baseline {args.baseline} unusable: {exc}", flush=True)
        return EXIT_ERROR
    for verdict in verdicts:
        print(f"bench guard: {verdict.message}", flush=True)
    passed = all(verdict.ok for verdict in verdicts)
    report["status"] = "pass" if passed else "fail"
    report["verdicts"] = [
        {"ratio": v.key, "measured": round(v.measured, 4), "baseline": v.baseline, "margin": v.margin, "ok": v.ok}
        for v in verdicts
    ]
    write_json(args.out, report)
    print(rules.summary_line(verdicts) + f" [{report['wall_s']} s, measurements in {args.out}]", flush=True)
    return EXIT_PASS if passed else EXIT_REGRESSED


if __name__ == "__main__":
    sys.exit(main())
