"""Timestamps and random ids as the kernel writes them on the wire (RFC 3339 in ms, ``<prefix>-<hex>``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def now() -> datetime:
    """The current time, UTC."""
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    """``2026-01-01T00:00:00.000Z``."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def hex_id(prefix: str) -> str:
    """``<prefix>-<32 hex digits>``."""
    return f"{prefix}-{uuid.uuid4().hex}"
