"""No code in agui_bridge/ reads a private attribute of requests, urllib3 or http.client objects.

Their private attributes change between releases without notice; the kernel client reads streams on
public APIs only (docs/design.md#a2a-stream-batches). The forbidden names are the private attributes those
libraries' classes and instances have today, plus the ones the client once used.
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Callable
from pathlib import Path

import requests
import requests.adapters
import urllib3
import urllib3.connection
import urllib3.connectionpool
import urllib3.response

PACKAGE = Path(__file__).resolve().parents[2] / "agui_bridge"

#: Private attributes the kernel client used to read, named even if a release renames them.
ONCE_USED = {"_connection", "_original_response", "_fp", "_pool", "_get_conn", "_put_conn", "_sock_shutdown"}


def private_names(*objects: object) -> set[str]:
    """Single-underscore names on these classes and instances (not dunders)."""
    names: set[str] = set()
    for obj in objects:
        names.update(n for n in dir(obj) if n.startswith("_") and not n.startswith("__"))
        names.update(n for n in getattr(obj, "__dict__", {}) if n.startswith("_") and not n.startswith("__"))
    return names


def forbidden_names() -> set[str]:
    instances: list[object] = [
        requests.Session(),
        requests.adapters.HTTPAdapter(),
        requests.Response(),
        urllib3.PoolManager(),
        urllib3.HTTPConnectionPool("127.0.0.1", 1),
        urllib3.connection.HTTPConnection("127.0.0.1", 1),
        urllib3.response.HTTPResponse(body=b""),
    ]
    classes: list[object] = [
        requests.PreparedRequest,
        urllib3.HTTPSConnectionPool,
        urllib3.connection.HTTPSConnection,
        http.client.HTTPResponse,
        http.client.HTTPConnection,
    ]
    return ONCE_USED | private_names(*instances, *classes)


def checker(names: set[str]) -> Callable[[str], list[str]]:
    """Lines of a source reading one of `names` as an attribute of anything but `self`/`cls`, or through
    getattr/hasattr/setattr."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    attribute = re.compile(rf"(?<![\w])(?!self\.|cls\.)[\w\])]+\.(?:{alternatives})\b")
    by_string = re.compile(rf"""(?:getattr|hasattr|setattr)\([^)]*["'](?:{alternatives})["']""")
    return lambda source: [line for line in source.splitlines() if attribute.search(line) or by_string.search(line)]


def test_the_libraries_private_names_are_found_by_introspection() -> None:
    assert {"_original_response", "_fp", "_get_conn"} <= private_names(
        urllib3.response.HTTPResponse(body=b""), urllib3.HTTPConnectionPool("127.0.0.1", 1)
    )


def test_the_check_finds_a_private_attribute_read() -> None:
    uses = checker({"_connection", "_fp", "_pool"})
    assert uses("sock = self._raw._connection.sock")
    assert uses('file = getattr(original, "_fp", None)')
    assert uses("pool = client._pool")
    assert not uses("self._pool = None")
    assert not uses("self._connection_count = 1")


def test_no_module_reads_a_private_attribute_of_requests_or_urllib3() -> None:
    uses = checker(forbidden_names())
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in uses(path.read_text(encoding="utf-8"))
    ]
    assert found == []
