"""Reading a thread file's document strictly (docs/design.md#state-load).

The schema is derived from the record's one declaration (`store/model.py`, docs/design.md#state-record): a
missing optional key takes what the declaration says its absence means; anything else wrong makes the file
corrupt (`StateCorrupt`, naming the first problem), except where a kind says it is read leniently and why.
"""

from __future__ import annotations

from marshmallow import ValidationError

from agui_bridge.store.errors import StateCorrupt
from agui_bridge.store.model import RECORD_SCHEMA, ThreadState

__all__ = ["load_document"]


def _first_problem(messages: object, where: str = "") -> str:
    """`execution.pipelineSequence: must be an integer >= 0` for the first leaf of an error tree."""
    if isinstance(messages, dict):
        key, child = next(iter(messages.items()))
        name = where if key == "_schema" else f"{where}.{key}" if where else str(key)
        return _first_problem(child, name)
    if isinstance(messages, list) and messages:
        return _first_problem(messages[0], where)
    return f"{where or 'document'}: {messages}"


def load_document(doc: object, thread_id: str) -> ThreadState:
    """Validate a parsed document strictly (docs/design.md#state-load) and build the record.

    Raises `StateCorrupt` naming the first problem.
    """
    if not isinstance(doc, dict):
        raise StateCorrupt("document must be an object")
    if doc.get("threadId") != thread_id:
        raise StateCorrupt("threadId does not match the requested thread")
    try:
        state: ThreadState = RECORD_SCHEMA.load(doc)
    except ValidationError as err:
        raise StateCorrupt(_first_problem(err.messages)) from None
    except RecursionError:
        raise StateCorrupt("document is nested too deeply") from None
    return state
