"""Per-phase cost of a 10-delta turn inside the bridge: where the fixed per-run path goes.

Run by `bench.py` (section `phases`) in its own process, once per version of `agui_bridge` on
`PYTHONPATH` (the checkout's snapshot, and a "before" tree), against the replay upstream:

    python bench/phases.py --upstream URL --token T --state DIR --workspace DIR --turns 200

The process is patched by gevent and the bridge uses its gevent back-end, as in a gunicorn worker; the app
runs in-process under Flask's test client, so the HTTP server and the client socket are not counted (the
latency section measures them end to end). Each phase is the wall time spent in the functions that do it,
found by name; a function missing from the version measured gives `n/a`, never an error:

* parse      `web.request_body.read_limited` + `decode_bounded_body`: body read, size check, JSON decode
             (before the typed RunRequest: `web.run_api.read_json_object`)
* validate   `runs.request.parse_run_input` + `request_digest`, `service.resolve_cwd` (before:
             `service.parse_run_input`, `service.request_digest`)
* admit      `service.admit_run`: lock, read, decide, commit C1
* connect    `A2AClient.open_stream`: the POST to the kernel until its response headers
* first byte from `open_stream` returning until the stream handles its first A2A event
* project    `RunTurn.handle` (before the split of the stream: `RunStream._handle`): A2A events to AG-UI
             events (includes the identity commit C3)
* commit C3  `RunLedger.record_identity` (also inside project)
* write      `Emitter.events` (before: `RunStream._encode`): AG-UI events to SSE bytes
* finish     `RunTurn.finish` + `RunStream._cleanup` (before: `RunStream._finish` + `_cleanup`): the
             terminal event, release (C7), clean-up
* commit C7  `RunLedger.finish` (also inside finish)
* total      POST to the end of the response body, and `other` = total - the phases (the generator,
             queues, greenlet switches, Flask, the test client)
* to_run_started  POST to the first chunk of the body (RUN_STARTED): parse, validate, admit, the stream's
             set-up and the first frame; a span of the turn, not a phase (outside the sum)

Prints one JSON object: per phase the median and p90 in microseconds over the turns (after warm-up), of
wall time (`p50_us`, `p90_us`) and of the process's CPU time (`cpu_p50_us`: `time.process_time`, every
thread, so a commit's work on the writer thread counts; on a shared machine it is far less noisy than the
wall time, which also holds the waits for the disk and for the other processes on the cores).
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

PHASES = (
    "parse", "validate", "admit", "connect", "first_byte", "project", "commit_c3", "write", "finish", "commit_c7",
)  # fmt: skip
#: Inside another phase: shown alone, not subtracted again for `other`.
NESTED = ("commit_c3", "commit_c7")
_acc: dict[str, float] = defaultdict(float)
_cpu: dict[str, float] = defaultdict(float)
_marks: dict[str, float] = {}
_counts: dict[str, int] = defaultdict(int)


def _timed(phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        cpu = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _acc[phase] += time.perf_counter() - started
            _cpu[phase] += time.process_time() - cpu

    return wrapper


def _wrap(owner: Any, name: str, phase: str) -> bool:
    fn = getattr(owner, name, None)
    if fn is None:
        return False
    setattr(owner, name, _timed(phase, fn))
    return True


def _wrap_first(phase: str, *candidates: tuple[str, str, tuple[str, ...]]) -> bool:
    """Wrap the first (module, class, methods) candidate whose class exists with every method."""
    import importlib

    for module_name, class_name, names in candidates:
        try:
            owner = getattr(importlib.import_module(module_name), class_name, None)
        except ImportError:
            continue
        if owner is not None and all(hasattr(owner, name) for name in names):
            return all([_wrap(owner, name, phase) for name in names])
    return False


def instrument() -> dict[str, bool]:
    """Wrap every phase's functions that exist in the version on the path."""
    import agui_bridge.runs.service as service
    import agui_bridge.web.run_api as run_api
    from agui_bridge.kernel.client import A2AClient
    from agui_bridge.runs import stream as stream_mod
    from agui_bridge.runs.ledger import RunLedger

    try:  # the body read once into a RunRequest (web/request_body.read_run_request -> runs/request.py)
        import agui_bridge.runs.request as run_request
        import agui_bridge.web.request_body as request_body
    except ImportError:  # older trees: read_json_object in the view, validation and digest in the service
        parse = _wrap(run_api, "read_json_object", "parse")
        validate = all(
            [
                _wrap(service, "parse_run_input", "validate"),
                _wrap(service, "resolve_cwd", "validate"),
                _wrap(service, "request_digest", "validate"),
            ]
        )
    else:
        parse = all([_wrap(request_body, "read_limited", "parse"), _wrap(request_body, "decode_bounded_body", "parse")])
        validate = all(
            [
                _wrap(run_request, "parse_run_input", "validate"),
                _wrap(run_request, "request_digest", "validate"),
                _wrap(service, "resolve_cwd", "validate"),
            ]
        )
    found = {
        "parse": parse,
        "validate": validate,
        "admit": _wrap(service, "admit_run", "admit"),
        "commit_c3": _wrap(RunLedger, "record_identity", "commit_c3"),
    }
    found["commit_c7"] = _wrap(RunLedger, "finish", "commit_c7")
    run_stream = getattr(stream_mod, "RunStream", None)
    stream = "agui_bridge.runs.stream"
    found["project"] = _wrap_first(
        "project", ("agui_bridge.runs.turn", "RunTurn", ("handle",)), (stream, "RunStream", ("_handle",))
    )
    found["write"] = _wrap_first(
        "write", ("agui_bridge.runs.emit", "Emitter", ("events",)), (stream, "RunStream", ("_encode",))
    )
    found["finish"] = _wrap_first(
        "finish", (stream, "RunStream", ("_finish", "_cleanup")), ("agui_bridge.runs.turn", "RunTurn", ("finish",))
    )
    if found["finish"] and not hasattr(run_stream, "_finish"):  # the split stream: RunTurn.finish + _cleanup
        found["finish"] = _wrap(run_stream, "_cleanup", "finish")

    open_stream = getattr(A2AClient, "open_stream", None)
    if open_stream is not None:

        @functools.wraps(open_stream)
        def opened(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            cpu = time.process_time()
            try:
                return open_stream(*args, **kwargs)
            finally:
                now = time.perf_counter()
                _acc["connect"] += now - started
                _marks["opened"] = now
                _marks["opened_cpu"] = time.process_time()
                _cpu["connect"] += _marks["opened_cpu"] - cpu

        A2AClient.open_stream = opened  # type: ignore[method-assign]
    found["connect"] = open_stream is not None

    first = getattr(run_stream, "_first_upstream_event", None) if run_stream is not None else None
    if first is not None:

        @functools.wraps(first)
        def first_event(*args: Any, **kwargs: Any) -> Any:
            opened_at = _marks.pop("opened", None)
            if opened_at is not None:
                _acc["first_byte"] += time.perf_counter() - opened_at
                _cpu["first_byte"] += time.process_time() - _marks.pop("opened_cpu")
            return first(*args, **kwargs)

        run_stream._first_upstream_event = first_event
    found["first_byte"] = first is not None

    import urllib3.connectionpool

    new_conn = urllib3.connectionpool.HTTPConnectionPool._new_conn

    @functools.wraps(new_conn)
    def counted(*args: Any, **kwargs: Any) -> Any:
        _counts["upstream_connections_opened"] += 1
        return new_conn(*args, **kwargs)

    urllib3.connectionpool.HTTPConnectionPool._new_conn = counted  # type: ignore[method-assign]
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--deltas", type=int, default=10)
    args = parser.parse_args()

    from agui_bridge.app import create_app
    from agui_bridge.config.settings import Settings

    found = instrument()
    settings = Settings(
        state_dir=Path(args.state),
        a2a_url=args.upstream,
        a2a_token=args.token,
        allowed_cwds=(Path(args.workspace),),
        runtime_backend="gevent",
        metrics_enabled=False,
    )
    try:  # as a worker's entry point does (a checkout from before it existed did this in create_app)
        from agui_bridge.worker.process import configure_process
    except ImportError:
        pass
    else:
        configure_process(settings)
    client = create_app(settings).test_client()
    logging.disable(logging.INFO)  # one "run ended" line per turn would be measured too
    samples: dict[str, list[float]] = defaultdict(list)
    cpu_samples: dict[str, list[float]] = defaultdict(list)
    for i in range(args.warmup + args.turns):
        thread_id = f"phase-{uuid.uuid4().hex}"
        body = {
            "threadId": thread_id,
            "runId": f"run-{uuid.uuid4().hex}",
            "state": {},
            "messages": [{"id": f"m-{i}", "role": "user", "content": f"[DELTAS {args.deltas}] hello"}],
            "tools": [],
            "context": [],
            "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "bench", "cwd": args.workspace}},
        }
        _acc.clear()
        _cpu.clear()
        _marks.clear()
        started = time.perf_counter()
        cpu_started = time.process_time()
        response = client.post("/", json=body, buffered=False)
        chunks = iter(response.response)
        data = next(chunks, b"")  # RUN_STARTED: the end of the path up to it (not counted again in `other`)
        to_run_started = time.perf_counter() - started
        cpu_to_run_started = time.process_time() - cpu_started
        data += b"".join(chunks)
        response.close()
        total = time.perf_counter() - started
        cpu_total = time.process_time() - cpu_started
        if response.status_code != 200 or b'"RUN_FINISHED"' not in data:
            print(json.dumps({"error": f"turn {i}: HTTP {response.status_code}: {data[-300:]!r}"}))
            return 1
        if i < args.warmup:
            continue
        samples["total"].append(total)
        cpu_samples["total"].append(cpu_total)
        for phase in PHASES:
            samples[phase].append(_acc.get(phase, 0.0))
            cpu_samples[phase].append(_cpu.get(phase, 0.0))
        samples["to_run_started"].append(to_run_started)
        cpu_samples["to_run_started"].append(cpu_to_run_started)
        samples["other"].append(total - sum(_acc.get(p, 0.0) for p in PHASES if p not in NESTED))
        cpu_samples["other"].append(cpu_total - sum(_cpu.get(p, 0.0) for p in PHASES if p not in NESTED))

    def summary(phase: str, present: bool) -> dict[str, float | None]:
        values, cpu = samples[phase], cpu_samples[phase]
        if not present or not values:
            return {"p50_us": None, "p90_us": None, "cpu_p50_us": None}
        ordered = sorted(values)
        return {
            "p50_us": round(statistics.median(ordered) * 1e6, 1),
            "p90_us": round(ordered[int(0.9 * (len(ordered) - 1))] * 1e6, 1),
            "cpu_p50_us": round(statistics.median(cpu) * 1e6, 1),
        }

    out: dict[str, Any] = {"turns": args.turns, "deltas": args.deltas, "found": found, "phases": {}}
    #: Keep-alive to the kernel: connections opened over all turns (warm-up included); 1 = every turn reused one.
    out["upstream_connections_opened"] = _counts["upstream_connections_opened"]
    out["turns_total"] = args.warmup + args.turns
    for phase in (*PHASES, "other", "total", "to_run_started"):
        out["phases"][phase] = summary(phase, found.get(phase, True))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
