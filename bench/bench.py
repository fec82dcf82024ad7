"""agui-bridge benchmark orchestrator. Run through `bash bench/run [--quick]`.

Sections (each measured against a baseline started in the same invocation):

* throughput  AG-UI events/s and server CPU us/event for one long turn, through one gevent worker, on
              the replay upstream and on the demo agent; baselines: the upstream read directly
              (requests, parse nothing) and the reference adapter `iac-code agui` 0.16.0.
* profile     py-spy flamegraph + top costs of the bridge worker (and of the reference) during the
              replay throughput case.
* latency     a 10-delta turn (request -> RUN_FINISHED) and time to RUN_STARTED at 1 and 100
              concurrent clients; baselines: direct upstream, reference.
* idle        1,000 / 5,000 idle streams opened in one burst on ONE worker: RUN_STARTED p99 from the
              burst, RSS per stream, heartbeat lateness, /health latency, worker CPU while holding,
              upstream connections; baselines: direct upstream hold (client floor) and the reference.
* state       admission, commit points and 4-process contention on one thread file.
* boot        a new worker's fork -> first /health, `agui-bridge serve` start -> first /health (bench/boot.py).

Every metric is computed per repetition, then reported as median and p99 over the repetitions.
Writes bench/results/<date>.json and <date>.md (`<date>-quick.*` with --quick).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boot
import harness as h
import loadgen as lg
import scaling
from profile_summary import as_text, summarise

FULL = {
    "deltas": 20_000,
    "tp_reps": 5,
    "demo_deltas": 5_000,
    "demo_reps": 3,
    "profile_s": 8.0,
    "lat_turns_1": 150,
    "lat_clients": 100,
    "lat_turns_100": 8,
    "lat_reps": 3,
    "idle_sizes": [100, 1000, 5000],
    "idle_reps": 2,
    "idle_hold_s": 12.0,
    "idle_limit_s": 45.0,
    "ref_idle_limit_s": 45.0,
    "teardown_limit_s": 45.0,
    "heartbeat_s": 2.0,
    "state_samples": 200,
    "contention_s": 5.0,
    "phase_turns": 200,
    "scale_streams": 6,
    "scale_deltas": 20_000,
    "scale_reps": 3,
}
QUICK = {
    "deltas": 10_000,
    "tp_reps": 2,
    "demo_deltas": 1_000,
    "demo_reps": 1,
    "profile_s": 3.0,
    "lat_turns_1": 40,
    "lat_clients": 100,
    "lat_turns_100": 2,
    "lat_reps": 1,
    "idle_sizes": [300],
    "idle_reps": 1,
    "idle_hold_s": 5.0,
    "idle_limit_s": 20.0,
    "ref_idle_limit_s": 20.0,
    "teardown_limit_s": 20.0,
    "heartbeat_s": 2.0,
    "state_samples": 40,
    "contention_s": 2.0,
    "phase_turns": 40,
    "scale_streams": 4,
    "scale_deltas": 10_000,
    "scale_reps": 1,
}
SECTIONS = ("throughput", "profile", "latency", "phases", "idle", "state", "scaling", "boot")
#: The baseline of the phase breakdown: the start of the current round of work (the older baseline, whose durable
#: commits ran on the event loop, needs `filelock`, which the bench's venv no longer installs).
PHASES_BEFORE_REF = "a830680"


def over_reps(values: list[float | None], digits: int = 3) -> dict[str, Any]:
    vals = [v for v in values if v is not None]
    return {
        "median": _r(h.percentile(vals, 50), digits),
        "p99": _r(h.percentile(vals, 99), digits),
        "values": [_r(v, digits) for v in values],
    }


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def med(metric: dict[str, Any] | None) -> float | None:
    return None if not metric else metric.get("median")


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cfg = dict(QUICK if args.quick else FULL)
        if getattr(args, "idle_sizes", ""):
            self.cfg["idle_sizes"] = [int(x) for x in args.idle_sizes.split(",") if x.strip()]
        self.token = secrets.token_hex(16)
        self.tmp = Path(tempfile.mkdtemp(prefix="agui-bench-"))
        self.logs = self.tmp / "logs"
        self.logs.mkdir()
        self.cwd_root = self.tmp / "workspaces"
        (self.cwd_root / "ws").mkdir(parents=True)
        self.ws = str(self.cwd_root / "ws")
        self.results_dir = Path(args.out)
        self.results_dir.mkdir(parents=True, exist_ok=True)
        self.date = args.date or dt.date.today().isoformat()
        self.stem = self.date + ("-quick" if args.quick else "")
        # Measure ONE version of the code for the whole run: the checkout is being edited while the bench
        # runs, so every bridge, demo agent and the state bench import a snapshot taken now.
        self.source = {"checkout": str(h.REPO_ROOT), **h.source_digest()}
        snapshot = self.tmp / "src"
        snapshot.mkdir()
        shutil.copytree(
            h.REPO_ROOT / "agui_bridge",
            snapshot / "agui_bridge",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules"),
        )
        for name in ("setup.cfg", "wsgi.py"):
            if (h.REPO_ROOT / name).exists():
                shutil.copy2(h.REPO_ROOT / name, snapshot / name)
        h.REPO_ROOT = snapshot
        self.source["snapshot_sha256"] = h.source_digest()["sha256"]
        self.ref = h.reference_status()
        self.use_ref = bool(self.ref.get("installed")) and not args.no_reference
        self.sections = [s for s in (args.only.split(",") if args.only else SECTIONS)]
        self.res: dict[str, Any] = {}
        self._servers: list[Any] = []
        self._state_seq = 0
        self.shm: Path | None = None

    # ---- helpers ---------------------------------------------------------------------------------

    def state_dir(self, name: str) -> Path:
        self._state_seq += 1
        return self.tmp / "state" / f"{self._state_seq:02d}-{name}"

    def track(self, server: Any) -> Any:
        self._servers.append(server)
        return server

    def stop(self, server: Any) -> None:
        with contextlib.suppress(Exception):
            server.stop()
        if server in self._servers:
            self._servers.remove(server)

    def stop_all(self) -> None:
        for server in list(reversed(self._servers)):
            self.stop(server)

    def bridge(self, name: str, a2a_url: str, *, tmpfs: bool = False, **kw: Any) -> h.Bridge:
        """`tmpfs`: the state directory on /dev/shm, where fsync costs nothing (isolates CPU from the disk)."""
        state_dir = self.state_dir(name)
        if tmpfs:
            self.shm = self.shm or Path(tempfile.mkdtemp(prefix="agui-bench-", dir="/dev/shm"))
            state_dir = self.shm / state_dir.name
        return self.track(
            h.Bridge(
                self.logs,
                name,
                a2a_url=a2a_url,
                a2a_token=self.token,
                state_dir=state_dir,
                cwd_root=self.cwd_root,
                workers=self.args.workers,
                **kw,
            )
        )

    def reference(self, name: str, a2a_url: str, **kw: Any) -> h.Reference | None:
        if not self.use_ref:
            return None
        try:
            return self.track(
                h.Reference(
                    self.logs,
                    name,
                    a2a_url=a2a_url,
                    a2a_token=self.token,
                    state_dir=self.state_dir(name),
                    cwd_root=self.cwd_root,
                    **kw,
                )
            )
        except RuntimeError as exc:
            self.ref = {**self.ref, "started": False, "start_error": str(exc)[-1500:]}
            self.use_ref = False
            h.log(f"reference adapter did not start: {str(exc)[-300:]}")
            return None

    def agui_req(self, port: int, text: str) -> bytes:
        return lg.agui_request(port, text, self.ws)

    def warm(self, port: int, text: str = "[DELTAS 50] warm-up", n: int = 3) -> None:
        for _ in range(n):
            rec = asyncio.run(lg.sse_stream(port, self.agui_req(port, text)))
            if rec.terminal != "RUN_FINISHED":
                raise RuntimeError(f"warm-up turn failed on port {port}: {rec.error} {rec.body[:300]!r}")

    # ---- throughput --------------------------------------------------------------------------------

    def agui_throughput(
        self, port: int, server_pid: int, upstream_pid: int, text: str, reps: int, expect_min_events: int
    ) -> dict[str, Any]:
        eps, cpu_us, up_cpu_us, events, errors = [], [], [], [], []
        for _ in range(reps):
            req = self.agui_req(port, text)
            c0, u0 = h.cpu_seconds(server_pid), h.cpu_seconds(upstream_pid)
            rec = asyncio.run(lg.sse_stream(port, req))
            time.sleep(0.15)  # the run's cleanup (lease release, log line) is part of its cost
            c1, u1 = h.cpu_seconds(server_pid), h.cpu_seconds(upstream_pid)
            if rec.terminal != "RUN_FINISHED" or rec.events < expect_min_events or rec.t_end is None:
                errors.append(f"{rec.terminal} {rec.error} events={rec.events} {rec.body[:200]!r}")
                continue
            elapsed = rec.t_end - rec.t_start
            eps.append(rec.events / elapsed)
            cpu_us.append((c1 - c0) / rec.events * 1e6)
            up_cpu_us.append((u1 - u0) / rec.events * 1e6)
            events.append(rec.events)
        return {
            "events_per_s": over_reps(eps, 0),
            "server_cpu_us_per_event": over_reps(cpu_us, 1),
            "upstream_cpu_us_per_event": over_reps(up_cpu_us, 1),
            "events": events,
            "errors": errors,
        }

    def direct_throughput(self, url: str, upstream_pid: int, text: str, reps: int) -> dict[str, Any]:
        u0 = h.cpu_seconds(upstream_pid)
        out = h.run_json(
            [
                str(h.BENCH_PY),
                str(h.BENCH_DIR / "direct_read.py"),
                "--url",
                url,
                "--token",
                self.token,
                "--text",
                text,
                "--reps",
                str(reps),
            ],
            env=h.base_env(with_repo=False),
            timeout=900,
        )
        u1 = h.cpu_seconds(upstream_pid)
        reps_out = out["reps"]
        total_events = sum(r["chunks"] for r in reps_out) or 1
        return {
            "events_per_s": over_reps([r["chunks"] / r["elapsed_s"] for r in reps_out], 0),
            "reader_cpu_us_per_event": over_reps([r["reader_cpu_s"] / r["chunks"] * 1e6 for r in reps_out], 1),
            "upstream_cpu_us_per_event_incl_warmup": round((u1 - u0) / total_events * 1e6, 1),
            "events": [r["chunks"] for r in reps_out],
            "bytes": [r["bytes"] for r in reps_out],
        }

    def section_throughput(self, replay: h.Replay) -> None:
        cfg = self.cfg
        d = cfg["deltas"]
        text = f"[DELTAS {d}] throughput"
        out: dict[str, Any] = {"deltas": d, "reps": cfg["tp_reps"], "workers": self.args.workers}
        h.log(f"throughput: direct read of the replay upstream ({d} deltas x {cfg['tp_reps']})")
        out["replay_direct"] = self.direct_throughput(replay.url, replay.pid, text, cfg["tp_reps"])
        h.log("throughput: bridge on the replay upstream")
        bridge = self.bridge("bridge-throughput", replay.url)
        self.warm(bridge.port)
        out["replay_bridge"] = self.agui_throughput(bridge.port, bridge.pid, replay.pid, text, cfg["tp_reps"], d)
        out["replay_bridge"]["command"] = bridge.command
        if "profile" in self.sections:
            self.res["profile"] = {"bridge": self.profile(bridge.pid, bridge.port, text, "throughput")}
        self.stop(bridge)
        ref = self.reference("reference-throughput", replay.url)
        if ref is not None:
            h.log("throughput: reference adapter on the replay upstream")
            try:
                self.warm(ref.port)
                out["replay_reference"] = self.agui_throughput(ref.port, ref.pid, replay.pid, text, cfg["tp_reps"], d)
                out["replay_reference"]["command"] = ref.command
                if "profile" in self.sections:
                    self.res.setdefault("profile", {})["reference"] = self.profile(
                        ref.pid, ref.port, text, "reference-throughput", svg=False
                    )
            except RuntimeError as exc:
                out["replay_reference"] = {"error": str(exc)[-500:]}
            self.stop(ref)
        # demo agent (a2a-sdk 1.3 server: expected to be the bottleneck itself)
        dd = cfg["demo_deltas"]
        demo = self.track(h.Demo(self.logs, self.token))
        dtext = f"[LONG {dd}] throughput"
        h.log(f"throughput: demo agent, direct read and bridge ({dd} deltas x {cfg['demo_reps']})")
        out["demo_deltas"] = dd
        out["demo_direct"] = self.direct_throughput(demo.url, demo.pid, dtext, cfg["demo_reps"])
        bridge = self.bridge("bridge-throughput-demo", demo.url)
        self.warm(bridge.port, "[LONG 20] warm-up")
        out["demo_bridge"] = self.agui_throughput(bridge.port, bridge.pid, demo.pid, dtext, cfg["demo_reps"], dd)
        self.stop(bridge)
        self.stop(demo)
        rb, rd, rr = out["replay_bridge"], out["replay_direct"], out.get("replay_reference", {})
        out["ratios"] = {
            "bridge_vs_direct_events_per_s": h.ratio(med(rb["events_per_s"]), med(rd["events_per_s"])),
            "bridge_vs_reference_events_per_s": h.ratio(med(rb["events_per_s"]), med(rr.get("events_per_s"))),
            "bridge_vs_reference_cpu_per_event": h.ratio(
                med(rb["server_cpu_us_per_event"]), med(rr.get("server_cpu_us_per_event"))
            ),
            "demo_bridge_vs_demo_direct_events_per_s": h.ratio(
                med(out["demo_bridge"]["events_per_s"]), med(out["demo_direct"]["events_per_s"])
            ),
        }
        self.res["throughput"] = out

    # ---- profile -----------------------------------------------------------------------------------

    def profile(self, pid: int, port: int, text: str, name: str, *, svg: bool = True) -> dict[str, Any]:
        spy = h.BENCH_DIR / ".venv" / "bin" / "py-spy"
        out: dict[str, Any] = {"tool": "py-spy 0.4.3 record --nonblocking --rate 250", "seconds": self.cfg["profile_s"]}
        raw = self.tmp / f"{name}.raw.txt"
        passes = [("raw", raw)]
        if svg:
            passes.append(("flamegraph", self.results_dir / f"{self.stem}-{name}-flamegraph.svg"))
        for fmt, path in passes:
            h.log(f"profile: py-spy {fmt} of pid {pid} ({name})")
            cmd = [
                str(spy),
                "record",
                "-p",
                str(pid),
                "--nonblocking",
                "--rate",
                "250",
                "--duration",
                str(int(self.cfg["profile_s"])),
                "--format",
                fmt,
                "-o",
                str(path),
            ]
            spy_proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            turns = 0
            while spy_proc.poll() is None:
                asyncio.run(lg.sse_stream(port, self.agui_req(port, text)))
                turns += 1
            err = spy_proc.stderr.read() if spy_proc.stderr else ""
            if spy_proc.returncode != 0 or not path.exists():
                out[f"{fmt}_error"] = err[-500:]
                continue
            if fmt == "flamegraph":
                out["flamegraph"] = path.name
        if raw.exists():
            summary = summarise(raw)
            text_path = self.results_dir / f"{self.stem}-{name}-profile.txt"
            text_path.write_text(as_text(summary, f"py-spy profile: {name} (pid {pid}), {self.cfg['profile_s']} s"))
            out["top"] = text_path.name
            out["summary"] = {k: v[:12] for k, v in summary.items() if isinstance(v, list)}
            out["samples"] = summary["samples"]
        return out

    def profile_idle(self, pid: int, seconds: float, name: str) -> subprocess.Popen[str]:
        spy = h.BENCH_DIR / ".venv" / "bin" / "py-spy"
        raw = self.tmp / f"{name}.raw.txt"
        cmd = [
            str(spy),
            "record",
            "-p",
            str(pid),
            "--nonblocking",
            "--idle",
            "--threads",
            "--rate",
            "100",
            "--duration",
            str(max(1, int(seconds))),
            "--format",
            "raw",
            "-o",
            str(raw),
        ]
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)

    def profile_burst(self, pid: int, seconds: float, name: str) -> subprocess.Popen[str]:
        """On-CPU profile (every thread, not --idle) of the worker while a burst is admitted: what each
        stream start costs. Stopped with SIGINT once every stream started."""
        spy = h.BENCH_DIR / ".venv" / "bin" / "py-spy"
        raw = self.tmp / f"{name}.raw.txt"
        cmd = [str(spy), "record", "-p", str(pid), "--nonblocking", "--rate", "200"]
        cmd += ["--duration", str(int(seconds) + 5), "--format", "raw", "-o", str(raw)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
        time.sleep(1.0)  # py-spy attaches before the burst begins
        return proc

    def _stopped_profile(self, proc: subprocess.Popen[str], name: str, thread: int | None) -> dict[str, Any] | None:
        """The summary of a py-spy run that was told to stop, or None if it wrote nothing."""
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            return None
        raw = self.tmp / f"{name}.raw.txt"
        if not raw.exists():
            return None
        return summarise(raw, thread=thread)

    def finish_burst_profile(self, proc: subprocess.Popen[str], name: str, pid: int) -> dict[str, Any] | None:
        summary = self._stopped_profile(proc, name, None)
        if summary is None:
            return None
        text_path = self.results_dir / f"{self.stem}-{name}-profile.txt"
        text_path.write_text(
            as_text(summary, f"py-spy on-CPU profile (all threads): {name} (pid {pid}), burst to last RUN_STARTED")
        )
        return {"top": text_path.name, "samples": summary["samples"], "mode": "on-CPU, all threads"}

    def finish_idle_profile(self, proc: subprocess.Popen[str], name: str, pid: int) -> dict[str, Any] | None:
        summary = self._stopped_profile(proc, name, pid)
        if summary is None:
            return None
        text_path = self.results_dir / f"{self.stem}-{name}-profile.txt"
        text_path.write_text(
            as_text(
                summary,
                f"py-spy wall-clock profile (--idle, hub thread only): {name} "
                f"(pid {pid}) while holding idle streams; `Hub.run` leaf = hub idle",
            )
        )
        return {
            "top": text_path.name,
            "samples": summary["samples"],
            "mode": "wall clock (--idle), hub thread",
            "summary": {k: v[:12] for k, v in summary.items() if isinstance(v, list)},
        }

    # ---- latency -------------------------------------------------------------------------------------

    def latency_case(self, port: int, make: Any, *, a2a: bool, pid: int | None = None) -> dict[str, Any]:
        """`pid`: the server process whose CPU per turn is recorded (`server_cpu_ms_per_turn`: utime + stime of
        all its threads over the repetition / turns); wall times on a shared machine hold everyone's load."""
        cfg = self.cfg
        per_rep: dict[str, dict[str, list[float | None]]] = {"1": {}, str(cfg["lat_clients"]): {}}
        errors: list[str] = []
        for _ in range(cfg["lat_reps"]):
            for clients, turns in ((1, cfg["lat_turns_1"]), (cfg["lat_clients"], cfg["lat_turns_100"])):
                cpu0 = h.cpu_seconds(pid) if pid is not None else 0.0
                recs = asyncio.run(lg.concurrent_turns(port, make, clients, turns, a2a=a2a))
                if pid is not None:
                    time.sleep(0.15)  # the clean-up of the last turn is charged too
                    cpu_ms = (h.cpu_seconds(pid) - cpu0) * 1000 / max(1, len(recs))
                    per_rep[str(clients)].setdefault("server_cpu_ms_per_turn", []).append(round(cpu_ms, 3))
                ok = [r for r in recs if r.t_end is not None and r.error is None and r.terminal]
                errors += [f"{r.error} {r.body[:120]!r}" for r in recs if r not in ok][:5]
                turn_ms = [(r.t_end - r.t_start) * 1000 for r in ok]  # type: ignore[operator]
                first = [((r.t_first if a2a else r.t_run_started) or r.t_end) - r.t_start for r in ok]
                first_ms = [x * 1000 for x in first]
                bucket = per_rep[str(clients)]
                for key, vals in (
                    ("turn_ms_p50", h.percentile(turn_ms, 50)),
                    ("turn_ms_p99", h.percentile(turn_ms, 99)),
                    ("run_started_ms_p50", h.percentile(first_ms, 50)),
                    ("run_started_ms_p99", h.percentile(first_ms, 99)),
                ):
                    bucket.setdefault(key, []).append(vals)
                bucket.setdefault("turns_ok", []).append(len(ok))
                bucket.setdefault("turns", []).append(len(recs))
        out: dict[str, Any] = {}
        for clients, bucket in per_rep.items():
            out[f"clients_{clients}"] = {k: over_reps(v, 2) for k, v in bucket.items()}
        out["errors"] = errors[:10]
        return out

    def section_latency(self, replay: h.Replay) -> None:
        cfg = self.cfg
        text = "[DELTAS 10] latency"
        out: dict[str, Any] = {
            "deltas": 10,
            "reps": cfg["lat_reps"],
            "turns_1_client": cfg["lat_turns_1"],
            "clients": cfg["lat_clients"],
            "turns_per_client": cfg["lat_turns_100"],
            "note": "turn = new connection, POST, ... RUN_FINISHED received; a new thread per turn",
        }
        h.log("latency: direct upstream")
        out["direct"] = self.latency_case(replay.port, lambda: lg.a2a_request(replay.port, self.token, text), a2a=True)
        h.log("latency: bridge")
        bridge = self.bridge("bridge-latency", replay.url)
        self.warm(bridge.port)
        out["bridge"] = self.latency_case(
            bridge.port, lambda: self.agui_req(bridge.port, text), a2a=False, pid=bridge.pid
        )
        self.stop(bridge)
        ref = self.reference("reference-latency", replay.url)
        if ref is not None:
            h.log("latency: reference adapter")
            try:
                self.warm(ref.port)
                out["reference"] = self.latency_case(
                    ref.port, lambda: self.agui_req(ref.port, text), a2a=False, pid=ref.pid
                )
            except Exception as exc:  # the reference failing is a result, not a bench failure
                out["reference"] = {"error": repr(exc)[-500:]}
            self.stop(ref)
        self.res["latency"] = out

    # ---- idle streams ----------------------------------------------------------------------------------

    def idle_case(self, kind: str, n: int, replay: h.Replay, *, rep: int, profile: bool = False) -> dict[str, Any]:
        cfg = self.cfg
        hb = cfg["heartbeat_s"]
        limit = cfg["ref_idle_limit_s"] if kind == "reference" else cfg["idle_limit_s"]
        server: Any = None
        result: dict[str, Any] = {"kind": kind, "streams": n, "rep": rep}
        if kind in ("bridge", "bridge-tmpfs"):
            server = self.bridge(
                f"{kind}-idle-{n}-{rep}",
                replay.url,
                heartbeat_s=hb,
                worker_connections=n + 200,
                max_active_runs=n + 100,
                tmpfs=kind == "bridge-tmpfs",
            )
            result["config"] = server.command
        elif kind == "bridge-stock":
            server = self.bridge(f"bridge-stock-idle-{n}", replay.url, heartbeat_s=hb)
            result["config"] = server.command + " (worker_connections 1000 and --max-active-runs 800 as shipped)"
        elif kind == "reference":
            server = self.reference(f"reference-idle-{n}", replay.url, heartbeat_s=hb)
            if server is None:
                return {"kind": kind, "streams": n, "skipped": "reference adapter unavailable"}
            result["config"] = f"iac-code agui (uvicorn, 1 process), heartbeat patched to {hb} s (bench/ref_serve.py)"
        if server is not None:
            self.warm(server.port, "[DELTAS 10] warm-up")
            port, pid = server.port, server.pid
            make = lambda: self.agui_req(port, "[HOLD] idle")  # noqa: E731
            a2a = False
        else:  # direct hold on the upstream: the client + loopback floor
            port, pid = replay.port, replay.pid
            make = lambda: lg.a2a_request(replay.port, self.token, "[HOLD] idle")  # noqa: E731
            a2a = True
            result["config"] = "the load client holding the replay upstream's turns directly (no bridge)"
        time.sleep(0.5)
        result["disk_fsync"] = h.fsync_probe(self.tmp / "fsync-probe", 20)
        held0 = replay.stats().get("held_now", 0)
        rss0 = h.rss_kib(pid)
        probe_out = self.tmp / f"probe-{kind}-{n}-{rep}.json"
        probe = subprocess.Popen(
            [
                str(h.BENCH_PY),
                str(h.BENCH_DIR / "probe.py"),
                "--port",
                str(port),
                "--interval",
                "0.1",
                "--duration",
                str(limit + cfg["idle_hold_s"] + cfg["teardown_limit_s"] + 30),
                "--out",
                str(probe_out),
            ],
            env=h.base_env(with_repo=False),
        )
        time.sleep(1.0)
        requests = [make() for _ in range(n)]
        spy = None
        marks: dict[str, float] = {}

        burst_spy = self.profile_burst(pid, limit, f"idle{n}-burst") if profile else None
        let_go0 = h.runs_let_go(server.url) if kind in ("bridge", "bridge-tmpfs", "bridge-stock") else None

        async def run() -> list[lg.StreamRecord]:
            nonlocal spy
            recs = [lg.StreamRecord() for _ in range(n)]
            marks["t0"] = lg.now()
            tasks = [
                asyncio.create_task(lg.sse_stream(port, req, rec, a2a=a2a, hb_interval=0 if a2a else hb))
                for req, rec in zip(requests, recs, strict=True)
            ]
            deadline = marks["t0"] + limit
            while lg.now() < deadline:
                started = sum(1 for r in recs if (r.t_first if a2a else r.t_run_started) or r.t_end or r.error)
                if started >= n:
                    break
                await asyncio.sleep(0.05)
            marks["all"] = lg.now()
            if burst_spy is not None:
                burst_spy.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
            await asyncio.sleep(1.0)
            marks["c0"] = lg.now()
            result["cpu0"] = h.cpu_seconds(pid)
            result["rss_held_kib_a"] = h.rss_kib(pid)
            if profile:
                spy = self.profile_idle(pid, cfg["idle_hold_s"] - 1, f"idle{n}")
            await asyncio.sleep(cfg["idle_hold_s"] / 2)
            result["upstream_connections"] = h.established_to_port(pid, replay.port) if server is not None else None
            result["upstream_streams_held"] = replay.stats().get("held_now", 0) - held0
            result["rss_held_kib_b"] = h.rss_kib(pid)
            await asyncio.sleep(cfg["idle_hold_s"] / 2)
            result["cpu1"] = h.cpu_seconds(pid)
            marks["c1"] = lg.now()
            result["rss_held_kib_c"] = h.rss_kib(pid)
            result["open_fds"] = h.open_fds(pid)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            marks["closed"] = lg.now()
            return recs

        h.log(f"idle: {kind} {n} streams, rep {rep}: burst")
        recs = asyncio.run(run())
        # departures noticed: until the bridge has let go of every stream of the burst (each ended, its task
        # cancelled, or detached: its reattach window started), from its own counters
        if let_go0 is not None:
            result["departures_noticed_s"] = None
            t_end = time.monotonic() + cfg["teardown_limit_s"]
            while time.monotonic() < t_end:
                let_go = h.runs_let_go(server.url)
                if let_go is not None and let_go - let_go0 >= n:
                    result["departures_noticed_s"] = _r(lg.now() - marks["closed"], 3)
                    break
                time.sleep(0.1)
        if spy is not None:
            result["profile"] = self.finish_idle_profile(spy, f"idle{n}", pid)
        if burst_spy is not None:
            result["burst_profile"] = self.finish_burst_profile(burst_spy, f"idle{n}-burst", pid)
        # teardown: until the upstream holds none of this case's turns open any more (the server closed or
        # cancelled every one of them); pooled keep-alive connections of CancelTask calls do not count
        teardown = None
        t_end = time.monotonic() + cfg["teardown_limit_s"]
        while time.monotonic() < t_end:
            time.sleep(0.25)
            if replay.stats().get("held_now", 0) <= held0:
                teardown = time.monotonic() - marks["closed"]
                break
        result["upstream_streams_left_after_teardown"] = replay.stats().get("held_now", 0) - held0
        result["teardown_limit_s"] = cfg["teardown_limit_s"]
        probe.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            probe.wait(30)
        samples = json.loads(probe_out.read_text())["samples"] if probe_out.exists() else []
        if server is not None:
            self.stop(server)
        t0 = marks["t0"]
        first = [
            ((r.t_first if a2a else r.t_run_started) - t0)
            for r in recs
            if (r.t_first if a2a else r.t_run_started) is not None
        ]
        # streams with no answer at all within the limit count as "limit" (censored); HTTP refusals do not
        unanswered = [r for r in recs if (r.t_first if a2a else r.t_run_started) is None and r.status is None]
        first_censored = first + [limit] * len(unanswered)
        late = [late for r in recs for (t, late) in r.hb if marks["all"] <= t <= marks["c1"]]
        errors: dict[str, int] = {}
        for r in recs:
            if (r.t_first if a2a else r.t_run_started) is None:
                key = (r.error or "no RUN_STARTED within the limit")[:80]
                errors[key] = errors.get(key, 0) + 1
            elif r.terminal is not None:
                key = f"ended early: {r.terminal} {r.body[:80]!r}"
                errors[key] = errors.get(key, 0) + 1

        def health(lo: float, hi: float) -> dict[str, Any]:
            window = [s for s in samples if lo <= s[0] <= hi]
            ok = [s[1] * 1000 for s in window if s[1] is not None and s[2] == 200]
            return {
                "n": len(window),
                "failed": len(window) - len(ok),
                "p50_ms": _r(h.percentile(ok, 50), 2),
                "p99_ms": _r(h.percentile(ok, 99), 2),
                "max_ms": _r(max(ok), 2) if ok else None,
            }

        rss_held = max(result.pop("rss_held_kib_a"), result.pop("rss_held_kib_b"), result.pop("rss_held_kib_c"))
        started = len(first)
        hold_s = marks["c1"] - marks["c0"]
        result.update(
            {
                "started": started,
                "failed_or_missing": errors,
                "run_started_from_burst_s": {
                    "p50": _r(h.percentile(first_censored, 50)),
                    "p99": _r(h.percentile(first_censored, 99)),
                    "max": _r(max(first_censored)) if first_censored else None,
                    "unanswered_within_limit": len(unanswered),
                    "limit_s": limit,
                },
                "all_started_after_s": _r(marks["all"] - t0),
                "rss_base_kib": rss0,
                "rss_held_kib": rss_held,
                "rss_per_stream_kib": _r((rss_held - rss0) / started, 1) if started else None,
                "heartbeat_late_s": {
                    "n": len(late),
                    "p50": _r(h.percentile(late, 50)),
                    "p99": _r(h.percentile(late, 99)),
                    "max": _r(max(late)) if late else None,
                },
                "heartbeats_per_stream": _r(sum(len(r.hb) for r in recs) / max(started, 1), 1),
                "health_before": health(t0 - 1.0, t0),
                "health_burst": health(t0, marks["all"]),
                "health_held": health(marks["all"], marks["c1"]),
                "cpu_pct_while_holding": _r((result.pop("cpu1") - result.pop("cpu0")) / hold_s * 100, 2),
                "hold_s": _r(hold_s, 2),
                "teardown_s": _r(teardown, 2),
            }
        )
        h.log(
            f"idle: {kind} {n}: started {started}/{n}, RUN_STARTED p99 {result['run_started_from_burst_s']['p99']} s,"
            f" /health p99 {result['health_held']['p99_ms']} ms, cpu {result['cpu_pct_while_holding']} %,"
            f" rss/stream {result['rss_per_stream_kib']} KiB, hb late p99 {result['heartbeat_late_s']['p99']} s,"
            f" upstream held {result.get('upstream_streams_held')} (sockets {result.get('upstream_connections')}),"
            f" teardown {teardown}, fsync p50 {result['disk_fsync']['p50_ms']} ms"
        )
        return result

    def section_idle(self, replay: h.Replay) -> None:
        cfg = self.cfg
        out: dict[str, Any] = {"heartbeat_s": cfg["heartbeat_s"], "hold_s": cfg["idle_hold_s"], "cases": {}}
        for i, n in enumerate(cfg["idle_sizes"]):
            cases: dict[str, Any] = {}
            cases["direct"] = self.idle_case("direct", n, replay, rep=1)
            reps = [
                self.idle_case("bridge", n, replay, rep=r + 1, profile=(r == 0 and n == max(cfg["idle_sizes"])))
                for r in range(cfg["idle_reps"])
            ]
            cases["bridge"] = self.combine(reps)
            if i == 0 and not self.args.quick:
                cases["bridge_stock"] = self.idle_case("bridge-stock", n, replay, rep=1)
            if n == max(cfg["idle_sizes"]) and not self.args.quick:
                cases["bridge_tmpfs"] = self.idle_case("bridge-tmpfs", n, replay, rep=1)
            if self.use_ref:
                try:
                    cases["reference"] = self.idle_case("reference", n, replay, rep=1)
                except Exception as exc:  # the reference collapsing is a result, not a bench failure
                    cases["reference"] = {"kind": "reference", "streams": n, "error": repr(exc)[-500:]}
                    for server in list(self._servers):
                        if isinstance(server, h.Reference):
                            self.stop(server)
            out["cases"][str(n)] = cases
        self.res["idle"] = out

    @staticmethod
    def combine(reps: list[dict[str, Any]]) -> dict[str, Any]:
        """Per-repetition idle results -> median / p99 over repetitions for every number."""

        def pick(path: tuple[str, ...], r: dict[str, Any]) -> Any:
            for p in path:
                r = r.get(p) if isinstance(r, dict) else None  # type: ignore[assignment]
            return r

        paths = [
            ("started",),
            ("all_started_after_s",),
            ("run_started_from_burst_s", "p99"),
            ("run_started_from_burst_s", "p50"),
            ("rss_per_stream_kib",),
            ("rss_held_kib",),
            ("heartbeat_late_s", "p99"),
            ("heartbeat_late_s", "p50"),
            ("health_held", "p99_ms"),
            ("health_held", "p50_ms"),
            ("health_held", "failed"),
            ("health_burst", "p99_ms"),
            ("cpu_pct_while_holding",),
            ("upstream_connections",),
            ("upstream_streams_held",),
            ("teardown_s",),
            ("departures_noticed_s",),
            ("run_started_from_burst_s", "unanswered_within_limit"),
            ("disk_fsync", "p50_ms"),
        ]
        summary = {".".join(p): over_reps([pick(p, r) for r in reps]) for p in paths}
        return {"summary": summary, "reps": reps}

    # ---- phases ---------------------------------------------------------------------------------------------

    def section_phases(self, replay: h.Replay) -> None:
        """Per-phase cost of a 10-delta turn in-process (bench/phases.py), on the baseline and now."""
        before = self.tmp / "src-before"
        before.mkdir()
        archive = subprocess.run(
            ["git", "-C", self.source["checkout"], "archive", self.args.phases_before, "agui_bridge", "setup.cfg"],
            capture_output=True,
            check=True,
            timeout=60,
        )
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True, timeout=60)
        out: dict[str, Any] = {"before_ref": self.args.phases_before, "turns": self.cfg["phase_turns"]}
        for label, tree in (("before", before), ("after", h.REPO_ROOT)):
            h.log(f"phases: {label} ({tree})")
            env = h.base_env()
            env["PYTHONPATH"] = str(tree)
            out[label] = h.run_json(
                [
                    str(h.BENCH_PY),
                    str(h.BENCH_DIR / "phases.py"),
                    "--upstream",
                    replay.url,
                    "--token",
                    self.token,
                    "--state",
                    str(self.state_dir(f"phases-{label}")),
                    "--workspace",
                    self.ws,
                    "--turns",
                    str(self.cfg["phase_turns"]),
                ],
                env=env,
                timeout=900,
            )
        self.res["phases"] = out

    # ---- state ---------------------------------------------------------------------------------------------

    def section_state(self) -> None:
        h.log("state: ThreadStore / admit_run / commit points / contention")
        out = h.run_json(
            [
                str(h.BENCH_PY),
                str(h.BENCH_DIR / "state_bench.py"),
                "--dir",
                str(self.tmp / "state-bench"),
                "--samples",
                str(self.cfg["state_samples"]),
                "--contention-seconds",
                str(self.cfg["contention_s"]),
            ],
            env=h.base_env(),
            timeout=900,
        )
        base = out["raw_durable_write"]["p50_us"]
        for val in out.values():
            if isinstance(val, dict) and "p50_us" in val:
                val["p50_vs_raw_durable_write"] = h.ratio(val["p50_us"], base, 2)
        out["contention_4p"]["throughput_vs_1p"] = h.ratio(
            out["contention_4p"]["txn_per_s"], out["contention_1p"]["txn_per_s"], 2
        )
        out["contention_4p"]["p99_vs_1p"] = h.ratio(out["contention_4p"]["p99_us"], out["contention_1p"]["p99_us"], 1)
        self.res["state"] = out

    # ---- driver -----------------------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        meta: dict[str, Any] = {
            "schema": 1,
            "date": self.date,
            "mode": "quick" if self.args.quick else "full",
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "config": self.cfg,
            "workers": self.args.workers,
            "sections": self.sections,
            "machine": machine_info(),
            "versions": versions(),
            "reference": self.ref,
            "agui_bridge_source": self.source,
            "note": "shared 2-core machine with other work running: numbers are noisy",
        }
        self.res["meta"] = meta
        replay = self.track(h.Replay(self.logs, self.token, deltas=self.cfg["deltas"]))
        meta["bridge_config"] = h.bridge_config(replay.url)
        meta["replay_upstream"] = {
            "command": f"bench/replay_upstream.py --deltas {self.cfg['deltas']}",
            "token": "random bearer token (IACCODE_A2A_HTTP_TOKEN)",
        }
        try:
            for section in self.sections:
                try:
                    if section == "throughput":
                        self.section_throughput(replay)
                    elif section == "latency":
                        self.section_latency(replay)
                    elif section == "idle":
                        self.section_idle(replay)
                    elif section == "state":
                        self.section_state()
                    elif section == "phases":
                        self.section_phases(replay)
                    elif section == "scaling":
                        self.res["scaling"] = scaling.section_scaling(self, replay)
                    elif section == "boot":
                        self.res["boot"] = boot.section_boot(self, replay)
                    elif section == "profile" and "throughput" not in self.sections:
                        bridge = self.bridge("bridge-profile", replay.url)
                        self.warm(bridge.port)
                        self.res["profile"] = {
                            "bridge": self.profile(
                                bridge.pid, bridge.port, f"[DELTAS {self.cfg['deltas']}]", "throughput"
                            )
                        }
                        self.stop(bridge)
                except Exception as exc:  # keep the other sections
                    h.log(f"section {section} failed: {exc!r}")
                    self.res.setdefault("errors", {})[section] = repr(exc)[-2000:]
                    for server in list(self._servers):
                        if server is not replay:
                            self.stop(server)
        finally:
            self.stop_all()
        meta["reference"] = self.ref
        meta["duration_s"] = round(time.monotonic() - started, 1)
        meta["loadavg_end"] = h.loadavg()
        self.res["targets"] = targets(self.res)
        return self.res


