"""AG-UI stream conformance checks for agui-bridge tests.

Usage in a test (bytes exactly as the server sent them)::

    from tests.support.agui_checks import assert_valid_agui_stream, event_types

    raw = resp.raw.read()            # requests, stream=True; or resp.content
    events = assert_valid_agui_stream(raw, expect_terminal="RUN_FINISHED")
    assert event_types(events)[:2] == ["RUN_STARTED", "CUSTOM"]

What :func:`assert_valid_agui_stream` enforces (docs/design.md#decision-balanced-spans-and-strict-framing,
docs/design.md#decision-agui-1-0-clients, docs/design.md#projection):

* framing: UTF-8, LF only (no ``\\r`` anywhere), every record is ``data: <json>\\n\\n`` (one
  line, compact JSON, non-ASCII literal, no duplicate keys), optionally after an ``id: <n>`` line (the
  reattach cursor: when the events carry ids they increase by one, docs/design.md#reattach), or the
  ``: heartbeat\\n\\n`` comment;
* every event validates against the ``ag_ui.core.Event`` discriminated union of
  ag-ui-protocol 1.0.0 in pydantic *strict* JSON mode (so ``"timestamp": 1.0`` or ``"1"`` fail);
* no unknown fields: the 1.0 models are ``extra="allow"`` (see ``GeneratedBaseModel``), so an extra
  key would validate silently, while the official ``@ag-ui/client`` strips it with a warning. Every
  model in the validated tree is therefore checked for extras, and none is allowed (what a client needs
  beyond a standard event's schema goes in a CUSTOM event);
* every event carries an integer ``timestamp`` (``bool``/``float`` rejected);
* no JSON ``null`` anywhere except inside free-form objects (``CUSTOM.value``,
  ``ACTIVITY_SNAPSHOT.content``, interrupt ``metadata``/``responseSchema``, event ``metadata``,
  ``rawEvent``, ``STATE_SNAPSHOT.snapshot``, ``RUN_FINISHED.result``);
* RUN_STARTED first, exactly one terminal event (RUN_FINISHED / RUN_ERROR) and it is last;
  RUN_FINISHED repeats RUN_STARTED's threadId/runId;
* balanced spans: TEXT_MESSAGE_* per messageId, TOOL_CALL_START/ARGS/END per toolCallId,
  REASONING_START/END and REASONING_MESSAGE_START/CONTENT/END per messageId (tracked separately,
  as the client does), STEP_STARTED/FINISHED per stepName; no span opened twice, continued or
  closed when not open, or left open at RUN_FINISHED *or* RUN_ERROR (our strict-framing decision is stricter than
  the official verifier, which only checks at RUN_FINISHED).

Streams that pass are also written to the session's capture directory (see
``tests/support/conformance.py``), where the Node verifier replays them through the official
``@ag-ui/client`` 1.0 pipeline at the end of the pytest session.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from ag_ui.core import Event
from pydantic import BaseModel, TypeAdapter, ValidationError

from agui_bridge.protocol.sse_parser import SseComment, SseMessage, SseParser, parse_body, parse_body_records

__all__ = [
    "TERMINAL_EVENT_TYPES",
    "AguiStreamError",
    "assert_valid_agui_stream",
    "capture_stream",
    "event_types",
    "get_capture_dir",
    "numbered_frames",
    "parse_sse",
    "set_capture_dir",
    "sse_comments",
]

TERMINAL_EVENT_TYPES: frozenset[str] = frozenset({"RUN_FINISHED", "RUN_ERROR"})
HEARTBEAT_COMMENT = b"heartbeat"
CAPTURE_ENV = "AGUI_CAPTURE_DIR"

_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)

# Extra (non-model) fields agui-bridge emits on purpose: {event type: {json path}}. None: a 1.0 client
# strips every member outside its schema with a warning.
_ALLOWED_EXTRAS: Mapping[str, frozenset[str]] = {}

# JSON paths (``*`` = any array index / key) whose subtree is free-form data where a null is
# meaningful (docs/design.md#decision-balanced-spans-and-strict-framing). Paths not listed may not
# hold a null at any depth.
_FREE_FORM: Mapping[str, tuple[str, ...]] = {
    "*": ("/metadata", "/rawEvent"),
    "CUSTOM": ("/value",),
    "ACTIVITY_SNAPSHOT": ("/content",),
    "STATE_SNAPSHOT": ("/snapshot",),
    "RUN_FINISHED": (
        "/result",
        "/outcome/interrupts/*/metadata",
        "/outcome/interrupts/*/responseSchema",
    ),
    "RUN_STARTED": ("/input",),
}

_ERROR_LIMIT = 25


class AguiStreamError(AssertionError):
    """An SSE body that is not a conforming agui-bridge AG-UI stream."""


# --------------------------------------------------------------------------------------------
# Parsing


def _as_bytes(raw: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(raw, str):
        return raw.encode("utf-8")
    return bytes(raw)


def parse_sse(raw: bytes | bytearray | memoryview | str) -> list[dict[str, Any]]:
    """Return the JSON objects of all ``data:`` records, ignoring ``:`` comments.

    Tolerant of framing (CR/CRLF line ends, multi-line data), as the one SSE reader is, so that tests
    can inspect even a broken stream; use :func:`assert_valid_agui_stream` to check the framing itself.
    """
    events: list[dict[str, Any]] = []
    for message in parse_body(_as_bytes(raw)):
        obj = json.loads(message.data)
        if not isinstance(obj, dict):
            raise ValueError(f"SSE data record is not a JSON object: {obj!r}")
        events.append(obj)
    return events


def sse_comments(raw: bytes | bytearray | memoryview | str) -> list[str]:
    """Return the text of every SSE comment line (``: heartbeat`` -> ``"heartbeat"``)."""
    items = parse_body_records(_as_bytes(raw))
    return [item.text.decode("utf-8") for item in items if isinstance(item, SseComment)]


def numbered_frames(raw: bytes) -> list[tuple[int, bytes]]:
    """Each numbered event of a body with its frame in the bridge's framing (``id: <n>\\ndata: ..\\n\\n``),
    heartbeats skipped and a frame cut at the end dropped: what a client stitching by id keeps."""
    return [
        (int(message.event_id), b"id: " + message.event_id + b"\ndata: " + message.data + b"\n\n")
        for message in SseParser().feed(raw)
        if message.event_id is not None
    ]


def event_types(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``type`` of each event, in order."""
    return [str(event.get("type")) for event in events]


