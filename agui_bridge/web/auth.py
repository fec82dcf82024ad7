"""Who may call the bridge: the bearer token (docs/design.md#authentication) and, without
one, loopback Hosts only (docs/design.md#decision-secure-by-default).

Bytes are compared in constant time; a malformed header is a 401, never a 500
(docs/design.md#decision-no-500). `guard_request` runs before every view and is the one place the
token is checked: a route added later is protected without remembering to call anything, and no view
checks it again.
"""

from __future__ import annotations

import functools
import hmac

from flask import request

from agui_bridge.config.loopback import is_loopback_host_header
from agui_bridge.config.settings import Settings
from agui_bridge.errors import HostNotAllowed, Unauthorized

#: Endpoints anyone may call: liveness for probes and load balancers.
OPEN_ENDPOINTS = frozenset({"health.health"})
#: Static files of the console: a browser's navigation cannot carry a bearer header, and they hold no data
#: (the page asks for the token and sends it on every API call). The Host rule still applies to them.
STATIC_ENDPOINTS = frozenset({"console.console_page", "console.console_static", "console.console_vendor"})


def check_bearer(header: str | None, expected: str | None) -> None:
    if not expected:
        return
    if not header or " " not in header:
        raise Unauthorized()
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        raise Unauthorized()
    try:
        presented = token.encode("latin-1")
    except UnicodeEncodeError:
        raise Unauthorized() from None
    if not tokens_match(presented, expected.encode("utf-8")):
        raise Unauthorized()


def tokens_match(presented: bytes, expected: bytes) -> bool:
    """The one comparison of a presented token, in constant time (its duration says nothing of the token)."""
    return hmac.compare_digest(presented, expected)


#: Distinct Host values remembered per worker; a client sending a new Host on every request only
#: evicts older answers (each is recomputed from the header alone, so a cached one can never be stale).
_HOST_CACHE_SIZE = 256
#: Longer values are never loopback (`is_loopback_host_header` refuses them): they are not kept.
_HOST_CACHED_MAX_CHARS = 270


@functools.lru_cache(maxsize=_HOST_CACHE_SIZE)
def _loopback_host_header(host_header: str) -> bool:
    """`is_loopback_host_header`, decided once per distinct Host value: parsing an IP literal on every
    request costs about 2% of a burst's CPU (docs/design.md#host-check-cache)."""
    return is_loopback_host_header(host_header)


def check_host(host_header: str | None, auth_token: str | None) -> None:
    """Without a token only a loopback Host is served: a DNS-rebound page names its own host.

    See docs/design.md#decision-secure-by-default.
    """
    if auth_token:
        return
    if not host_header or len(host_header) > _HOST_CACHED_MAX_CHARS or not _loopback_host_header(host_header):
        raise HostNotAllowed()


def guard_request(settings: Settings) -> None:
    """Host rule, then the token, for every route but /health; unknown paths keep their plain 404/405."""
    if request.endpoint in OPEN_ENDPOINTS:
        return
    check_host(request.headers.get("Host"), settings.auth_token)
    if request.url_rule is None or request.endpoint in STATIC_ENDPOINTS:
        return
    check_bearer(request.headers.get("Authorization"), settings.auth_token)
