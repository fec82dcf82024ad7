"""Placement at scale: HAProxy itself, with the shipped deploy/haproxy/haproxy.cfg rules, over stub hosts.

100,000 threads are created over 10 stub hosts (tests/support/stub_hosts.py: asyncio stand-ins answering as the
bridge does, in this one process), then a host is added (a reload with a new server line), one is removed (its
stub stops answering: port refused, as after a SIGKILL) and one drained (`set server ... state drain` on the
runtime API). After each change the script counts the threads whose host changed (HAProxy's own table, every
entry, before and after), routes existing threads through the status route (every thread after the reload, every
thread of the removed and of the drained host, 5,000 others after the removal; a stub counts any request for a
thread another stub holds as misrouted), the host-lost errors among them, and where new threads land.

    python bench/placement_sim.py                      # bench/results/<date>-placement.json and .md
    python bench/placement_sim.py --threads 20000      # a quicker run

Needs haproxy (bash scripts/install-host-tools). Client concurrency is modest (32 keep-alive connections; 128 for
the removed host's threads, which mostly wait in HAProxy's retry timers) and the run stops itself after
--max-seconds (about 100 s for the default run on 2 shared cores).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from agui_bridge.demo.testing import free_port  # noqa: E402
from tests.support.haproxy import (  # noqa: E402
    BACKEND,
    CONFIG,
    EXECUTION_TABLE,
    THREAD_TABLE,
    HaproxyProcess,
    Host,
)
from tests.support.stub_hosts import Answer, Client, Registry, StubHost  # noqa: E402

SAMPLE_OTHERS = 5000
NEW_PER_PHASE = 10000


def address_of(number: int) -> str:
    return f"127.0.1.{number}"


def rss_kib(pid: int) -> int:
    match = re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    return int(match.group(1)) if match else 0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Simulation:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.registry = Registry()
        self.stubs: dict[str, StubHost] = {}
        self.haproxy: HaproxyProcess | None = None
        self.clients: list[Client] = []
        self.report: dict[str, Any] = {"phases": []}
        self.thread_count = 0
        self.haproxy_cpu_s = 0.0

    # ------------------------------------------------------------------------------------------------ plumbing

    async def add_stub(self, number: int) -> StubHost:
        stub = await StubHost(f"host{number}", address_of(number), self.registry).start()
        self.stubs[stub.name] = stub
        return stub

    def hosts(self) -> list[Host]:
        return [Host(int(s.name[4:]), s.address, s.port, s.agent_port) for s in self.stubs.values()]

    async def command(self, command: str) -> str:
        assert self.haproxy is not None
        return await asyncio.to_thread(self.haproxy.command, command)

    async def table(self, name: str = THREAD_TABLE) -> dict[str, str]:
        assert self.haproxy is not None
        return await asyncio.to_thread(self.haproxy.table, name)

    async def wait_for(self, check: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not await check():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}")
            await asyncio.sleep(0.2)

    async def servers_up(self, names: Iterable[str]) -> bool:
        state = await self.command(f"show servers state {BACKEND}")
        rows = {row.split()[3]: row.split() for row in state.splitlines()[1:] if len(row.split()) > 7}
        return all(name in rows and rows[name][5] == "2" and rows[name][7] != "0" for name in names)

    async def drive(self, jobs: list[Callable[[Client], Awaitable[None]]], connections: int | None = None) -> None:
        """Run the jobs over the client pool (or over `connections` connections of their own), one at a time per
        connection."""
        queue = list(reversed(jobs))
        assert self.haproxy is not None
        pool = self.clients
        if connections is not None:
            pool = [Client("127.0.0.1", self.haproxy.listen_port) for _ in range(connections)]

        async def worker(client: Client) -> None:
            while queue:
                await queue.pop()(client)

        await asyncio.gather(*(worker(client) for client in pool))
        if connections is not None:
            for client in pool:
                await client.close()

    # ------------------------------------------------------------------------------------------------ requests

    def new_thread_id(self) -> str:
        self.thread_count += 1
        return f"sim-{self.thread_count:07d}"

    async def create_threads(self, count: int) -> Counter[str]:
        before = Counter(self.registry.new_threads)
        errors: Counter[str] = Counter()

        def job(thread_id: str) -> Callable[[Client], Awaitable[None]]:
            async def run(client: Client) -> None:
                payload = {
                    "threadId": thread_id,
                    "runId": "run-1",
                    "messages": [{"id": "m-1", "role": "user", "content": "hello"}],
                }
                answer = await client.request("POST", "/", json.dumps(payload).encode())
                if answer.status != 200:
                    errors[answer.code() or str(answer.status)] += 1

            return run

        await self.drive([job(self.new_thread_id()) for _ in range(count)])
        placed = Counter(self.registry.new_threads)
        placed.subtract(before)
        return Counter({name: n for name, n in placed.items() if n} | {f"error:{k}": v for k, v in errors.items()})

    async def route_existing(self, thread_ids: list[str], connections: int | None = None) -> dict[str, Any]:
        """The status route for each thread; what came back, and how long the slowest answer took."""
        outcomes: Counter[str] = Counter()
        slowest = 0.0

        def job(thread_id: str) -> Callable[[Client], Awaitable[None]]:
            async def run(client: Client) -> None:
                nonlocal slowest
                started = time.monotonic()
                answer: Answer = await client.request("POST", f"/extensions/iac-code/v1/threads/{thread_id}/status")
                slowest = max(slowest, time.monotonic() - started)
                outcomes["ok" if answer.status == 200 else f"{answer.status} {answer.code()}"] += 1

            return run

        misrouted_before = sum(self.registry.misrouted.values())
        await self.drive([job(t) for t in thread_ids], connections)
        return {
            "requests": len(thread_ids),
            "outcomes": dict(outcomes),
            "misrouted": sum(self.registry.misrouted.values()) - misrouted_before,
            "slowest_s": round(slowest, 3),
        }

    def held_by(self, name: str) -> list[str]:
        return [t for t, host in self.registry.thread_host.items() if host == name]

    def sample(self, thread_ids: list[str], size: int) -> list[str]:
        return random.Random(size).sample(thread_ids, min(size, len(thread_ids)))

    # ------------------------------------------------------------------------------------------------ phases

    async def run(self) -> dict[str, Any]:
        args = self.args
        for number in range(1, args.hosts + 1):
            await self.add_stub(number)
        self.haproxy = HaproxyProcess(self.workdir / "haproxy", free_port(), free_port(), self.hosts())
        await asyncio.to_thread(self.haproxy.start)
        await self.wait_for(lambda: self.servers_up(self.stubs), 30, "every host up")
        self.clients = [Client("127.0.0.1", self.haproxy.listen_port) for _ in range(args.concurrency)]
        worker = await asyncio.to_thread(self.haproxy.worker_pid)
        rss_before = rss_kib(worker)

        started = time.monotonic()
        placed = await self.create_threads(args.threads)
        created_s = time.monotonic() - started
        table_created = await self.table()
        executions = len(await self.table(EXECUTION_TABLE))
        rss_after = rss_kib(worker)
        self.haproxy_cpu_s += cpu_s(worker)
        self.phase(
            "create",
            f"{args.threads:,} new threads over {args.hosts} hosts",
            new_threads=dict(placed),
            table_entries=len(table_created),
            execution_entries=executions,
            seconds=round(created_s, 1),
        )
        self.report["table_memory"] = {
            "worker_rss_kib_before": rss_before,
            "worker_rss_kib_after": rss_after,
            "entries": len(table_created) + executions,
            "bytes_per_entry": round((rss_after - rss_before) * 1024 / max(1, len(table_created) + executions)),
        }

        # A host added: a reload with one more server line. The new worker pulls both tables from the old one.
        added = await self.add_stub(args.hosts + 1)
        for client in self.clients:
            await client.close()
        await asyncio.to_thread(self.haproxy.reload, self.hosts())
        await self.wait_for(lambda: self.table_size_is(len(table_created)), 60, "the table after the reload")
        await self.wait_for(lambda: self.servers_up([added.name]), 30, "the added host up")
        worker = await asyncio.to_thread(self.haproxy.worker_pid)
        after_reload = await self.table()
        self.phase(
            "add",
            f"{added.name} added by a reload",
            moved=moved(table_created, after_reload),
            entries_after_reload=len(after_reload),
            existing_routed=await self.route_existing(list(table_created)),
            new_threads=dict(await self.create_threads(NEW_PER_PHASE)),
        )

        # A host removed: its stub stops answering (refused), as after SIGKILL.
        removed = self.stubs["host1"]
        before_removal = await self.table()
        await removed.kill()
        lost = self.held_by(removed.name)
        others = self.sample([t for t, h in before_removal.items() if h != removed.name], SAMPLE_OTHERS)
        self.phase(
            "remove",
            f"{removed.name} stops answering (port refused)",
            threads_on_removed_host=len(self.held_by(removed.name)),
            # Each of these waits about 1 s in HAProxy (its retries): more connections, not more CPU.
            removed_host_threads_routed=await self.route_existing(lost, args.lost_concurrency),
            other_threads_routed=await self.route_existing(others),
            new_threads=dict(await self.create_threads(NEW_PER_PHASE)),
            moved=moved(before_removal, await self.table()),
        )

        # A host drained on the runtime API: keeps its threads, takes no new one.
        drained = "host2"
        before_drain = await self.table()
        await self.command(f"set server {BACKEND}/{drained} state drain")
        self.phase(
            "drain",
            f"{drained} drained (set server {BACKEND}/{drained} state drain)",
            drained_host_threads_routed=await self.route_existing(self.held_by(drained)),
            new_threads=dict(await self.create_threads(NEW_PER_PHASE)),
            moved=moved(before_drain, await self.table()),
        )
        final = await self.table()
        self.report["moved_since_creation"] = moved(table_created, final)
        self.report["misrouted_total"] = sum(self.registry.misrouted.values())
        self.haproxy_cpu_s += cpu_s(worker)
        self.report["haproxy_cpu_s"] = self.haproxy_cpu_s
        return self.report

    async def table_size_is(self, size: int) -> bool:
        text = await self.command("show table")  # one header line per table, no entries
        match = re.search(rf"table: {THREAD_TABLE}, .*used:(\d+)", text)
        return bool(match and int(match.group(1)) >= size)

    def phase(self, name: str, what: str, **numbers: Any) -> None:
        entry = {"phase": name, "what": what, **numbers}
        self.report["phases"].append(entry)
        print(json.dumps(entry), flush=True)

    async def stop(self) -> None:
        for client in self.clients:
            await client.close()
        if self.haproxy is not None:
            await asyncio.to_thread(self.haproxy.stop)
        for stub in self.stubs.values():
            await stub.kill()


def moved(before: dict[str, str], after: dict[str, str]) -> dict[str, int]:
    """Threads of `before` whose host changed in `after`, and those missing from it."""
    return {
        "changed_host": sum(1 for k, v in before.items() if k in after and after[k] != v),
        "missing": sum(1 for k in before if k not in after),
    }


def key_lengths() -> dict[str, int]:
    """Each table's key length in the shipped config (entry size follows it)."""
    text = CONFIG.read_text(encoding="utf-8")
    found = re.findall(r"^backend (\S+)\n\s+stick-table type string len (\d+)", text, flags=re.M)
    return {name: int(length) for name, length in found}


