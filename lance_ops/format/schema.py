"""Lance schemas: the manifest's flat ``Field`` list <-> a field tree <-> Arrow.

A Lance schema is a tree of fields, stored in the manifest flattened in
pre-order, each field with a table-unique ``id`` and its parent's id (-1 for a
top-level field). Types are Lance *logical type* strings ("int64",
"timestamp:us:UTC", "fixed_size_list:float:128", "struct", "list", ...).

Field ids matter more than names: data files record which field ids they hold
(``DataFile.fields``), renames keep ids, and new columns get new ids. Ids are
assigned depth-first at creation (0, 1, 2, ...) and continue after the table's
highest id when columns are added.

Which fields own a column in a data file depends on the file version (see
:func:`data_file_field_ids`): in 2.1+ files only leaves do (struct, list and map
parents do not; a fixed-size list of a primitive is a leaf; a packed struct is
one leaf); in 2.0 files every field does.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import pyarrow as pa

from ..errors import CorruptTableError, SchemaMismatchError, UnsupportedFeatureError
from .proto import file_pb2

#: Arrow field metadata key that makes a struct one packed column.
PACKED_STRUCT_KEYS = ("lance-encoding:packed", "packed")

_ENC_NONE, _ENC_PLAIN, _ENC_VAR_BINARY, _ENC_DICTIONARY = 0, 1, 2, 3


@dataclass
class Field:
    """One node of a Lance schema tree."""

    name: str
    logical_type: str
    id: int = -1
    nullable: bool = True
    children: list["Field"] = field(default_factory=list)
    metadata: dict[str, bytes] = field(default_factory=dict)
    encoding: int = _ENC_NONE
    extension_name: str = ""
    unenforced_primary_key: bool = False
    #: (offset, length) of a legacy dictionary field's values in the manifest
    #: file (carried through; the manifest writer relocates them).
    dictionary: tuple[int, int] | None = None

    # ------------------------------------------------------------------ walking
    def walk(self) -> Iterator["Field"]:
        """This field and its descendants in pre-order."""
        yield self
        for child in self.children:
            yield from child.walk()

    @property
    def is_packed_struct(self) -> bool:
        """A struct stored as one column (field metadata ``lance-encoding:packed``
        true). Keys may be ``str`` (manifest fields) or ``bytes`` (Arrow
        metadata as pyarrow returns it): both are looked up."""
        if self.logical_type != "struct":
            return False
        for k in PACKED_STRUCT_KEYS:
            v = self.metadata.get(k, self.metadata.get(k.encode()))
            if v is not None and _b(v).lower() in (b"true", b"1"):
                return True
        return False

    def column_leaves(self) -> Iterator["Field"]:
        """Fields of this subtree that own a column in a 2.1+ data file."""
        if not self.children or self.is_packed_struct:
            yield self
            return
        for child in self.children:
            yield from child.column_leaves()

    def to_arrow(self) -> pa.Field:
        meta = dict(self.metadata) if self.metadata else None
        return pa.field(self.name, self.arrow_type(), nullable=self.nullable, metadata=meta)

    def arrow_type(self) -> pa.DataType:
        return _logical_to_arrow(self.logical_type, self.children)


@dataclass
class Schema:
    """A Lance schema: top-level fields plus schema-level metadata."""

    fields: list[Field]
    metadata: dict[str, bytes] = field(default_factory=dict)

    # ------------------------------------------------------------ conversions
    @classmethod
    def from_proto(cls, pb_fields: Iterable[file_pb2.Field], metadata=None) -> "Schema":
        """Rebuild the tree from the manifest's flat pre-order field list."""
        by_id: dict[int, Field] = {}
        top: list[Field] = []
        for pb in pb_fields:
            f = Field(
                name=pb.name,
                logical_type=pb.logical_type,
                id=pb.id,
                nullable=pb.nullable,
                metadata=dict(pb.metadata),
                encoding=int(pb.encoding),
                extension_name=pb.extension_name,
                unenforced_primary_key=pb.unenforced_primary_key,
                dictionary=(pb.dictionary.offset, pb.dictionary.length) if pb.HasField("dictionary") else None,
            )
            if pb.parent_id < 0:
                top.append(f)
            else:
                parent = by_id.get(pb.parent_id)
                if parent is None:
                    raise CorruptTableError(
                        f"schema field {pb.name!r} (id {pb.id}) names unknown parent {pb.parent_id}"
                    )
                parent.children.append(f)
            by_id[pb.id] = f
        return cls(top, dict(metadata or {}))

    def to_proto(self) -> list[file_pb2.Field]:
        """The flat pre-order field list a manifest stores."""
        out: list[file_pb2.Field] = []

        def emit(f: Field, parent_id: int) -> None:
            pb = file_pb2.Field(
                name=f.name,
                id=f.id,
                parent_id=parent_id,
                logical_type=f.logical_type,
                nullable=f.nullable,
                encoding=f.encoding,
                extension_name=f.extension_name,
                unenforced_primary_key=f.unenforced_primary_key,
            )
            for k, v in f.metadata.items():
                pb.metadata[k] = v
            if f.dictionary is not None:
                pb.dictionary.offset, pb.dictionary.length = f.dictionary
            out.append(pb)
            for c in f.children:
                emit(c, f.id)

        for f in self.fields:
            emit(f, -1)
        return out

    @classmethod
    def from_arrow(cls, schema: pa.Schema, first_id: int = 0) -> "Schema":
        """A new schema from Arrow, ids assigned depth-first from ``first_id``."""
        fields = [field_from_arrow(f) for f in schema]
        out = cls(fields, {_b(k): _b(v) for k, v in (schema.metadata or {}).items()})
        out.assign_ids(first_id)
        return out

    def to_arrow(self) -> pa.Schema:
        return pa.schema([f.to_arrow() for f in self.fields], metadata=self.metadata or None)

    # ------------------------------------------------------------------ ids
    def walk(self) -> Iterator[Field]:
        for f in self.fields:
            yield from f.walk()

    def assign_ids(self, first_id: int) -> int:
        """Give every field with id -1 the next id in pre-order; returns the next
        free id."""
        next_id = first_id
        for f in self.walk():
            if f.id < 0:
                f.id = next_id
                next_id += 1
        return next_id

    def max_id(self) -> int:
        return max((f.id for f in self.walk()), default=-1)

    def by_id(self) -> dict[int, Field]:
        return {f.id: f for f in self.walk()}

    def parent_ids(self) -> dict[int, int]:
        """field id -> parent field id (-1 for top level)."""
        out: dict[int, int] = {}

        def rec(f: Field, parent: int) -> None:
            out[f.id] = parent
            for c in f.children:
                rec(c, f.id)

        for f in self.fields:
            rec(f, -1)
        return out

    # --------------------------------------------------------------- lookups
    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaMismatchError(f"no column {name!r} in schema {self.names}")

    def has(self, name: str) -> bool:
        return any(f.name == name for f in self.fields)

    def project(self, names: Iterable[str]) -> "Schema":
        return Schema([self.field(n) for n in names], dict(self.metadata))

    def copy(self) -> "Schema":
        return copy.deepcopy(self)

    def same_structure(self, other: "Schema") -> bool:
        """Equal names, types, nullability and ids (metadata ignored)."""

        def key(f: Field):
            return (f.name, f.logical_type, f.nullable, f.id, tuple(key(c) for c in f.children))

        return [key(f) for f in self.fields] == [key(f) for f in other.fields]


