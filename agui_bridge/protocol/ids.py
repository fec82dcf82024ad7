"""Ids the bridge emits are ids it accepts back (pure; docs/design.md#emitted-ids).

AG-UI clients send their message history (and interrupt ids) back on every run, and the input caps
every id at `limits.MAX_ID_CHARS`. Ids the bridge makes from the thread id, the Pipeline run id or the
kernel's ids can be longer than that, so every emitted id goes through `emitted_id`: a short,
printable id without `/` is kept as it is; any other is replaced by a readable prefix and the
SHA-256 of the whole source. The result depends on the source alone (no salt, no state), so the same
kernel ids give the same AG-UI ids in every worker, after a restart, on reattach and on resume.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

from agui_bridge.config import limits

__all__ = ["DIGEST_SEPARATOR", "MAX_EMITTED_ID_CHARS", "emitted_id"]

#: Every emitted id is at most this long: well under the input cap, so a client may wrap it once more.
MAX_EMITTED_ID_CHARS: Final = 128
#: Between the readable prefix and the digest of a derived id.
DIGEST_SEPARATOR: Final = "~"
_PREFIX_CHARS: Final = 40
_DIGEST_CHARS: Final = 52  # base32 of 32 bytes, padding dropped

assert _PREFIX_CHARS + len(DIGEST_SEPARATOR) + _DIGEST_CHARS <= MAX_EMITTED_ID_CHARS < limits.MAX_ID_CHARS


def _kept(source: str) -> bool:
    return 0 < len(source) <= MAX_EMITTED_ID_CHARS and source.isprintable() and "/" not in source


def emitted_id(source: str) -> str:
    """`source` itself when it is short, printable and has no `/`; else `<prefix>~<sha256 base32>`.

    Idempotent: a derived id is kept as it is, so wrapping an emitted id again changes nothing.
    """
    if _kept(source):
        return source
    raw = hashlib.sha256(source.encode("utf-8", "surrogatepass")).digest()
    digest = base64.b32encode(raw).decode("ascii").rstrip("=").lower()
    prefix = "".join(c if c.isprintable() and c != "/" else "_" for c in source[:_PREFIX_CHARS])
    return f"{prefix}{DIGEST_SEPARATOR}{digest}"
