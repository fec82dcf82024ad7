"""Every pre-stream error of POST / (docs/design.md#pre-stream-checks).

Also docs/design.md#authentication, docs/design.md#error-envelope, docs/design.md#language-selection,
docs/design.md#input-validation, docs/design.md#workspace-cwd, docs/design.md#thread-binding,
docs/design.md#request-digest, docs/design.md#admission and docs/design.md#decision-no-500.

One table: each row prepares whatever state it needs (crafted thread files, or a real turn against the
demo agent), sends one request through the Flask test client and checks status, code, JSON Pointer
``field`` (INVALID_INPUT only, docs/design.md#decision-field-specific-errors), the localised message and
that the body is a bare JSON envelope.
EXECUTION_NOT_FOUND belongs to the cancel route: tests/integration/test_cancel_extension.py checks it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import pytest
from flask.testing import FlaskClient

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.i18n.language import translate
from agui_bridge.store import model
from agui_bridge.store.owner import current_owner
from agui_bridge.store.store import ThreadStore
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import new_thread_id, run_body

TOKEN = "s3cret"
MAX_BODY = 12 * 1024 * 1024
CWD_FIELD = "/forwardedProps/iacCode/cwd"
JSON = "application/json"


@dataclass
class Env:
    """What a row may use to prepare its request."""

    client: FlaskClient
    tmp_path: Path
    workspace: Path
    store: ThreadStore
    thread_id: str = field(default_factory=new_thread_id)

    def body(self, text: str = "hi", **props: Any) -> dict[str, Any]:
        return run_body(self.thread_id, text, self.workspace, **props)

    def complete_turn(self, body: dict[str, Any]) -> None:
        """Run one real turn against the demo agent (creates the thread binding and run digest)."""
        response = self.client.post("/", json=body, headers=self.auth())
        assert response.status_code == 200, response.get_data(as_text=True)
        assert_valid_agui_stream(response.get_data(), expect_terminal="success")

    @staticmethod
    def auth() -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}

    def craft_thread(self, *, lease: bool = False, pending: bool = False) -> None:
        """Write a bound thread (this workspace, no userId) with a live lease or a pending interrupt."""
        now_ms = time.time_ns() // 1_000_000
        state = model.new_thread(self.thread_id, str(self.workspace.resolve()), None, "invocation-1", str(uuid.uuid4()))
        if lease:
            state.active_run = model.RunLease(
                run_id="run-elsewhere",
                execution_id=state.execution.execution_id,
                owner=current_owner(),
                expires_at_ms=now_ms + 600_000,
            )
        if pending:
            state.execution.task_id = "task-crafted"
            state.execution.pending["input-1"] = model.PendingInterrupt(
                value={"inputId": "input-1", "kind": "question", "prompt": "Which region?", "required": True},
                sideband=False,
                expires_at_ms=now_ms + 600_000,
            )
        with self.store.transaction(self.thread_id) as txn:
            assert txn.state is None
            txn.commit(state)


Request = dict[str, Any]


def post_json(body: Any, **headers: str) -> Request:
    return {"data": json.dumps(body, ensure_ascii=False).encode(), "headers": {"Content-Type": JSON, **headers}}


@dataclass(frozen=True)
class Row:
    id: str
    build: Callable[[Env], Request]
    status: int
    code: str
    key: str
    params: dict[str, str] = field(default_factory=dict)
    field: str | None = None
    lang: str = "en"
    auth: bool = False  # build the app with auth_token=TOKEN (the request then needs the bearer)


# ------------------------------------------------------------------------------------------ row builders


def _mutated(mutate: Callable[[dict[str, Any], Env], None]) -> Callable[[Env], Request]:
    def build(env: Env) -> Request:
        body = env.body()
        mutate(body, env)
        return post_json(body)

    return build


def _iac(**changes: Any) -> Callable[[dict[str, Any], Env], None]:
    def mutate(body: dict[str, Any], _env: Env) -> None:
        body["forwardedProps"]["iacCode"].update(changes)

    return mutate


def _auth_header(value: str) -> Callable[[Env], Request]:
    return lambda env: post_json(env.body(), Authorization=value)


def _cwd(make: Callable[[Env], str]) -> Callable[[Env], Request]:
    def build(env: Env) -> Request:
        return post_json(run_body(env.thread_id, "hi", make(env)))

    return build


def _file_cwd(env: Env) -> str:
    path = env.tmp_path / "a-file"
    path.write_text("not a directory")
    return str(path)


def _corrupt_thread(env: Env) -> Request:
    path = env.store.path_for(env.thread_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{ this is not a thread document \xff")
    return post_json(env.body())


def _resume_unknown(env: Env) -> Request:
    body = env.body()
    body["resume"] = []
    return post_json(body)


def _resume_other_invocation(env: Env) -> Request:
    env.complete_turn(env.body(ros_invocation_id="invocation-1"))
    body = env.body(ros_invocation_id="invocation-2")
    body["resume"] = []
    return post_json(body)


def _duplicate(env: Env) -> Request:
    body = env.body()
    env.complete_turn(body)
    return post_json(body)


def _conflict(env: Env) -> Request:
    body = env.body()
    env.complete_turn(body)
    return post_json(run_body(env.thread_id, "something else", env.workspace, run_id=body["runId"]))


def _busy(env: Env) -> Request:
    env.craft_thread(lease=True)
    return post_json(env.body())


def _other_cwd(env: Env) -> Request:
    env.complete_turn(env.body())
    other = env.tmp_path / "other-workspace"
    return post_json(run_body(env.thread_id, "hi", other))


def _other_user(env: Env) -> Request:
    env.complete_turn(env.body(userId="alice"))
    return post_json(env.body(userId="bob"))


def _user_vs_null(env: Env) -> Request:
    env.complete_turn(env.body())
    return post_json(env.body(userId="alice"))


def _resume_required(env: Env) -> Request:
    env.craft_thread(pending=True)
    return post_json(env.body())


def _resume_unknown_zh(env: Env) -> Request:
    body = env.body(preferredLanguage="zh_CN")
    body["resume"] = []
    return post_json(body, **{"Accept-Language": "ja"})


def _missing_thread_id(lang_props: dict[str, Any], **headers: str) -> Callable[[Env], Request]:
    def build(env: Env) -> Request:
        body = env.body(**lang_props)
        del body["threadId"]
        return post_json(body, **headers)

    return build


# ------------------------------------------------------------------------------------------ the table


class _Unauthorized(TypedDict):
    status: int
    code: str
    key: str
    auth: bool


class _Invalid(TypedDict):
    status: int
    code: str


class _Conflict(TypedDict):
    status: int


#: The columns a family of rows shares, typed so that a row spreading them is checked like the others.
UNAUTH: _Unauthorized = {"status": 401, "code": "UNAUTHORIZED", "key": "unauthorized", "auth": True}
INVALID: _Invalid = {"status": 400, "code": "INVALID_INPUT"}
CONFLICT: _Conflict = {"status": 409}

ROWS: list[Row] = [
    # Authentication (docs/design.md#authentication): the first check, so only Accept-Language is read.
    Row("auth-missing", lambda env: post_json(env.body()), **UNAUTH),
    Row("auth-no-space", _auth_header(f"Bearer{TOKEN}"), **UNAUTH),
    Row("auth-wrong-scheme", _auth_header(f"Basic {TOKEN}"), **UNAUTH),
    Row("auth-wrong-token", _auth_header("Bearer s3cre7"), **UNAUTH),
    Row("auth-empty-token", _auth_header("Bearer "), **UNAUTH),
    Row("auth-latin1-bytes", _auth_header("Bearer s3cr\u00e9t"), **UNAUTH),
    Row("auth-nbsp-separator", _auth_header(f"Bearer\u00a0{TOKEN}"), **UNAUTH),
    Row("auth-non-latin1", _auth_header("Bearer \u65e5\u672c"), **UNAUTH),
    Row(
        "auth-before-content-type",
        lambda env: {"data": b"garbage", "headers": {"Content-Type": "text/plain"}},
        **UNAUTH,
    ),
    Row(
        "auth-before-body-size",
        lambda env: {"data": b"x" * (MAX_BODY + 1), "headers": {"Content-Type": JSON}},
        **UNAUTH,
    ),
    Row(
        "auth-language-from-header-not-body",
        lambda env: post_json(env.body(preferredLanguage="zh"), **{"Accept-Language": "de-DE"}),
        **UNAUTH,
        lang="de",
    ),
    # Pre-stream check: media type (docs/design.md#pre-stream-checks).
    Row(
        "media-text-plain",
        lambda env: {"data": json.dumps(env.body()), "headers": {"Content-Type": "text/plain"}},
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        "unsupported_media_type",
    ),
    Row(
        "media-missing",
        lambda env: {"data": json.dumps(env.body()).encode()},
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        "unsupported_media_type",
    ),
    Row(
        "media-json-suffix-not-json",
        lambda env: {"data": json.dumps(env.body()), "headers": {"Content-Type": "application/json-patch+json"}},
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        "unsupported_media_type",
    ),
    Row(
        "media-after-auth-ok",
        lambda env: {"data": b"{}", "headers": {"Content-Type": "text/plain", **Env.auth()}},
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        "unsupported_media_type",
        auth=True,
    ),
    # charset and case are ignored: the request gets past the media type check (next error: envelope).
    Row(
        "media-charset-accepted",
        lambda env: {"data": b"[]", "headers": {"Content-Type": "Application/JSON ; charset=utf-8"}},
        **INVALID,
        key="not_an_object",
        field="",
    ),
    # Pre-stream check: size (docs/design.md#pre-stream-checks).
    Row(
        "too-large-declared",
        lambda env: {
            "data": b"{}",
            "headers": {"Content-Type": JSON},
            "environ_overrides": {"CONTENT_LENGTH": str(MAX_BODY + 1)},
        },
        413,
        "REQUEST_TOO_LARGE",
        "request_too_large",
    ),
    Row(
        "too-large-real-body",
        lambda env: {"data": b" " * (MAX_BODY + 1), "headers": {"Content-Type": JSON}},
        413,
        "REQUEST_TOO_LARGE",
        "request_too_large",
    ),
    # Pre-stream check: JSON (docs/design.md#pre-stream-checks).
    Row(
        "json-garbage",
        lambda env: {"data": b"{not json", "headers": {"Content-Type": JSON}},
        400,
        "INVALID_JSON",
        "invalid_json",
    ),
    Row(
        "json-invalid-utf8",
        lambda env: {"data": b'{"threadId": "\xff\xfe\xfd"}', "headers": {"Content-Type": JSON}},
        400,
        "INVALID_JSON",
        "invalid_json",
    ),
    Row(
        "json-empty",
        lambda env: {"data": b"", "headers": {"Content-Type": JSON}},
        400,
        "INVALID_JSON",
        "invalid_json",
    ),
    # Pre-stream check: a JSON object, then input validation of the envelope, iacCode, cwd and tools
    # (docs/design.md#input-validation, docs/design.md#workspace-cwd;
    # field pointers: docs/design.md#decision-field-specific-errors).
    Row("input-array", lambda env: post_json([env.body()]), **INVALID, key="not_an_object", field=""),
    Row("input-string", lambda env: post_json("hi"), **INVALID, key="not_an_object", field=""),
    Row(
        "input-missing-thread-id",
        _missing_thread_id({}),
        **INVALID,
        key="field_required",
        params={"field": "threadId"},
        field="/threadId",
    ),
    Row(
        "input-numeric-thread-id",
        _mutated(lambda body, env: body.update(threadId=42)),
        **INVALID,
        key="field_type_string",
        params={"field": "threadId"},
        field="/threadId",
    ),
    Row(
        "input-forwarded-props-sibling",
        _mutated(lambda body, env: body["forwardedProps"].update(other={"x": 1})),
        **INVALID,
        key="forwarded_props_only_iaccode",
        params={"field": "forwardedProps.other"},
        field="/forwardedProps/other",
    ),
    Row(
        "input-unknown-iaccode-key",
        _mutated(_iac(bogusKey=True)),
        **INVALID,
        key="field_unknown",
        params={"field": "forwardedProps.iacCode.bogusKey"},
        field="/forwardedProps/iacCode/bogusKey",
    ),
    Row(
        "input-schema-version-string",
        _mutated(_iac(schemaVersion="1")),
        **INVALID,
        key="schema_version",
        params={"field": "forwardedProps.iacCode.schemaVersion"},
        field="/forwardedProps/iacCode/schemaVersion",
    ),
    Row(
        "input-ros-invocation-id-257",
        _mutated(_iac(rosInvocationId="r" * 257)),
        **INVALID,
        key="field_length",
        params={"field": "forwardedProps.iacCode.rosInvocationId", "min": "1", "max": "256"},
        field="/forwardedProps/iacCode/rosInvocationId",
    ),
    Row(
        "input-bad-run-mode",
        _mutated(_iac(runMode="turbo")),
        **INVALID,
        key="field_enum",
        params={"field": "forwardedProps.iacCode.runMode", "choices": "normal, pipeline"},
        field="/forwardedProps/iacCode/runMode",
    ),
    Row(
        "input-tools-not-empty",
        _mutated(lambda body, env: body.update(tools=[{"name": "t", "description": "d", "parameters": {}}])),
        **INVALID,
        key="tools_not_supported",
        params={"field": "tools"},
        field="/tools",
    ),
    Row(
        "input-cwd-relative",
        _cwd(lambda env: "relative/workspace"),
        **INVALID,
        key="cwd_not_absolute",
        field=CWD_FIELD,
    ),
    Row(
        "input-cwd-env-var-not-absolute",
        _cwd(lambda env: "$HOME/workspace"),
        **INVALID,
        key="cwd_not_absolute",
        field=CWD_FIELD,
    ),
    Row(
        "input-cwd-outside-roots",
        _cwd(lambda env: str(env.tmp_path.parent / f"elsewhere-{uuid.uuid4().hex}")),
        **INVALID,
        key="cwd_outside_roots",
        field=CWD_FIELD,
    ),
    Row(
        "input-cwd-dotdot-escape",
        _cwd(lambda env: str(env.tmp_path) + "/../.."),
        **INVALID,
        key="cwd_outside_roots",
        field=CWD_FIELD,
    ),
    Row("input-cwd-is-a-file", _cwd(_file_cwd), **INVALID, key="cwd_not_directory", field=CWD_FIELD),
    # State (docs/design.md#state-load).
    Row("state-corrupt-file", _corrupt_thread, 503, "STATE_UNAVAILABLE", "state_unavailable"),
    Row(
        # A client mistake is never answered as server trouble (docs/design.md#decision-no-500).
        "input-empty-thread-id",
        _mutated(lambda body, env: body.update(threadId="")),
        **INVALID,
        key="field_length",
        params={"field": "threadId", "min": "1", "max": "200"},
        field="/threadId",
    ),
    # Admission (docs/design.md#admission).
    Row("lost-resume-unknown-thread", _resume_unknown, **CONFLICT, code="EXECUTION_LOST", key="execution_lost"),
    Row(
        "lost-resume-other-invocation",
        _resume_other_invocation,
        **CONFLICT,
        code="EXECUTION_LOST",
        key="resume_mismatch",
    ),
    Row("duplicate-run-id", _duplicate, **CONFLICT, code="DUPLICATE_RUN_ID", key="run_id_used"),
    Row("run-id-conflict", _conflict, **CONFLICT, code="RUN_ID_CONFLICT", key="run_id_used"),
    Row("thread-busy", _busy, **CONFLICT, code="THREAD_BUSY", key="thread_busy"),
    Row(
        "binding-other-cwd",
        _other_cwd,
        **CONFLICT,
        code="THREAD_BINDING_CONFLICT",
        key="thread_binding_conflict",
    ),
    Row(
        "binding-other-user",
        _other_user,
        **CONFLICT,
        code="THREAD_BINDING_CONFLICT",
        key="thread_binding_conflict",
    ),
    Row(
        "binding-user-vs-null",
        _user_vs_null,
        **CONFLICT,
        code="THREAD_BINDING_CONFLICT",
        key="thread_binding_conflict",
    ),
    Row("resume-required", _resume_required, **CONFLICT, code="RESUME_REQUIRED", key="resume_required"),
    # Localisation (docs/design.md#language-selection).
    Row(
        "lang-accept-language-ja",
        lambda env: {"data": b"{}", "headers": {"Content-Type": "text/plain", "Accept-Language": "ja-JP, en;q=0.5"}},
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        "unsupported_media_type",
        lang="ja",
    ),
    Row(
        "lang-accept-language-weights",
        lambda env: {"data": b"{", "headers": {"Content-Type": JSON, "Accept-Language": "en;q=0.2, zh-CN;q=1"}},
        400,
        "INVALID_JSON",
        "invalid_json",
        lang="zh",
    ),
    Row(
        "lang-unauthorized-ja",
        lambda env: post_json(env.body(), **{"Accept-Language": "ja-JP, en;q=0.5"}),
        **UNAUTH,
        lang="ja",
    ),
    Row(
        "lang-body-beats-header-on-envelope-error",
        _missing_thread_id({"preferredLanguage": "zh-CN"}, **{"Accept-Language": "ja-JP, en;q=0.5"}),
        **INVALID,
        key="field_required",
        params={"field": "threadId"},
        field="/threadId",
        lang="zh",
    ),
    Row(
        "lang-body-beats-header-on-admission-error",
        _resume_unknown_zh,
        **CONFLICT,
        code="EXECUTION_LOST",
        key="execution_lost",
        lang="zh",
    ),
    Row(
        "lang-unsupported-body-falls-back-to-header",
        lambda env: post_json(env.body(preferredLanguage="ko", schemaVersion=2), **{"Accept-Language": "fr"}),
        **INVALID,
        key="schema_version",
        params={"field": "forwardedProps.iacCode.schemaVersion"},
        field="/forwardedProps/iacCode/schemaVersion",
        lang="fr",
    ),
]


# ------------------------------------------------------------------------------------------ the test


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_prestream_error(row: Row, settings: Settings, tmp_path: Path, workspace: Path, state_dir: Path) -> None:
    app = create_app(settings.replace(auth_token=TOKEN) if row.auth else settings)
    env = Env(app.test_client(), tmp_path, workspace, ThreadStore(state_dir))
    request = row.build(env)
    response = env.client.post("/", **request)
    text = response.get_data(as_text=True)

    assert response.status_code == row.status, text
    assert response.mimetype == "application/json", response.headers
    assert "Traceback" not in text and 'File "' not in text
    document = response.get_json()
    assert set(document) == {"error"}, document
    error = document["error"]
    assert error["code"] == row.code, error
    allowed_keys = {"code", "message", "field"} if row.code == "INVALID_INPUT" else {"code", "message"}
    assert set(error) <= allowed_keys, error
    if row.code == "INVALID_INPUT":
        assert row.field is not None and error.get("field") == row.field, error
    assert isinstance(error["message"], str) and error["message"]
    assert error["message"] == translate(row.key, row.lang, **row.params), error
    if row.lang != "en":
        assert error["message"] != translate(row.key, "en", **row.params)


def test_truncated_body_is_a_json_error_not_a_plain_400(client: FlaskClient) -> None:
    response = client.post(
        "/", data=b"{}", content_type="application/json", environ_overrides={"CONTENT_LENGTH": "100"}
    )
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "INVALID_JSON"
