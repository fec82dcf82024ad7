"""The pure caps of `validation.bounds` and the literal cwd rule of `runs.workspace` (docs/design.md#workspace-cwd)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.config import limits
from agui_bridge.errors import InvalidInput
from agui_bridge.runs.workspace import literal_absolute_path, resolve_cwd
from agui_bridge.validation.bounds import check_body_bounds, check_json_shape, prescan_json_text


def nested(depth: int) -> Any:
    """`depth` arrays inside each other (scalars do not add a level)."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def test_depth_at_the_cap_passes_and_one_more_fails_with_a_pointer() -> None:
    check_json_shape(nested(limits.MAX_JSON_DEPTH))
    with pytest.raises(InvalidInput) as caught:
        check_json_shape({"a": nested(limits.MAX_JSON_DEPTH)})
    assert caught.value.message_key == "json_too_deep"
    assert caught.value.field == "/a" + "/0" * (limits.MAX_JSON_DEPTH - 1)


def test_depth_far_beyond_the_recursion_limit_is_invalid_input_not_recursion_error() -> None:
    with pytest.raises(InvalidInput):
        check_json_shape(nested(sys.getrecursionlimit() * 3))


def test_value_count_counts_every_value() -> None:
    check_json_shape([0] * (limits.MAX_JSON_VALUES - 1))  # the array itself is one value
    with pytest.raises(InvalidInput) as caught:
        check_json_shape([0] * limits.MAX_JSON_VALUES)
    assert caught.value.message_key == "json_too_many_values" and caught.value.field == ""


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"thread_id": "x" * (limits.MAX_ID_CHARS + 1)}, "/thread_id"),
        ({"messages": [{"id": "m", "role": "tool", "toolCallId": "c" * 201}]}, "/messages/0/toolCallId"),
        ({"messages": [{"id": "m", "toolCalls": [{"id": "c" * 201}]}]}, "/messages/0/toolCalls/0/id"),
        ({"context": [{}] * (limits.MAX_LIST_ITEMS + 1)}, "/context"),
        ({"tools": [{}] * (limits.MAX_LIST_ITEMS + 1)}, "/tools"),
        (
            {"forwarded_props": {"iac_code": {"ros_invocation_id": "r" * 257}}},
            "/forwarded_props/iac_code/ros_invocation_id",
        ),
    ],
)
def test_named_caps_point_at_the_spelling_used(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_body_bounds(body)
    assert caught.value.field == field


def test_wrong_types_are_left_to_the_schema() -> None:
    check_body_bounds({"threadId": 5, "messages": "no", "resume": {}, "forwardedProps": []})


@pytest.mark.parametrize("raw", ["", "relative", "~", "~/x", "$HOME", "${HOME}/x", "%APPDATA%"])
def test_nothing_is_expanded_and_relative_paths_are_refused(raw: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        literal_absolute_path(raw)
    assert caught.value.message_key == "cwd_not_absolute"


def test_literal_normalisation_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_VAR", "s3cr3t")
    assert literal_absolute_path("/a/./b//$SECRET_VAR/../c") == "/a/b/c"
    assert literal_absolute_path("/a/$SECRET_VAR") == "/a/$SECRET_VAR"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("/" + "a" * 256, "cwd_too_long"),
        ("/" + "é" * 128, "cwd_too_long"),  # 256 bytes in UTF-8
        ("/d" * 2049, "cwd_too_long"),
        ("/a\x00b", "cwd_invalid"),
        ("/a\ud800", "cwd_invalid"),
    ],
)
def test_lengths_are_checked_in_bytes_before_the_filesystem(raw: str, key: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        literal_absolute_path(raw)
    assert caught.value.message_key == key
    assert caught.value.field == "/forwardedProps/iacCode/cwd"


def test_resolve_cwd_creates_inside_a_root_only(tmp_path: Path) -> None:
    target = tmp_path / "new" / "dir"
    assert resolve_cwd(str(target), [tmp_path]) == str(target.resolve())
    assert target.is_dir()
    with pytest.raises(InvalidInput) as caught:
        resolve_cwd(str(tmp_path.parent / "elsewhere-bounds"), [tmp_path])
    assert caught.value.message_key == "cwd_outside_roots"
    assert not (tmp_path.parent / "elsewhere-bounds").exists()


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (b"[" + b'"a",' * limits.MAX_JSON_VALUES + b'"a"]', "json_too_many_values"),
        (b"[" + b"0," * limits.MAX_JSON_VALUES + b"0]", "json_too_many_values"),
        (
            b"[" * (limits.MAX_JSON_DEPTH + 1) + b"]" * (limits.MAX_JSON_DEPTH + 1) + b"," * limits.MAX_JSON_VALUES,
            "json_too_deep",
        ),
    ],
)
def test_prescan_refuses_before_decoding(body: bytes, key: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        prescan_json_text(body)
    assert caught.value.message_key == key


@pytest.mark.parametrize(
    "text",
    [
        '{"t": "' + "a,b,[{" * limits.MAX_JSON_VALUES + '"}',  # commas and brackets inside a string
        '{"t": "' + '\\\\\\",' * limits.MAX_JSON_VALUES + '"}',  # escaped quotes and backslashes
        "[" + "1," * 1000 + "1]",
    ],
)
def test_prescan_lets_bounded_bodies_through(text: str) -> None:
    prescan_json_text(text.encode())
