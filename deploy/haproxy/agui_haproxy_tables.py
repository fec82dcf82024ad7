#!/usr/bin/env python3
"""Keep the shipped HAProxy config's placement as long as the bridges keep the threads, through the runtime API.

A stick table's entry expires at most ~24.8 days after its last touch (HAProxy's 2^31 ms ceiling), and the bridges
keep an idle thread's record for --state-retention-days (30 by default). The config stores in each st_threads
entry the time of the thread's last request (gpt0, from HAProxy's `date`); this tool, run hourly by
agui-haproxy-refresh.timer, re-touches (`set table ... data.gpt0 <same value>`, which renews the entry's expiry
and keeps its server) exactly the entries whose last request is younger than the retention plus a margin. An
entry then lives as long as its thread's record, and at most one table expiry longer.

    agui_haproxy_tables.py refresh --retention-days 30      hourly (the timer)
    agui_haproxy_tables.py reload --master-pid PID           systemd's ExecReload (haproxy-reload.conf)
    agui_haproxy_tables.py wait-resync                        until `show peers` reports the resync done

`reload` refuses to let two reloads come within the peers' resync: it waits for the running worker's resync,
signals the master (SIGUSR2), waits for the new worker and for its resync, then returns. Standard library only
(Debian's python3); the runtime socket is the config's `stats socket` (level admin). deploy/README.md,
"Several hosts", explains both.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

DEFAULT_SOCKET = "/run/haproxy/agui-admin.sock"
DEFAULT_TABLE = "st_threads"
DEFAULT_PEERS = "agui_peers"
DAY_S = 86400
#: An entry this close to its expiry is left alone: it is not being kept (its thread is older than the
#: retention), and a `set table` just after it expired would create a new, server-less entry.
DEFAULT_MIN_REMAINING_MS = 60_000
#: One non-interactive CLI request (commands joined by ';') must fit HAProxy's 16 KiB buffer.
_BATCH_BYTES = 12_000
_RESYNC_DONE = 0x3  # the peers section's RESYNC_LOCAL and RESYNC_REMOTE flags (`show peers`)


def runtime_command(socket_path: str, command: str, timeout_s: float = 30.0) -> str:
    """One request on HAProxy's runtime API; its whole answer."""
    return "".join(runtime_lines(socket_path, command, timeout_s))


def runtime_lines(socket_path: str, command: str, timeout_s: float = 30.0) -> Iterator[str]:
    """One request's answer line by line (a large table is never held whole)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout_s)
        client.connect(socket_path)
        client.sendall(command.encode("utf-8", "surrogateescape") + b"\n")
        with client.makefile("rb") as answer:
            for raw in answer:
                yield raw.decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Entry:
    """One `show table` line of a placement table: the raw key, ms until expiry, the server, gpt0."""

    key: bytes
    expires_in_ms: int
    server: str | None
    last_request_s: int


_ESCAPES = {"t": b"\t", "n": b"\n", "r": b"\r", "e": b"\x1b"}


def unescape_key(text: str) -> bytes:
    """`show table` prints a string key through dump_text: `\\xHH` for a byte outside printable ASCII, a
    backslash before a space, `=` or a backslash, `\\t`/`\\n`/`\\r`/`\\e`. This gives the key's bytes back."""
    raw = text.encode("utf-8", "surrogateescape")
    out = bytearray()
    index = 0
    while index < len(raw):
        byte = raw[index : index + 1]
        if byte != b"\\" or index + 1 == len(raw):
            out += byte
            index += 1
            continue
        following = chr(raw[index + 1])
        if following == "x" and re.fullmatch(rb"[0-9a-fA-F]{2}", raw[index + 2 : index + 4]):
            out.append(int(raw[index + 2 : index + 4], 16))
            index += 4
        else:
            out += _ESCAPES.get(following, raw[index + 1 : index + 2])
            index += 2
    return bytes(out)


def cli_argument(key: bytes) -> bytes:
    """The key as one CLI argument: the CLI splits on spaces and tabs and ';' ends a command, each unless
    escaped with a backslash (which also escapes itself). Other bytes, UTF-8 included, pass as they are."""
    return re.sub(rb"([ \t\\;])", rb"\\\1", key)


_KEY = re.compile(r" key=((?:\\.|[^\\ ])*) ")
_FIELD = re.compile(r"(\w+)=(\S*)")


def parse_entry(line: str) -> Entry | None:
    """A `show table` entry line (`0x...: key=... use=0 exp=... server_id=1 gpt0=... server_key=host1`),
    or None for the header and blank lines. The key is escaped: a space in it comes as a backslash and a space."""
    key = _KEY.search(line) if line.startswith("0x") else None
    if key is None:
        return None
    fields = dict(_FIELD.findall(line[key.end() :]))
    return Entry(
        key=unescape_key(key.group(1)),
        expires_in_ms=int(fields.get("exp", "0")),
        server=fields.get("server_key", "-").strip("-") or None,  # "-": no server (never stored one)
        last_request_s=int(fields.get("gpt0", "0")),
    )


@dataclass(frozen=True)
class RefreshPlan:
    """What one refresh does: (key, gpt0 to write) for the kept entries; counts of those left to expire."""

    touch: list[tuple[bytes, int]]
    left_to_expire: int
    skipped: int


