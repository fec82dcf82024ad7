"""Loading, writing and copying all derive from the record's one declaration (docs/design.md#state-record).

The table below is read from the declaration itself (`dataclasses.fields` and their `wire` metadata), so a field
added to the record is checked here without anyone listing it: the file round trip, `copy_state` and
`stored_copy` give every field back, and a copy shares nothing mutable with its original.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agui_bridge.store import derive as derive_module
from agui_bridge.store import kinds
from agui_bridge.store.derive import Derived, derive, wire_fields
from agui_bridge.store.document import load_document
from agui_bridge.store.kinds import Kind, Wire
from agui_bridge.store.model import SCHEMA_VERSION, ThreadState, copy_state, stored_copy, to_document

Step = str | None  # an attribute name, or None for the first item of a list or map
Path = tuple[Step, ...]

TRACEPARENT = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"


def _scalar_samples() -> dict[Kind, object]:
    return {
        kinds.TEXT: "text-1",
        kinds.OPTIONAL_TEXT: "optional-1",
        kinds.NATURAL: 7,
        kinds.FLAG: True,
        kinds.TIMESTAMP: 1_795_000_000_123,
        kinds.OPTIONAL_JSON_OBJECT: {"a": {"b": [1, {"c": 2.5}]}, "z": None},
    }


def _sample_of(kind: Kind, name: str) -> object:
    """A value of `kind` unlike its default, already in the form the file reads back (sorted, cleaned)."""
    scalars = _scalar_samples()
    if kind in scalars:
        return scalars[kind]
    if isinstance(kind, kinds.SortedSet):
        item = "0" * 64 if kind.item is kinds.HEX64 else f"{name}-a"
        other = "f" * 64 if kind.item is kinds.HEX64 else f"{name}-b"
        return [item, other]
    if isinstance(kind, kinds.Lenient):
        return TRACEPARENT
    if isinstance(kind, kinds.JsonObject):
        return {"inputId": "input/1", "kind": "question", "options": [{"id": "x", "label": "y"}]}
    if isinstance(kind, kinds.UsableStringMap):
        return {f"{name}-1": "d1", f"{name}-2": "d2"}
    if isinstance(kind, kinds.UsableStringList):
        return [f"{name}-1", f"{name}-2"]
    if isinstance(kind, kinds.NestedList):
        items = [_sample_record(kind.record, "1"), _sample_record(kind.record, "2")]
        return sorted(items, key=kind.order)
    if isinstance(kind, kinds.NestedMap):
        entry = _sample_record(kind.record, "1")
        return {kind.key_of(entry): entry}
    if isinstance(kind, kinds.Nested):  # and OptionalNested
        return _sample_record(kind.record, "1")
    raise AssertionError(f"no sample for the kind {kind!r} of {name}: add one to this table")


def _sample_record(record: type, tag: str) -> Any:
    values: dict[str, object] = {}
    for item, declared in wire_fields(record):
        value = _sample_of(declared.kind, item.name)
        values[item.name] = f"{value}-{tag}" if declared.kind is kinds.TEXT else value
    return record(**values)


def _sample() -> ThreadState:
    state: ThreadState = _sample_record(ThreadState, "1")
    return state


def _absent(item: dataclasses.Field[Any], declared: Wire) -> object:
    """What the record holds when a loader or copier leaves the field out."""
    if declared.absent is not dataclasses.MISSING:
        return declared.absent
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return None


def _paths(record: type, prefix: Path = ()) -> Iterator[tuple[Path, dataclasses.Field[Any], Wire]]:
    """Every declared field reachable from `record`, records inside collections included."""
    for item, declared in wire_fields(record):
        path = (*prefix, item.name)
        yield path, item, declared
        kind = declared.kind
        if isinstance(kind, kinds.NestedList | kinds.NestedMap):
            yield from _paths(kind.record, (*path, None))
        elif isinstance(kind, kinds.Nested):
            yield from _paths(kind.record, path)


def _at(value: object, path: Path) -> object:
    for step in path:
        if step is None:
            value = next(iter(value.values())) if isinstance(value, dict) else value[0]  # type: ignore[index]
        else:
            value = getattr(value, step)
    return value


def _name(path: Path) -> str:
    return ".".join("[0]" if step is None else step for step in path).replace(".[0]", "[0]")


FIELDS = list(_paths(ThreadState))


def _through_the_file(state: ThreadState) -> ThreadState:
    text = json.dumps(to_document(state), indent=2, ensure_ascii=False, allow_nan=False)
    return load_document(json.loads(text), state.thread_id)


def _containers(value: object) -> Iterator[object]:
    """Every mutable object reachable from `value` (records, lists, dicts)."""
    if dataclasses.is_dataclass(value):
        yield value
        for item in dataclasses.fields(value):
            yield from _containers(getattr(value, item.name))
    elif isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _containers(item)
    elif isinstance(value, list):
        yield value
        for item in value:
            yield from _containers(item)


def _shared(original: object, copy: object) -> list[str]:
    mine = {id(obj) for obj in _containers(original)}
    return [type(obj).__name__ for obj in _containers(copy) if id(obj) in mine]


def _mutate_everywhere(value: object) -> None:
    for obj in list(_containers(value)):
        if isinstance(obj, dict):
            obj["mutated"] = "mutated"
        elif isinstance(obj, list):
            obj.append("mutated")


DERIVATIONS: list[tuple[str, Callable[[ThreadState], ThreadState]]] = [
    ("file round trip", _through_the_file),
    ("copy_state", copy_state),
    ("stored_copy", stored_copy),
]


@pytest.mark.parametrize(("path", "item", "declared"), FIELDS, ids=[_name(path) for path, _, _ in FIELDS])
def test_every_declared_field_survives_the_file_and_both_copies(
    path: Path, item: dataclasses.Field[Any], declared: Wire
) -> None:
    state = _sample()
    expected = _at(state, path)
    assert expected != _absent(item, declared), "the sample must differ from what leaving the field out gives"
    for how, derived in DERIVATIONS:
        assert _at(derived(state), path) == expected, how
    assert state == _sample()  # nothing above changed the original


@pytest.mark.parametrize(("how", "derived"), DERIVATIONS, ids=[how for how, _ in DERIVATIONS])
def test_the_whole_record_survives_and_a_copy_shares_nothing_mutable(
    how: str, derived: Callable[[ThreadState], ThreadState]
) -> None:
    original = _sample()
    copy = derived(original)
    assert copy == original
    assert to_document(copy) == to_document(original)
    assert _shared(original, copy) == []
    _mutate_everywhere(copy)
    assert copy != original
    assert original == _sample()


def test_the_document_has_one_key_per_declared_field_and_the_version() -> None:
    document = to_document(_sample())
    keys = {declared.key for _, declared in wire_fields(ThreadState)}
    assert set(document) == keys | {"schemaVersion"}
    assert document["schemaVersion"] == SCHEMA_VERSION


def _without(monkeypatch: pytest.MonkeyPatch, record: type, name: str) -> Derived:
    """A derivation whose field table lacks `record.name`, as a hand-written copier that forgot it would."""

    def table(of: type) -> list[tuple[dataclasses.Field[Any], Wire]]:
        return [(item, declared) for item, declared in wire_fields(of) if not (of is record and item.name == name)]

    monkeypatch.setattr(derive_module, "wire_fields", table)
    return derive(ThreadState, version_key="schemaVersion", version=SCHEMA_VERSION)


def _owner(path: Path) -> type:
    record: type = ThreadState
    for step in path[:-1]:
        if step is None:
            continue
        kind = next(declared.kind for item, declared in wire_fields(record) if item.name == step)
        assert isinstance(kind, kinds.Nested | kinds.NestedList | kinds.NestedMap)
        record = kind.record
    return record


@pytest.mark.parametrize(("path", "item", "declared"), FIELDS, ids=[_name(path) for path, _, _ in FIELDS])
def test_the_table_catches_a_copier_that_skips_the_field(
    monkeypatch: pytest.MonkeyPatch, path: Path, item: dataclasses.Field[Any], declared: Wire
) -> None:
    broken = _without(monkeypatch, _owner(path), item.name).root.copy
    state = _sample()
    try:
        copy = broken(state)
    except TypeError:
        return  # a required field: the record cannot even be built without it
    assert _at(copy, path) != _at(state, path)


def test_the_table_catches_a_copy_that_shares_a_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds.SortedSet, "copy", lambda self, records: None)
    shallow = derive(ThreadState, version_key="schemaVersion", version=SCHEMA_VERSION).root.copy
    state = _sample()
    assert _shared(state, shallow(state)) != []
