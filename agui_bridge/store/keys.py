"""Pure derivations from a threadId: the state file stem (docs/design.md#state-location) and the A2A contextId
(docs/design.md#thread-binding).

Both are deterministic so every worker, host and restart agrees on them.
"""

from __future__ import annotations

import hashlib
import re

from agui_bridge.store.errors import InvalidThreadId

ENCODED_PREFIX = "aguiid~"
HASHED_PREFIX = "aguihash~"
MAX_STEM_LENGTH = 200
CONTEXT_ID_PREFIX = "agui-"

_SAFE_THREAD_ID = re.compile(r"[A-Za-z0-9_.-]+")
_WINDOWS_DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}
)


def _utf8(thread_id: str) -> bytes:
    if not thread_id:
        raise InvalidThreadId("thread id is empty")
    try:
        return thread_id.encode("utf-8")
    except UnicodeEncodeError:
        # JSON can carry lone surrogates ("\ud800"); they have no UTF-8 form, so no stable key.
        raise InvalidThreadId("thread id is not valid Unicode") from None


def _is_verbatim_safe(thread_id: str) -> bool:
    """Lower-case only so `Thread-1` and `thread-1` never share a file on case-insensitive filesystems."""
    if _SAFE_THREAD_ID.fullmatch(thread_id) is None or thread_id != thread_id.lower():
        return False
    if thread_id in {".", ".."} or thread_id.endswith("."):
        return False
    first_segment = thread_id.rstrip(".").split(".", 1)[0].upper()
    return first_segment not in _WINDOWS_DEVICE_NAMES


def thread_file_stem(thread_id: str) -> str:
    """File stem for a thread: verbatim if safe, else reversible hex, else a fixed-length hash."""
    raw = _utf8(thread_id)
    if _is_verbatim_safe(thread_id):
        return thread_id
    encoded = ENCODED_PREFIX + raw.hex()
    if len(encoded) <= MAX_STEM_LENGTH:
        return encoded
    return HASHED_PREFIX + hashlib.sha256(raw).hexdigest()


def context_id_for(thread_id: str) -> str:
    """A2A contextId of a thread: "agui-" + first 40 hex of SHA-256(UTF-8 threadId)."""
    return CONTEXT_ID_PREFIX + hashlib.sha256(_utf8(thread_id)).hexdigest()[:40]
