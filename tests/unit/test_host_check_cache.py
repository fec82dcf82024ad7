"""The Host rule decided once per distinct Host value (docs/design.md#host-check-cache): the same answers as
the parser, every time, with a bounded memory."""

from __future__ import annotations

import pytest

from agui_bridge.config.loopback import is_loopback_host_header
from agui_bridge.errors import HostNotAllowed
from agui_bridge.web import auth

HOSTS = [
    "127.0.0.1:8000",
    "localhost",
    "LOCALHOST:80",
    "[::1]:9",
    "[::ffff:127.0.0.1]",
    "127.1",
    "evil.example:8000",
    "127.0.0.1:80x",
    "[fe80::1%eth0]",
    "0x7f.0.0.1",
    "",
    "127.0.0.1:" + "1" * 300,
]


@pytest.mark.parametrize("host", [*HOSTS, None])
def test_cached_answers_are_the_parsers_answers_every_time(host: str | None) -> None:
    for _ in range(3):
        if is_loopback_host_header(host):
            auth.check_host(host, None)
        else:
            with pytest.raises(HostNotAllowed):
                auth.check_host(host, None)


def test_a_token_serves_any_host_without_parsing_it() -> None:
    auth.check_host("evil.example", "secret-token")
    auth.check_host(None, "secret-token")


def test_the_cache_is_bounded_and_skips_over_long_values() -> None:
    auth._loopback_host_header.cache_clear()
    for i in range(auth._HOST_CACHE_SIZE * 2):
        with pytest.raises(HostNotAllowed):
            auth.check_host(f"host-{i}.example", None)
    info = auth._loopback_host_header.cache_info()
    assert info.maxsize == auth._HOST_CACHE_SIZE and info.currsize == auth._HOST_CACHE_SIZE
    auth._loopback_host_header.cache_clear()
    with pytest.raises(HostNotAllowed):
        auth.check_host("localhost:" + "1" * 400, None)
    assert auth._loopback_host_header.cache_info().currsize == 0
