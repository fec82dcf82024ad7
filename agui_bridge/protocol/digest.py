"""Request and answer digests (docs/design.md#request-digest, #exactly-once): canonical JSON, Python number rules.

In the pure core so that the validation builds each resume answer's digest with the answer
(`validation/results.ResumeAnswer`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def request_digest(raw: Any) -> str:
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def answer_digest(status: str, payload: object, has_payload: bool) -> str:
    """SHA-256 of a resume answer's canonical `{"status", "payload"}` (raw payload, null when absent;
    docs/design.md#exactly-once)."""
    return request_digest({"status": status, "payload": payload if has_payload else None})
