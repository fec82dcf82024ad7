"""Bounded input through the Flask test client: a literal cwd, capped ids, message counts and nesting,
and slow uploads (docs/design.md#workspace-cwd, docs/design.md#decision-bounded-state).

A cwd is never expanded with the server's environment (that would leak its secrets into paths), every
size a client controls has a cap, and an over-long id is the client's mistake (INVALID_INPUT), not a 503.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from agui_bridge.config import limits
from agui_bridge.config.settings import Settings


def body(workspace: Path, **changes: Any) -> dict[str, Any]:
    iac = {"schemaVersion": 1, "rosInvocationId": "inv-1", "cwd": str(workspace)}
    iac.update(changes.pop("iac", {}))
    base: dict[str, Any] = {
        "threadId": f"t-{uuid.uuid4().hex}",
        "runId": f"r-{uuid.uuid4().hex}",
        "state": {},
        "messages": [{"id": "m-1", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": iac},
    }
    base.update(changes)
    return base


def post(client: FlaskClient, payload: Any) -> tuple[int, dict[str, Any]]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    response = client.post("/", data=raw, content_type="application/json")
    if response.status_code == 200:
        response.get_data()
        return 200, {}
    return response.status_code, response.get_json()


def assert_invalid(status: int, document: dict[str, Any], field: str) -> None:
    assert status == 400, document
    assert document["error"]["code"] == "INVALID_INPUT", document
    assert document["error"]["field"] == field, document
    assert document["error"]["message"]


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    secret = "tok-" + uuid.uuid4().hex
    monkeypatch.setenv("IAC_CODE_AGUI_A2A_TOKEN", secret)
    return secret


# ------------------------------------------------------------------------------------------ the cwd is literal


def test_cwd_is_not_expanded_with_the_server_environment(
    client: FlaskClient, workspace: Path, secret_env: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    literal = f"{workspace}/$IAC_CODE_AGUI_A2A_TOKEN"
    status, _ = post(client, body(workspace, iac={"cwd": literal}))
    assert status == 200
    names = [path.name for path in tmp_path.rglob("*")]
    assert secret_env not in " ".join(names)
    assert (workspace / "$IAC_CODE_AGUI_A2A_TOKEN").is_dir()  # taken literally, inside the root
    assert secret_env not in caplog.text


@pytest.mark.parametrize("raw", ["~/work", "~root/work", "$HOME/work", "%USERPROFILE%/work"])
def test_tilde_and_variables_are_not_absolute(client: FlaskClient, workspace: Path, raw: str) -> None:
    status, document = post(client, body(workspace, iac={"cwd": raw}))
    assert_invalid(status, document, "/forwardedProps/iacCode/cwd")


def test_percent_variables_stay_literal(client: FlaskClient, workspace: Path, secret_env: str) -> None:
    status, _ = post(client, body(workspace, iac={"cwd": f"{workspace}/%IAC_CODE_AGUI_A2A_TOKEN%"}))
    assert status == 200
    assert (workspace / "%IAC_CODE_AGUI_A2A_TOKEN%").is_dir()


# ------------------------------------------------------------------------------ lengths the file system refuses


def test_long_cwd_component_is_invalid_input_not_oserror(
    client: FlaskClient, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    status, document = post(client, body(workspace, iac={"cwd": f"{workspace}/{'a' * 256}"}))
    assert_invalid(status, document, "/forwardedProps/iacCode/cwd")
    assert "File name too long" not in caplog.text and "Errno" not in caplog.text
    assert not any(len(p.name) > 255 for p in workspace.iterdir())


def test_cwd_over_path_max_is_invalid_input(client: FlaskClient, workspace: Path) -> None:
    deep = str(workspace) + ("/" + "d" * 200) * 25
    status, document = post(client, body(workspace, iac={"cwd": deep}))
    assert_invalid(status, document, "/forwardedProps/iacCode/cwd")
    assert list(workspace.iterdir()) == []


def test_long_lowercase_thread_id_is_invalid_input(client: FlaskClient, workspace: Path) -> None:
    status, document = post(client, body(workspace, threadId="a" * 246))
    assert_invalid(status, document, "/threadId")


def test_thread_id_at_the_cap_is_accepted(client: FlaskClient, workspace: Path) -> None:
    status, _ = post(client, body(workspace, threadId="b" * limits.MAX_ID_CHARS))
    assert status == 200


def test_extensions_refuse_long_ids_without_503(client: FlaskClient, settings: Settings) -> None:
    long_id = "c" * 300
    cancel = client.post(
        "/extensions/iac-code/v1/executions/e-1/cancel", json={"threadId": long_id, "rosInvocationId": "inv"}
    )
    assert cancel.status_code == 400 and cancel.get_json()["error"]["field"] == "/threadId"
    status = client.post(f"/extensions/iac-code/v1/threads/{long_id}/status", json={"rosInvocationId": "inv"})
    assert status.status_code == 404, status.get_data()
    cancel = client.post(
        f"/extensions/iac-code/v1/executions/{long_id}/cancel", json={"threadId": "t", "rosInvocationId": "inv"}
    )
    assert cancel.status_code == 404, cancel.get_data()


# ------------------------------------------------------------------------------------------ sizes and nesting


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"runId": "r" * (limits.MAX_ID_CHARS + 1)}, "/runId"),
        ({"parentRunId": "p" * (limits.MAX_ID_CHARS + 1)}, "/parentRunId"),
        ({"iac": {"userId": "u" * (limits.MAX_ID_CHARS + 1)}}, "/forwardedProps/iacCode/userId"),
        ({"messages": [{"id": "m" * (limits.MAX_ID_CHARS + 1), "role": "user", "content": "x"}]}, "/messages/0/id"),
        ({"resume": [{"interruptId": "i" * (limits.MAX_ID_CHARS + 1), "status": "resolved"}]}, "/resume/0/interruptId"),
    ],
)
def test_id_lengths_are_capped(
    client: FlaskClient, workspace: Path, state_dir: Path, change: dict[str, Any], field: str
) -> None:
    status, document = post(client, body(workspace, **change))
    assert_invalid(status, document, field)
    assert not (state_dir / "threads").exists() or not any((state_dir / "threads").glob("*.json"))


def test_message_count_is_capped(client: FlaskClient, workspace: Path) -> None:
    messages = [{"id": f"m{i}", "role": "user", "content": "x"} for i in range(limits.MAX_MESSAGES + 1)]
    status, document = post(client, body(workspace, messages=messages))
    assert_invalid(status, document, "/messages")


def test_total_parts_are_capped(client: FlaskClient, workspace: Path) -> None:
    part = {"type": "text", "text": "x"}
    per_message = 100
    count = limits.MAX_CONTENT_PARTS // per_message + 1
    messages = [{"id": f"m{i}", "role": "user", "content": [part] * per_message} for i in range(count)]
    status, document = post(client, body(workspace, messages=messages))
    assert_invalid(status, document, f"/messages/{count - 1}/content")


def test_message_text_is_capped(client: FlaskClient, workspace: Path) -> None:
    text = "x" * (limits.MAX_MESSAGE_TEXT_CHARS + 1)
    status, document = post(client, body(workspace, messages=[{"id": "m", "role": "user", "content": text}]))
    assert_invalid(status, document, "/messages/0/content")


def test_900_levels_of_nesting_is_invalid_input(client: FlaskClient, workspace: Path) -> None:
    deep: Any = "leaf"
    for _ in range(900):
        deep = [deep]
    status, document = post(client, body(workspace, state={"deep": deep}))
    assert status == 400 and document["error"]["code"] == "INVALID_INPUT", document
    assert document["error"]["field"].startswith("/state/deep/0/0/0")


def test_nesting_beyond_the_decoder_is_invalid_input(client: FlaskClient) -> None:
    raw = b'{"state":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    status, document = post(client, raw)
    assert status == 400 and document["error"]["code"] == "INVALID_INPUT", document


def test_total_json_values_are_capped(client: FlaskClient, workspace: Path) -> None:
    status, document = post(client, body(workspace, state={"v": [0] * limits.MAX_JSON_VALUES}))
    assert status == 400 and document["error"]["code"] == "INVALID_INPUT", document
    assert document["error"]["field"] == ""


def test_hostile_maximal_body_is_refused_quickly(client: FlaskClient, workspace: Path) -> None:
    """The 12 MiB body of ~300k tiny messages (seconds of CPU to validate) is refused before it is even
    decoded, by the value cap (its commas outside strings alone exceed it)."""
    one = b'{"id":"m","role":"user","content":"x"},'
    count = (12 * 1024 * 1024 - 4096) // len(one)
    raw = b'{"threadId":"t","runId":"r","messages":[' + one * (count - 1) + one[:-1] + b"]}"
    assert len(raw) <= 12 * 1024 * 1024
    started = time.process_time()
    status, document = post(client, raw)
    assert_invalid(status, document, "")
    assert document["error"]["message"] == "The request body contains too many JSON values (at most 100000)."
    # Not a timing assertion on wall time: CPU seconds of this process only guard against falling back
    # to whole-schema validation (which takes over 15 s here).
    assert time.process_time() - started < 10


# ------------------------------------------------------------------------------------------ slow uploads


class _SlowStream(io.RawIOBase):
    """A request body that delivers one byte per `delay_s`."""

    def __init__(self, data: bytes, delay_s: float) -> None:
        self._data = data
        self._delay_s = delay_s

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._data:
            return 0
        time.sleep(self._delay_s)
        buffer[0:1] = self._data[:1]
        self._data = self._data[1:]
        return 1


def test_slow_upload_is_dropped_with_a_localised_error(
    app: Flask, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "UPLOAD_GRACE_S", 0.05)
    monkeypatch.setattr(limits, "UPLOAD_MIN_BYTES_PER_S", 10_000_000)
    monkeypatch.setattr(limits, "UPLOAD_DEADLINE_S", 0.2)
    raw = json.dumps(body(workspace)).encode()
    response = app.test_client().post(
        "/",
        content_type="application/json",
        headers={"Accept-Language": "de"},
        environ_overrides={"wsgi.input": _SlowStream(raw, 0.01), "CONTENT_LENGTH": str(len(raw))},
    )
    assert response.status_code == 400, response.get_data()
    error = response.get_json()["error"]
    assert error["code"] == "INVALID_JSON"
    assert error["message"] == "Der Inhalt der Anfrage kam zu langsam an und wurde nicht angenommen."


def test_a_normal_upload_is_not_affected_by_the_pace_rule(client: FlaskClient, workspace: Path) -> None:
    status, _ = post(client, body(workspace))
    assert status == 200
