"""What the pump reads from A2A for one run: a sequence of calls flattened into queue items.

A new run is one `SendStreamingMessage`. A resume is one call per answer (streamed, or unary for
sideband waits) and then, for permission answers, `GetTask`/`SubscribeToTask` until the task reaches
a final state (docs/design.md#sending-answers). The stream generator must commit an answer before it shows any
event that follows it, so the items carry markers: `SendOpened` before the events of a streamed
answer (its first event means "accepted") and `UnaryAccepted` after a unary one succeeded.

Every stream is read only up to its first ending state (docs/design.md#decision-stop-at-first-ending-state):
the kernel may hold the connection open afterwards. A JSON-RPC error answering an interrupt response is
raised as `AnswerRejected`; `runs/failures.py` says what it means to the client.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agui_bridge.a2a import messages as a2a_messages
from agui_bridge.a2a.errors import A2AError, A2ARpcError, A2ATransportError
from agui_bridge.a2a.port import A2APort, UpstreamStream
from agui_bridge.a2a.signals import ENDING_STATES, A2AEvent
from agui_bridge.errors import A2AUnavailable
from agui_bridge.runs.failures import AnswerRejected
from agui_bridge.runs.resume_plan import SendPlan
from agui_bridge.validation.content import user_message_parts
from agui_bridge.validation.run_input import RunInput


@dataclass(frozen=True)
class SendOpened:
    """The events that follow answer these interrupts; the first one means A2A accepted them."""

    interrupt_ids: tuple[str, ...]


@dataclass(frozen=True)
class UnaryAccepted:
    """A unary `SendMessage` carrying these answers succeeded."""

    interrupt_ids: tuple[str, ...]


Item = list[A2AEvent] | SendOpened | UnaryAccepted


def last_user_message_id(messages: tuple[dict[str, Any], ...]) -> str:
    """The A2A message id of a new run or guidance: the AG-UI id of the last user message."""
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("id"), str):
            return str(message["id"])
    return "agui-user-message"


def user_message_params(
    run: RunInput, *, cwd: str, context_id: str, language: str, task_id: str | None = None
) -> dict[str, Any]:
    """`SendStreamingMessage` params carrying the run's user message (docs/design.md#a2a-metadata-written)."""
    parts = user_message_parts(run.messages)
    metadata = a2a_messages.iac_code_metadata(run.props, cwd, language)
    message = a2a_messages.user_message(last_user_message_id(run.messages), parts, metadata, context_id, task_id)
    return a2a_messages.send_params(message)


def cut_at_ending(batch: Sequence[A2AEvent]) -> tuple[list[A2AEvent], bool]:
    """The events up to and including the first one in an ending state, and whether there was one."""
    for index, event in enumerate(batch):
        if event.state in ENDING_STATES:
            return list(batch[: index + 1]), True
    return list(batch), False


class Upstream:
    """Iterable of queue items for one run; `abort()` may be called from another greenlet/thread."""

    def __init__(self, client: A2APort) -> None:
        self._client = client
        self._current: UpstreamStream | None = None
        self._aborted = False
        self._items: Iterator[Item] = iter(())

    def __iter__(self) -> Iterator[Item]:
        return self._items

    def abort(self) -> None:
        self._aborted = True
        stream = self._current
        if stream is not None:
            stream.abort()

    def close(self) -> None:
        stream = self._current
        if stream is not None:
            stream.close()

    # ---- what to read ------------------------------------------------------------------------

    def new_run(self, params: dict[str, Any]) -> Upstream:
        self._items = self._new_run(params)
        return self

    def resume(self, plan: SendPlan, task_id: str) -> Upstream:
        self._items = self._resume(plan, task_id)
        return self

    def _new_run(self, params: dict[str, Any]) -> Iterator[Item]:
        # The call's generator itself, not one wrapping it: one generator level less on the pump's stack
        # while it waits for the kernel (docs/design.md#stream-memory).
        return self._stream("SendStreamingMessage", params)

    def _resume(self, plan: SendPlan, task_id: str) -> Iterator[Item]:
        final_seen = False
        unary_used = False
        for send in plan.sends:
            if send.unary:
                try:
                    self._client.send_message(send.params)
                except A2ARpcError as exc:
                    raise AnswerRejected(exc) from exc
                unary_used = True
                yield UnaryAccepted(send.interrupt_ids)
                continue
            yield SendOpened(send.interrupt_ids)
            try:
                count, final = yield from self._stream("SendStreamingMessage", send.params)
            except A2ARpcError as exc:
                raise AnswerRejected(exc) from exc
            if count == 0:
                raise A2AUnavailable(send.not_accepted_key)
            final_seen = final_seen or final
        if unary_used:
            snapshot = self._client.get_task(task_id)
            yield [snapshot]
            if snapshot.state in ENDING_STATES:
                return
            yield from self._follow(task_id)
        elif plan.follow_task and not final_seen:
            yield from self._follow(task_id)

    def _follow(self, task_id: str) -> Iterator[Item]:
        """Subscribe until a final state; if that fails or ends early, the task snapshot decides."""
        try:
            _count, final = yield from self._stream("SubscribeToTask", {"id": task_id})
            if final:
                return
        except A2AError:
            if self._aborted:
                raise
        if self._aborted:
            return
        snapshot = self._client.get_task(task_id)
        if snapshot.state not in ENDING_STATES:
            raise A2AUnavailable()
        yield [snapshot]

    def _stream(self, method: str, params: dict[str, Any]) -> Generator[Item, None, tuple[int, bool]]:
        """Read one streaming call up to its first ending state: (events read, ending state seen)."""
        if self._aborted:
            raise A2ATransportError("the run was stopped")
        stream = self._client.open_stream(method, params)
        del params  # sent: not kept for the life of the stream
        self._current = stream
        count = 0
        try:
            for batch in stream.batches():
                events, final = cut_at_ending(batch)
                del batch
                count += len(events)
                if events:
                    yield events
                del events  # handed over: not kept while the next read waits (docs/design.md#stream-memory)
                if final:
                    return count, True
            return count, False
        finally:
            self._current = None
            stream.close()


__all__ = [
    "Item",
    "SendOpened",
    "UnaryAccepted",
    "Upstream",
    "cut_at_ending",
    "last_user_message_id",
    "user_message_params",
]
