"""Control characters in client-controlled text: one definition for ids, log lines and the terminal.

An id that ends up in a URL refuses C0, DEL and C1 (docs/design.md#input-validation); a log line and a
terminal also escape what reads other than it is (the Unicode line/paragraph separators and the
bidirectional overrides). The terminal keeps tab and line feed as the text's own layout. A lone surrogate
(valid JSON as an escape, and in argv under a non-UTF-8 locale) cannot be written as UTF-8 at all. Pure.
"""

from __future__ import annotations

import re

__all__ = ["ID_CONTROL", "LOG_CONTROL", "TERMINAL_CONTROL", "encodes_as_utf8", "escape_matches"]

#: C0 (CR, LF, ESC...), DEL and C1 (CSI, OSC, NEL as single code points), as a character-class body.
_C0_DEL_C1 = r"\x00-\x1f\x7f-\x9f"
#: The same without tab and line feed.
_C0_DEL_C1_BUT_LAYOUT = r"\x00-\x08\x0b-\x1f\x7f-\x9f"
#: The Unicode line and paragraph separators and the bidirectional embeddings, overrides and isolates.
_UNICODE_STEERING = r"\u2028\u2029\u202a-\u202e\u2066-\u2069"

#: What an addressable id may not hold.
ID_CONTROL = re.compile(f"[{_C0_DEL_C1}]")
#: What ends a log line or steers a terminal somewhere a log is read.
LOG_CONTROL = re.compile(f"[{_C0_DEL_C1}{_UNICODE_STEERING}]")
#: What a terminal acts on instead of showing (tab and line feed excepted).
TERMINAL_CONTROL = re.compile(f"[{_C0_DEL_C1_BUT_LAYOUT}{_UNICODE_STEERING}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_matches(pattern: re.Pattern[str], text: str) -> str:
    """`text` with each character `pattern` matches replaced by its visible escape (`ESC` -> `\\x1b`)."""
    return pattern.sub(_visible, text)


def encodes_as_utf8(text: str) -> bool:
    """False for text holding a lone surrogate: it names nothing a UTF-8 answer or request could carry."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
