"""State benchmark: admission, commits and lock contention of `agui_bridge.store` (bench only).

Imports agui_bridge (never modifies it) and times, in this plain process (thread back-end: the same
syscalls the gevent worker makes, where each of them also stalls the hub):

* `raw_durable_write`  baseline: 2 KiB temp file + fsync + os.replace + directory fsync, no lock, no JSON;
* `lock_read`          `ThreadStore.transaction` without a commit (in-process lock + flock + read);
* `admit_new_thread`   `admit_run` on a new thread (creates its file);
* `admit_history_<k>`  `admit_run` on a thread that already carries k earlier runs (run digests and
                       terminal execution ids grow with every turn; nothing trims them yet);
* `record_identity`, `lease_renew`, `interrupt_commit`, `finish`: the stream's commit points
                       (`RunLedger`), each a locked read-modify-write with fsyncs (`lease_renew` only
                       while leases are renewed per run);
* `beacon_publish_<n>_runs`: the per-worker liveness beacon listing n runs (when the code has one);
* `contention_<n>p`    n processes doing read-modify-write transactions on ONE thread file for a fixed
                       time (throughput, and latency including the wait for the lock).
* `hub`                (`--hub`, in a gevent-patched child process, as in a worker) CPU of the hub thread
                       (`time.thread_time`, the greenlets' thread; the writer threads are not counted) per
                       transaction of each kind: admission on a new and on an existing thread (C1), the
                       identity (C3), the release (C7), and a lock + read without a commit; then the
                       writer's hand-off: a crash-class commit from call to return, and the part of it
                       from the writer waking the waiter to the greenlet running again (`_wake`), with
                       the hub idle and with the hub busy (CPU-bound greenlets).

* `mechanisms`         (`--mechanisms`, patched child, seconds) each custom mechanism of `store/` against
                       the library's equivalent, in the same process, alternated (docs/design.md#state-writer):
                       `handoff`: a greenlet hands a write + rename to a native thread and waits, through
                       `store/handoff.py` vs `gevent.get_hub().threadpool.apply` (wall per call and hub CPU,
                       idle hub and busy hub); `doc_cache`: hub CPU of a locked read + commit with the
                       document cache vs reading the file each time (a new thread, and one with 50 turns);
                       `writer`: 50 concurrent power-class commits (burst wall time, fsync calls) and a
                       crash-class commit made during such a burst, through the two-lane writer vs one
                       gevent ThreadPool (10 threads) doing each commit's write, fsyncs and rename per
                       call, and vs two pools (10 for power-class, 2 for crash-class commits).

Prints one JSON line (times in microseconds).
Usage: python bench/state_bench.py --dir DIR [--samples 200] [--contention-seconds 5]
       python bench/state_bench.py --mechanisms [--samples 200]     (quick: seconds)
"""

from __future__ import annotations

import sys

if "--hub" in sys.argv or "--mechanisms" in sys.argv:  # measuring the hub: patched before anything is imported
    from gevent import monkey

    monkey.patch_all()

import argparse
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections import deque
from contextlib import suppress
from pathlib import Path
from typing import Any

from agui_bridge.config.settings import Settings
from agui_bridge.projection.interrupts import build_interrupt
from agui_bridge.protocol.digest import request_digest
from agui_bridge.runs.admission import RunTicket, admit_run
from agui_bridge.runs.ledger import RunLedger
from agui_bridge.store import model
from agui_bridge.store.owner import current_owner, owner_is_alive
from agui_bridge.store.store import ThreadStore
from agui_bridge.validation.run_input import parse_run_input
from agui_bridge.worker.process import configure_process

US = 1_000_000


