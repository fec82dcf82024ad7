"""The `format` checks of interrupt answers (agui_bridge/validation/formats.py; docs/design.md#answer-validation).

They are the bridge's own, on the standard library: jsonschema's checkers for several formats exist only when
optional packages are installed, and those packages cost a worker seconds at start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agui_bridge.config.limits import MAX_FORMAT_VALUE_CHARS
from agui_bridge.validation.answers import REQUIRED_FORMATS, payload_errors
from agui_bridge.validation.formats import FORMAT_CHECKS

REPO_ROOT = Path(__file__).resolve().parents[2]

#: (format, value, conforms)
CASES: list[tuple[str, str, bool]] = [
    ("date-time", "2026-11-29T19:30:00.000Z", True),
    ("date-time", "2026-11-29t19:30:00+01:00", True),
    ("date-time", "2016-12-31T23:59:60Z", True),
    ("date-time", "yesterday", False),
    ("date-time", "2026-02-30T10:00:00Z", False),
    ("date-time", "2026-11-29T19:30:00", False),
    ("date-time", "2026-11-29 19:30:00Z", False),
    ("date-time", "2026-11-29T24:00:00Z", False),
    ("date", "2024-02-29", True),
    ("date", "2023-02-29", False),
    ("date", "2026-1-05", False),
    ("date", "٢٠٢٦-١١-٢٩", False),
    ("time", "08:30:00Z", True),
    ("time", "08:30:00.5-05:00", True),
    ("time", "08:30", False),
    ("time", "08:30:00", False),
    ("email", "ada@example.org", True),
    ("email", "ada.example.org", False),
    ("uri", "https://example.org/a/b?c=d#e", True),
    ("uri", "urn:isbn:0451450523", True),
    ("uri", "mailto:ada@example.org", True),
    ("uri", "http://[2001:db8::1]:8080/", True),
    ("uri", "http://user:pw@host.example:81/p%20q", True),
    ("uri", "file:///etc/hosts", True),
    ("uri", "/relative/path", False),
    ("uri", "example.org", False),
    ("uri", "http://exa mple.org/", False),
    ("uri", "http://example.org/%zz", False),
    ("uri", "http://[not-an-ip]/", False),
    ("uri", "1http://example.org/", False),
    ("uuid", "0b5f1c5e-2b7c-4e7f-9a3e-2f1d8f6a9c10", True),
    ("uuid", "0b5f1c5e2b7c4e7f9a3e2f1d8f6a9c10", False),
    ("uuid", "not-a-uuid", False),
    ("ipv4", "192.168.0.1", True),
    ("ipv4", "256.1.1.1", False),
    ("ipv4", "01.2.3.4", False),
    ("ipv6", "2001:db8::1", True),
    ("ipv6", "fe80::1%eth0", False),
    ("ipv6", "2001:db8::g", False),
    ("hostname", "example.org", True),
    ("hostname", "a-b.example.org.", True),
    ("hostname", "-bad.example.org", False),
    ("hostname", "bad_.example.org", False),
    ("hostname", "a" * 64 + ".example.org", False),
    ("hostname", "", False),
]


@pytest.mark.parametrize(("name", "value", "conforms"), CASES)
def test_a_format_accepts_what_its_rfc_allows_and_nothing_else(name: str, value: str, conforms: bool) -> None:
    assert FORMAT_CHECKS[name](value) is conforms
    errors = payload_errors({"type": "string", "format": name}, value)
    assert errors == ([] if conforms else [""])


def test_every_required_format_has_a_check_and_cases() -> None:
    assert set(REQUIRED_FORMATS) == set(FORMAT_CHECKS)
    for name in REQUIRED_FORMATS:
        assert {conforms for format_name, _, conforms in CASES if format_name == name} == {True, False}


@pytest.mark.parametrize("name", sorted(FORMAT_CHECKS))
def test_a_value_that_is_not_a_string_conforms_to_every_format(name: str) -> None:
    assert FORMAT_CHECKS[name](7) is True


def test_a_format_that_is_not_ours_is_not_checked() -> None:
    """`regex`, `iri`, `duration` and the like are annotations only (JSON Schema 2020-12's default)."""
    assert payload_errors({"type": "string", "format": "duration"}, "not a duration") == []


#: jsonschema's optional format packages, made unimportable in the child below.
FORMAT_PACKAGES = ("rfc3987_syntax", "rfc3987", "rfc3339_validator", "rfc3986_validator", "fqdn", "webcolors")
FORMATS_WITHOUT_PACKAGES = f"""
import sys
for name in {FORMAT_PACKAGES!r}:
    sys.modules[name] = None  # an import of it raises ImportError, as if it were not installed
from agui_bridge.validation.answers import payload_errors
bad = {{"date-time": "yesterday", "time": "noon", "uri": "not a uri", "hostname": "-x-"}}
print(",".join(sorted(name for name, value in bad.items() if payload_errors({{"format": name}}, value) == [""])))
"""


def test_answer_formats_are_checked_without_jsonschemas_optional_packages() -> None:
    """A fresh install has none of them (no `format` extra): the formats must still be checked."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", FORMATS_WITHOUT_PACKAGES], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "date-time,hostname,time,uri"


@pytest.mark.parametrize(
    ("name", "prefix"),
    [("uri", "https://example.com/"), ("email", "someone@example.com/")],
)
def test_a_string_over_the_format_bound_conforms_to_no_format(name: str, prefix: str) -> None:
    """A megabyte "URI" is refused by its length, before any pattern scans it (docs/design.md#answer-validation)."""
    check = FORMAT_CHECKS[name]
    longest = prefix + "a" * (MAX_FORMAT_VALUE_CHARS - len(prefix))
    assert check(longest)
    assert not check(longest + "a")
    assert not check(prefix + "a" * (12 * 1024 * 1024))
