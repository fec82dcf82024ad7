"""Ids the bridge emits are ids it accepts back (docs/design.md#emitted-ids).

The property: whatever the lengths of threadId, runId and the kernel's ids, every id in every event the
projection emits is bounded, printable and free of `/`, a client's history built from those events passes
the input validation, and the same source ids always give the same emitted ids.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agui_bridge.config import limits
from agui_bridge.protocol.ids import MAX_EMITTED_ID_CHARS, emitted_id
from agui_bridge.validation.run_input import parse_run_input
from tests.support.emitted_streams import demo_pipeline_payloads, history, lengthen, project, transcript_payloads

TRANSCRIPTS = (
    "iac-a-text.sse",
    "iac-b-tool-permission.sse",
    "iac-c-resume-allow.sse",
    "iac-e2-thinking-exposed.sse",
    "iac-x-llm-unreachable.sse",
)
#: Members of emitted events (and interrupts) that hold ids a client may send back.
EMITTED_ID_MEMBERS = ("messageId", "toolCallId", "parentMessageId", "stepName")


def test_a_short_printable_id_is_kept() -> None:
    for source in ("m-1", "tool-1", "input-" + "a" * 100, "a" * MAX_EMITTED_ID_CHARS, "名前 with spaces"):
        assert emitted_id(source) == source


def test_a_long_id_becomes_a_bounded_digest_that_keeps_a_readable_prefix() -> None:
    long = "reasoning-pipeline-message:pipeline-" + "t" * 200
    derived = emitted_id(long)
    assert len(derived) <= MAX_EMITTED_ID_CHARS < limits.MAX_ID_CHARS
    assert derived.startswith("reasoning-pipeline-message:") and "~" in derived
    assert emitted_id(long) == derived  # deterministic: no salt, no state
    assert emitted_id(long + "x") != derived
    assert emitted_id(derived) == derived  # wrapping an emitted id again changes nothing


def test_slashes_control_characters_and_lone_surrogates_are_never_emitted() -> None:
    for source in ("a/b", "line\nbreak", "nul\x00", "del\x7f", "lone\ud800", "sep\u2028", ""):
        derived = emitted_id(source)
        assert derived != source
        assert "/" not in derived and derived.isprintable() and derived.encode("utf-8")
        assert emitted_id(derived) == derived


# ---- the property over the golden transcripts and the demo Pipeline ---------------------------


SOURCES: dict[str, list[dict[str, Any]]] = {name: transcript_payloads(name) for name in TRANSCRIPTS}
SOURCES["demo-pipeline"] = demo_pipeline_payloads()


def emitted_ids(events: list[dict[str, Any]]) -> list[str]:
    ids = [e[m] for e in events for m in EMITTED_ID_MEMBERS if isinstance(e.get(m), str)]
    ids += [e["id"] for e in events if "reason" in e]  # interrupts
    return ids


def resume_body(thread_id: str, run_id: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    answers = [{"interruptId": e["id"], "status": "cancelled"} for e in events if "reason" in e]
    return {
        "threadId": thread_id,
        "runId": run_id,
        "state": {},
        "messages": history(events),
        "tools": [],
        "context": [],
        "forwardedProps": {"iacCode": {"schemaVersion": 1, "rosInvocationId": "inv-1", "cwd": "/tmp"}},
        **({"resume": answers} if answers else {}),
    }


@settings(max_examples=25, deadline=None)
@given(
    source=st.sampled_from(sorted(SOURCES)),
    thread_chars=st.integers(1, limits.MAX_ID_CHARS),
    run_chars=st.integers(1, limits.MAX_ID_CHARS),
    kernel_chars=st.integers(1, 1000),
)
@example(source="demo-pipeline", thread_chars=200, run_chars=200, kernel_chars=1000)
@example(source="iac-e2-thinking-exposed.sse", thread_chars=200, run_chars=200, kernel_chars=300)
@example(source="iac-b-tool-permission.sse", thread_chars=200, run_chars=200, kernel_chars=199)
def test_every_emitted_id_fits_the_input_rules_and_is_stable(
    source: str, thread_chars: int, run_chars: int, kernel_chars: int
) -> None:
    thread_id, run_id = "t" * thread_chars, "r" * run_chars
    payloads = lengthen(copy.deepcopy(SOURCES[source]), kernel_chars, {})
    assert isinstance(payloads, list)
    events = project(thread_id, run_id, payloads)
    ids = emitted_ids(events)
    assert ids, "the source emits ids"
    for value in ids:
        assert 0 < len(value) <= MAX_EMITTED_ID_CHARS, value
        assert value.isprintable() and "/" not in value, value
    parse_run_input(resume_body(thread_id, run_id, events))  # the client's history and answers are accepted
    replayed = lengthen(copy.deepcopy(SOURCES[source]), kernel_chars, {})  # the same sources, in a fresh worker
    assert isinstance(replayed, list)
    again = project(thread_id, run_id, replayed)
    stable = [i for i in emitted_ids(again) if not i.startswith(("assistant-", "tool-", "input-"))]
    assert stable == [i for i in ids if not i.startswith(("assistant-", "tool-", "input-"))]
