"""Language selection and catalogue completeness (docs/design.md#language-selection)."""

from __future__ import annotations

import ast
import configparser
import json
import re
from importlib import resources
from pathlib import Path

import pytest

from agui_bridge.i18n.language import (
    IDENTICAL_TO_ENGLISH_ALLOWED,
    SUPPORTED,
    language_from_accept,
    normalise_language,
    process_default_language,
    select_language,
    translate,
)
from agui_bridge.i18n.message_keys import MessageKey

REPO = Path(__file__).resolve().parents[2]


def _shipped(language: str) -> dict[str, str]:
    """The catalogue file of `language` as the installed package ships it."""
    text = resources.files("agui_bridge.i18n").joinpath("catalog", f"{language}.json").read_text(encoding="utf-8")
    entries: dict[str, str] = json.loads(text)
    return entries


CATALOG = {language: _shipped(language) for language in SUPPORTED}
KEYS = sorted(CATALOG["en"])

REQUIRED_KEYS = tuple(
    """
unauthorized unsupported_media_type request_too_large cancel_request_too_large invalid_json
cancel_invalid_json not_an_object invalid_envelope invalid_forwarded_props cancel_not_an_object
cancel_fields_required new_run_requires_user_message unsupported_content remote_media image_media_type
image_base64 image_too_large images_too_large image_invalid state_unavailable service_unavailable
run_id_used thread_busy thread_binding_conflict resume_required execution_lost resume_mismatch
task_unavailable session_unavailable execution_not_found resume_duplicate_ids resume_incomplete
unknown_interrupt resume_payload_required resume_payload_invalid resume_no_answer resume_already_applied
execution_expired task_mapping_failed session_mapping_failed interrupt_commit_failed answer_commit_failed
session_backup_not_ready a2a_unavailable a2a_rejected_answer a2a_answer_not_accepted
a2a_permission_not_accepted context_changed task_changed session_changed task_mismatch
interrupt_other_task interrupt_other_context execution_failed cancelled cancelled_by_answer
permission_required input_required tools_not_supported cwd_not_absolute cwd_invalid cwd_outside_roots
cwd_not_directory cwd_cannot_create user_content_invalid internal_error
field_required field_unknown field_null field_conflict field_type_string field_type_integer
field_type_boolean field_type_object field_type_array field_type_content field_enum field_length
field_positive field_invalid schema_version forwarded_props_only_iaccode
""".split()  # noqa: SIM905 - a readable word list
)

PLACEHOLDER = re.compile(r"\{(\w+)\}")


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("en", "en"),
        ("zh-CN", "zh"),
        ("ja-JP", "ja"),
        (" FR_ca ", "fr"),
        ("pt-BR", "pt"),
        ("de", "de"),
        ("es-419", "es"),
        ("ko", None),
        ("", None),
        ("*", None),
        (None, None),
        (1, None),
        (["en"], None),
    ],
)
def test_normalise_language(tag: object, expected: str | None) -> None:
    assert normalise_language(tag) == expected


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "en"),
        ({"LANG": "de_DE.UTF-8"}, "de"),
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LANG": "C.UTF-8", "LC_MESSAGES": "ja_JP.UTF-8"}, "ja"),
        ({"LANGUAGE": "fr", "LC_ALL": "de_DE", "LANG": "es_ES"}, "fr"),
        ({"LANGUAGE": "", "LC_ALL": "ko_KR.UTF-8", "LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LANGUAGE": "pt_BR:en"}, "pt"),
        ({"LANG": "sr_RS@latin"}, "en"),
        ({"LANG": "POSIX"}, "en"),
    ],
)
def test_process_default_language(environ: dict[str, str], expected: str) -> None:
    assert process_default_language(environ) == expected


@pytest.mark.parametrize(
    ("header", "default", "expected"),
    [
        ("ja-JP, en;q=0.5", "en", "ja"),
        ("zh;q=0, en;q=0.2, ja;q=1", "en", "ja"),
        ("en;q=0.2, zh-CN;q=1", "en", "zh"),
        (None, "de", "de"),
        ("", "fr", "fr"),
        ("ko, it", "es", "es"),
        ("*", "pt", "pt"),
        ("ko, *;q=0.5", "ja", "ja"),
        ("fr;q=0.5, de;q=0.5", "en", "fr"),
        ("fr;Q=0.4, de;q=0.5", "en", "de"),
        ("fr;q=abc, de;q=0.1", "en", "de"),
        ("fr;q=1.5, de;q=0.1", "en", "de"),
        ("fr;q=nan, de;q=0.1", "en", "de"),
        ("fr;q=inf, de;q=0.1", "en", "de"),
        ("fr;q=-1", "zh", "zh"),
        (" , ;q=1, es", "en", "es"),
        ("es;level=1;q=0.9, en;q=0.8", "en", "es"),
        ("en", "xx", "en"),
        (None, "xx", "en"),
    ],
)
def test_language_from_accept(header: str | None, default: str, expected: str) -> None:
    assert language_from_accept(header, default) == expected