# --------------------------------------------------------------------------------------------
# Capture for the Node verifier

_capture_dir: Path | None = None
_capture_seq = itertools.count(1)


def set_capture_dir(path: str | os.PathLike[str] | None) -> None:
    """Where accepted streams are written (None disables capture unless ``AGUI_CAPTURE_DIR``)."""
    global _capture_dir
    _capture_dir = Path(path) if path is not None else None


def get_capture_dir() -> Path | None:
    if _capture_dir is not None:
        return _capture_dir
    env = os.environ.get(CAPTURE_ENV)
    return Path(env) if env else None


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.")
    return slug[:120] or "stream"


def capture_stream(raw: bytes | bytearray | memoryview, label: str | None = None) -> Path | None:
    """Write ``raw`` into the capture directory; returns the file, or None when capture is off."""
    directory = get_capture_dir()
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    if label is None:
        # "tests/e2e/test_x.py::test_y[param] (call)" -> a readable, unique-enough file name.
        label = os.environ.get("PYTEST_CURRENT_TEST", "stream").rsplit(" ", 1)[0]
    path = directory / f"{os.getpid()}-{next(_capture_seq):05d}-{_slug(label)}.sse"
    path.write_bytes(bytes(raw))
    return path


# --------------------------------------------------------------------------------------------
# Checks


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _path_matches(path: Sequence[str], pattern: str) -> bool:
    parts = pattern.strip("/").split("/")
    if len(path) < len(parts):
        return False
    return all(p == "*" or p == seg for p, seg in zip(parts, path, strict=False))


def _null_paths(value: Any, path: list[str], free_form: Sequence[str]) -> Iterable[str]:
    if any(_path_matches(path, pattern) for pattern in free_form):
        return
    if value is None:
        yield "/" + "/".join(path)
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _null_paths(child, [*path, str(key)], free_form)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _null_paths(child, [*path, str(index)], free_form)


def _model_extras(value: Any, path: str) -> Iterable[str]:
    """JSON paths of every key a pydantic model kept as an extra (``extra="allow"``)."""
    if isinstance(value, BaseModel):
        for key in value.model_extra or {}:
            yield f"{path}/{key}"
        for name, field in type(value).model_fields.items():
            yield from _model_extras(getattr(value, name), f"{path}/{field.alias or name}")
    elif isinstance(value, list | tuple):
        for index, child in enumerate(value):
            yield from _model_extras(child, f"{path}/{index}")


def _check_event_shape(index: int, payload: str, event: dict[str, Any], errors: list[str]) -> None:
    etype = str(event.get("type"))
    where = f"event #{index} ({etype})"
    try:
        model = _EVENT_ADAPTER.validate_json(payload, strict=True)
    except ValidationError as exc:
        first = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:3])
        errors.append(f"{where}: does not validate against ag_ui.core.Event: {first}")
        return
    allowed = _ALLOWED_EXTRAS.get(etype, frozenset())
    for extra in _model_extras(model, ""):
        if extra not in allowed:
            errors.append(f"{where}: unknown field {extra} (the official client strips it)")
    timestamp = event.get("timestamp")
    if type(timestamp) is not int:
        errors.append(f"{where}: timestamp must be an integer, got {timestamp!r}")
    free_form = (*_FREE_FORM["*"], *_FREE_FORM.get(etype, ()))
    for null_path in _null_paths(event, [], free_form):
        errors.append(f"{where}: JSON null at {null_path} (omit optional fields instead)")


