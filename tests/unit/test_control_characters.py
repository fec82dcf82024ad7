"""Each reader of client text escapes (or refuses) exactly its own set of control characters."""

from __future__ import annotations

import re

import pytest

from agui_bridge.protocol.control import ID_CONTROL, LOG_CONTROL, TERMINAL_CONTROL, escape_matches

# character, refused in an id, escaped in a log line, escaped on the terminal
CASES = [
    ("\x00", True, True, True),
    ("\t", True, True, False),  # the terminal keeps the text's own layout
    ("\n", True, True, False),
    ("\r", True, True, True),
    ("\x1b", True, True, True),
    ("\x7f", True, True, True),
    ("\x85", True, True, True),  # NEL
    ("\x9b", True, True, True),  # CSI
    ("\u2028", False, True, True),  # line separator: fine in a URL path, a forged line in a log
    ("\u202e", False, True, True),  # right-to-left override
    ("\u2067", False, True, True),  # right-to-left isolate
    ("a", False, False, False),
    ("é", False, False, False),
    ("\u200b", False, False, False),  # zero width space: invisible, but steers nothing
]


@pytest.mark.parametrize(("char", "in_id", "in_log", "on_terminal"), CASES)
def test_each_reader_has_its_own_set_of_control_characters(
    char: str, in_id: bool, in_log: bool, on_terminal: bool
) -> None:
    patterns: list[re.Pattern[str]] = [ID_CONTROL, LOG_CONTROL, TERMINAL_CONTROL]
    assert [p.search(char) is not None for p in patterns] == [in_id, in_log, on_terminal]


@pytest.mark.parametrize(
    ("text", "escaped"),
    [("a\x1b[2Jb", "a\\x1b[2Jb"), ("x\u202ey", "x\\u202ey"), ("line\nnext", "line\\x0anext"), ("plain", "plain")],
)
def test_an_escaped_control_character_is_visible_as_its_code(text: str, escaped: str) -> None:
    assert escape_matches(LOG_CONTROL, text) == escaped
