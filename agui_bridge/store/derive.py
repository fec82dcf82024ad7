"""Loading, writing and copying of a declared record, derived once at import (docs/design.md#state-record).

`derive(Root)` reads the `wire` metadata of every dataclass field reachable from `Root` (`store/kinds.py`)
and builds, per record class: a marshmallow schema (the strict loader: the key, the check and the value a
file without the key means, which is the `absent` of the declaration, else the field's default, else the key
is required), and three functions generated as Python source from the same field table: `dump` (the
document, keys sorted), `copy` (a deep copy) and `stored` (what reading back the written file yields, without
writing it). Generated code costs what the hand-written copies it replaced cost (a loop over the field
table with a call per field took two to three times as long); a field without `wire` metadata is an error
at import, so no field can be left out of any of the four.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load

from agui_bridge.store.kinds import Kind, Op, Wire

__all__ = ["Codec", "Derived", "derive", "wire_fields"]


class _Part(Schema):
    class Meta:
        unknown = EXCLUDE


@dataclasses.dataclass(frozen=True)
class Codec:
    schema: Schema
    dump: Op
    copy: Op
    stored: Op


def wire_fields(record: type) -> list[tuple[dataclasses.Field[Any], Wire]]:
    """The declared fields of `record`, in declaration order."""
    out = []
    for item in dataclasses.fields(record):
        declared = item.metadata.get("wire")
        if not isinstance(declared, Wire):
            raise TypeError(f"{record.__name__}.{item.name} declares no wire key and kind")
        out.append((item, declared))
    return out


class Derived:
    """The codecs of one record tree; `of` derives a record class's codec on first use."""

    def __init__(self, root: type, version_key: str, version: int) -> None:
        self._codecs: dict[type, Codec] = {}
        self._root = root
        self._version = (version_key, version)
        self.root = self.of(root)

    def of(self, record: type) -> Codec:
        codec = self._codecs.get(record)
        if codec is None:
            version = self._version if record is self._root else None
            codec = self._codecs[record] = _derive(record, self, version)
        return codec


def derive(root: type, *, version_key: str, version: int) -> Derived:
    return Derived(root, version_key, version)


def _options(item: dataclasses.Field[Any], declared: Wire) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if declared.key != item.name:
        options["data_key"] = declared.key
    if declared.absent is not dataclasses.MISSING:
        options["load_default"] = declared.absent
    elif item.default is not dataclasses.MISSING:
        options["load_default"] = item.default
    elif item.default_factory is not dataclasses.MISSING:
        options["load_default"] = item.default_factory
    else:
        options["required"] = True
    return options


def _call(namespace: dict[str, object], op: object, value: str, *, with_owner: bool) -> str:
    """The expression applying `op` (None: the value itself) to `value` (and to the record `obj`)."""
    if op is None:
        return value
    name = f"_op{len(namespace)}"
    namespace[name] = op
    return f"{name}({value}, obj)" if with_owner else f"{name}({value})"


def _compile(source: list[str], namespace: dict[str, object], name: str) -> Op:
    exec("\n".join(source), namespace)  # noqa: S102  the source is built above from the field table only
    function: Op = namespace[name]  # type: ignore[assignment]
    return function


def _derive(record: type, records: Derived, version: tuple[str, int] | None) -> Codec:
    table = wire_fields(record)
    namespace: dict[str, object] = {"_record": record}

    entries: list[tuple[str, dataclasses.Field[Any] | None, Kind | None]] = [
        (declared.key, item, declared.kind) for item, declared in table
    ]
    if version is not None:
        entries.append((version[0], None, None))
    dump = [f"def dump_{record.__name__}(obj):", "    d = {}"]
    for key, item, kind in sorted(entries, key=lambda entry: entry[0]):
        if item is None or kind is None:
            dump.append(f"    d[{key!r}] = {version[1] if version else None!r}")
        elif kind.omit_none:
            expr = _call(namespace, kind.dump(records), "v", with_owner=kind.needs_owner)
            dump += [f"    v = obj.{item.name}", "    if v is not None:", f"        d[{key!r}] = {expr}"]
        else:
            expr = _call(namespace, kind.dump(records), f"obj.{item.name}", with_owner=kind.needs_owner)
            dump.append(f"    d[{key!r}] = {expr}")
    dump.append("    return d")

    def build(name: str, op_of: Callable[[Kind], object], with_owner: bool) -> Op:
        arguments = [
            f"{item.name}="
            + _call(
                namespace, op_of(declared.kind), f"obj.{item.name}", with_owner=with_owner and declared.kind.needs_owner
            )
            for item, declared in table
        ]
        return _compile([f"def {name}(obj):", f"    return _record({', '.join(arguments)})"], namespace, name)

    copy = build(f"copy_{record.__name__}", lambda kind: kind.copy(records), with_owner=False)
    stored = build(f"stored_{record.__name__}", lambda kind: kind.stored(records), with_owner=True)
    return Codec(
        schema=_schema(record, table, records, version),
        dump=_compile(dump, namespace, f"dump_{record.__name__}"),
        copy=copy,
        stored=stored,
    )


def _supported(key: str, version: int) -> Callable[[object], None]:
    def check(value: object) -> None:
        if isinstance(value, bool) or value != version:
            raise ValidationError(f"unsupported {key}")

    return check


def _schema(
    record: type, table: list[tuple[dataclasses.Field[Any], Wire]], records: Derived, version: tuple[str, int] | None
) -> Schema:
    attributes: dict[str, object] = {}
    if version is not None:
        attributes["schema_version"] = fields.Raw(
            data_key=version[0],
            required=True,
            validate=_supported(*version),
            error_messages={"required": f"unsupported {version[0]}"},
        )
    hooks: list[tuple[str, str, Op]] = []
    for item, declared in table:
        attributes[item.name] = declared.kind.schema_field(records, **_options(item, declared))
        hook = declared.kind.loaded()
        if hook is not None:
            hooks.append((item.name, declared.key, hook))

    def build(self: Schema, data: dict[str, Any], **kwargs: Any) -> object:
        data.pop("schema_version", None)
        for name, key, hook in hooks:
            try:
                data[name] = hook(data[name])
            except ValidationError as err:
                raise ValidationError({key: err.messages}) from None
        return record(**data)

    attributes["_record"] = post_load(build)
    schema_class: type[Schema] = type(f"{record.__name__}Schema", (_Part,), attributes)
    return schema_class()