def markdown(report: dict[str, Any]) -> str:
    meta = report["meta"]
    lines = [
        f"# Placement simulation, {meta['date']}",
        "",
        f"HAProxy {meta['haproxy']} with the shipped deploy/haproxy/haproxy.cfg rules over {meta['hosts']} stub hosts",
        f"(bench/placement_sim.py); {meta['threads']:,} threads; {meta['concurrency']} client connections "
        f"({meta['lost_concurrency']} for the removed host's threads, which wait in HAProxy's retries); "
        f"{meta['wall_s']} s wall, {meta['client_cpu_s']} s CPU in the client+stubs process, "
        f"{meta['haproxy_cpu_s']} s in HAProxy's workers; {meta['cpus']} CPUs (shared).",
        "",
        "| phase | what | threads that changed host (missing) | existing threads routed | host-lost errors | "
        "new threads per host |",
        "|---|---|---|---|---|---|",
    ]
    for phase in report["phases"]:
        moved_ = phase.get("moved")
        moved_text = f"{moved_['changed_host']} ({moved_['missing']})" if moved_ else "-"
        routed = [v for k, v in phase.items() if k.endswith("_routed")]
        routed_text = "; ".join(
            f"{r['requests']:,}: {', '.join(f'{k} {n:,}' for k, n in sorted(r['outcomes'].items()))}, "
            f"misrouted {r['misrouted']}, slowest {r['slowest_s']} s"
            for r in routed
        )
        lost = phase.get("removed_host_threads_routed", {}).get("outcomes", {})
        lost_text = f"{sum(n for k, n in lost.items() if 'THREAD_HOST_UNAVAILABLE' in k):,}" if lost else "-"
        new = phase.get("new_threads", {})
        new_text = ", ".join(f"{k} {v:,}" for k, v in sorted(new.items(), key=lambda kv: natural(kv[0])))
        lines.append(f"| {phase['phase']} | {phase['what']} | {moved_text} | {routed_text or '-'} | {lost_text} | "
                     f"{new_text} |")  # fmt: skip
    memory = report["table_memory"]
    lines += [
        "",
        f"Threads whose host changed from creation to the end: {report['moved_since_creation']['changed_host']} "
        f"(missing from the table: {report['moved_since_creation']['missing']}); requests a stub counted as "
        f"misrouted: {report['misrouted_total']}.",
        "",
        f"Table memory: HAProxy's worker grew {memory['worker_rss_kib_after'] - memory['worker_rss_kib_before']:,} KiB "
        f"for {memory['entries']:,} entries (one thread entry and one execution entry per thread): "
        f"about {memory['bytes_per_entry']} bytes per entry with `type string len "
        f"{meta['key_len'][THREAD_TABLE]}` / `len {meta['key_len'][EXECUTION_TABLE]}` keys.",
        "",
    ]
    return "\n".join(lines)


