"""Demo agent server helpers that need no running server."""

from __future__ import annotations

import pytest

from agui_bridge.demo.server import TOKEN_ENV, is_loopback_host, run_demo_agent, token_from_env


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({}, None), ({TOKEN_ENV: ""}, None), ({TOKEN_ENV: "  "}, None), ({TOKEN_ENV: "abc"}, "abc")],
)
def test_token_from_env(environ: dict[str, str], expected: str | None) -> None:
    assert token_from_env(environ) == expected


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback_host(host: str, ok: bool) -> None:
    assert is_loopback_host(host) is ok


def test_run_demo_agent_refuses_non_loopback_host() -> None:
    with pytest.raises(ValueError, match="loopback"):
        run_demo_agent("0.0.0.0", 0, None)
