"""A body that names a top-level key twice is refused (400 INVALID_INPUT, localised) on `POST /`, the status route
and the cancel route: json keeps the last of two equal keys while HAProxy's json_query (the shipped config keys a
thread by `$.threadId`) reads the first, so such a body could be routed by one thread and served as another
(docs/design.md#pre-stream-checks, docs/http-api.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from agui_bridge.i18n.language import translate
from agui_bridge.testing import run_input
from agui_bridge.web.request_body import DuplicateKey, loads_unique_top_level
from tests.support.harness import new_thread_id

STATUS = "/extensions/iac-code/v1/threads/{thread}/status"
CANCEL = "/extensions/iac-code/v1/executions/execution-1/cancel"


def with_second_thread_id(body: dict[str, Any], raw_key: str = '"threadId"') -> bytes:
    """The body's JSON with another threadId appended at the top level, the way a hand-built body would."""
    text = json.dumps(body)
    return (text[:-1] + f', {raw_key}: "someone-else"}}').encode()


def assert_duplicate_refused(response: Any, key: str, lang: str = "en") -> None:
    assert response.status_code == 400, response.get_data(as_text=True)
    error = response.get_json()["error"]
    assert error["code"] == "INVALID_INPUT"
    assert error["field"] == "/" + key
    assert error["message"] == translate("duplicate_key", lang, name=json.dumps(key))


@pytest.mark.parametrize("lang", ["en", "fr", "ja"])
def test_a_run_naming_threadId_twice_is_refused_in_the_callers_language(
    client: FlaskClient, workspace: Path, lang: str
) -> None:
    body = with_second_thread_id(run_input(new_thread_id(), "hi", workspace))
    response = client.post("/", data=body, content_type="application/json", headers={"Accept-Language": lang})
    assert_duplicate_refused(response, "threadId", lang)


def test_a_large_run_naming_threadId_twice_is_refused_too(client: FlaskClient, workspace: Path) -> None:
    """Over 16 KiB the body is decoded off the hub: the same rule."""
    body = run_input(new_thread_id(), "x" * 40_000, workspace)
    response = client.post("/", data=with_second_thread_id(body), content_type="application/json")
    assert_duplicate_refused(response, "threadId")


def test_a_duplicate_written_with_escapes_is_still_a_duplicate(client: FlaskClient, workspace: Path) -> None:
    body = with_second_thread_id(run_input(new_thread_id(), "hi", workspace), raw_key='"thread\\u0049d"')
    response = client.post("/", data=body, content_type="application/json")
    assert_duplicate_refused(response, "threadId")


def test_the_status_route_refuses_a_body_naming_a_key_twice(client: FlaskClient) -> None:
    body = b'{"rosInvocationId": "invocation-1", "rosInvocationId": "invocation-2"}'
    response = client.post(STATUS.format(thread=new_thread_id()), data=body, content_type="application/json")
    assert_duplicate_refused(response, "rosInvocationId")


def test_the_cancel_route_refuses_a_body_naming_threadId_twice(client: FlaskClient) -> None:
    body = with_second_thread_id({"threadId": "thread-1", "rosInvocationId": "invocation-1"})
    response = client.post(CANCEL, data=body, content_type="application/json", headers={"Accept-Language": "de"})
    assert_duplicate_refused(response, "threadId", "de")


#: Each route reading a JSON body, with its own message for invalid JSON.
INVALID_JSON_KEY_BY_ROUTE = {
    "/": "invalid_json",
    STATUS.format(thread="thread-1"): "status_invalid_json",
    CANCEL: "cancel_invalid_json",
}


@pytest.mark.parametrize("path", list(INVALID_JSON_KEY_BY_ROUTE))
@pytest.mark.parametrize("body", [b'{"\\ud800": 1, "\\ud800": 2}', b'{"\xed\xa0\x80": 1, "\xed\xa0\x80": 2}'])
def test_a_repeated_key_holding_a_lone_surrogate_is_refused_with_a_json_answer(
    client: FlaskClient, caplog: pytest.LogCaptureFixture, path: str, body: bytes
) -> None:
    """The key is shown as its JSON escape and given no pointer: a raw surrogate cannot be written as UTF-8."""
    response = client.post(path, data=body, content_type="application/json")
    assert response.status_code == 400, response.get_data()
    error = json.loads(response.get_data().decode("utf-8"))["error"]
    assert error == {
        "code": "INVALID_INPUT",
        "message": translate("duplicate_key", "en", name='"\\ud800"'),
        "field": "",
    }
    assert not [record for record in caplog.records if record.exc_info], "no traceback is logged"


@pytest.mark.parametrize(("path", "invalid_json_key"), INVALID_JSON_KEY_BY_ROUTE.items())
def test_a_malformed_body_repeating_a_key_is_answered_as_invalid_json(
    client: FlaskClient, path: str, invalid_json_key: str
) -> None:
    """The repeated key is only reported for a body that parses: invalid JSON keeps the invalid-JSON answer."""
    response = client.post(path, data=b'{"a": 1, "a": 2,}', content_type="application/json")
    assert response.status_code == 400, response.get_data()
    error = response.get_json()["error"]
    assert error["code"] == "INVALID_JSON"
    assert error["message"] == translate(invalid_json_key, "en")


VALID = [
    b'{"a": 1, "b": {"c": [1, 2, {"d": null}]}}',
    b' \n{ "a" : "x" , "b" : [ ] }\t\r\n',
    b"{}",
    b'{"nested": {"k": 1, "k": 2}}',  # only the top level is checked: nested objects keep json's rule
    b'{"caf\\u00e9": "\\ud83d\\ude00", "t": "a\\"b"}',
    b"\xef\xbb\xbf" + b'{"bom": true}',
    b'[1, {"a": 1, "a": 2}]',
    b'"just a string"',
    b'{"n": NaN, "i": -Infinity, "f": 1.5e3}',
]
INVALID = [
    b"{",
    b'{"a": 1,}',
    b'{"a" 1}',
    b'{"a": 1 "b": 2}',
    b'{"a":}',
    b'{"a": 1}}',
    b'{"a": 1} x',
    b"{,}",
    b'{"a\x01": 1}',
    b"\xff{}",
    b"",
    b'{"a": 1, "a": 2,}',  # malformed after a repeated key: still json's error, not the duplicate's
    b'{"a": 1, "a": 2} x',
    b'{"a": 1, "a": 2, "b":}',
]


@pytest.mark.parametrize("body", VALID)
def test_a_body_without_top_level_duplicates_decodes_exactly_as_json_does(body: bytes) -> None:
    assert json.dumps(loads_unique_top_level(body)) == json.dumps(json.loads(body))


@pytest.mark.parametrize("body", INVALID)
def test_a_body_json_refuses_is_refused_as_invalid_json(body: bytes) -> None:
    with pytest.raises(ValueError) as refused:
        loads_unique_top_level(body)
    assert not isinstance(refused.value, DuplicateKey)
    with pytest.raises(ValueError):
        json.loads(body)


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (b'{"a": 1, "a": 1}', "a"),
        (b'{"threadId": "x", "runId": "r", "threadId": "y"}', "threadId"),
        (b'{"\\u0061": 1, "a": 2}', "a"),
    ],
)
def test_a_top_level_key_given_twice_is_named(body: bytes, key: str) -> None:
    with pytest.raises(DuplicateKey) as duplicate:
        loads_unique_top_level(body)
    assert duplicate.value.key == key
