"""A2A events -> AG-UI events for one run (pure; docs/design.md#projection).

Spans are balanced before any terminal event (docs/design.md#span-balancing,
docs/design.md#decision-balanced-spans-and-strict-framing).

The projector owns the run-local span bookkeeping (open text messages, reasoning, tool calls,
steps) so that `close_all` can balance every span before any terminal event. It never stores
message text beyond the run: only SHA-256 digests of finalised messages leave it (for replay
suppression across an interrupt and its resume).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from agui_bridge.a2a.signals import A2AEvent
from agui_bridge.projection.usage import UsageTotals
from agui_bridge.projection.values import compact_json, integral, non_empty_str
from agui_bridge.protocol import events as ev
from agui_bridge.protocol.events import Event
from agui_bridge.protocol.ids import emitted_id

_AGENT_ROLES = frozenset({"ROLE_AGENT", "agent", None})


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _status_text(body: dict[str, Any]) -> tuple[str | None, str]:
    """(messageId, text) of an agent status message; text is '' when there is none."""
    status = body.get("status")
    if not isinstance(status, dict):
        return None, ""
    message = status.get("message")
    if not isinstance(message, dict) or message.get("role") not in _AGENT_ROLES:
        return None, ""
    return non_empty_str(message.get("messageId")), _parts_text(message.get("parts"))


def _parts_text(parts: object) -> str:
    if not isinstance(parts, list):
        return ""
    if len(parts) == 1:  # a text delta: one part
        part = parts[0]
        text = part.get("text") if isinstance(part, dict) else None
        return text if isinstance(text, str) else ""
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _history_text(body: dict[str, Any]) -> tuple[str | None, str]:
    """Trailing agent messages of a Task snapshot's history (used before any text was shown)."""
    history = body.get("history")
    if not isinstance(history, list):
        return None, ""
    trailing: list[dict[str, Any]] = []
    for message in reversed(history):
        if not isinstance(message, dict) or message.get("role") not in _AGENT_ROLES:
            break
        trailing.append(message)
    if not trailing:
        return None, ""
    trailing.reverse()
    return non_empty_str(trailing[-1].get("messageId")), "".join(_parts_text(m.get("parts")) for m in trailing)


#: Maps the Pipeline envelopes of one event's `metadata.iac_code` (`projection/pipeline.PipelineMapper.live`).
EnvelopeMapper = Callable[[dict[str, Any]], list[Event]]


class EnvelopeProjection(Protocol):
    """A projection of Pipeline envelopes that works over a projector's spans (`projection/pipeline.py`)."""

    def live(self, iac: dict[str, Any]) -> list[Event]: ...


