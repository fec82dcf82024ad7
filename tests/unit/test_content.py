"""User message -> A2A parts, image rules.

See docs/design.md#message-content and docs/design.md#decision-images-validated-passed-through.
"""

from __future__ import annotations

import base64

import pytest

from agui_bridge.errors import InvalidInput
from agui_bridge.validation import content
from agui_bridge.validation.content import detect_image_type, is_safe_filename, user_message_parts

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\x0dIHDR" + b"\x00" * 17
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 8
GIF = b"GIF89a" + b"\x01\x00\x01\x00" + b"\x00" * 8
WEBP = b"RIFF" + b"\x1a\x00\x00\x00" + b"WEBP" + b"VP8L" + b"\x00" * 8


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def image(data: str, mime: str = "image/png", filename: object = None, **source: object) -> dict[str, object]:
    part: dict[str, object] = {"type": "image", "source": {"type": "data", "value": data, "mimeType": mime, **source}}
    if filename is not None:
        part["metadata"] = {"filename": filename}
    return part


def user(content_value: object) -> list[dict[str, object]]:
    return [{"id": "m1", "role": "user", "content": content_value}]


def test_string_content() -> None:
    assert user_message_parts(user("hello")) == [{"text": "hello"}]
    assert user_message_parts(user("")) == [{"text": ""}]


def test_last_user_message_wins_and_other_roles_ignored() -> None:
    messages = [
        {"id": "1", "role": "user", "content": "first"},
        {"id": "2", "role": "assistant", "content": "reply"},
        {"id": "3", "role": "user", "content": "second"},
        {"id": "4", "role": "system", "content": "sys"},
    ]
    assert user_message_parts(messages) == [{"text": "second"}]


@pytest.mark.parametrize(
    "messages",
    [[], [{"id": "a", "role": "assistant", "content": "x"}], [{"id": "s", "role": "system", "content": "x"}]],
)
def test_no_user_message(messages: list[dict[str, object]]) -> None:
    with pytest.raises(InvalidInput) as info:
        user_message_parts(messages)
    assert info.value.message_key == "new_run_requires_user_message"


@pytest.mark.parametrize(
    ("data", "mime"), [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")]
)
def test_valid_images_pass_unchanged(data: bytes, mime: str) -> None:
    encoded = b64(data)
    parts = user_message_parts(user([{"type": "text", "text": "look"}, image(encoded, mime.upper())]))
    assert parts == [
        {"text": "look"},
        {"data": {"filename": "agui-image-2", "bytes": encoded}, "mediaType": mime},
    ]


def test_snake_case_mime_type_is_read() -> None:
    part = {"type": "image", "source": {"type": "data", "value": b64(PNG), "mime_type": "image/png"}}
    assert user_message_parts(user([part]))[0]["mediaType"] == "image/png"


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("before.png", "before.png"),
        ("../before.png", "agui-image-1"),
        ("CON", "agui-image-1"),
        (None, "agui-image-1"),
        ("con.txt", "agui-image-1"),
        ("LPT9", "agui-image-1"),
        ("COM10.png", "COM10.png"),
        ("a\\b.png", "agui-image-1"),
        ("what?.png", "agui-image-1"),
        ("trailing.", "agui-image-1"),
        ("trailing ", "agui-image-1"),
        (".", "agui-image-1"),
        ("..", "agui-image-1"),
        ("", "agui-image-1"),
        ("tab\there.png", "agui-image-1"),
        ("x" * 255, "x" * 255),
        ("x" * 256, "agui-image-1"),
        ("é" * 128, "agui-image-1"),
        ("图片.png", "图片.png"),
        (42, "agui-image-1"),
    ],
)
def test_filename_rule(filename: object, expected: str) -> None:
    part = image(b64(PNG), filename=filename if filename is not None else None)
    parts = user_message_parts(user([part]))
    assert parts[0]["data"] == {"filename": expected, "bytes": b64(PNG)}


