"""Thread file stems (docs/design.md#state-location) and contextId derivation (docs/design.md#thread-binding)."""

from __future__ import annotations

import hashlib

import pytest

from agui_bridge.store.errors import InvalidThreadId
from agui_bridge.store.keys import context_id_for, thread_file_stem


def _hex(value: str) -> str:
    return "aguiid~" + value.encode("utf-8").hex()


def _hash(value: str) -> str:
    return "aguihash~" + hashlib.sha256(value.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    ("thread_id", "stem"),
    [
        ("8473547e-c8ed-4aef-a84c-603a6a8d42da", "8473547e-c8ed-4aef-a84c-603a6a8d42da"),
        ("Thread-1", "aguiid~5468726561642d31"),
        ("thread-1", "thread-1"),
        ("../external/thread", _hex("../external/thread")),
        ("T" * 115, _hash("T" * 115)),
        ("会话" * 40, _hash("会话" * 40)),
        ("a", "a"),
        ("123", "123"),
        ("a_b.c-d", "a_b.c-d"),
        (".hidden", ".hidden"),
        (".", _hex(".")),
        ("..", _hex("..")),
        ("abc.", _hex("abc.")),
        ("con", _hex("con")),
        ("con.txt", _hex("con.txt")),
        ("nul.tar.gz", _hex("nul.tar.gz")),
        ("com1", _hex("com1")),
        ("lpt9.log", _hex("lpt9.log")),
        ("com10", "com10"),
        ("console", "console"),
        ("a b", _hex("a b")),
        ("a/b", _hex("a/b")),
        ("x\x00y", _hex("x\x00y")),
        ("T" * 96, _hex("T" * 96)),  # 7 + 192 = 199 characters: still reversible
        ("T" * 97, _hash("T" * 97)),  # 7 + 194 = 201 characters: hashed
    ],
)
def test_thread_file_stem_when_examples(thread_id: str, stem: str) -> None:
    assert thread_file_stem(thread_id) == stem


def test_thread_file_stem_names_stay_short_when_ids_are_long() -> None:
    assert len(thread_file_stem("T" * 115) + ".json") < 100
    assert len(thread_file_stem("会话" * 40) + ".json") < 100


@pytest.mark.parametrize("thread_id", ["", "\ud800"])
def test_thread_file_stem_refuses_when_id_is_empty_or_not_unicode(thread_id: str) -> None:
    with pytest.raises(InvalidThreadId):
        thread_file_stem(thread_id)
    with pytest.raises(InvalidThreadId):
        context_id_for(thread_id)


def test_context_id_is_prefix_and_40_hex_of_sha256() -> None:
    expected = "agui-" + hashlib.sha256(b"thread-1").hexdigest()[:40]
    assert context_id_for("thread-1") == expected
    assert len(context_id_for("会话")) == 45