# ---------------------------------------------------------------------------
# Arrow -> Lance
# ---------------------------------------------------------------------------


def _b(x) -> bytes:
    return x if isinstance(x, bytes) else str(x).encode()


def _s(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def field_from_arrow(f: pa.Field) -> Field:
    """A Lance field tree (ids unassigned) for an Arrow field."""
    t = f.type
    children: list[Field] = []
    if pa.types.is_struct(t):
        children = [field_from_arrow(t.field(i)) for i in range(t.num_fields)]
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        children = [field_from_arrow(t.value_field)]
    elif pa.types.is_fixed_size_list(t) and pa.types.is_struct(t.value_type):
        children = [field_from_arrow(t.value_field)]
    elif pa.types.is_map(t):
        entries = pa.field(
            "entries",
            pa.struct([t.key_field, t.item_field]),
            nullable=False,
        )
        children = [field_from_arrow(entries)]
    # Keys as str (as the manifest's map<string, bytes> has them), values bytes.
    meta = {_s(k): _b(v) for k, v in (f.metadata or {}).items()}
    ext = ""
    if isinstance(t, pa.ExtensionType):
        ext = t.extension_name
        t = t.storage_type
    return Field(
        name=f.name,
        logical_type=arrow_to_logical(t),
        nullable=f.nullable,
        children=children,
        metadata=meta,
        encoding=_encoding_for(t),
        extension_name=ext,
    )


def _encoding_for(t: pa.DataType) -> int:
    if pa.types.is_dictionary(t):
        return _ENC_DICTIONARY
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return _ENC_VAR_BINARY
    if pa.types.is_struct(t) or pa.types.is_null(t):
        return _ENC_NONE
    return _ENC_PLAIN


_SIMPLE_TO_LOGICAL = {
    pa.null(): "null",
    pa.bool_(): "bool",
    pa.int8(): "int8",
    pa.uint8(): "uint8",
    pa.int16(): "int16",
    pa.uint16(): "uint16",
    pa.int32(): "int32",
    pa.uint32(): "uint32",
    pa.int64(): "int64",
    pa.uint64(): "uint64",
    pa.float16(): "halffloat",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.binary(): "binary",
    pa.large_string(): "large_string",
    pa.large_binary(): "large_binary",
    pa.date32(): "date32:day",
    pa.date64(): "date64:ms",
}
_LOGICAL_TO_SIMPLE = {v: k for k, v in _SIMPLE_TO_LOGICAL.items()}


def arrow_to_logical(t: pa.DataType) -> str:
    """Lance logical type string of an Arrow type (as pylance 14 writes it)."""
    simple = _SIMPLE_TO_LOGICAL.get(t)
    if simple is not None:
        return simple
    if pa.types.is_timestamp(t):
        return f"timestamp:{t.unit}:{t.tz or '-'}"
    if pa.types.is_time32(t):
        return f"time32:{t.unit}"
    if pa.types.is_time64(t):
        return f"time64:{t.unit}"
    if pa.types.is_duration(t):
        return f"duration:{t.unit}"
    if pa.types.is_decimal128(t):
        return f"decimal:128:{t.precision}:{t.scale}"
    if pa.types.is_decimal256(t):
        return f"decimal:256:{t.precision}:{t.scale}"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed_size_binary:{t.byte_width}"
    if pa.types.is_fixed_size_list(t):
        return f"fixed_size_list:{arrow_to_logical(t.value_type)}:{t.list_size}"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_list(t):
        return "list.struct" if pa.types.is_struct(t.value_type) else "list"
    if pa.types.is_large_list(t):
        return "large_list.struct" if pa.types.is_struct(t.value_type) else "large_list"
    if pa.types.is_map(t):
        return "map"
    if pa.types.is_dictionary(t):
        return f"dict:{arrow_to_logical(t.value_type)}:{arrow_to_logical(t.index_type)}:false"
    raise UnsupportedFeatureError(f"Arrow type {t} has no Lance logical type")


def _logical_to_arrow(lt: str, children: list[Field]) -> pa.DataType:
    simple = _LOGICAL_TO_SIMPLE.get(lt)
    if simple is not None:
        return simple
    head, _, rest = lt.partition(":")
    try:
        if head == "timestamp":
            unit, _, tz = rest.partition(":")
            return pa.timestamp(unit, None if tz in ("-", "") else tz)
        if head == "time32":
            return pa.time32(rest)
        if head == "time64":
            return pa.time64(rest)
        if head == "duration":
            return pa.duration(rest)
        if head == "decimal":
            bits, p, s = rest.split(":")
            ctor = pa.decimal128 if bits == "128" else pa.decimal256
            return ctor(int(p), int(s))
        if head == "fixed_size_binary":
            return pa.binary(int(rest))
        if head == "fixed_size_list":
            inner, _, size = rest.rpartition(":")
            if inner == "struct":
                if len(children) != 1:
                    raise CorruptTableError(f"fixed_size_list:struct needs one child, got {len(children)}")
                return pa.list_(children[0].to_arrow(), int(size))
            return pa.list_(_logical_to_arrow(inner, []), int(size))
        if head == "dict":
            value, index, _ordered = rest.rsplit(":", 2)
            return pa.dictionary(_logical_to_arrow(index, []), _logical_to_arrow(value, []))
        if lt == "struct":
            return pa.struct([c.to_arrow() for c in children])
        if lt in ("list", "list.struct"):
            return pa.list_(_only_child(lt, children).to_arrow())
        if lt in ("large_list", "large_list.struct"):
            return pa.large_list(_only_child(lt, children).to_arrow())
        if lt == "map":
            entries = _only_child(lt, children)
            if len(entries.children) != 2:
                raise CorruptTableError("map entries must have a key and a value field")
            key, value = entries.children
            return pa.map_(key.to_arrow(), value.to_arrow())
    except (ValueError, TypeError) as e:
        raise UnsupportedFeatureError(f"cannot interpret Lance logical type {lt!r}: {e}") from e
    raise UnsupportedFeatureError(f"unknown Lance logical type {lt!r}")


def _only_child(lt: str, children: list[Field]) -> Field:
    if len(children) != 1:
        raise CorruptTableError(f"{lt} field needs exactly one child, got {len(children)}")
    return children[0]


# ---------------------------------------------------------------------------
# Data files
# ---------------------------------------------------------------------------


def file_version_tuple(version: str) -> tuple[int, int]:
    """"2.2" -> (2, 2); legacy "0.1"/"0.2" -> (0, 0) as pylance records them."""
    major, _, minor = version.partition(".")
    if major == "0":
        return (0, 0)
    return (int(major), int(minor or 0))


def data_file_field_ids(fields: Iterable[Field], file_version: tuple[int, int]) -> list[int]:
    """``DataFile.fields`` for a file holding these (top-level) fields.

    2.1+: leaf fields only (packed structs count as one leaf). 2.0: every field
    in pre-order except children of packed structs and of fixed-size lists.
    Legacy 0.x: every field.
    """
    out: list[int] = []
    for f in fields:
        if file_version >= (2, 1):
            out.extend(x.id for x in f.column_leaves())
        elif file_version >= (2, 0):
            out.extend(_pre_order_unpacked(f))
        else:
            out.extend(x.id for x in f.walk())
    return out


def _pre_order_unpacked(f: Field) -> Iterator[int]:
    yield f.id
    if f.is_packed_struct or f.logical_type.startswith("fixed_size_list"):
        return
    for c in f.children:
        yield from _pre_order_unpacked(c)


def replace_fields(schema: Schema, replacements: dict[str, Field]) -> Schema:
    """A copy of ``schema`` with some top-level fields replaced by name."""
    out = schema.copy()
    out.fields = [replacements.get(f.name, f) for f in out.fields]
    return out


def strip_ids(f: Field) -> Field:
    """A copy of ``f`` with every id reset to -1 (for re-assignment)."""
    g = dataclasses.replace(f, id=-1, children=[strip_ids(c) for c in f.children])
    return g
