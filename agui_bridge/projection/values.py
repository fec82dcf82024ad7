"""Small pure helpers for values that come from A2A metadata (protobuf Structs)."""

from __future__ import annotations

import json
from typing import Any

_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


def compact_json(value: Any) -> str:
    """Compact, key-sorted, non-ASCII literal JSON (TOOL_CALL_ARGS / result content)."""
    return _compact.encode(value)


def integral(value: Any) -> Any:
    """Turn protobuf's `20.0` back into `20`, recursively; other values unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value


def as_count(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return int(value)
    return 0


def non_empty_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