def machine_info() -> dict[str, Any]:
    mem_kib = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as fh:
        mem_kib = int(fh.readline().split()[1])
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "mem_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_start": h.loadavg(),
    }


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dist in ("gunicorn", "gevent", "greenlet", "flask", "requests", "urllib3", "orjson", "uvloop", "py-spy"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            out[dist] = version(dist)
    with contextlib.suppress(OSError):
        for line in (h.REPO_ROOT / "setup.cfg").read_text().splitlines():
            if line.startswith("version"):
                out["agui-bridge"] = line.split("=", 1)[1].strip()
    if h.REF_PY.exists():
        with contextlib.suppress(Exception):
            res = subprocess.run(
                [str(h.REF_PY), "-c", "from importlib.metadata import version as v;print(v('iac-code'), v('a2a-sdk'))"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            iac, sdk = res.stdout.split()
            out["reference"] = {"iac-code": iac, "a2a-sdk": sdk}
    return out


# ---- targets ------------------------------------------------------------------------------------------------


def _get(res: dict[str, Any], *path: str) -> Any:
    cur: Any = res
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The performance targets: ratios to the reference measured in the same run, or absolute bounds."""
    out: list[dict[str, Any]] = []

    def add(name: str, target: str, measured: Any, met: bool | None, unit: str = "", note: str = "") -> None:
        out.append({"target": name, "goal": target, "measured": measured, "unit": unit, "met": met, "note": note})

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b == 0 else round(a / b, 3)

    lat_b, lat_r = _get(res, "latency", "bridge"), _get(res, "latency", "reference")
    clients = _get(res, "latency", "clients")
    if lat_b:
        for metric, goal, name in (
            ("turn_ms_p50", 0.33, "10-delta turn p50 vs reference"),
            ("run_started_ms_p50", 0.5, "time to RUN_STARTED p50 vs reference"),
        ):
            x = ratio(med(_get(lat_b, "clients_1", metric)), med(_get(lat_r or {}, "clients_1", metric)))
            add(name, f"<= {goal}x", x, None if x is None else x <= goal, "x")
        x = ratio(
            med(_get(lat_b, f"clients_{clients}", "run_started_ms_p99")),
            med(_get(lat_r or {}, f"clients_{clients}", "run_started_ms_p99")),
        )
        name = f"{clients} streams at once: RUN_STARTED p99 vs reference"
        add(name, "<= 0.25x", x, None if x is None else x <= 0.25, "x")

    idle = _get(res, "idle", "cases") or {}

    def idle_summary(n: int) -> dict[str, Any] | None:
        return _get(idle, str(n), "bridge", "summary") if str(n) in idle else None

    s = idle_summary(100)
    if s:
        v = med(s.get("health_held.p99_ms"))
        add("100 streams open: /health p99", "< 50 ms", v, None if v is None else v < 50, "ms")
    s = idle_summary(1000)
    if s:
        v = med(s.get("run_started_from_burst_s.p99"))
        add("1,000 streams at once: RUN_STARTED p99", "< 1 s", v, None if v is None else v < 1.0, "s")
        v, failed = med(s.get("health_held.p99_ms")), med(s.get("health_held.failed"))
        add(
            "1,000 streams open: /health p99, no failed probe",
            "< 50 ms, 0 failed",
            v,
            None if v is None else (v < 50 and not failed),
            "ms",
            f"{failed or 0:.0f} failed",
        )
        v = med(s.get("departures_noticed_s")) if s.get("departures_noticed_s") else med(s.get("teardown_s"))
        add(
            "1,000 streams: every departure noticed (each run cancelled, or detached into its reattach window)",
            "<= 2 s",
            v,
            None if v is None else v <= 2.0,
            "s",
        )
    big = max((int(k) for k in idle), default=0)
    s = idle_summary(big) if big >= 300 else None
    if s:
        label = f"{big:,} idle streams" + (" (quick run: the target is for 5,000)" if big < 5000 else "")
        held = med(s.get("upstream_streams_held"))
        add(f"{label}: upstream turns held", f"== {big}", held, None if held is None else held >= big)
        for key, goal, limit, unit in (
            ("run_started_from_burst_s.p99", "RUN_STARTED p99 < 2 s", 2.0, "s"),
            ("health_held.p99_ms", "/health p99 < 100 ms", 100.0, "ms"),
            ("heartbeat_late_s.p99", "heartbeat lateness p99 < 1 s", 1.0, "s"),
            ("rss_per_stream_kib", "<= 40 KiB per stream", 40.0, "KiB"),
            ("cpu_pct_while_holding", "< 5 % of a core while holding", 5.0, "%"),
        ):
            v = med(s.get(key))
            ok = None if v is None else (v <= limit if unit == "KiB" else v < limit)
            add(f"{label}: {goal.split(' <')[0]}", goal, v, ok, unit)
    r = _get(res, "throughput", "ratios") or {}
    x = r.get("bridge_vs_reference_events_per_s")
    add("one long turn: events/s vs reference", ">= 5x", x, None if x is None else x >= 5, "x")
    x = r.get("bridge_vs_reference_cpu_per_event")
    add("one long turn: CPU per event vs reference", "<= 0.15x", x, None if x is None else x <= 0.15, "x")
    x, met, note = scaling.target(res)
    add("two workers on two cores: aggregate events/s vs one worker", f">= {scaling.GOAL}x", x, met, "x", note)
    for name, goal, measured, met, unit, note in boot.targets(res):
        add(name, goal, measured, met, unit, note)
    c4 = _get(res, "state", "contention_4p")
    if c4:
        x = ratio(c4.get("p99_us"), c4.get("p50_us"))
        add("one thread file, 4 processes: p99 / p50", "<= 10x", x, None if x is None else x <= 10, "x")
    return out


# ---- report ---------------------------------------------------------------------------------------------------


def fmt(metric: Any, digits: int = 1) -> str:
    if metric is None:
        return "n/a"
    if isinstance(metric, dict):
        m, p = metric.get("median"), metric.get("p99")
        if m is None:
            return "n/a"
        vals = [v for v in metric.get("values", []) if v is not None]
        if len(vals) <= 1 or p is None or p == m:
            return _num(m, digits)
        return f"{_num(m, digits)} ({_num(p, digits)})"
    return _num(metric, digits)


def _num(v: Any, digits: int) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, (int, float)):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}"
    return str(v)


def markdown(res: dict[str, Any]) -> str:
    meta = res["meta"]
    lines = [f"# agui-bridge benchmark, {meta['date']} ({meta['mode']})", ""]
    m = meta["machine"]
    lines.append(
        f"Machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['mem_gib']} GiB, Linux {m['kernel']}, Python "
        f"{m['python']}; load average at start {m['loadavg_start']}, at end {meta.get('loadavg_end')}. "
        f"Shared machine: numbers are noisy. Bridge: `agui-bridge serve --workers {meta['workers']}` "
        f"(gunicorn + gevent). Run: `bash bench/run{' --quick' if meta['mode'] == 'quick' else ''}` "
        f"({meta.get('duration_s')} s)."
    )
    lines.append("")
    lines.append("Cells are `median (p99)` over repetitions; a single value means one repetition or no spread.")
    ref = meta.get("reference", {})
    if not ref.get("installed") or ref.get("started") is False:
        lines += ["", f"**Reference adapter unavailable:** {ref.get('reason') or ref.get('start_error')}"]
    tp = res.get("throughput")
    if tp:
        lines += [
            "",
            f"## Throughput: one turn of {tp['deltas']:,} text deltas, one worker",
            "",
            "| case | AG-UI (or A2A) events/s | server CPU us/event | upstream CPU us/event | ratio |",
            "|---|---|---|---|---|",
        ]
        r = tp["ratios"]
        rows = [
            ("replay upstream read directly (baseline)", tp.get("replay_direct"), "1"),
            (
                "bridge on replay upstream",
                tp.get("replay_bridge"),
                f"{r.get('bridge_vs_direct_events_per_s')}x direct, "
                f"{r.get('bridge_vs_reference_events_per_s')}x reference",
            ),
            ("reference `iac-code agui` on replay upstream", tp.get("replay_reference"), "1 (baseline)"),
            (f"demo agent read directly ({tp.get('demo_deltas')} deltas)", tp.get("demo_direct"), "1"),
            (
                "bridge on demo agent",
                tp.get("demo_bridge"),
                f"{r.get('demo_bridge_vs_demo_direct_events_per_s')}x direct",
            ),
        ]
        for name, case, ratio_text in rows:
            if not case:
                continue
            if "error" in case:
                lines.append(f"| {name} | error: {case['error'][:80]} | | | |")
                continue
            cpu = case.get("server_cpu_us_per_event") or case.get("reader_cpu_us_per_event")
            up = case.get("upstream_cpu_us_per_event") or case.get("upstream_cpu_us_per_event_incl_warmup")
            cpu_label = fmt(cpu) + (" (reader)" if "reader_cpu_us_per_event" in case else "")
            lines.append(f"| {name} | {fmt(case.get('events_per_s'), 0)} | {cpu_label} | {fmt(up)} | {ratio_text} |")
        lines.append(f"| CPU per event, bridge / reference | | {r.get('bridge_vs_reference_cpu_per_event')}x | | |")
    prof = res.get("profile", {}).get("bridge")
    if prof and prof.get("summary"):
        lines += [
            "",
            "Top self time in the bridge worker during the replay throughput case (py-spy, "
            f"{prof.get('samples')} samples; full list in `{prof.get('top')}`, flamegraph "
            f"`{Path(prof.get('flamegraph', '')).name}`):",
            "",
        ]
        lines += ["| self % | frame |", "|---|---|"]
        for row in prof["summary"]["self"][:10]:
            lines.append(f"| {row['pct']} | `{row['frame']}` |")
    lat = res.get("latency")
    if lat:
        c = lat["clients"]
        lines += [
            "",
            "## Latency: a 10-delta turn (new connection per turn, new thread per turn)",
            "",
            "| case | clients | turn p50 ms | turn p99 ms | RUN_STARTED p50 ms | RUN_STARTED p99 ms "
            "| server CPU ms/turn |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, key in (
            ("replay upstream direct (first event)", "direct"),
            ("bridge", "bridge"),
            ("reference `iac-code agui`", "reference"),
        ):
            case = lat.get(key)
            if not case:
                continue
            for clients in ("1", str(c)):
                d = case.get(f"clients_{clients}", {})
                lines.append(
                    f"| {name} | {clients} | {fmt(d.get('turn_ms_p50'), 2)} | {fmt(d.get('turn_ms_p99'), 2)} | "
                    f"{fmt(d.get('run_started_ms_p50'), 2)} | {fmt(d.get('run_started_ms_p99'), 2)} | "
                    f"{fmt(d.get('server_cpu_ms_per_turn'), 2)} |"
                )
    idle = res.get("idle")
    if idle:
        lines += [
            "",
            f"## Idle streams opened in one burst on one worker (heartbeat {idle['heartbeat_s']} s, "
            f"held {idle['hold_s']} s)",
            "",
            "| case | streams | started | RUN_STARTED p99 from burst s | /health p99 held ms | RSS/stream KiB "
            "| heartbeat late p99 s | CPU % while holding | upstream turns held | upstream sockets | teardown s "
            "| disk fsync p50 ms |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for n, cases in idle["cases"].items():
            for key, name in (
                ("direct", "direct upstream hold (client floor)"),
                ("bridge", "bridge"),
                ("bridge_stock", "bridge, default limits"),
                ("bridge_tmpfs", "bridge, state on tmpfs (fsync free)"),
                ("reference", "reference `iac-code agui`"),
            ):
                case = cases.get(key)
                if not case or case.get("skipped"):
                    continue
                if case.get("error"):
                    lines.append(f"| {name} | {n} | error: {case['error'][:120]} |" + " |" * 9)
                    continue
                reps = case["reps"] if "summary" in case else [case]
                s = case["summary"] if "summary" in case else Bench.combine([case])["summary"]
                limit = reps[0].get("run_started_from_burst_s", {}).get("limit_s")
                censored = any(r.get("run_started_from_burst_s", {}).get("unanswered_within_limit") for r in reps)
                rs = fmt(s["run_started_from_burst_s.p99"], 3) + (
                    f" (>= limit {limit:.0f} s for some)" if censored else ""
                )
                teardown = (
                    fmt(s["teardown_s"])
                    if med(s["teardown_s"]) is not None or key == "direct"
                    else (f"> {reps[0].get('teardown_limit_s', '?')} s")
                )
                if med(s.get("departures_noticed_s")) is not None:  # let go of (ended or detached) / upstream freed
                    teardown = f"noticed {fmt(s['departures_noticed_s'], 3)}, upstream {teardown}"
                held = fmt(s["upstream_streams_held"], 0)
                sockets = fmt(s["upstream_connections"], 0)
                health = fmt(s["health_held.p99_ms"])
                if med(s["health_held.p99_ms"]) is None and med(s["health_held.failed"]):
                    health = f"all {fmt(s['health_held.failed'], 0)} probes failed (5 s timeout)"
                elif max([v for v in s["health_held.failed"]["values"] if v is not None] or [0]):
                    worst = max(v for v in s["health_held.failed"]["values"] if v is not None)
                    health += f", up to {worst:.0f} probe(s) failed"
                vals = [
                    fmt(s["started"], 0),
                    rs,
                    health,
                    fmt(s["rss_per_stream_kib"]),
                    fmt(s["heartbeat_late_s.p99"], 3),
                    fmt(s["cpu_pct_while_holding"]),
                    held,
                    sockets,
                    teardown,
                    fmt(s["disk_fsync.p50_ms"], 2),
                ]
                lines.append(f"| {name} | {n} | " + " | ".join(vals) + " |")
        notes = []
        for n, cases in idle["cases"].items():
            for key in ("bridge_stock", "reference"):
                case = cases.get(key)
                if case and case.get("failed_or_missing"):
                    notes.append(f"{key} {n}: " + "; ".join(f"{v} x {k}" for k, v in case["failed_or_missing"].items()))
            b = cases.get("bridge", {}).get("reps", [])
            for rep in b:
                if rep.get("failed_or_missing"):
                    notes.append(
                        f"bridge {n} rep {rep['rep']}: "
                        + "; ".join(f"{v} x {k}" for k, v in rep["failed_or_missing"].items())
                    )
        if notes:
            lines += ["", "Streams that did not start (or ended early):", ""] + [f"* {x}" for x in notes]
    ph = res.get("phases")
    if ph and "after" in ph:
        lines += [
            "",
            f"## Phases of a 10-delta turn (in-process, gevent back-end, {ph['turns']} turns; p50 (p90) us)",
            "",
            f"Before = `{ph['before_ref']}` (the baseline), after = this checkout; bench/phases.py says "
            "what each phase covers. Keep-alive to the kernel: "
            f"{ph['after'].get('upstream_connections_opened')} upstream connection(s) opened for "
            f"{ph['after'].get('turns_total')} turns.",
            "",
            "| phase | before | after | CPU p50 before | CPU p50 after |",
            "|---|---|---|---|---|",
        ]
        for phase, cell in ph["after"]["phases"].items():
            old = _get(ph, "before", "phases", phase) or {}

            def show(c: dict[str, Any]) -> str:
                return "n/a" if c.get("p50_us") is None else f"{_num(c['p50_us'], 0)} ({_num(c['p90_us'], 0)})"

            def cpu(c: dict[str, Any]) -> str:  # process CPU (all threads) inside the phase: bench/phases.py
                return "n/a" if c.get("cpu_p50_us") is None else _num(c["cpu_p50_us"], 0)

            lines.append(f"| {phase} | {show(old)} | {show(cell)} | {cpu(old)} | {cpu(cell)} |")
    st = res.get("state")
    if st:
        lines += [
            "",
            "## State (one process; each operation is a locked read-modify-write with fsyncs)",
            "",
            "| operation | p50 us | p99 us | p50 vs raw durable write |",
            "|---|---|---|---|",
        ]
        for key in (
            "raw_durable_write",
            "lock_read",
            "admit_new_thread",
            "admit_history_100",
            "admit_history_1000",
            "record_identity",
            "lease_renew",
            "beacon_publish_1000_runs",
            "beacon_publish_5000_runs",
            "interrupt_commit",
            "finish",
        ):
            v = st.get(key)
            if v:
                extra = f" ({v['file_bytes']:,} B file)" if "file_bytes" in v else ""
                lines.append(
                    f"| {key}{extra} | {fmt(v['p50_us'], 0)} | {fmt(v['p99_us'], 0)} | "
                    f"{v.get('p50_vs_raw_durable_write')}x |"
                )
        c1, c4 = st["contention_1p"], st["contention_4p"]
        lines += [
            "",
            "| one thread file | txn/s | p50 us | p99 us | max us | per-process txns |",
            "|---|---|---|---|---|---|",
            f"| 1 process | {fmt(c1['txn_per_s'], 0)} | {fmt(c1['p50_us'], 0)} | {fmt(c1['p99_us'], 0)} | "
            f"{fmt(c1['max_us'], 0)} | {c1['per_process_txns']} |",
            f"| 4 processes | {fmt(c4['txn_per_s'], 0)} ({c4.get('throughput_vs_1p')}x) | {fmt(c4['p50_us'], 0)} | "
            f"{fmt(c4['p99_us'], 0)} ({c4.get('p99_vs_1p')}x) | {fmt(c4['max_us'], 0)} | {c4['per_process_txns']} |",
        ]
        hub = st.get("hub")
        if isinstance(hub, dict):
            lines += [
                "",
                "Hub CPU per transaction (gevent-patched process, `time.thread_time` of the hub; mean us):",
                "",
                "| transaction | hub CPU us | wall us |",
                "|---|---|---|",
            ]
            for key, cell in hub.items():
                if isinstance(cell, dict) and "hub_cpu_us" in cell:
                    lines.append(f"| {key} | {fmt(cell['hub_cpu_us'], 0)} | {fmt(cell['wall_us'], 0)} |")
            idle, busy = hub.get("handoff_idle_hub"), hub.get("handoff_busy_hub")
            if idle and busy:
                lines += [
                    "",
                    f"Writer hand-off (a crash-class commit, call to return), p50 (p99) us: "
                    f"hub idle {fmt(idle['p50_us'], 0)} ({fmt(idle['p99_us'], 0)}), hub busy with 4 CPU-bound "
                    f"greenlets {fmt(busy['p50_us'], 0)} ({fmt(busy['p99_us'], 0)}).",
                ]
    if isinstance(res.get("scaling"), dict):
        lines += scaling.markdown(res["scaling"])
    if isinstance(res.get("boot"), dict):
        lines += boot.markdown(res["boot"])
    tg = res.get("targets")
    if tg:
        lines += ["", "## Targets", "", "| target | goal | measured | met |", "|---|---|---|---|"]
        for t in tg:
            met = {True: "met", False: "**not met**", None: "n/a"}[t["met"]]
            shown = "n/a" if t["measured"] is None else f"{_num(t['measured'], 2)} {t['unit']}".strip()
            if t.get("note"):
                shown += f" ({t['note']})"
            lines.append(f"| {t['target']} | {t['goal']} | {shown} | {met} |")
    if res.get("errors"):
        lines += ["", "## Section errors", ""] + [f"* {k}: `{v[:300]}`" for k, v in res["errors"].items()]
    watchdog = res.get("hub_watchdog") or {}
    lines += h.hub_findings_markdown(watchdog.get("threshold_ms", 0), watchdog.get("findings", []))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description="agui-bridge benchmarks")
    parser.add_argument("--quick", action="store_true", help="~2 minute smoke run (results/<date>-quick.*)")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference adapter")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers of the bridge (default 1)")
    parser.add_argument("--date", default=None, help="results file date (default today)")
    parser.add_argument("--out", default=str(h.BENCH_DIR / "results"))
    parser.add_argument(
        "--phases-before", default=PHASES_BEFORE_REF, help="git ref measured as 'before' in the phase breakdown"
    )
    parser.add_argument("--keep-tmp", action="store_true", help="keep the scratch directory (logs, state)")
    parser.add_argument(
        "--idle-sizes", default="", help="comma-separated stream counts of the idle section (default 100,1000,5000)"
    )
    parser.add_argument("--render", metavar="JSON", help="only rewrite the markdown of an existing results file")
    parser.add_argument(
        "--hub-watchdog-ms", type=float, default=0.0,
        help="run every bridge with the hub watchdog; its reports are findings in the results (0: off)",
    )  # fmt: skip
    args = parser.parse_args()
    h.HUB_WATCHDOG_MS = args.hub_watchdog_ms
    if args.render:
        path = Path(args.render)
        res = json.loads(path.read_text())
        res["targets"] = targets(res)
        path.write_text(json.dumps(res, indent=1) + "\n")
        md = markdown(res)
        path.with_suffix(".md").write_text(md)
        print(md)
        return 0
    loop = lg.install_uvloop()
    bench = Bench(args)
    h.log(
        f"bench: mode {'quick' if args.quick else 'full'}, scratch {bench.tmp}, client loop {loop}, "
        f"reference {'on' if bench.use_ref else 'off: ' + str(bench.ref.get('reason'))}"
    )
    try:
        res = bench.run()
    finally:
        if bench.shm is not None:
            shutil.rmtree(bench.shm, ignore_errors=True)
        if not args.keep_tmp:
            shutil.rmtree(bench.tmp / "state", ignore_errors=True)
            shutil.rmtree(bench.tmp / "state-bench", ignore_errors=True)
    res["meta"]["client_loop"] = loop
    res["meta"]["scratch"] = str(bench.tmp)
    if args.hub_watchdog_ms > 0:
        res["hub_watchdog"] = {"threshold_ms": args.hub_watchdog_ms, "findings": h.HUB_FINDINGS}
    json_path = bench.results_dir / f"{bench.stem}.json"
    md_path = bench.results_dir / f"{bench.stem}.md"
    tmp_json = json_path.with_suffix(".json.tmp")
    tmp_json.write_text(json.dumps(res, indent=1, sort_keys=False) + "\n")
    tmp_json.replace(json_path)
    md = markdown(res)
    md_path.write_text(md)
    print(md)
    h.log(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
