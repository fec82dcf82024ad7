"""A client that sends its history back, as every AG-UI client does, is never refused for an id the bridge made.

The demo Pipeline with a 200-character threadId and runIds: its reasoning and text ids are derived from the
thread id (docs/design.md#emitted-ids), and each resume carries the whole history of the earlier runs.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from flask.testing import FlaskClient

from agui_bridge.config import limits
from agui_bridge.testing import answer, run_input
from tests.support.agui_checks import assert_valid_agui_stream
from tests.support.emitted_streams import history


def long_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}".ljust(limits.MAX_ID_CHARS, "x")


def post(client: FlaskClient, body: dict[str, Any], expect: str) -> list[dict[str, Any]]:
    response = client.post("/", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return assert_valid_agui_stream(response.get_data(), expect_terminal=expect)


def test_a_pipeline_with_200_character_ids_resumes_through_every_interrupt_with_its_history_sent_back(
    client: FlaskClient, workspace: Path
) -> None:
    thread_id = long_id("thread")
    body = run_input(thread_id, "deploy a small web app", workspace, run_id=long_id("run"), runMode="pipeline")
    first = post(client, body, "interrupt")
    messages = history(first, body["messages"])
    assert any(m["role"] == "reasoning" for m in messages), "the candidates' reasoning is in the history"
    (selection,) = first[-1]["outcome"]["interrupts"]
    resume = {**run_input(thread_id, "", workspace, run_id=long_id("run"), runMode="pipeline"), "messages": messages}
    resume["resume"] = [answer(selection, {"selectedId": "1"})]
    second = post(client, resume, "interrupt")
    messages = history(second, messages)
    (permission,) = second[-1]["outcome"]["interrupts"]
    last = {**run_input(thread_id, "", workspace, run_id=long_id("run"), runMode="pipeline"), "messages": messages}
    last["resume"] = [answer(permission, {"decision": "allow_once"})]
    third = post(client, last, "success")
    every_id = [m["id"] for m in history(third, messages)]
    assert every_id and all(len(i) <= limits.MAX_ID_CHARS for i in every_id)