def plan_refresh(entries: Iterable[Entry], now_s: int, keep_s: int, min_remaining_ms: int) -> RefreshPlan:
    """Pure: which entries to renew. Kept: an entry with a server whose last request is younger than `keep_s`
    (gpt0 0, an entry from before gpt0 was stored, counts from now). Left alone: older ones (they expire one
    table expiry after their last touch), server-less ones, and ones about to expire."""
    touch: list[tuple[bytes, int]] = []
    left = skipped = 0
    for entry in entries:
        if entry.server is None or entry.expires_in_ms < min_remaining_ms:
            skipped += 1
        elif entry.last_request_s == 0:
            touch.append((entry.key, now_s))
        elif entry.last_request_s > now_s - keep_s:
            touch.append((entry.key, entry.last_request_s))
        else:
            left += 1
    return RefreshPlan(touch, left, skipped)


def batches(commands: Iterable[bytes], limit: int = _BATCH_BYTES) -> Iterator[bytes]:
    """Commands joined by ';' into requests that fit one CLI buffer."""
    batch: list[bytes] = []
    size = 0
    for command in commands:
        if batch and size + len(command) + 2 > limit:
            yield b"; ".join(batch)
            batch, size = [], 0
        batch.append(command)
        size += len(command) + 2
    if batch:
        yield b"; ".join(batch)


@dataclass(frozen=True)
class RefreshCounts:
    """What one refresh did."""

    renewed: int
    left_to_expire: int
    skipped: int


#: Entries planned and sent per slice, so a table of millions is never held whole.
_SLICE = 10_000


def refresh(
    socket_path: str,
    table: str,
    keep_s: int,
    now_s: int | None = None,
    min_remaining_ms: int = DEFAULT_MIN_REMAINING_MS,
) -> RefreshCounts:
    """Renew the entries of `table` whose thread had a request within `keep_s` seconds, a slice at a time while
    `show table` streams (HAProxy's dump holds its place in the table, so the renewals may run beside it)."""
    now = int(time.time()) if now_s is None else now_s
    entries = (entry for line in runtime_lines(socket_path, f"show table {table}") if (entry := parse_entry(line)))
    renewed = left = skipped = 0
    while chunk := list(itertools.islice(entries, _SLICE)):
        plan = plan_refresh(chunk, now, keep_s, min_remaining_ms)
        commands = (
            b"set table " + table.encode() + b" key " + cli_argument(key) + b" data.gpt0 " + str(gpt0).encode()
            for key, gpt0 in plan.touch
        )
        for request in batches(commands):
            answer = runtime_command(socket_path, request.decode("utf-8", "surrogateescape")).strip()
            if answer:
                raise RuntimeError(f"HAProxy refused a set table: {answer[:300]}")
        renewed, left, skipped = renewed + len(plan.touch), left + plan.left_to_expire, skipped + plan.skipped
    return RefreshCounts(renewed, left, skipped)


def resync_done(socket_path: str, section: str) -> bool:
    """`show peers`: this worker has its tables (from the old worker, a remote peer, or the 5 s timeout)."""
    answer = runtime_command(socket_path, "show peers", timeout_s=5)
    match = re.search(rf"id={re.escape(section)} disabled=\d+ flags=0x([0-9a-fA-F]+)", answer)
    return match is not None and int(match.group(1), 16) & _RESYNC_DONE == _RESYNC_DONE


def worker_pid(socket_path: str) -> int | None:
    try:
        match = re.search(r"^Pid: (\d+)$", runtime_command(socket_path, "show info", timeout_s=5), re.M)
    except OSError:
        return None  # between workers: the socket is being taken over
    return int(match.group(1)) if match else None


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout_s:g} s waiting for {what}")
        time.sleep(0.2)


def reload(socket_path: str, section: str, master_pid: int, timeout_s: float) -> None:
    """A reload that keeps the tables: only once the running worker has its tables, and returning only once
    the new worker has them, so a second reload can never catch a worker before its resync."""
    wait_for(lambda: resync_done(socket_path, section), timeout_s, "the running worker's peers resync")
    before = worker_pid(socket_path)
    os.kill(master_pid, signal.SIGUSR2)
    wait_for(lambda: worker_pid(socket_path) not in (None, before), timeout_s, "the new worker")
    wait_for(lambda: resync_done(socket_path, section), timeout_s, "the new worker's peers resync")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--socket", default=DEFAULT_SOCKET, help="HAProxy's runtime API socket (level admin)")
    commands = parser.add_subparsers(dest="command", required=True)
    renew = commands.add_parser("refresh", help="renew the entries of threads the bridges still keep")
    renew.add_argument("--table", default=DEFAULT_TABLE)
    renew.add_argument("--retention-days", type=float, required=True, help="the bridges' --state-retention-days")
    renew.add_argument(
        "--margin-days", type=float, default=1.0, help="kept past the retention: the sweep's hour, a long run, skew"
    )
    again = commands.add_parser("reload", help="reload HAProxy without ever catching a worker before its resync")
    again.add_argument("--master-pid", type=int, required=True)
    again.add_argument("--peers", default=DEFAULT_PEERS)
    again.add_argument("--timeout", type=float, default=60.0)
    wait = commands.add_parser("wait-resync", help="wait until the running worker's peers resync is done")
    wait.add_argument("--peers", default=DEFAULT_PEERS)
    wait.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    try:
        if args.command == "refresh":
            keep_s = int((args.retention_days + args.margin_days) * DAY_S)
            counts = refresh(args.socket, args.table, keep_s)
            sys.stdout.write(f"renewed {counts.renewed}, left {counts.left_to_expire}, skipped {counts.skipped}\n")
        elif args.command == "reload":
            reload(args.socket, args.peers, args.master_pid, args.timeout)
        else:
            wait_for(lambda: resync_done(args.socket, args.peers), args.timeout, "the peers resync")
    except (OSError, TimeoutError, RuntimeError) as exc:
        sys.stderr.write(f"agui_haproxy_tables: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
