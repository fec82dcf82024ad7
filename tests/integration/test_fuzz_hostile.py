"""Property test: every route, driven with hostile ids, cwds, headers, bodies and nesting
(docs/design.md#decision-bounded-state, docs/design.md#decision-no-500).

Through the Flask test client against the demo agent. Whatever arrives:

* the status is one the route documents, never a 500 and never a 503 (nothing here is the server's
  trouble: the state directory is healthy, the agent is up, the worker is not draining);
* no file or directory appears outside the state directory and the allowed workspace root;
* a refused request leaves no lock file behind (every `<stem>.json.lock` has its `<stem>.json`);
* no secret of the environment or the settings shows up in a response body, header or log line.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from werkzeug.test import TestResponse

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from tests.support.fuzz_inputs import (
    TOKEN,
    accept_language,
    authorization,
    base_body,
    content_type,
    mostly,
    mutate,
)

ENV_SECRETS = {
    "IAC_CODE_AGUI_A2A_TOKEN": "envsecret-a2a-" + uuid.uuid4().hex,
    "IAC_CODE_AGUI_AUTH_TOKEN": "envsecret-auth-" + uuid.uuid4().hex,
    "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "envsecret-cloud-" + uuid.uuid4().hex,
    "DASHSCOPE_API_KEY": "envsecret-llm-" + uuid.uuid4().hex,
}

#: route -> the statuses it documents (docs/design.md#error-envelope, docs/design.md#cancellation;
#: /metrics, /console, /health are GETs).
DOCUMENTED: dict[str, frozenset[int]] = {
    "run": frozenset({200, 400, 401, 409, 413, 415}),
    "cancel": frozenset({200, 400, 401, 404, 409, 413, 415}),
    "status": frozenset({200, 400, 401, 404, 413, 415}),
    "get": frozenset({200, 401, 404, 405}),
    "router": frozenset({308, 400, 401, 404, 413, 415}),
}

HOSTILE = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

# ------------------------------------------------------------------------------------------ strategies

_TRICKS = [
    "",
    ".",
    "..",
    "../../etc/passwd",
    "/etc/passwd",
    "~",
    "~root",
    "$HOME",
    "${IAC_CODE_AGUI_A2A_TOKEN}",
    "$IAC_CODE_AGUI_A2A_TOKEN",
    "%IAC_CODE_AGUI_A2A_TOKEN%",
    "a\x00b",
    "line\nforged INFO log line",
    "\x1b[31mred",
    "\ud800",
    "CON",
    "aux.txt",
    "a" * 245,
    "a" * 246,
    "a" * 255,
    "A" * 300,
    "é" * 150,
    "a/b",
    "a\\b",
]
hostile_ids = st.sampled_from(_TRICKS) | st.text(max_size=40) | st.text(alphabet="abc-", min_size=190, max_size=320)


def hostile_cwd(root: Path) -> st.SearchStrategy[str]:
    tails = st.sampled_from(_TRICKS) | st.text(max_size=30)
    return (
        tails.map(lambda t: f"{root}/{t}")
        | tails
        | st.integers(min_value=200, max_value=300).map(lambda n: f"{root}/{'c' * n}")
        | st.integers(min_value=1, max_value=30).map(lambda n: str(root) + "/dd" * n + "/../" * n)
        | st.just(str(root / "work"))
    )


NEST = "__nest__"


def deep_json(depth: int) -> str:
    """`depth` levels of alternating objects and arrays as JSON text (never a Python structure the
    test itself would have to recurse through)."""
    pairs = depth // 2
    text = '{"k":[' * pairs + '"x"' + "]}" * pairs
    return f"[{text}]" if depth % 2 else text


nesting = st.integers(min_value=1, max_value=3000)


def encode(body: Any, depth: int | None) -> bytes:
    text = json.dumps(body)
    if depth is not None:
        text = text.replace(f'"{NEST}"', deep_json(depth), 1)
    return text.encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    path = tmp_path / "roots"
    path.mkdir()
    return path


@pytest.fixture
def hostile_app(tmp_path: Path, roots: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Flask]:
    for name, value in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)
    configured = settings.replace(
        state_dir=tmp_path / "state", allowed_cwds=(roots,), auth_token=TOKEN, console_enabled=True
    )
    yield create_app(configured)


def _snapshot(paths: list[Path]) -> set[str]:
    out: set[str] = set()
    for base in paths:
        if base.exists():
            out.update(str(p) for p in base.iterdir())
    return out


class Invariants:
    """What every example must leave true (see the module docstring)."""

    def __init__(self, tmp_path: Path, roots: Path, secrets: list[str], caplog: pytest.LogCaptureFixture) -> None:
        self.tmp_path = tmp_path
        self.roots = roots
        self.state = tmp_path / "state"
        self.secrets = [s for s in secrets if s]
        self.caplog = caplog
        self.repo = Path.cwd()
        self.before = _snapshot([tmp_path, self.repo, tmp_path.parent])

    def check(self, route: str, response: TestResponse) -> None:
        raw = response.get_data()
        event(f"{route} {response.status_code}")
        assert response.status_code != 500, raw[:1000]
        assert response.status_code != 503, raw[:1000]
        assert response.status_code in DOCUMENTED[route], (route, response.status_code, raw[:500])
        if response.status_code >= 400 and response.mimetype == "application/json":
            error = json.loads(raw)["error"]
            assert error["code"] and error["message"], error
        text = raw.decode("utf-8", "replace") + str(response.headers)
        for secret in self.secrets:
            assert secret not in text, (route, secret)

    def check_files(self) -> None:
        after = _snapshot([self.tmp_path, self.repo, self.tmp_path.parent])
        created = {p for p in after - self.before if not p.startswith((str(self.state), str(self.roots)))}
        assert not created, created
        threads = self.state / "threads"
        if threads.exists():
            names = {p.name for p in threads.iterdir()}
            orphans = [n for n in names if n.endswith(".json.lock") and n[: -len(".lock")] not in names]
            assert not orphans, orphans
        for path in self.tmp_path.rglob("*"):
            for secret in self.secrets:
                assert secret not in path.name, path
        for record in self.caplog.records:
            line = record.getMessage() + (record.exc_text or "")
            for secret in self.secrets:
                assert secret not in line, line


@pytest.fixture
def invariants(tmp_path: Path, roots: Path, settings: Settings, caplog: pytest.LogCaptureFixture) -> Invariants:
    caplog.set_level(logging.DEBUG)
    secrets = [*ENV_SECRETS.values(), TOKEN, settings.a2a_token or ""]
    return Invariants(tmp_path, roots, secrets, caplog)


def headers(auth: str | None, language: str | None) -> dict[str, str]:
    return {name: value for name, value in (("Authorization", auth), ("Accept-Language", language)) if value}


# ------------------------------------------------------------------------------------------ properties


@HOSTILE
@given(data=st.data())
def test_run_route_with_hostile_ids_cwds_and_nesting(
    hostile_app: Flask, invariants: Invariants, roots: Path, data: st.DataObject
) -> None:
    body = base_body(str(uuid.uuid4()), roots / "work")
    body["forwardedProps"]["iacCode"].pop("llmApiKey")
    body["forwardedProps"]["iacCode"].pop("alibabaCloud")
    body["messages"] = [{"id": "m-user", "role": "user", "content": "hello"}]
    body["threadId"] = data.draw(mostly(str(uuid.uuid4()), hostile_ids), label="threadId")
    body["runId"] = data.draw(mostly(str(uuid.uuid4()), hostile_ids), label="runId")
    body["forwardedProps"]["iacCode"]["userId"] = data.draw(mostly(None, hostile_ids), label="userId")
    body["forwardedProps"]["iacCode"]["cwd"] = data.draw(mostly(str(roots / "work"), hostile_cwd(roots)), label="cwd")
    if data.draw(st.sampled_from([False, False, True]), label="resume"):
        body["resume"] = [{"interruptId": data.draw(hostile_ids, label="interruptId"), "status": "resolved"}]
    if data.draw(st.sampled_from([False, False, True]), label="mutate"):
        body = mutate(data, body)
    depth = data.draw(mostly(None, nesting), label="state depth")
    if depth is not None:
        body["state"] = NEST
    payload = encode(body, depth)
    response = hostile_app.test_client().post(
        "/",
        data=payload,
        headers=headers(data.draw(authorization, label="auth"), data.draw(accept_language, label="lang")),
        content_type=data.draw(content_type, label="ctype") or "",
    )
    invariants.check("run", response)
    invariants.check_files()


@HOSTILE
@given(
    execution_id=hostile_ids,
    thread_id=hostile_ids,
    ros=hostile_ids | st.integers() | st.none(),
    auth=authorization,
    language=accept_language,
    nest=st.none() | nesting,
)
# Found by the search once: an id holding "/" made a "//" path that Werkzeug answered with a 308 redirect.
@example(execution_id="", thread_id="/etc/passwd", ros=None, auth="Bearer s3cret", language=None, nest=None)
def test_extension_routes_with_hostile_input(
    hostile_app: Flask,
    invariants: Invariants,
    execution_id: str,
    thread_id: str,
    ros: object,
    auth: str | None,
    language: str | None,
    nest: int | None,
) -> None:
    client: FlaskClient = hostile_app.test_client()
    body: dict[str, Any] = {"threadId": thread_id, "rosInvocationId": ros}
    if nest is not None:
        body["extra"] = NEST
    payload = encode(body, nest)
    quoted_execution = urllib.parse.quote(execution_id.encode("utf-8", "surrogatepass"), safe="")
    quoted_thread = urllib.parse.quote(thread_id.encode("utf-8", "surrogatepass"), safe="")
    sent = headers(auth, language)
    cancel = client.post(
        f"/extensions/iac-code/v1/executions/{quoted_execution}/cancel",
        data=payload,
        headers=sent,
        content_type="application/json",
    )
    # An empty path segment is the router's business (a 308 to the merged path, or its plain 404).
    invariants.check("cancel" if quoted_execution else "router", cancel)
    status = client.post(
        f"/extensions/iac-code/v1/threads/{quoted_thread}/status",
        data=json.dumps({"rosInvocationId": ros}),
        headers=sent,
        content_type="application/json",
    )
    invariants.check("status" if quoted_thread else "router", status)
    invariants.check_files()


@HOSTILE
@given(
    path=st.sampled_from(["/metrics", "/console", "/console/console.js", "/console/../../etc/passwd", "/health"]),
    auth=authorization,
    language=accept_language,
    junk=st.text(max_size=30),
)
def test_get_routes_with_hostile_headers(
    hostile_app: Flask, invariants: Invariants, path: str, auth: str | None, language: str | None, junk: str
) -> None:
    sent = headers(auth, language)
    response = hostile_app.test_client().get(path + "?" + urllib.parse.quote(junk), headers=sent)
    invariants.check("get", response)
    invariants.check_files()


def test_the_secrets_are_really_in_the_environment(hostile_app: Flask) -> None:
    """Guard: the property above would be vacuous if the fake secrets were not set."""
    for name, value in ENV_SECRETS.items():
        assert os.environ[name] == value