class _Spans:
    """Open/close bookkeeping for one kind of span, keyed by id."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.open: dict[str, int] = {}

    def start(self, key: str, index: int, where: str, errors: list[str]) -> None:
        if key in self.open:
            errors.append(f"{where}: {self.kind} {key!r} opened twice (open since #{self.open[key]})")
        self.open[key] = index

    def touch(self, key: str, index: int, where: str, errors: list[str]) -> None:
        if key not in self.open:
            errors.append(f"{where}: {self.kind} {key!r} is not open")

    def end(self, key: str, index: int, where: str, errors: list[str]) -> None:
        if key not in self.open:
            errors.append(f"{where}: {self.kind} {key!r} closed but not open")
        self.open.pop(key, None)

    def dangling(self, where: str, errors: list[str]) -> None:
        for key, opened in sorted(self.open.items()):
            errors.append(f"{where}: {self.kind} {key!r} (opened at #{opened}) is still open")


_SPAN_EVENTS: Mapping[str, tuple[str, str, str]] = {
    # event type: (span kind, id field, action)
    "TEXT_MESSAGE_START": ("text message", "messageId", "start"),
    "TEXT_MESSAGE_CONTENT": ("text message", "messageId", "touch"),
    "TEXT_MESSAGE_END": ("text message", "messageId", "end"),
    "TOOL_CALL_START": ("tool call", "toolCallId", "start"),
    "TOOL_CALL_ARGS": ("tool call", "toolCallId", "touch"),
    "TOOL_CALL_END": ("tool call", "toolCallId", "end"),
    "REASONING_START": ("reasoning span", "messageId", "start"),
    "REASONING_END": ("reasoning span", "messageId", "end"),
    "REASONING_MESSAGE_START": ("reasoning message", "messageId", "start"),
    "REASONING_MESSAGE_CONTENT": ("reasoning message", "messageId", "touch"),
    "REASONING_MESSAGE_END": ("reasoning message", "messageId", "end"),
    "STEP_STARTED": ("step", "stepName", "start"),
    "STEP_FINISHED": ("step", "stepName", "end"),
}


def _check_sequence(events: Sequence[dict[str, Any]], errors: list[str]) -> None:
    if not events:
        errors.append("stream has no events")
        return
    types = event_types(events)
    if types[0] != "RUN_STARTED":
        errors.append(f"first event must be RUN_STARTED, got {types[0]}")
    extra_starts = [i for i, t in enumerate(types) if t == "RUN_STARTED" and i != 0]
    if extra_starts:
        errors.append(f"RUN_STARTED repeated at {extra_starts} (one run per response)")
    terminals = [i for i, t in enumerate(types) if t in TERMINAL_EVENT_TYPES]
    if len(terminals) != 1:
        errors.append(f"expected exactly one terminal event, got {[(i, types[i]) for i in terminals]}")
    if types[-1] not in TERMINAL_EVENT_TYPES:
        errors.append(f"last event must be RUN_FINISHED or RUN_ERROR, got {types[-1]}")
    elif terminals and terminals[0] != len(types) - 1:
        errors.append(f"events after the terminal event at #{terminals[0]}: {types[terminals[0] + 1 :]}")

    start = events[0] if types[0] == "RUN_STARTED" else {}
    spans = {kind: _Spans(kind) for kind, _, _ in _SPAN_EVENTS.values()}
    for index, event in enumerate(events):
        etype = types[index]
        where = f"event #{index} ({etype})"
        span = _SPAN_EVENTS.get(etype)
        if span is not None:
            kind, field, action = span
            key = event.get(field)
            if isinstance(key, str):
                getattr(spans[kind], action)(key, index, where, errors)
        elif etype in TERMINAL_EVENT_TYPES:
            for tracker in spans.values():
                tracker.dangling(where, errors)
            for field in ("threadId", "runId"):
                if field in event and start and event[field] != start.get(field):
                    errors.append(f"{where}: {field} {event[field]!r} != RUN_STARTED {field} {start.get(field)!r}")


def _check_terminal(events: Sequence[dict[str, Any]], expect: str, errors: list[str]) -> None:
    last = events[-1] if events else {}
    ltype = last.get("type")
    if expect in TERMINAL_EVENT_TYPES:
        if ltype != expect:
            errors.append(f"expected terminal {expect}, got {ltype}")
        return
    outcome = last.get("outcome") or {"type": "success"}
    if ltype != "RUN_FINISHED" or outcome.get("type") != expect:
        errors.append(f"expected RUN_FINISHED with outcome {expect!r}, got {ltype} {last.get('outcome')}")


def _fail(errors: list[str], types: Sequence[str] | None = None) -> NoReturn:
    shown = errors[:_ERROR_LIMIT]
    more = f"\n  ... and {len(errors) - _ERROR_LIMIT} more" if len(errors) > _ERROR_LIMIT else ""
    seq = f"\nevent types: {list(types)}" if types is not None else ""
    raise AguiStreamError("invalid AG-UI stream:\n  " + "\n  ".join(shown) + more + seq)


def _strict_records(data: bytes) -> Iterator[tuple[int, SseMessage]]:
    """The numbered event records of an LF-framed body read by the one SSE reader, each checked to be
    exactly the bridge's framing. The reader is tolerant, so every record it returns is written back in
    the strict form (``[id: <n>\\n]data: <one line>\\n\\n`` or ``: heartbeat\\n\\n``) and must
    reproduce the body byte for byte; anything it skipped or merged (an empty record, an ``event:`` or
    ``retry:`` line, ``data:`` without its space, two ``data:`` lines) breaks the match."""
    offset = 0
    for number, item in enumerate([*parse_body_records(data), None]):
        if item is None:
            if offset == len(data):
                return
            strict = b""
        elif isinstance(item, SseComment):
            strict = b": " + item.text + b"\n\n" if item.text == HEARTBEAT_COMMENT else b""
        else:
            if item.event_id is not None and not item.event_id.isdigit():
                _fail([f"record #{number} has a malformed id line: {data[offset : offset + 40]!r}"])
            id_line = b"" if item.event_id is None else b"id: " + item.event_id + b"\n"
            strict = id_line + b"data: " + item.data + b"\n\n"
        if not strict or not data.startswith(strict, offset):
            _fail([f"record #{number} is neither 'data: <json>' nor ': heartbeat': {data[offset : offset + 120]!r}"])
        offset += len(strict)
        if isinstance(item, SseMessage):
            yield number, item


def assert_valid_agui_stream(
    raw: bytes | bytearray | memoryview,
    *,
    expect_terminal: str | None = None,
    capture: bool = True,
    check_compact_json: bool = True,
) -> list[dict[str, Any]]:
    """Assert that ``raw`` (the exact response body) is a conforming agui-bridge AG-UI stream.

    ``expect_terminal``: ``"RUN_FINISHED"`` or ``"RUN_ERROR"`` (the last event's type), or an
    outcome type ``"success"`` / ``"interrupt"`` / ``"cancelled"`` meaning RUN_FINISHED with that
    outcome (an absent outcome counts as success). Returns the events as dicts. On success the bytes
    are captured for the session-end Node verifier unless ``capture=False``.
    """
    if isinstance(raw, str):
        raise TypeError("assert_valid_agui_stream needs the raw response bytes, not str")
    data = bytes(raw)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail([f"body is not UTF-8: {exc}"])
    if "\r" in text:
        cr_at = data.index(b"\r")
        _fail([f"CR found at byte {cr_at}: SSE framing must use LF only"])
    if not text.endswith("\n\n"):
        _fail([f"body does not end with a blank line (tail {text[-40:]!r})"])

    errors: list[str] = []
    events: list[dict[str, Any]] = []
    payloads: list[str] = []
    ids: list[int] = []
    for number, message in _strict_records(data):
        payload = message.data.decode("utf-8")
        if message.event_id is not None:
            ids.append(int(message.event_id))
        try:
            obj = json.loads(payload, object_pairs_hook=_reject_duplicate_keys)
        except ValueError as exc:
            _fail([f"record #{number} is not valid JSON ({exc}): {payload[:120]!r}"])
        if not isinstance(obj, dict):
            _fail([f"record #{number} is not a JSON object: {payload[:120]!r}"])
        if check_compact_json:
            compact = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
            if compact != payload:
                errors.append(f"record #{number}: JSON is not compact / non-ASCII-literal")
        events.append(obj)
        payloads.append(payload)

    if ids and (len(ids) != len(events) or ids != list(range(ids[0], ids[0] + len(ids)))):
        errors.append(f"event ids are not on every event or not contiguous: {ids[:20]}")
    for index, (payload, event) in enumerate(zip(payloads, events, strict=True)):
        _check_event_shape(index, payload, event, errors)
    _check_sequence(events, errors)
    if expect_terminal is not None:
        _check_terminal(events, expect_terminal, errors)
    if errors:
        _fail(errors, event_types(events))
    if capture:
        capture_stream(data)
    return events
