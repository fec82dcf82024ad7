"""Request digests for run idempotency (docs/design.md#request-digest): canonical JSON, Python number rules."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def request_digest(raw: Any) -> str:
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