def test_filename_index_counts_text_parts() -> None:
    parts = user_message_parts(
        user([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, image(b64(GIF), "image/gif")])
    )
    assert parts[2]["data"]["filename"] == "agui-image-3"  # type: ignore[index]


@pytest.mark.parametrize(
    ("part", "key"),
    [
        ({"type": "audio", "source": {"type": "data", "value": "", "mimeType": "audio/wav"}}, "unsupported_content"),
        ({"type": "video", "source": {"type": "url", "value": "http://x"}}, "unsupported_content"),
        (
            {"type": "document", "source": {"type": "data", "value": "", "mimeType": "application/pdf"}},
            "unsupported_content",
        ),
        ({"type": "binary", "mimeType": "image/png", "data": "AAAA"}, "unsupported_content"),
        ({"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}}, "remote_media"),
        ({"type": "image", "source": {"type": "file", "value": "file-123"}}, "unsupported_content"),
        (image(b64(PNG), "image/svg+xml"), "image_media_type"),
        (image(b64(PNG), "image/jpg"), "image_media_type"),
        (image(b64(PNG), ""), "image_media_type"),
        (image(b64(PNG) + "\n"), "image_base64"),
        (image(b64(PNG)[:-1]), "image_base64"),
        (image("iVBO R0=="), "image_base64"),
        (image("===="), "image_base64"),
        (image("ab=c"), "image_base64"),
        (image("aGk-_w=="), "image_base64"),
        (image("ｉＶＢＯ"), "image_base64"),
        (image(b64(JPEG), "image/png"), "image_invalid"),
        (image(b64(b"not an image at all")), "image_invalid"),
        (image(""), "image_invalid"),
        (image(b64(b"\x89PNG\r\n\x1a\n")), "image_invalid"),
        (image(b64(b"RIFF\x00\x00\x00\x00WAVEfmt ")), "image_invalid"),
        ({"type": "image"}, "user_content_invalid"),
        ({"type": "text", "text": 5}, "user_content_invalid"),
        ("just a string part", "user_content_invalid"),
    ],
)
def test_part_rejections(part: object, key: str) -> None:
    with pytest.raises(InvalidInput) as info:
        user_message_parts(user([{"type": "text", "text": "first"}, part]))
    assert info.value.message_key == key


def test_non_list_non_string_content() -> None:
    with pytest.raises(InvalidInput) as info:
        user_message_parts(user({"type": "text"}))
    assert info.value.message_key == "user_content_invalid"


def test_single_image_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(content, "MAX_IMAGE_BYTES", len(PNG) - 1)
    with pytest.raises(InvalidInput) as info:
        user_message_parts(user([image(b64(PNG))]))
    assert info.value.message_key == "image_too_large"


def test_total_image_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(content, "MAX_TOTAL_IMAGE_BYTES", len(PNG) * 2 - 1)
    assert len(user_message_parts(user([image(b64(PNG))]))) == 1
    with pytest.raises(InvalidInput) as info:
        user_message_parts(user([image(b64(PNG)), image(b64(PNG))]))
    assert info.value.message_key == "images_too_large"


def test_real_limits() -> None:
    assert content.MAX_IMAGE_BYTES == 8_388_608
    assert content.MAX_TOTAL_IMAGE_BYTES == 10_485_760
    big = PNG + b"\x00" * (8_388_608 - len(PNG) + 1)
    with pytest.raises(InvalidInput) as info:
        user_message_parts(user([image(b64(big))]))
    assert info.value.message_key == "image_too_large"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (b"GIF87a", "image/gif"),
        (WEBP, "image/webp"),
        (b"", None),
        (b"BM", None),
    ],
)
def test_detect_image_type(data: bytes, expected: str | None) -> None:
    assert detect_image_type(data) == expected


def test_is_safe_filename_examples() -> None:
    assert is_safe_filename("before.png")
    assert not is_safe_filename("../before.png")
    assert not is_safe_filename("CON")
    assert not is_safe_filename(None)
