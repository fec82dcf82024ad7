"""What counts as loopback: the bind address, a request's Host header and the upstream A2A URL.

One module so the three checks cannot drift apart. Names are never resolved (DNS would make the answer
depend on the network); only `localhost` and IP literals in 127.0.0.0/8 or ::1 are loopback. stdlib only:
the gunicorn master imports this before fork.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

LOOPBACK_NAME = "localhost"
#: Characters that parsers disagree on (`\` is a separator for browsers and some clients, whitespace and
#: control characters are silently stripped by urllib) or that have no place in a URL an operator types.
_URL_REJECT = re.compile(r"[\\\s\x00-\x1f\x7f-\x9f]")
_PORT = re.compile(r"[0-9]{1,5}")


class UpstreamUrlError(ValueError):
    """The A2A URL is not a plain loopback http(s) URL; the message says which rule failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"The AG-UI adapter may connect only to a loopback A2A HTTP(S) URL: {reason}")


def is_loopback_host(host: str) -> bool:
    """`localhost`, an IPv4 literal in 127.0.0.0/8 or the IPv6 loopback (brackets optional)."""
    name = host.lower()
    if name == LOOPBACK_NAME:
        return True
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if "%" in name:  # an IPv6 zone id is never loopback
        return False
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False  # other names, and shorthand like 127.1 or 2130706433, are not accepted
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def is_loopback_host_header(value: str | None) -> bool:
    """A Host header naming a loopback host, with or without a port (`localhost:8000`, `[::1]:80`)."""
    if not value or len(value) > 270:
        return False
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return False
        host, rest = value[: end + 1], value[end + 1 :]
    else:
        colon = value.find(":")
        host, rest = (value, "") if colon < 0 else (value[:colon], value[colon:])
    if rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:])):
        return False
    return is_loopback_host(host)


def normalise_upstream_url(url: str) -> str:
    """A loopback `http(s)://host[:port][/path]` URL with a trailing slash, or UpstreamUrlError.

    No userinfo, query or fragment; the host must be a loopback literal or `localhost`. The rules are
    applied to what urllib parses after refusing every character parsers disagree on, so the host
    checked here is the host `requests` connects to.
    """
    if _URL_REJECT.search(url):
        raise UpstreamUrlError("no whitespace, control characters or backslashes.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UpstreamUrlError("not a valid URL.") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise UpstreamUrlError("the scheme must be http or https.")
    if "@" in parts.netloc:
        raise UpstreamUrlError("no user name or password.")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise UpstreamUrlError("no query or fragment.")
    host = parts.hostname
    if not host or not is_loopback_host(host):
        raise UpstreamUrlError("the host must be localhost, 127.x.x.x or [::1].")
    if port == 0:
        raise UpstreamUrlError("port 0 is not a port.")
    return url.rstrip("/") + "/"
