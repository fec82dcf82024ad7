"""The kinds of value a thread record holds (docs/design.md#state-record).

A record field is declared once, in `store/model.py`: a dataclass field whose metadata (`wire`) gives its key
in the document and its kind. A kind says, for one value, how the document spells it (`dump`), how a file
is checked and read (`schema_field`, then `loaded`), what reading back the written file yields (`stored`) and
how to copy it without sharing anything mutable (`copy`); `store/derive.py` derives the loader, the writer
and the copies of every record from those declarations. A kind's operation that is None leaves the value as
it is (an immutable value needs no copy), which lets the derived code skip the call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol

from marshmallow import ValidationError, fields, validate

__all__ = [
    "FLAG",
    "HEX64",
    "NATURAL",
    "OPTIONAL_JSON_OBJECT",
    "OPTIONAL_TEXT",
    "TEXT",
    "TIMESTAMP",
    "JsonObject",
    "Kind",
    "Lenient",
    "Nested",
    "NestedList",
    "NestedMap",
    "OptionalNested",
    "Records",
    "SortedSet",
    "UsableStringList",
    "UsableStringMap",
    "Wire",
    "copy_json",
    "format_rfc3339_ms",
    "parse_rfc3339_ms",
    "sorted_json",
    "wire",
]

Op = Callable[[Any], Any]
OwnerOp = Callable[[Any, Any], Any]


class RecordCodec(Protocol):
    """What `store/derive.py` derives for one record class."""

    @property
    def schema(self) -> Any: ...  # a marshmallow Schema instance

    @property
    def dump(self) -> Op: ...

    @property
    def copy(self) -> Op: ...

    @property
    def stored(self) -> Op: ...


class Records(Protocol):
    def of(self, record: type) -> RecordCodec: ...


class Kind:
    """One kind of value. `dump` and `stored` of a kind with `needs_owner` also get the record holding the
    value (a window that depends on a sibling field)."""

    omit_none: bool = False  # the key is left out of the document while the value is None
    needs_owner: bool = False

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        raise NotImplementedError

    def dump(self, records: Records) -> Op | OwnerOp | None:
        return None

    def loaded(self) -> Op | None:
        """Applied to the checked value before the record is built; may raise `ValidationError`."""
        return None

    def stored(self, records: Records) -> Op | OwnerOp | None:
        return None

    def copy(self, records: Records) -> Op | None:
        return None


@dataclass(frozen=True)
class Wire:
    key: str
    kind: Kind
    absent: object = MISSING  # what a file without the key means, when not the field's default


def wire(key: str, kind: Kind, *, absent: object = MISSING) -> dict[str, Wire]:
    """The metadata of a record field: `field(metadata=wire("runId", TEXT))`."""
    return {"wire": Wire(key, kind, absent)}


# ------------------------------------------------------------------------------------------- JSON values


def sorted_json(value: object) -> object:
    """Deep copy with object keys sorted, so the file is stable without `sort_keys`; NaN and infinities
    are refused here (orjson would write them as null)."""
    if isinstance(value, Mapping):
        return {str(key): sorted_json(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [sorted_json(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("NaN or Infinity in thread state")
    return value


def copy_json(value: object) -> object:
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value  # str, int, float, bool, None: immutable


# ------------------------------------------------------------------------------------------- time

_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


def format_rfc3339_ms(ms: int) -> str:
    """Epoch milliseconds → `2026-11-29T19:30:00.000Z` (integer arithmetic, no float rounding)."""
    if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= _MAX_MS:
        raise ValueError("timestamp out of range")
    seconds, millis = divmod(ms, 1000)
    moment = _EPOCH + timedelta(seconds=seconds)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{millis:03d}Z"


def parse_rfc3339_ms(text: str) -> int:
    """RFC 3339 timestamp with an explicit offset → epoch milliseconds (sub-ms digits truncated)."""
    if _RFC3339.fullmatch(text) is None:
        raise ValueError("not an RFC 3339 timestamp")
    moment = datetime.fromisoformat(text)
    ms = (moment - _EPOCH) // _ONE_MS
    if not 0 <= ms <= _MAX_MS:
        raise ValueError("timestamp out of range")
    return ms


# ------------------------------------------------------------------------------------------- checks


def _errors(text: str) -> dict[str, Any]:
    return {"required": "is required", "null": text, "invalid": text, "type": text}


class _Flag(fields.Boolean):
    """JSON true/false only."""

    def __init__(self, **options: Any) -> None:
        super().__init__(error_messages=_errors("must be a boolean"), **options)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class _Timestamp(fields.Field[int]):
    """An RFC 3339 timestamp; null reads as the absent value."""

    def __init__(self, **options: Any) -> None:
        super().__init__(allow_none=True, **options)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> int:
        try:
            if not isinstance(value, str):
                raise ValueError("not a string")
            return parse_rfc3339_ms(value)
        except ValueError:
            raise ValidationError("must be an RFC 3339 timestamp") from None

    def deserialize(
        self, value: Any, attr: str | None = None, data: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        if value is None:
            return self.load_default() if callable(self.load_default) else self.load_default
        return super().deserialize(value, attr, data, **kwargs)


class _Lenient(fields.Field[object]):
    """Any JSON value, cleaned by `keep` instead of refused."""

    def __init__(self, keep: Op, **options: Any) -> None:
        super().__init__(allow_none=True, **options)
        self.keep = keep

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> object:
        return self.keep(value)


def _text_field(**options: Any) -> fields.String:
    text = "must be a non-empty string"
    return fields.String(validate=validate.Length(min=1, error=text), error_messages=_errors(text), **options)


def _array(item: fields.Field[Any], **options: Any) -> fields.List[Any]:
    return fields.List(item, error_messages=_errors("must be an array"), **options)


def _object(**options: Any) -> fields.Dict:
    return fields.Dict(error_messages=_errors("must be an object"), **options)


def _usable(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _sorted_unique(items: list[Any]) -> list[Any]:
    return sorted(set(items))


# ------------------------------------------------------------------------------------------- scalars


class _Text(Kind):
    """A non-empty string."""

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return _text_field(**options)


class _OptionalText(Kind):
    """A string or null."""

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return fields.String(allow_none=True, error_messages=_errors("must be a string or null"), **options)


class _Natural(Kind):
    """An integer >= 0 (strict: no floats, no booleans)."""

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return fields.Integer(
            strict=True,
            validate=validate.Range(min=0, error="must be an integer >= 0"),
            error_messages=_errors("must be an integer >= 0"),
            **options,
        )


class _FlagKind(Kind):
    """true or false."""

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return _Flag(**options)

    def dump(self, records: Records) -> Op:
        return bool

    def stored(self, records: Records) -> Op:
        return bool


class _TimestampKind(Kind):
    """Epoch milliseconds, written as RFC 3339 UTC with milliseconds."""

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return _Timestamp(**options)

    def dump(self, records: Records) -> Op:
        return format_rfc3339_ms


class _Hex64(Kind):
    """A SHA-256 in lower-case hex (as an item of a collection)."""

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return fields.String(validate=_is_hex64, error_messages=_errors("must be a string"), **options)


def _is_hex64(value: str) -> None:
    if _HEX64.fullmatch(value) is None:
        raise ValidationError("must be 64-char lowercase hex")


_HEX64 = re.compile(r"[0-9a-f]{64}")

TEXT: Final[Kind] = _Text()
OPTIONAL_TEXT: Final[Kind] = _OptionalText()
NATURAL: Final[Kind] = _Natural()
FLAG: Final[Kind] = _FlagKind()
TIMESTAMP: Final[Kind] = _TimestampKind()
HEX64: Final[Kind] = _Hex64()


@dataclass(frozen=True)
class Lenient(Kind):
    """An immutable value that is never a reason to call the file corrupt: `keep` drops what is unusable."""

    keep: Op
    omit_none: bool = True

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return _Lenient(self.keep, **options)

    def stored(self, records: Records) -> Op:
        return self.keep


# ------------------------------------------------------------------------------------------- collections


@dataclass(frozen=True)
class SortedSet(Kind):
    """A set of strings, kept and written sorted."""

    item: Kind

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return _array(self.item.schema_field(records), **options)

    def dump(self, records: Records) -> Op:
        return _sorted_unique

    def loaded(self) -> Op:
        return _sorted_unique

    def stored(self, records: Records) -> Op:
        return _sorted_unique

    def copy(self, records: Records) -> Op:
        return list


@dataclass(frozen=True)
class UsableStringMap(Kind):
    """A bounded memory of non-empty string → non-empty string, in age order: `window` keeps the newest
    on the way out; an unusable entry is dropped on the way in (only a wrong container type is corrupt)."""

    window: Op

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return _object(**options)

    def dump(self, records: Records) -> Op:
        return self.window

    def loaded(self) -> Op:
        return _usable_map

    def stored(self, records: Records) -> Op:
        window = self.window
        return lambda value: _usable_map(window(value))

    def copy(self, records: Records) -> Op:
        return dict


def _usable_map(value: Mapping[Any, Any]) -> dict[str, str]:
    return {k: v for k, v in value.items() if _usable(k) and _usable(v)}


@dataclass(frozen=True)
class UsableStringList(Kind):
    """A bounded memory of distinct non-empty strings in age order, read as leniently as `UsableStringMap`."""

    window: Op

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return _array(fields.Raw(allow_none=True), **options)

    def dump(self, records: Records) -> Op:
        return self.window

    def loaded(self) -> Op:
        return _usable_list

    def stored(self, records: Records) -> Op:
        window = self.window
        return lambda value: _usable_list(window(value))

    def copy(self, records: Records) -> Op:
        return list


def _usable_list(value: list[Any]) -> list[str]:
    return list(dict.fromkeys(item for item in value if _usable(item)))


@dataclass(frozen=True)
class JsonObject(Kind):
    """A JSON object from elsewhere, cut down by `keep` (which also sorts it) both ways."""

    keep: Op

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return _object(**options)

    def dump(self, records: Records) -> Op:
        return self.keep

    def loaded(self) -> Op:
        return self.keep

    def stored(self, records: Records) -> Op:
        return self.keep

    def copy(self, records: Records) -> Op:
        return copy_json


class _OptionalJsonObject(Kind):
    """A JSON object kept as it is (written with sorted keys), or absent."""

    omit_none = True

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return _object(allow_none=True, **options)

    def dump(self, records: Records) -> Op:
        return sorted_json

    def stored(self, records: Records) -> Op:
        return lambda value: None if value is None else sorted_json(value)

    def copy(self, records: Records) -> Op:
        return copy_json


OPTIONAL_JSON_OBJECT: Final[Kind] = _OptionalJsonObject()


# ------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Nested(Kind):
    """Another record, required."""

    record: type

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return fields.Nested(records.of(self.record).schema, error_messages=_errors("must be an object"), **options)

    def dump(self, records: Records) -> Op:
        return records.of(self.record).dump

    def stored(self, records: Records) -> Op:
        return records.of(self.record).stored

    def copy(self, records: Records) -> Op:
        return records.of(self.record).copy


@dataclass(frozen=True)
class OptionalNested(Nested):
    """Another record, or absent."""

    omit_none: bool = True

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return fields.Nested(records.of(self.record).schema, allow_none=True, **options)

    def stored(self, records: Records) -> Op:
        stored = records.of(self.record).stored
        return lambda value: None if value is None else stored(value)

    def copy(self, records: Records) -> Op:
        copy = records.of(self.record).copy
        return lambda value: None if value is None else copy(value)


@dataclass(frozen=True)
class NestedList(Kind):
    """A list of records, kept in `order`; `window(value, owner)` bounds it on the way out."""

    record: type
    window: OwnerOp
    order: Op
    needs_owner: bool = True

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        item = fields.Nested(records.of(self.record).schema, error_messages=_errors("must be an object"))
        return _array(item, **options)

    def _kept(self, value: list[Any], owner: object) -> list[Any]:
        return sorted(self.window(value, owner), key=self.order)

    def dump(self, records: Records) -> OwnerOp:
        dump = records.of(self.record).dump
        return lambda value, owner: [dump(item) for item in self._kept(value, owner)]

    def loaded(self) -> Op:
        return lambda value: sorted(value, key=self.order)

    def stored(self, records: Records) -> OwnerOp:
        stored = records.of(self.record).stored
        return lambda value, owner: [stored(item) for item in self._kept(value, owner)]

    def copy(self, records: Records) -> Op:
        copy = records.of(self.record).copy
        return lambda value: [copy(item) for item in value]


@dataclass(frozen=True)
class NestedMap(Kind):
    """Non-empty string → record, in insertion order; `key_of(record)` is the key each entry must have."""

    record: type
    key_of: Callable[[Any], object]
    problem: str

    def schema_field(self, records: Records, **options: Any) -> fields.Field[Any]:
        return fields.Dict(
            keys=fields.String(validate=validate.Length(min=1)),
            values=fields.Nested(records.of(self.record).schema),
            error_messages=_errors("must be an object"),
            **options,
        )

    def dump(self, records: Records) -> Op:
        dump = records.of(self.record).dump
        return lambda value: {key: dump(item) for key, item in value.items()}

    def loaded(self) -> Op:
        def checked(value: dict[str, Any]) -> dict[str, Any]:
            if any(self.key_of(item) != key for key, item in value.items()):
                raise ValidationError(self.problem)
            return value

        return checked

    def stored(self, records: Records) -> Op:
        stored = records.of(self.record).stored
        return lambda value: {key: stored(item) for key, item in value.items()}

    def copy(self, records: Records) -> Op:
        copy = records.of(self.record).copy
        return lambda value: {key: copy(item) for key, item in value.items()}