class RunProjector:
    """Stateful per-run mapper. `project()` returns the AG-UI events for one A2A event.

    `envelopes` builds, over this projector, the projection of Pipeline envelopes (they open and close its
    spans): the projector gets it once, at construction (`projection/pipeline.run_projection`).
    """

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        text_digests: set[str] | None = None,
        *,
        envelopes: Callable[[RunProjector], EnvelopeProjection] | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.text_digests: set[str] = set(text_digests or ())
        self.usage = UsageTotals()
        self.last_state: str | None = None
        self._open_text: dict[str, None] = {}
        self._current_text: str | None = None
        self._text_chunks: dict[str, list[str]] = {}
        self._seen_text_ids: set[str] = set()
        self._text_emitted = False
        self._open_reasoning: dict[str, None] = {}
        self._open_tools: dict[str, None] = {}
        self._ended_tools: set[str] = set()
        self._tool_results: set[str] = set()
        self.open_steps: dict[str, str] = {}  # step key -> AG-UI step name, open in this run
        self._envelope_mapper: EnvelopeMapper | None = None if envelopes is None else envelopes(self).live

    @property
    def envelope_mapper(self) -> EnvelopeMapper | None:
        """Maps `metadata.iac_code` Pipeline envelopes (None: envelopes show nothing); given at construction
        only (`envelopes`, as `projection/pipeline.run_projection` does), never set afterwards."""
        return self._envelope_mapper

    # ---- public API -------------------------------------------------------------------------

    def project(self, event: A2AEvent, *, text: bool = True, pipeline: bool = True) -> list[Event]:
        """A resume's preflight snapshot is projected without status text and Pipeline envelopes: the
        text was shown already, and a snapshot holds only a bounded suffix of the envelopes
        (docs/design.md#pipelines)."""
        out: list[Event] = []
        iac = event.iac
        if event.kind == "artifactUpdate":
            artifact = event.body.get("artifact")
            if isinstance(artifact, dict):
                out.append(ev.custom(ev.ARTIFACT_EVENT, {"schemaVersion": 1, **integral(artifact)}))
        thinking = iac.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "raw_thinking":
            thought = thinking.get("text")
            if isinstance(thought, str) and thought:
                self.emit_reasoning(out, "reasoning-" + (self._current_text or self.run_id), thought)
        envelope_mapper = self._envelope_mapper
        if pipeline and envelope_mapper is not None and ("pipeline" in iac or "pipelineBatch" in iac):
            out.extend(envelope_mapper(iac))
        if text:
            self._project_text(out, event)
        tool = iac.get("tool")
        if isinstance(tool, dict):
            self._project_tool(out, tool)
        if "usage" in iac:
            self.usage.record(iac["usage"])
        if event.state is not None:
            self.last_state = event.state
        return out

    def close_all(self) -> list[Event]:
        """Balance every open span, in the documented order, sorted, not LIFO (docs/design.md#span-balancing)."""
        out: list[Event] = []
        self._close_reasoning(out)
        for tool_call_id in sorted(self._open_tools):
            out.append(ev.tool_end(tool_call_id))
            self._ended_tools.add(tool_call_id)
        self._open_tools.clear()
        for message_id in sorted(self._open_text):
            self._finalise_text(message_id)
            out.append(ev.text_end(message_id))
        self._open_text.clear()
        self._current_text = None
        for key in sorted(self.open_steps):
            out.append(ev.step_finished(self.open_steps[key]))
        self.open_steps.clear()
        return out

    def finalise_all_text(self) -> None:
        """Record the digests of every message shown in this run (interrupt commit)."""
        for message_id in list(self._text_chunks):
            self._finalise_text(message_id)

    def usage_entries(self) -> list[dict[str, Any]]:
        return self.usage.entries()

    # ---- text -------------------------------------------------------------------------------

    def _project_text(self, out: list[Event], event: A2AEvent) -> None:
        message_id, text = _status_text(event.body)
        if not text and not self._text_emitted and event.kind == "task":
            message_id, text = _history_text(event.body)
        if not text:
            return
        final = event.iac.get("assistantFinal")
        if isinstance(final, dict) and final.get("complete") is True and self._text_emitted:
            return
        message_id = message_id or self._current_text or f"assistant-{uuid.uuid4().hex}"
        self.emit_text(out, message_id, text)

    def emit_text(self, out: list[Event], message_id: str, text: str, *, parallel: bool = False) -> None:
        message_id = emitted_id(message_id)
        if message_id not in self._seen_text_ids:
            self._seen_text_ids.add(message_id)
            if self.text_digests:
                text = self._suppress_replay(message_id, text)
                if not text:
                    return
        self._close_reasoning(out)
        if message_id not in self._open_text:
            current = self._current_text
            if current is not None and current != message_id and not parallel and current in self._open_text:
                self._finalise_text(current)
                del self._open_text[current]
                out.append(ev.text_end(current))
            self._open_text[message_id] = None
            out.append(ev.text_start(message_id))
        self._text_chunks.setdefault(message_id, []).append(text)
        out.append(ev.text_content(message_id, text))
        self._current_text = message_id
        self._text_emitted = True

    def end_text(self, out: list[Event], message_id: str) -> None:
        """End one open text message before the run ends (a Pipeline step's: docs/design.md#pipelines).

        More text under the same id later reopens it: an AG-UI 1.0 client continues the message it has.
        """
        message_id = emitted_id(message_id)
        if message_id in self._open_text:
            self._finalise_text(message_id)
            del self._open_text[message_id]
            out.append(ev.text_end(message_id))

    def _suppress_replay(self, message_id: str, text: str) -> str:
        """Drop the longest prefix already shown in an earlier run of this execution.

        See docs/design.md#projection-text.
        """
        for end in range(len(text), 0, -1):
            if _digest(text[:end]) in self.text_digests:
                self._text_chunks[message_id] = [text[:end]]
                return text[end:]
        return text

    def _finalise_text(self, message_id: str) -> None:
        chunks = self._text_chunks.get(message_id)
        if chunks:
            self.text_digests.add(_digest("".join(chunks)))

    # ---- reasoning --------------------------------------------------------------------------

    def emit_reasoning(self, out: list[Event], reasoning_id: str, text: str) -> None:
        reasoning_id = emitted_id(reasoning_id)
        if reasoning_id not in self._open_reasoning:
            self._open_reasoning[reasoning_id] = None
            out.append(ev.reasoning_start(reasoning_id))
            out.append(ev.reasoning_message_start(reasoning_id))
        out.append(ev.reasoning_content(reasoning_id, text))

    def end_reasoning(self, out: list[Event], reasoning_id: str) -> None:
        """End one open reasoning message before the run ends (docs/design.md#pipelines)."""
        reasoning_id = emitted_id(reasoning_id)
        if reasoning_id in self._open_reasoning:
            del self._open_reasoning[reasoning_id]
            out.append(ev.reasoning_message_end(reasoning_id))
            out.append(ev.reasoning_end(reasoning_id))

    def _close_reasoning(self, out: list[Event]) -> None:
        if not self._open_reasoning:
            return
        for reasoning_id in sorted(self._open_reasoning):
            out.append(ev.reasoning_message_end(reasoning_id))
            out.append(ev.reasoning_end(reasoning_id))
        self._open_reasoning.clear()

    # ---- tools ------------------------------------------------------------------------------

    def _project_tool(self, out: list[Event], tool: dict[str, Any]) -> None:
        status = tool.get("status")
        tool_call_id = emitted_id(non_empty_str(tool.get("toolUseId")) or f"tool-{uuid.uuid4().hex}")
        name = non_empty_str(tool.get("name")) or "tool"
        if status == "started":
            self._start_tool(out, tool_call_id, name)
        elif status == "input_complete":
            tool_input = tool.get("toolInput")
            arguments = integral(tool_input) if tool_input is not None else {"summary": tool.get("inputSummary")}
            self.tool_call(out, tool_call_id, name, arguments)
        elif status in ("completed", "failed"):
            self.tool_result(out, tool_call_id, tool.get("result"))
        elif status == "progress":
            out.append(ev.custom(ev.TOOL_PROGRESS_EVENT, {"schemaVersion": 1, **integral(tool)}))

    def _start_tool(self, out: list[Event], tool_call_id: str, name: str, parent: str | None = None) -> bool:
        """`parent` names the message that called the tool; by default the current open text message."""
        if tool_call_id in self._open_tools or tool_call_id in self._ended_tools:
            return False
        if self._current_text is not None:
            self._finalise_text(self._current_text)
        if parent is None:
            parent = self._current_text if self._current_text in self._open_text else None
        else:
            parent = emitted_id(parent)
        self._open_tools[tool_call_id] = None
        out.append(ev.tool_start(tool_call_id, name, parent))
        return True

    def tool_call(
        self, out: list[Event], tool_call_id: str, name: str, arguments: Any, parent: str | None = None
    ) -> None:
        """START (if needed), ARGS with the full input, END: the shape of `input_complete`."""
        tool_call_id = emitted_id(tool_call_id)
        if tool_call_id in self._ended_tools:
            return
        self._start_tool(out, tool_call_id, name, parent)
        out.append(ev.tool_args(tool_call_id, compact_json(arguments)))
        out.append(ev.tool_end(tool_call_id))
        self._open_tools.pop(tool_call_id, None)
        self._ended_tools.add(tool_call_id)

    def tool_result(self, out: list[Event], tool_call_id: str, result: Any) -> None:
        """Once per tool call per run; an open call is ended first so the span stays balanced."""
        tool_call_id = emitted_id(tool_call_id)
        if tool_call_id in self._tool_results:
            return
        self._tool_results.add(tool_call_id)
        if tool_call_id in self._open_tools:
            del self._open_tools[tool_call_id]
            self._ended_tools.add(tool_call_id)
            out.append(ev.tool_end(tool_call_id))
        content = result if isinstance(result, str) else compact_json(integral(result))
        out.append(ev.tool_result(tool_call_id, content))
