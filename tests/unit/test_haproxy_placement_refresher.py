"""The placement refresher's pure parts (deploy/haproxy/agui_haproxy_tables.py): reading `show table` lines as
HAProxy escapes them, writing a key back as one CLI argument, and which entries it renews."""

from __future__ import annotations

import pytest

from tests.support.haproxy_tables import load_tool

TOOL = load_tool()
NOW = 1_800_000_000
KEEP = 31 * 86400


@pytest.mark.parametrize(
    ("line", "key", "server", "gpt0"),
    [
        ("0x55: key=plain use=0 exp=2073600000 server_id=1 gpt0=7 server_key=host1", b"plain", "host1", 7),
        ("0x55: key=Team/Thread\\ 1 use=0 exp=5 server_id=2 gpt0=0 server_key=host2", b"Team/Thread 1", "host2", 0),
        (
            "0x55: key=caf\\xC3\\xA9\\=x\\\\y;z use=1 exp=9 shard=0 server_id=3 gpt0=1 server_key=host3",
            "café=x\\y;z".encode(),
            "host3",
            1,
        ),
        ("0x55: key=orphan use=0 exp=9 server_id=0 gpt0=5 server_key=-", b"orphan", None, 5),
    ],
    ids=["plain", "space", "utf8-equals-backslash", "no-server"],
)
def test_a_show_table_line_gives_back_the_raw_key_its_server_and_last_request(
    line: str, key: bytes, server: str | None, gpt0: int
) -> None:
    entry = TOOL.parse_entry(line)
    assert (entry.key, entry.server, entry.last_request_s) == (key, server, gpt0)


@pytest.mark.parametrize("line", ["", "# table: st_threads, type: string, size:1048576, used:1", "> "])
def test_lines_that_are_no_entry_are_skipped(line: str) -> None:
    assert TOOL.parse_entry(line) is None


def test_a_key_is_written_back_as_one_cli_argument() -> None:
    assert TOOL.cli_argument("a b\tc\\d;e é".encode()) == "a\\ b\\\tc\\\\d\\;e\\ é".encode()


def entry(gpt0: int, server: str | None = "host1", expires_in_ms: int = 10**9) -> object:
    return TOOL.Entry(key=f"t{gpt0}".encode(), expires_in_ms=expires_in_ms, server=server, last_request_s=gpt0)


def test_only_placed_entries_younger_than_the_retention_are_renewed_with_their_own_time() -> None:
    plan = TOOL.plan_refresh(
        [
            entry(NOW - 10),  # recent: renewed
            entry(NOW - KEEP + 1),  # just inside: renewed
            entry(NOW - KEEP),  # at the retention: left to expire
            entry(0),  # no time yet (placed before gpt0 was stored): counted from now
            entry(NOW - 10, server=None),  # no server: never kept alive
            entry(NOW - 10, expires_in_ms=5),  # about to expire: a set could re-create it server-less
        ],
        NOW,
        KEEP,
        60_000,
    )
    assert plan.touch == [(b"t1799999990", NOW - 10), (f"t{NOW - KEEP + 1}".encode(), NOW - KEEP + 1), (b"t0", NOW)]
    assert (plan.left_to_expire, plan.skipped) == (1, 2)


def test_commands_are_batched_within_one_cli_buffer() -> None:
    commands = [b"x" * 1000 for _ in range(30)]
    batches = list(TOOL.batches(commands, 12_000))
    assert all(len(batch) <= 12_000 for batch in batches)
    assert b"; ".join(batches).split(b"; ") == commands
