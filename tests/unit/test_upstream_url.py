"""The A2A URL is parsed by a real parser and must name a loopback host; the session ignores proxies."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from urllib3.util import parse_url

from agui_bridge.config import ConfigError, load_settings
from agui_bridge.config.loopback import (
    UpstreamUrlError,
    is_loopback_host,
    is_loopback_host_header,
    normalise_upstream_url,
)
from agui_bridge.kernel.client import A2AClient

ACCEPTED = [
    ("http://127.0.0.1:41242", "http://127.0.0.1:41242/"),
    ("http://127.0.0.1:41242/", "http://127.0.0.1:41242/"),
    ("https://localhost:8443/a2a", "https://localhost:8443/a2a/"),
    ("HTTP://LOCALHOST:1/", "HTTP://LOCALHOST:1/"),
    ("http://127.8.9.10/", "http://127.8.9.10/"),
    ("http://[::1]:41242/", "http://[::1]:41242/"),
    ("http://[::ffff:127.0.0.1]:41242/", "http://[::ffff:127.0.0.1]:41242/"),
]

REFUSED = [
    "http://evil.example\\@127.0.0.1/",  # the reported bypass: requests connects to evil.example
    "http://evil.example\\@127.0.0.1:41242/",
    "http://user:pw@127.0.0.1:41242/",
    "http://evil.example@127.0.0.1/",
    "http://127.0.0.1@evil.example/",
    "http://127.0.0.1:80@evil.example/",
    "http://127.0.0.1\t.evil.example/",
    "http://127.0.0.1\n/",
    "http://127.0.0.1 /",
    "http://10.0.0.5:41242/",
    "http://0.0.0.0:41242/",
    "http://127.1/",  # shorthand some resolvers expand; never accepted
    "http://2130706433/",
    "http://localhost.evil.example/",
    "http://localhost./",
    "http://[::1%25eth0]/",
    "http://[fe80::1]/",
    "ftp://127.0.0.1/",
    "file:///etc/passwd",
    "127.0.0.1:41242",
    "http://127.0.0.1:99999/",
    "http://127.0.0.1:0/",
    "http://127.0.0.1/?next=http://evil.example/",
    "http://127.0.0.1/#frag",
    "http:///path",
    "",
]


@pytest.mark.parametrize(("url", "normalised"), ACCEPTED)
def test_loopback_urls_are_accepted_and_requests_would_connect_there(url: str, normalised: str) -> None:
    assert normalise_upstream_url(url) == normalised
    host = parse_url(normalised).host  # the parser requests/urllib3 use to pick the peer
    assert host is not None and is_loopback_host(host)


@pytest.mark.parametrize("url", REFUSED)
def test_url_tricks_that_leave_loopback_are_refused(url: str) -> None:
    with pytest.raises(UpstreamUrlError) as error:
        normalise_upstream_url(url)
    message = str(error.value)
    assert message.startswith("The AG-UI adapter may connect only to a loopback A2A HTTP(S) URL: ")
    assert "\n" not in message


def test_backslash_bypass_is_refused_at_every_entry_point() -> None:
    """The CLI, wsgi.py and deploy/gunicorn.conf.py all build settings through load_settings."""
    with pytest.raises(ConfigError, match="no whitespace, control characters or backslashes"):
        load_settings({"IAC_CODE_AGUI_A2A_URL": "http://evil.example\\@127.0.0.1/"})
    with pytest.raises(ConfigError, match="the host must be"):
        load_settings({"IAC_CODE_AGUI_A2A_URL": "http://10.0.0.5:41242/"})


@pytest.mark.parametrize(
    ("header", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST:8000", True),
        ("127.0.0.1", True),
        ("127.0.0.1:8000", True),
        ("127.255.0.9:1", True),
        ("[::1]", True),
        ("[::1]:8000", True),
        (None, False),
        ("", False),
        ("evil.example", False),
        ("evil.example:8000", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.nip.io", False),
        ("10.0.0.5:8000", False),
        ("0.0.0.0:8000", False),
        ("::1", False),  # an IPv6 Host must be bracketed
        ("[::1", False),
        ("[::1]x", False),
        ("localhost:", False),
        ("localhost:80:80", False),
        ("localhost:http", False),
        ("localhost@evil.example", False),
        ("a" * 300, False),
    ],
)
def test_host_header_loopback_names(header: str | None, loopback: bool) -> None:
    assert is_loopback_host_header(header) is loopback


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers any JSON-RPC POST with an empty result and records that it was reached."""

    hits: list[str]

    def do_POST(self) -> None:
        self.hits.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.dumps({"jsonrpc": "2.0", "id": "x", "result": {"task": {"id": "t", "contextId": "c"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: Any) -> None:
        pass


def _server() -> tuple[http.server.ThreadingHTTPServer, list[str]]:
    hits: list[str] = []
    handler = type("Handler", (_Recorder,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, hits


@pytest.fixture
def upstream_and_proxy() -> Iterator[tuple[str, list[str], str, list[str]]]:
    upstream, upstream_hits = _server()
    proxy, proxy_hits = _server()
    try:
        yield (
            f"http://127.0.0.1:{upstream.server_port}/",
            upstream_hits,
            f"http://127.0.0.1:{proxy.server_port}",
            proxy_hits,
        )
    finally:
        upstream.shutdown()
        proxy.shutdown()


def test_a2a_session_ignores_proxy_variables(
    upstream_and_proxy: tuple[str, list[str], str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream_url, upstream_hits, proxy_url, proxy_hits = upstream_and_proxy
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy_url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    client = A2AClient(upstream_url, "secret-a2a-token")
    try:
        client.get_task("t")
        client.pipeline_state("t", 0)
    finally:
        client.close()
    assert proxy_hits == [], "the A2A call (with its bearer token) went through the proxy"
    assert len(upstream_hits) == 2


def test_the_client_itself_refuses_a_non_loopback_url() -> None:
    """Settings built by hand (tests, embedding) skip load_settings; the A2A client checks again."""
    with pytest.raises(UpstreamUrlError):
        A2AClient("http://evil.example\\@127.0.0.1/", None)
    assert A2AClient("http://127.0.0.1:1", None).base_url == "http://127.0.0.1:1/"