def pct(values: list[float], q: float) -> float:
    data = sorted(values)
    if not data:
        return float("nan")
    pos = (len(data) - 1) * q / 100
    lo, hi = int(pos), min(int(pos) + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def stats(samples_s: list[float]) -> dict[str, Any]:
    us = [s * US for s in samples_s]
    return {
        "n": len(us),
        "p50_us": round(pct(us, 50), 1),
        "p99_us": round(pct(us, 99), 1),
        "mean_us": round(sum(us) / len(us), 1) if us else None,
        "max_us": round(max(us), 1) if us else None,
    }


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def body(thread_id: str, cwd: str) -> dict[str, Any]:
    run_id = str(uuid.uuid4())
    return {
        "threadId": thread_id,
        "runId": run_id,
        "state": {},
        "messages": [{"id": f"message-{run_id}", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "inv-1", "cwd": cwd}},
    }


def admit(store: ThreadStore, thread_id: str, cwd: str) -> RunTicket:
    raw = body(thread_id, cwd)
    return admit_run(
        store,
        parse_run_input(raw),
        cwd=cwd,
        digest=request_digest(raw),
        owner=current_owner(),
        now_ms=now_ms(),
        lease_ttl_ms=20_000,
        is_alive=owner_is_alive,
    )


def timed(fn: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def raw_durable_write(directory: Path, n: int) -> list[float]:
    payload = os.urandom(1024).hex().encode()
    target = directory / "raw.json"
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".raw.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
        out.append(time.perf_counter() - t0)
    return out


def with_history(store: ThreadStore, cwd: str, k: int) -> str:
    """A thread that already went through k runs (digests and terminal executions kept)."""
    thread_id = f"hist-{k}-{uuid.uuid4()}"
    state = model.new_thread(thread_id, cwd, None, "inv-1", str(uuid.uuid4()))
    state.run_digests = {str(uuid.uuid4()): os.urandom(32).hex() for _ in range(k)}
    state.terminal_execution_ids = sorted(str(uuid.uuid4()) for _ in range(k))
    with store.transaction(thread_id) as txn:
        txn.commit(state)
    return thread_id


PERMISSION = {
    "schemaVersion": 1,
    "kind": "permission",
    "inputId": "input-1",
    "toolUseId": "call_1",
    "toolName": "write_file",
    "title": "Change a workspace file",
    "prompt": "Write /workspace/x.yaml. Allow once?",
    "effect": "file_change",
    "language": "en",
    "options": [{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}],
}


def single_process(root: Path, n: int) -> dict[str, Any]:
    store = ThreadStore(root / "state", lock_timeout_s=10)
    cwd = str(root)
    raw_dir = root / "raw"
    raw_dir.mkdir()
    res: dict[str, Any] = {}
    admit(store, "warmup", cwd)  # creates the directories, imports, caches
    res["raw_durable_write"] = stats(raw_durable_write(raw_dir, n))

    def lock_read(tid: str) -> None:
        with store.transaction(tid):
            pass

    res["lock_read"] = stats([timed(lock_read, "warmup") for _ in range(n)])
    tickets: list[RunTicket] = []
    samples = []
    for _ in range(n):
        tid = str(uuid.uuid4())
        t0 = time.perf_counter()
        tickets.append(admit(store, tid, cwd))
        samples.append(time.perf_counter() - t0)
    res["admit_new_thread"] = stats(samples)
    ledgers = [RunLedger(store, t) for t in tickets]
    res["record_identity"] = stats([timed(ledger.record_identity, str(uuid.uuid4()), None) for ledger in ledgers])
    if hasattr(RunLedger, "renew"):  # per-run lease renewal (a locked, fsynced write per stream and interval)
        res["lease_renew"] = stats([timed(ledger.renew, now_ms(), 20_000) for ledger in ledgers])
    try:  # per-worker liveness beacon (one small write per worker and interval, whatever the stream count)
        from agui_bridge.worker.beacon import Beacons
    except ImportError:
        pass
    else:
        beacons = Beacons(root / "state")
        for runs in (1000, 5000):
            ids = [str(uuid.uuid4()) for _ in range(runs)]
            res[f"beacon_publish_{runs}_runs"] = stats(
                [timed(beacons.publish, current_owner(), ids, now_ms()) for _ in range(max(10, n // 4))]
            )
    expires = now_ms() + 540_000
    announced = build_interrupt(dict(PERMISSION), model.format_rfc3339_ms(expires))
    samples = []
    for ledger in ledgers:
        pending = {
            "input-1": model.PendingInterrupt(
                value=dict(PERMISSION), sideband=False, expires_at_ms=expires, announced=announced
            )
        }
        samples.append(timed(ledger.commit_interrupt, pending, [os.urandom(32).hex()], now_ms()))
    res["interrupt_commit"] = stats(samples)
    # a normal (non-interrupt) end: lease release + retire, on fresh admissions
    finishers = [RunLedger(store, admit(store, str(uuid.uuid4()), cwd)) for _ in range(n)]
    res["finish"] = stats([timed(lambda led=ledger: led.finish(now_ms(), retire=True)) for ledger in finishers])
    for k in (100, 1000):
        m = max(10, n // 4)
        threads = [with_history(store, cwd, k) for _ in range(m)]
        size = os.path.getsize(store.path_for(threads[0]))
        samples = [timed(admit, store, tid, cwd) for tid in threads]
        res[f"admit_history_{k}"] = {**stats(samples), "file_bytes": size}
    return res


def contention_worker(args: argparse.Namespace) -> int:
    store = ThreadStore(Path(args.dir), lock_timeout_s=30)
    while time.monotonic() < args.start_at:
        time.sleep(0.001)
    end = args.start_at + args.seconds
    lat = []
    while time.monotonic() < end:
        t0 = time.perf_counter()
        with store.transaction(args.thread) as txn:
            state = txn.state
            assert state is not None
            state.last_activity_ms = now_ms()
            txn.commit(state)
        lat.append(time.perf_counter() - t0)
    print(json.dumps({"lat": lat}))
    return 0


def contention(root: Path, procs: int, seconds: float) -> dict[str, Any]:
    store_dir = root / f"contention-{procs}"
    store = ThreadStore(store_dir)
    thread = "contended-thread"
    with store.transaction(thread) as txn:
        txn.commit(model.new_thread(thread, str(root), None, "inv-1", str(uuid.uuid4())))
    start_at = time.monotonic() + 1.0
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                "--dir",
                str(store_dir),
                "--thread",
                thread,
                "--start-at",
                repr(start_at),
                "--seconds",
                repr(seconds),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(procs)
    ]
    lat: list[float] = []
    per_proc = []
    for w in workers:
        out, _ = w.communicate(timeout=seconds + 60)
        got = json.loads(out.strip().splitlines()[-1])["lat"]
        per_proc.append(len(got))
        lat.extend(got)
    return {
        **stats(lat),
        "processes": procs,
        "seconds": seconds,
        "txn_per_s": round(len(lat) / seconds, 1),
        "per_process_txns": per_proc,
    }


def hub_costs(root: Path, n: int) -> dict[str, Any]:
    """Hub CPU per transaction (us, mean over n) and the writer's hand-off latency (runs patched)."""
    import gevent

    from agui_bridge.store import writer as writer_mod

    configure_process(Settings())  # the switch interval of a gevent worker, as its entry point sets it
    store = ThreadStore(root / "hub-state", lock_timeout_s=10)
    cwd = str(root)
    admit(store, "warmup", cwd)
    out: dict[str, Any] = {}

    def per_op(name: str, ops: list[Any]) -> None:
        t_cpu, t_wall = time.thread_time(), time.perf_counter()
        for op in ops:
            op()
        out[name] = {
            "hub_cpu_us": round((time.thread_time() - t_cpu) / len(ops) * US, 1),
            "wall_us": round((time.perf_counter() - t_wall) / len(ops) * US, 1),
        }

    threads = [str(uuid.uuid4()) for _ in range(n)]
    tickets: list[RunTicket] = []
    per_op("C1_admit_new_thread", [lambda t=t: tickets.append(admit(store, t, cwd)) for t in threads])
    ledgers = [RunLedger(store, t) for t in tickets]
    per_op("C3_record_identity", [lambda led=led: led.record_identity(str(uuid.uuid4()), "session") for led in ledgers])
    per_op("C7_finish", [lambda led=led: led.finish(now_ms(), retire=True) for led in ledgers])
    per_op("C1_admit_existing_thread", [lambda t=t: admit(store, t, cwd) for t in threads])

    def lock_read(tid: str) -> None:
        with store.transaction(tid):
            pass

    per_op("lock_read", [lambda t=t: lock_read(t) for t in threads])

    # Hand-off: the writer stamps when it wakes a waiter; the greenlet measures when it runs again.
    woken: list[float] = []
    real_finish = writer_mod._Job.finish

    def stamped(job: Any) -> None:
        woken.append(time.perf_counter())
        real_finish(job)

    writer_mod._Job.finish = stamped  # type: ignore[method-assign]

    def handoffs(count: int, key: str) -> None:
        commits, wakes = [], []
        for tid in threads[:count]:
            del woken[:]
            with store.transaction(tid) as txn:
                assert txn.state is not None
                started = time.perf_counter()
                txn.commit(txn.state, writer_mod.Durability.CRASH)
                now = time.perf_counter()
                commits.append(now - started)
                wakes.append(now - woken[0])
            gevent.sleep(0.001)
        out[key] = stats(commits)  # commit called -> commit returned (the writer's work included)
        out[key + "_wake"] = stats(wakes)  # writer done -> greenlet running

    count = min(n, 200)
    handoffs(count, "handoff_idle_hub")
    stop = False

    def busy() -> None:  # a CPU-bound greenlet: 2 ms of work, then a wait (as a stream waits for I/O)
        while not stop:
            until = time.perf_counter() + 0.002
            while time.perf_counter() < until:
                pass
            gevent.sleep(0.0001)  # not sleep(0): 2 ms callbacks would hold gevent's loop for 50 of them

    spinners = [gevent.spawn(busy) for _ in range(4)]
    gevent.sleep(0.01)
    handoffs(count, "handoff_busy_hub")
    stop = True
    gevent.joinall(spinners)
    writer_mod._Job.finish = real_finish  # type: ignore[method-assign]
    out["switch_interval_s"] = sys.getswitchinterval()
    return out


class _PoolWriter:
    """The library's way to the same end: each commit's write, fsyncs and rename as one call on a gevent
    ThreadPool (no batching, no lanes, no syncer); a crash-class write's fsync is spawned on the pool
    right after the rename and not waited for (the same durability, sooner)."""

    def __init__(self, pool: Any, crash_pool: Any = None) -> None:
        self.pool = pool
        #: A second pool for crash-class writes (one per class, as the writer's lanes), or the same one.
        self.crash_pool = crash_pool or pool
        self.fsyncs = 0

    def _write(self, path: Path, payload: bytes | None, power: bool) -> Any:
        from agui_bridge.store import filewrite

        if payload is None:
            os.unlink(path)
            return None, -1
        fd, tmp_name = filewrite.create_temp(path)
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        signature = filewrite.stamp(fd)
        if power:
            os.fsync(fd)
            self.fsyncs += 1
        filewrite.replace(tmp_name, path)
        if power:
            filewrite.fsync_dir(path.parent)
            self.fsyncs += 1
            filewrite.close_file(fd)
            fd = -1
        return signature, fd

    def _sync_later(self, fd: int, directory: Path) -> None:
        from agui_bridge.store import filewrite

        os.fsync(fd)
        filewrite.fsync_dir(directory)
        self.fsyncs += 2
        filewrite.close_file(fd)

    def submit(self, path: Path, payload: bytes | None, durability: Any) -> Any:
        from agui_bridge.store.writer import Durability

        power = durability is Durability.POWER
        signature, fd = (self.pool if power else self.crash_pool).apply(self._write, (path, payload, power))
        if fd >= 0:  # spawned from the hub (a pool thread may not spawn on its own pool)
            self.pool.spawn(self._sync_later, fd, path.parent)
        return signature


def mechanisms(root: Path, n: int) -> dict[str, Any]:
    """Each custom mechanism of `store/` against the library's equivalent (runs patched; alternated rounds,
    so both sides see the same machine). Times in us."""
    import gevent
    from gevent.threadpool import ThreadPool

    from agui_bridge.store import filewrite
    from agui_bridge.store import store as store_mod
    from agui_bridge.store import writer as writer_mod
    from agui_bridge.store.doc_cache import DocumentCache
    from agui_bridge.store.handoff import native_primitives, new_waiter

    configure_process(Settings())  # a gevent worker's switch interval
    rounds = 3
    out: dict[str, Any] = {"rounds": rounds, "samples": n, "switch_interval_s": sys.getswitchinterval()}
    stop = [False]

    def busy() -> None:  # as in hub_costs: 2 ms of CPU, then a short wait
        while not stop[0]:
            until = time.perf_counter() + 0.002
            while time.perf_counter() < until:
                pass
            gevent.sleep(0.0001)

    def with_busy_hub(fn: Any) -> Any:
        stop[0] = False
        spinners = [gevent.spawn(busy) for _ in range(4)]
        gevent.sleep(0.01)
        try:
            return fn()
        finally:
            stop[0] = True
            gevent.joinall(spinners)

    # ---- hand-off: a greenlet has a native thread write + rename a 2 KiB file, and waits for it.
    directory = root / "handoff"
    directory.mkdir(parents=True, exist_ok=True)
    payload = os.urandom(2048)

    def write_rename(i: int) -> None:
        target = directory / f"f{i % 50}.json"
        fd, tmp_name = filewrite.create_temp(target)
        os.write(fd, payload)
        filewrite.replace(tmp_name, target)
        filewrite.close_file(fd)

    lock, start_thread, _patched = native_primitives()
    jobs: deque[Any] = deque()
    signal = lock()
    signal.acquire()

    def native_worker() -> None:
        while True:
            signal.acquire()
            while jobs:
                fn, arg, waiter = jobs.popleft()
                fn(arg)
                waiter.complete()

    start_thread(native_worker, (), "bench-handoff")

    def via_handoff(i: int) -> None:
        waiter = new_waiter(True, lock)
        jobs.append((write_rename, i, waiter))
        with suppress(RuntimeError):  # already released: the thread is awake anyway
            signal.release()
        waiter.wait()

    hub_pool = gevent.get_hub().threadpool

    def via_threadpool(i: int) -> None:
        hub_pool.apply(write_rename, (i,))

    def calls(fn: Any) -> dict[str, Any]:
        walls: list[float] = []
        cpu = time.thread_time()
        for i in range(n):
            started = time.perf_counter()
            fn(i)
            walls.append(time.perf_counter() - started)
            gevent.sleep(0)
        result = stats(walls)
        result["hub_cpu_us"] = round((time.thread_time() - cpu) / n * US, 1)
        return result

    handoff: dict[str, list[Any]] = {}
    for _ in range(rounds):
        for name, fn in (("store_handoff", via_handoff), ("gevent_threadpool_apply", via_threadpool)):
            handoff.setdefault(f"{name}_idle_hub", []).append(calls(fn))
            handoff.setdefault(f"{name}_busy_hub", []).append(with_busy_hub(lambda fn=fn: calls(fn)))
    out["handoff"] = handoff

    # ---- document cache: hub CPU of a locked read + crash-class commit of the same thread, again and again.
    cwd = str(root)
    doc: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, capacity in (("with_cache", None), ("read_each_time", 0)):
            store = ThreadStore(root / f"doc-{name}", lock_timeout_s=10)
            if capacity is not None:
                store._cache = DocumentCache(capacity=capacity)
            for label, thread_id in (("new_thread", admit(store, str(uuid.uuid4()), cwd).thread_id),
                                     ("history_50", with_history(store, cwd, 50))):  # fmt: skip
                cpu = time.thread_time()
                for _ in range(n):
                    with store.transaction(thread_id) as txn:
                        assert txn.state is not None
                        txn.commit(txn.state, writer_mod.Durability.CRASH)
                doc.setdefault(f"{name}_{label}_hub_cpu_us", []).append(round((time.thread_time() - cpu) / n * US, 1))
    out["doc_cache"] = doc

    # ---- writer: a burst of 50 power-class commits, and a crash-class commit made while one is in flight.
    real_state_writer = store_mod.state_writer
    writer: dict[str, list[Any]] = {}
    counted = [0]
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        counted[0] += 1
        real_fsync(fd)

    def burst(store: ThreadStore, threads: list[str]) -> dict[str, Any]:
        def power(thread_id: str) -> None:
            with store.transaction(thread_id) as txn:
                assert txn.state is not None
                txn.commit(txn.state, writer_mod.Durability.POWER)

        def crash_commit() -> float:
            gevent.sleep(0.001)  # the burst is under way
            started = time.perf_counter()
            with store.transaction(crash_thread) as txn:
                assert txn.state is not None
                txn.commit(txn.state, writer_mod.Durability.CRASH)
            return time.perf_counter() - started

        counted[0] = 0
        started = time.perf_counter()
        greenlets = [gevent.spawn(power, t) for t in threads]
        crash = gevent.spawn(crash_commit)
        gevent.joinall([*greenlets, crash], raise_error=True)
        return {
            "burst_wall_us": round((time.perf_counter() - started) * US),
            "crash_commit_during_burst_us": round(crash.value * US),
            "fsync_calls": counted[0],
        }

    os.fsync = counting_fsync  # type: ignore[assignment]
    try:
        for _ in range(rounds):
            for name in ("two_lanes_and_syncer", "one_gevent_threadpool", "two_gevent_threadpools"):
                pool_writer = (
                    _PoolWriter(ThreadPool(10))
                    if name == "one_gevent_threadpool"
                    else _PoolWriter(ThreadPool(10), ThreadPool(2))
                    if name == "two_gevent_threadpools"
                    else None
                )
                store_mod.state_writer = (lambda w=pool_writer: w) if pool_writer else real_state_writer  # type: ignore[assignment]
                store = ThreadStore(root / f"writer-{name}-{uuid.uuid4().hex[:6]}", lock_timeout_s=30)
                threads = [admit(store, str(uuid.uuid4()), cwd).thread_id for _ in range(50)]
                crash_thread = admit(store, str(uuid.uuid4()), cwd).thread_id
                writer.setdefault(name, []).append(burst(store, threads))
    finally:
        os.fsync = real_fsync
        store_mod.state_writer = real_state_writer
    out["writer"] = writer
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=False)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--contention-seconds", type=float, default=5.0)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--thread")
    parser.add_argument("--start-at", type=float)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--hub", action="store_true", help="measure hub CPU per transaction (patched child)")
    parser.add_argument(
        "--mechanisms", action="store_true", help="store/'s mechanisms vs the library's (patched, seconds)"
    )
    args = parser.parse_args()
    if args.worker:
        return contention_worker(args)
    if args.mechanisms:
        root = Path(args.dir or tempfile.mkdtemp(prefix="agui-bench-state-"))
        root.mkdir(parents=True, exist_ok=True)
        print(json.dumps(mechanisms(root, args.samples)))
        return 0
    if args.hub:
        root = Path(args.dir or tempfile.mkdtemp(prefix="agui-bench-state-"))
        root.mkdir(parents=True, exist_ok=True)
        print(json.dumps(hub_costs(root, max(args.samples, 200))))
        return 0
    root = Path(args.dir or tempfile.mkdtemp(prefix="agui-bench-state-"))
    root.mkdir(parents=True, exist_ok=True)
    res = single_process(root, args.samples)
    res["contention_1p"] = contention(root, 1, args.contention_seconds)
    res["contention_4p"] = contention(root, 4, args.contention_seconds)
    hub = subprocess.run(
        [sys.executable, __file__, "--hub", "--dir", str(root / "hub"), "--samples", str(args.samples)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    res["hub"] = json.loads(hub.stdout.strip().splitlines()[-1])
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
