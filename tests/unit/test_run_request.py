"""`POST /`'s body read once (runs/request.py): the validated input, the language of every answer
(`i18n.select_language`) and the request digest (docs/design.md#pre-stream-checks, #language-selection)."""

from __future__ import annotations

from typing import Any

import pytest

from agui_bridge.errors import InvalidInput
from agui_bridge.protocol.digest import request_digest
from agui_bridge.runs.request import RunRequest, read_run_request
from agui_bridge.testing import run_input


def _valid(**iac_code: Any) -> dict[str, Any]:
    return run_input("thread-1", "hi", "/tmp", run_id="run-1", **iac_code)


def _without_thread_id(**iac_code: Any) -> dict[str, Any]:
    body = _valid(**iac_code)
    del body["threadId"]
    return body


def _snake_case_props(language: str) -> dict[str, Any]:
    body = _valid()
    body["forwarded_props"] = {"iac_code": {**body.pop("forwardedProps")["iacCode"], "preferred_language": language}}
    return body


@pytest.mark.parametrize(
    ("body", "accept_language", "default", "language"),
    [
        (_valid(preferredLanguage="zh-CN"), "ja-JP, en;q=0.5", "en", "zh"),  # the body's preference wins
        (_valid(), "ja-JP, en;q=0.5", "en", "ja"),  # none in the body: Accept-Language
        (_valid(preferredLanguage="ko"), "fr", "en", "fr"),  # unsupported in the body: Accept-Language
        (_valid(preferredLanguage="ko"), None, "de", "de"),  # nothing usable: the process default
        (_valid(), "en;q=0.2, pt-BR;q=1", "en", "pt"),  # the highest weight
        (_snake_case_props("es"), "fr", "en", "es"),  # the snake_case spelling counts too
        (_without_thread_id(preferredLanguage="zh-CN"), "ja", "en", "zh"),  # even an envelope error
        (_without_thread_id(preferredLanguage=5), "ja", "en", "ja"),  # not a string: Accept-Language
        (_without_thread_id(), None, "fr", "fr"),
    ],
)
def test_the_language_of_the_answers_is_select_languages_choice(
    body: dict[str, Any], accept_language: str | None, default: str, language: str
) -> None:
    assert read_run_request(body, accept_language, default).language == language


def test_a_valid_body_carries_its_input_and_digest() -> None:
    body = _valid(preferredLanguage="de")
    request = read_run_request(body, None, "en")
    run = request.run_input()
    assert (run.thread_id, run.run_id, run.props.preferred_language) == ("thread-1", "run-1", "de")
    assert request.digest == request_digest(body)


def test_each_resume_answer_carries_its_digest_from_the_request_step() -> None:
    """The answers' digests are computed with the body's validation (off the hub for a large body), not by the
    resume preflight (docs/design.md#exactly-once)."""
    body = _valid()
    body["resume"] = [
        {"interruptId": "p1", "status": "resolved", "payload": {"b": 1, "a": "é"}},
        {"interruptId": "q1", "status": "cancelled"},
    ]
    resume = read_run_request(body, None, "en").run_input().resume
    assert resume is not None
    assert [answer.digest for answer in resume] == [
        request_digest({"status": "resolved", "payload": {"a": "é", "b": 1}}),
        request_digest({"status": "cancelled", "payload": None}),
    ]


def test_a_refused_body_keeps_its_first_error_for_the_service_to_raise() -> None:
    request = read_run_request(_without_thread_id(), None, "en")
    assert request.digest == ""  # no run is admitted: no digest is computed
    with pytest.raises(InvalidInput) as raised:
        request.run_input()
    assert (raised.value.field, raised.value.message_key) == ("/threadId", "field_required")


def test_a_run_request_is_immutable() -> None:
    request = read_run_request(_valid(), None, "en")
    with pytest.raises(AttributeError):
        request.language = "fr"  # type: ignore[misc]
    assert isinstance(request, RunRequest)