def natural(name: str) -> tuple[str, int]:
    match = re.match(r"(\D*)(\d*)", name)
    assert match
    return match.group(1), int(match.group(2) or 0)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agui-placement-") as workdir:
        simulation = Simulation(args, Path(workdir))
        try:
            return await asyncio.wait_for(simulation.run(), timeout=args.max_seconds)
        finally:
            await simulation.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--lost-concurrency", type=int, default=128, help="connections for the removed host's threads (each waits ~1 s)"
    )
    parser.add_argument("--max-seconds", type=float, default=300)
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results")
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    started = time.monotonic()
    report = asyncio.run(main_async(args))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    version = subprocess.run(["haproxy", "-v"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
    report["meta"] = {
        "date": args.date,
        "haproxy": version.removeprefix("HAProxy version ").split(" ")[0],
        "threads": args.threads,
        "hosts": args.hosts,
        "concurrency": args.concurrency,
        "lost_concurrency": args.lost_concurrency,
        "wall_s": round(time.monotonic() - started, 1),
        "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "haproxy_cpu_s": round(report.pop("haproxy_cpu_s", 0.0), 1),
        "cpus": os.cpu_count(),
        "key_len": key_lengths(),
        "python": platform.python_version(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "placement" if args.threads == 100_000 else f"placement-{args.threads}"
    (args.out / f"{args.date}-{suffix}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (args.out / f"{args.date}-{suffix}.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))


if __name__ == "__main__":
    main()
