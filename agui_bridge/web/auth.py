"""Bearer-token check (behaviour.md 1.3): bytes compared in constant time; never a 500 (D5)."""

from __future__ import annotations

import hmac

from agui_bridge.errors import Unauthorized


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
    if not hmac.compare_digest(presented, expected.encode("utf-8")):
        raise Unauthorized()
