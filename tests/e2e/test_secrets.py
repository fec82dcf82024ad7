"""Secrets never reach the state directory or the logs ("never stored" in docs/design.md#state-document).

See also docs/design.md#observability and docs/design.md#input-validation.

Every turn carries distinctive credentials in ``forwardedProps.iacCode`` (LLM key, LLM header, AccessKey
id/secret, STS token) and a private message text. Through gunicorn + gevent at DEBUG level (a normal
turn, a second turn on the same thread, a failing turn, and an upstream-down turn on a second server),
none of those strings may occur in any file under the state directory or in the servers' logs, and the
thread file holds only the documented keys. An in-process variant checks every log record (all
loggers, DEBUG) through pytest's ``caplog`` before any handler-level redaction could hide a leak.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agui_bridge.app import create_app
from agui_bridge.config.settings import Settings
from agui_bridge.demo.testing import free_port
from agui_bridge.store.store import ThreadStore
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.harness import BridgeServer, bridge_server, new_thread_id, run_body
from tests.support.state_checks import Secrets, assert_documented_document, assert_state_clean, leaks

pytestmark = pytest.mark.e2e


def run(server: BridgeServer, body: dict[str, Any], bearer: str, expect: str) -> list[dict[str, Any]]:
    with server.post(body, headers={"Authorization": f"Bearer {bearer}"}) as response:
        assert response.status_code == 200, response.text
        raw = b"".join(response.iter_content(chunk_size=None))
    return assert_valid_agui_stream(raw, expect_terminal=expect)


def test_secrets_stay_out_of_state_and_logs_through_gunicorn(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    s = Secrets()
    state_dir = tmp_path / "state"
    workspace = tmp_path / "workspace"
    env = {"IAC_CODE_AGUI_AUTH_TOKEN": s.bearer}
    thread_id = new_thread_id()
    with bridge_server(demo_url, demo_token, state_dir, tmp_path, log_level="debug", env=dict(env)) as server:
        first = run(server, run_body(thread_id, f"hello, {s.message}", workspace, **s.props()), s.bearer, "success")
        assert first[-1]["type"] == "RUN_FINISHED"
        # A second turn on the same thread (rotation), then a failing one, then a turn after the failure.
        run(server, run_body(thread_id, f"again: {s.message}", workspace, **s.props()), s.bearer, "success")
        failed = run(
            server, run_body(thread_id, f"please fail {s.message}", workspace, **s.props()), s.bearer, "RUN_ERROR"
        )
        assert failed[-1]["code"] == "A2A_EXECUTION_FAILED"
        run(server, run_body(thread_id, f"once more {s.message}", workspace, **s.props()), s.bearer, "success")
        # A rejected request carrying the secrets must not leak them either.
        rejected_body = {
            **run_body(thread_id, s.message, workspace, **s.props()),
            "tools": [{"name": "x", "description": "y"}],
        }
        # Connection: close, so no idle keep-alive connection delays the graceful shutdown.
        close = {"Connection": "close"}
        with server.post(rejected_body, headers={"Authorization": f"Bearer {s.bearer}", **close}) as rejected:
            assert rejected.status_code == 400 and rejected.json()["error"]["code"] == "INVALID_INPUT"
            assert not leaks(rejected.content, s.credentials())
        with server.post(run_body(thread_id, s.message, workspace, **s.props()), headers=close) as unauthorized:
            assert unauthorized.status_code == 401
        log_paths = [server.log_path]

    down_url = f"http://127.0.0.1:{free_port()}/"
    with bridge_server(down_url, demo_token, state_dir, tmp_path, log_level="debug", env=dict(env)) as down:
        body = run_body(new_thread_id(), f"hello, {s.message}", workspace, **s.props())
        error = run(down, body, s.bearer, "RUN_ERROR")
        assert error[-1]["code"] == "A2A_UNAVAILABLE"
        log_paths.append(down.log_path)

    files = assert_state_clean(state_dir, s.never_stored())
    thread_files = [p for p in files if p.suffix == ".json" and p.parent.name == "threads"]
    assert all(p.parent.name in ("threads", "owners") for p in files if p.suffix == ".json")  # + worker beacons
    assert len(thread_files) == 2, files
    document = assert_documented_document(ThreadStore(state_dir).path_for(thread_id))
    assert document["threadId"] == thread_id and len(document["runDigests"]) == 4
    for path in thread_files:
        assert_documented_document(path)

    for path in log_paths:
        log = path.read_bytes()
        assert b"DEBUG" in log or b"debug" in log.lower(), "the server did not run at debug level"
        found = leaks(log, s.credentials())
        assert not found, f"{found} found in {path}"


@pytest.fixture
def debug_records(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """caplog at DEBUG on the root *and* on the package logger (which does not propagate)."""
    caplog.set_level(logging.DEBUG)
    # The package logger's own level too: whatever set this process up before (an entry point's
    # `configure_process`, a module's server) may have given it one (caplog puts it back afterwards).
    caplog.set_level(logging.DEBUG, logger="agui_bridge")
    yield caplog
    logging.getLogger("agui_bridge").removeHandler(caplog.handler)


def record_texts(record: logging.LogRecord) -> list[str]:
    texts = [str(record.msg), repr(record.args)]
    with contextlib.suppress(TypeError, ValueError):
        texts.append(record.getMessage())
    if record.exc_info:
        texts.append(logging.Formatter().formatException(record.exc_info))
    if record.exc_text:
        texts.append(record.exc_text)
    standard = set(vars(logging.makeLogRecord({})))
    texts.extend(repr(value) for key, value in vars(record).items() if key not in standard)
    return texts


def test_no_log_record_carries_a_secret_in_process(
    settings: Settings, tmp_path: Path, workspace: Path, state_dir: Path, debug_records: pytest.LogCaptureFixture
) -> None:
    s = Secrets()
    app = create_app(settings.replace(log_level="debug", auth_token=s.bearer))
    package_logger = logging.getLogger("agui_bridge")
    package_logger.addHandler(debug_records.handler)
    assert package_logger.isEnabledFor(logging.DEBUG)
    client = app.test_client()
    auth = {"Authorization": f"Bearer {s.bearer}"}
    thread_id = new_thread_id()

    def post(body: dict[str, Any], expect: str) -> list[dict[str, Any]]:
        response = client.post("/", json=body, headers=auth)
        assert response.status_code == 200, response.get_data(as_text=True)
        return assert_valid_agui_stream(response.get_data(), expect_terminal=expect)

    post(run_body(thread_id, f"hello, {s.message}", workspace, **s.props()), "success")
    post(run_body(thread_id, f"please fail {s.message}", workspace, **s.props()), "RUN_ERROR")
    down = create_app(settings.replace(log_level="debug", a2a_url=f"http://127.0.0.1:{free_port()}/"))
    response = down.test_client().post("/", json=run_body(new_thread_id(), s.message, workspace, **s.props()))
    events = assert_valid_agui_stream(response.get_data(), expect_terminal="RUN_ERROR")
    assert events[-1]["code"] == "A2A_UNAVAILABLE"
    bad = client.post("/", json={**run_body(thread_id, s.message, workspace, **s.props()), "tools": [1]}, headers=auth)
    assert bad.status_code == 400
    wrong = client.post("/", json=run_body(thread_id, s.message, workspace, **s.props()))
    assert wrong.status_code == 401

    records = debug_records.records
    assert any(r.name.startswith("agui_bridge") for r in records), "no package record was captured"
    for record in records:
        for text in record_texts(record):
            found = leaks(text.encode("utf-8", "backslashreplace"), s.credentials())
            assert not found, f"{found} in a {record.levelname} record of {record.name}: {text[:300]}"
    assert_state_clean(state_dir, s.never_stored())


def test_json_logs_carry_the_run_ids_and_no_secret(tmp_path: Path, demo_url: str, demo_token: str) -> None:
    """`--log-format json`: one JSON object per line, ids from context on every run record, no secret."""
    keys = Secrets()
    options = {"log_format": "json", "log_level": "debug", "env": {"IAC_CODE_AGUI_AUTH_TOKEN": keys.bearer}}
    with bridge_server(demo_url, demo_token, tmp_path / "state", tmp_path, **options) as server:
        thread_id = new_thread_id()
        body = run_body(thread_id, "please write file", tmp_path, **keys.props())
        body["messages"][0]["content"] = f"please write file {keys.message}"
        interrupted = run(server, body, keys.bearer, "interrupt")
        (interrupt,) = interrupted[-1]["outcome"]["interrupts"]
        resume = run_body(thread_id, "", tmp_path, **keys.props())
        resume["resume"] = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "deny"}}]
        run(server, resume, keys.bearer, "success")
        log = server.log_path.read_bytes()
    assert not leaks(log, keys.credentials())
    records = [json.loads(line) for line in log.decode().splitlines() if line.startswith("{")]
    assert records and all({"ts", "level", "logger", "message"} <= set(r) for r in records)
    ended = [r for r in records if r["message"] == "run ended" and r.get("thread_id") == thread_id]
    assert [r["outcome"] for r in ended] == ["interrupt", "success"]
    for record in ended:
        assert {"request_id", "run_id", "execution_id", "duration_ms"} <= set(record)
    assert ended[0]["run_id"] == body["runId"] and ended[1]["run_id"] == resume["runId"]
    assert ended[0]["execution_id"] == ended[1]["execution_id"]
    assert any(r["logger"].startswith("gunicorn") for r in records)  # gunicorn's own log is JSON too
