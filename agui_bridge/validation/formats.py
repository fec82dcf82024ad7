"""The JSON Schema `format` checks of interrupt answers, each a pure predicate on the standard library.

The bridge checks exactly the formats in `FORMAT_CHECKS` (docs/design.md#answer-validation). jsonschema's
own checkers for several of them exist only when optional packages are installed, and importing those
packages cost a worker seconds at start (`rfc3987_syntax` builds a parser at import;
docs/operations.md#worker-start), so none of them is a dependency: these predicates are what is checked,
whatever happens to be installed. A value that is not a string conforms to every format (JSON Schema
2020-12: a format applies to strings only). A string over `MAX_FORMAT_VALUE_CHARS` conforms to none: it is
refused before any pattern or parser scans it, so a client's megabyte "URI" costs nothing.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from datetime import date
from functools import wraps
from uuid import UUID

from agui_bridge.config.limits import MAX_FORMAT_VALUE_CHARS

_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})", re.ASCII)
#: RFC 3339 `full-time`: seconds up to 60 (a leap second), any fraction, `Z` or a numeric offset.
_TIME = re.compile(r"([01]\d|2[0-3]):([0-5]\d):([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)", re.ASCII)

# RFC 3986 section 3, from its ABNF: an absolute URI (scheme required), with an optional fragment.
_PCT = r"%[0-9A-Fa-f]{2}"
_UNRESERVED_SUB = r"A-Za-z0-9\-._~!$&'()*+,;="
_PCHAR = rf"(?:[{_UNRESERVED_SUB}:@]|{_PCT})"
_USERINFO = rf"(?:[{_UNRESERVED_SUB}:]|{_PCT})*"
_REG_NAME = rf"(?:[{_UNRESERVED_SUB}]|{_PCT})*"
_IP_LITERAL = r"\[(?P<literal>[0-9A-Za-z\-._~!$&'()*+,;=:]+)\]"
_URI = re.compile(
    rf"[A-Za-z][A-Za-z0-9+\-.]*:"
    rf"(?://(?:{_USERINFO}@)?(?:{_IP_LITERAL}|{_REG_NAME})(?::\d*)?(?:/{_PCHAR}*)*"
    rf"|/?(?:{_PCHAR}+(?:/{_PCHAR}*)*)?)"
    rf"(?:\?(?:{_PCHAR}|[/?])*)?"
    rf"(?:#(?:{_PCHAR}|[/?])*)?",
    re.ASCII,
)
_IP_FUTURE = re.compile(r"[vV][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+", re.ASCII)
#: RFC 1123 host name label: letters, digits and inner hyphens, 1 to 63 characters.
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)


def _bounded(check: Callable[[object], bool]) -> Callable[[object], bool]:
    """`check`, preceded by the length bound: an over-long string fails before it is scanned."""

    @wraps(check)
    def bounded(value: object) -> bool:
        if isinstance(value, str) and len(value) > MAX_FORMAT_VALUE_CHARS:
            return False
        return check(value)

    return bounded


@_bounded
def is_date(value: object) -> bool:
    """RFC 3339 `full-date`: YYYY-MM-DD, a real calendar day."""
    if not isinstance(value, str):
        return True
    match = _DATE.fullmatch(value)
    if match is None:
        return False
    try:
        date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return False
    return True


@_bounded
def is_time(value: object) -> bool:
    """RFC 3339 `full-time`: HH:MM:SS[.frac] and `Z` or an offset."""
    return not isinstance(value, str) or _TIME.fullmatch(value) is not None


@_bounded
def is_date_time(value: object) -> bool:
    """RFC 3339 `date-time`: a full-date, `T` (either case), a full-time."""
    if not isinstance(value, str):
        return True
    day, sep, time = value[:10], value[10:11], value[11:]
    return sep in ("T", "t") and is_date(day) and is_time(time)


@_bounded
def is_email(value: object) -> bool:
    """As jsonschema's own check: an `@` somewhere (mail addresses are not worth a grammar here)."""
    return not isinstance(value, str) or "@" in value


@_bounded
def is_ipv4(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


@_bounded
def is_ipv6(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        address = ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return address.scope_id is None  # RFC 4291 text has no zone index


@_bounded
def is_hostname(value: object) -> bool:
    """RFC 1123: dot-separated labels, at most 253 characters (a trailing dot allowed)."""
    if not isinstance(value, str):
        return True
    name = value[:-1] if value.endswith(".") else value
    if not name or len(name) > 253:
        return False
    return all(_LABEL.fullmatch(label) for label in name.split("."))


@_bounded
def is_uri(value: object) -> bool:
    """RFC 3986 `URI`: a scheme, then an authority and path, a query and a fragment, all percent-encoded."""
    if not isinstance(value, str):
        return True
    match = _URI.fullmatch(value)
    if match is None:
        return False
    literal = match["literal"]
    if literal is None:
        return True
    return _IP_FUTURE.fullmatch(literal) is not None or is_ipv6(literal)


@_bounded
def is_uuid(value: object) -> bool:
    """RFC 4122 text form: 32 hex digits in the 8-4-4-4-12 groups."""
    if not isinstance(value, str):
        return True
    try:
        UUID(value)
    except ValueError:
        return False
    return len(value) == 36 and all(value[position] == "-" for position in (8, 13, 18, 23))


#: Every format an interrupt's answer schema may rely on, and its check.
FORMAT_CHECKS: dict[str, Callable[[object], bool]] = {
    "date-time": is_date_time,
    "date": is_date,
    "time": is_time,
    "email": is_email,
    "uri": is_uri,
    "uuid": is_uuid,
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "hostname": is_hostname,
}
