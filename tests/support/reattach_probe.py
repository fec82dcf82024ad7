"""Does a live bridge serve reattach (docs/design.md#reattach)? The client tests of reattach ask before they run.

`/health` advertises it (`"reattach": {"supported": true, ...}`, or `true`); the capabilities document
(`custom.iacCode.reattach.supported`) is asked too. A bridge without it makes those tests skip with
this reason, so the clients can be tested against a bridge that does not serve reattach.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin

import pytest
import requests

NOT_SUPPORTED = "the bridge does not advertise reattach in /health (a bridge without the reattach server side)"


def _supported(value: Any) -> bool:
    return value is True or (isinstance(value, dict) and value.get("supported") is True)


def reattach_supported(bridge_url: str, token: str | None) -> bool:
    health = requests.get(urljoin(bridge_url, "health"), timeout=10).json()
    if _supported(health.get("reattach")):
        return True
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = requests.get(urljoin(bridge_url, "extensions/iac-code/v1/capabilities"), headers=headers, timeout=10)
    if response.status_code != 200:
        return False
    custom = response.json().get("custom", {}).get("iacCode", {})
    return _supported(custom.get("reattach"))


def require_reattach(bridge_url: str, token: str | None) -> None:
    if not reattach_supported(bridge_url, token):
        pytest.skip(NOT_SUPPORTED)