@pytest.mark.parametrize(
    ("accept", "preferred", "default", "expected"),
    [
        ("ja", "zh-CN", "en", "zh"),
        ("ja", "ko", "en", "ja"),
        ("ja", None, "en", "ja"),
        ("ja", 42, "en", "ja"),
        (None, None, "de", "de"),
        ("ko", "it", "fr", "fr"),
    ],
)
def test_select_language(accept: str | None, preferred: object, default: str, expected: str) -> None:
    assert select_language(accept, preferred, default) == expected


def test_every_required_key_is_present() -> None:
    missing = [key for key in REQUIRED_KEYS if key not in CATALOG["en"]]
    assert missing == []


def test_the_constants_are_exactly_the_catalogue_keys() -> None:
    assert sorted(key.value for key in MessageKey) == KEYS
    assert all(key.name == key.value.upper() for key in MessageKey)


@pytest.mark.parametrize("language", SUPPORTED)
def test_every_language_file_has_every_key(language: str) -> None:
    assert sorted(CATALOG[language]) == KEYS


@pytest.mark.parametrize("key", KEYS)
def test_catalog_entry_is_complete(key: str) -> None:
    english = CATALOG["en"][key]
    placeholders = set(PLACEHOLDER.findall(english))
    for language in SUPPORTED:
        text = CATALOG[language][key]
        assert text.strip(), (key, language)
        assert set(PLACEHOLDER.findall(text)) == placeholders, (key, language)
        if language != "en" and (key, language) not in IDENTICAL_TO_ENGLISH_ALLOWED:
            assert text != english, f"{key}/{language} is left in English"


def test_field_rule_messages_name_the_field() -> None:
    for key in KEYS:
        if key.startswith("field_") or key in {"schema_version", "forwarded_props_only_iaccode"}:
            assert "{field}" in CATALOG["en"][key], key


def test_the_catalogue_files_are_package_data() -> None:
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg", encoding="utf-8")
    patterns = [p.strip() for p in setup["options.package_data"]["agui_bridge.i18n.catalog"].split(",")]
    assert "*.json" in patterns  # the catalog ships with the package
    assert sorted(path.stem for path in (REPO / "agui_bridge" / "i18n" / "catalog").glob("*.json")) == sorted(SUPPORTED)


def _key_like_calls() -> list[tuple[str, int]]:
    """Message keys built with f-strings: a call to `translate` or a key argument given as an f-string."""
    found: list[tuple[str, int]] = []
    for path in (REPO / "agui_bridge").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            first = node.args[:1] if name == "translate" else []
            keyed = [kw.value for kw in node.keywords if kw.arg is not None and kw.arg.endswith("_key")]
            if any(isinstance(arg, ast.JoinedStr) for arg in [*first, *keyed]):
                found.append((str(path.relative_to(REPO)), node.lineno))
    return found


def test_no_message_key_is_built_with_an_f_string() -> None:
    assert _key_like_calls() == []


def test_nothing_depends_on_running_under_pytest() -> None:
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "agui_bridge").rglob("*.py")
        if "PYTEST_CURRENT_TEST" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("key", "language", "params", "expected"),
    [
        ("unauthorized", "en", {}, "A valid bearer token is required."),
        ("unauthorized", "de", {}, "Ein gültiges Bearer-Token ist erforderlich."),
        ("unauthorized", "ko", {}, "A valid bearer token is required."),
        ("unauthorized", "zh-CN", {}, "需要有效的 Bearer 令牌。"),
        ("field_required", "en", {"field": "threadId"}, "threadId is required."),
        (
            "field_enum",
            "fr",
            {"field": "runMode", "choices": "normal, pipeline"},
            "runMode doit être l'une des valeurs suivantes : normal, pipeline.",
        ),
        ("field_length", "en", {"field": "x"}, "x must be between {min} and {max} characters."),
        ("field_required", "en", {"field": "{evil}"}, "{evil} is required."),
        ("service_unavailable", "en", {}, "The AG-UI bridge is not accepting new runs right now. Retry later."),
    ],
)
def test_translate(key: str, language: str, params: dict[str, str], expected: str) -> None:
    assert translate(key, language, **params) == expected


def test_unknown_key_falls_back_and_is_reported(unknown_message_keys: list[str]) -> None:
    """The same in tests and at run time: the localised internal error, and an error log naming the key
    (which the `tests.support.message_key_check` plugin turns into a failure unless the test expects it)."""
    assert translate("no_such_key", "ja") == CATALOG["ja"]["internal_error"]
    assert unknown_message_keys == ["no_such_key"]
    unknown_message_keys.clear()


def test_constants_translate_like_their_key_strings() -> None:
    assert translate(MessageKey.EXECUTION_FAILED, "es") == "La ejecución A2A falló."
    assert translate(MessageKey.EXECUTION_FAILED, "es") == translate("execution_failed", "es")
