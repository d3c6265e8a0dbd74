"""Typed transactions: one dataclass per operation of ``transaction.proto``.

A :class:`Transaction` is what one commit changes: its read version, a uuid, and
one :class:`Operation`. It serializes to the ``Transaction`` protobuf stored in
``_transactions/{read_version}-{uuid}.txn`` and inline in the manifest file.

Fragments, data files and index metadata inside operations stay protobuf
messages (``table_pb2.DataFragment`` ...): they are the typed objects the
manifest is made of, and copying them into parallel dataclasses would only add
a second representation to keep in sync. Schemas become :class:`Schema` trees.

Some operations carry in-memory extras that are not serialized and only matter
to the process that prepared them (e.g. the row offsets a delete affected, used
to rebase over a concurrent delete instead of failing).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

from google.protobuf.message import DecodeError
from pyroaring import BitMap

from ..errors import CorruptTableError
from ..format.messages import copy_message, copy_messages
from ..format.naming import new_uuid, transaction_file_name
from ..format.proto import table_pb2, transaction_pb2
from ..format.schema import Schema

Fragment = table_pb2.DataFragment
T = transaction_pb2.Transaction

REWRITE_ROWS = T.REWRITE_ROWS
REWRITE_COLUMNS = T.REWRITE_COLUMNS


class Operation:
    """Base of the typed operations. ``name`` is the transaction type name
    reported in ``CommitInfo.operation`` and ``history()``."""

    name: ClassVar[str] = "Unknown"
    proto_field: ClassVar[str] = ""

    def fill(self, pb: T) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def parse(cls, pb) -> "Operation":  # pragma: no cover - abstract
        raise NotImplementedError

    def parameters(self) -> dict[str, str]:
        """Small, human-readable description for ``history()``."""
        return {}


@dataclass
class Append(Operation):
    name: ClassVar[str] = "Append"
    proto_field: ClassVar[str] = "append"
    fragments: list[Fragment] = field(default_factory=list)

    def fill(self, pb):
        pb.append.fragments.extend(self.fragments)

    @classmethod
    def parse(cls, pb):
        return cls(copy_messages(pb.fragments, Fragment))

    def parameters(self):
        return {"numFragments": str(len(self.fragments))}


@dataclass
class Delete(Operation):
    name: ClassVar[str] = "Delete"
    proto_field: ClassVar[str] = "delete"
    updated_fragments: list[Fragment] = field(default_factory=list)
    deleted_fragment_ids: list[int] = field(default_factory=list)
    predicate: str = ""
    #: In memory only: fragment id -> physical offsets this delete removed.
    affected_rows: dict[int, BitMap] | None = None

    def fill(self, pb):
        pb.delete.updated_fragments.extend(self.updated_fragments)
        pb.delete.deleted_fragment_ids.extend(self.deleted_fragment_ids)
        pb.delete.predicate = self.predicate

    @classmethod
    def parse(cls, pb):
        return cls(copy_messages(pb.updated_fragments, Fragment), list(pb.deleted_fragment_ids), pb.predicate)

    def parameters(self):
        return {"predicate": self.predicate}


@dataclass
class Overwrite(Operation):
    name: ClassVar[str] = "Overwrite"
    proto_field: ClassVar[str] = "overwrite"
    fragments: list[Fragment] = field(default_factory=list)
    schema: Schema | None = None
    config_upsert_values: dict[str, str] = field(default_factory=dict)
    initial_bases: list[table_pb2.BasePath] = field(default_factory=list)

    def fill(self, pb):
        o = pb.overwrite
        o.fragments.extend(self.fragments)
        if self.schema is not None:
            o.schema.extend(self.schema.to_proto())
            for k, v in self.schema.metadata.items():
                o.schema_metadata[k] = v
        for k, v in self.config_upsert_values.items():
            o.config_upsert_values[k] = v
        o.initial_bases.extend(self.initial_bases)

    @classmethod
    def parse(cls, pb):
        return cls(
            copy_messages(pb.fragments, Fragment),
            Schema.from_proto(pb.schema, dict(pb.schema_metadata)),
            dict(pb.config_upsert_values),
            copy_messages(pb.initial_bases, table_pb2.BasePath),
        )


@dataclass
class CreateIndex(Operation):
    name: ClassVar[str] = "CreateIndex"
    proto_field: ClassVar[str] = "create_index"
    new_indices: list[table_pb2.IndexMetadata] = field(default_factory=list)
    removed_indices: list[table_pb2.IndexMetadata] = field(default_factory=list)

    def fill(self, pb):
        pb.create_index.new_indices.extend(self.new_indices)
        pb.create_index.removed_indices.extend(self.removed_indices)

    @classmethod
    def parse(cls, pb):
        return cls(
            copy_messages(pb.new_indices, table_pb2.IndexMetadata),
            copy_messages(pb.removed_indices, table_pb2.IndexMetadata),
        )

    def parameters(self):
        return {"indices": ",".join(i.name for i in self.new_indices)}


@dataclass
class RewriteGroup:
    old_fragments: list[Fragment]
    new_fragments: list[Fragment]


@dataclass
class Rewrite(Operation):
    name: ClassVar[str] = "Rewrite"
    proto_field: ClassVar[str] = "rewrite"
    groups: list[RewriteGroup] = field(default_factory=list)
    rewritten_indices: list = field(default_factory=list)  # Rewrite.RewrittenIndex messages
    #: In memory only: when a concurrent commit changed some groups' fragments,
    #: commit the other groups instead of failing (compaction re-plans the rest).
    allow_partial: bool = False
    #: In memory only: groups dropped by such a rebase.
    dropped_groups: list[RewriteGroup] = field(default_factory=list)

    def fill(self, pb):
        for g in self.groups:
            pg = pb.rewrite.groups.add()
            pg.old_fragments.extend(g.old_fragments)
            pg.new_fragments.extend(g.new_fragments)
        pb.rewrite.rewritten_indices.extend(self.rewritten_indices)

    @classmethod
    def parse(cls, pb):
        groups = [RewriteGroup(copy_messages(g.old_fragments, Fragment), copy_messages(g.new_fragments, Fragment)) for g in pb.groups]
        if not groups and (len(pb.old_fragments) or len(pb.new_fragments)):
            groups = [RewriteGroup(copy_messages(pb.old_fragments, Fragment), copy_messages(pb.new_fragments, Fragment))]
        return cls(groups, copy_messages(pb.rewritten_indices, T.Rewrite.RewrittenIndex))

    def old_fragment_ids(self) -> set[int]:
        return {f.id for g in self.groups for f in g.old_fragments}

    def parameters(self):
        return {
            "numGroups": str(len(self.groups)),
            "oldFragments": ",".join(str(i) for i in sorted(self.old_fragment_ids())),
        }


@dataclass
class Merge(Operation):
    name: ClassVar[str] = "Merge"
    proto_field: ClassVar[str] = "merge"
    fragments: list[Fragment] = field(default_factory=list)
    schema: Schema | None = None
    preserves_nullability: bool = True

    def fill(self, pb):
        pb.merge.fragments.extend(self.fragments)
        pb.merge.schema.extend(self.schema.to_proto())
        for k, v in self.schema.metadata.items():
            pb.merge.schema_metadata[k] = v
        pb.merge.preserves_nullability = self.preserves_nullability

    @classmethod
    def parse(cls, pb):
        return cls(
            copy_messages(pb.fragments, Fragment),
            Schema.from_proto(pb.schema, dict(pb.schema_metadata)),
            pb.preserves_nullability,
        )


@dataclass
class Project(Operation):
    name: ClassVar[str] = "Project"
    proto_field: ClassVar[str] = "project"
    schema: Schema | None = None
    preserves_nullability: bool = True

    def fill(self, pb):
        pb.project.schema.extend(self.schema.to_proto())
        pb.project.preserves_nullability = self.preserves_nullability

    @classmethod
    def parse(cls, pb):
        return cls(Schema.from_proto(pb.schema), pb.preserves_nullability)


@dataclass
class Restore(Operation):
    name: ClassVar[str] = "Restore"
    proto_field: ClassVar[str] = "restore"
    version: int = 0

    def fill(self, pb):
        pb.restore.version = self.version

    @classmethod
    def parse(cls, pb):
        return cls(pb.version)

    def parameters(self):
        return {"version": str(self.version)}


@dataclass
class ReserveFragments(Operation):
    name: ClassVar[str] = "ReserveFragments"
    proto_field: ClassVar[str] = "reserve_fragments"
    num_fragments: int = 0

    def fill(self, pb):
        pb.reserve_fragments.num_fragments = self.num_fragments

    @classmethod
    def parse(cls, pb):
        return cls(pb.num_fragments)

    def parameters(self):
        return {"numFragments": str(self.num_fragments)}


@dataclass
class Update(Operation):
    name: ClassVar[str] = "Update"
    proto_field: ClassVar[str] = "update"
    removed_fragment_ids: list[int] = field(default_factory=list)
    updated_fragments: list[Fragment] = field(default_factory=list)
    new_fragments: list[Fragment] = field(default_factory=list)
    fields_modified: list[int] = field(default_factory=list)
    fields_for_preserving_frag_bitmap: list[int] = field(default_factory=list)
    update_mode: int = REWRITE_ROWS
    #: fragment id -> portable roaring bitmap bytes of changed offsets
    #: (REWRITE_COLUMNS; lets a rebased commit restamp the new version).
    updated_fragment_offsets: dict[int, bytes] = field(default_factory=dict)
    mem_wal_to_merge: object | None = None
    #: In memory only: fragment id -> physical offsets whose old copies this
    #: update deleted (REWRITE_ROWS), for the row-level rebase.
    affected_rows: dict[int, BitMap] | None = None
    #: In memory only: description for history() (predicate, clause summary).
    description: dict[str, str] = field(default_factory=dict)

    def fill(self, pb):
        u = pb.update
        u.removed_fragment_ids.extend(self.removed_fragment_ids)
        u.updated_fragments.extend(self.updated_fragments)
        u.new_fragments.extend(self.new_fragments)
        u.fields_modified.extend(self.fields_modified)
        u.fields_for_preserving_frag_bitmap.extend(self.fields_for_preserving_frag_bitmap)
        u.update_mode = self.update_mode
        for k, v in self.updated_fragment_offsets.items():
            u.updated_fragment_offsets[k] = v
        if self.mem_wal_to_merge is not None:
            u.mem_wal_to_merge.CopyFrom(self.mem_wal_to_merge)

    @classmethod
    def parse(cls, pb):
        mw = copy_message(pb.mem_wal_to_merge) if pb.HasField("mem_wal_to_merge") else None
        return cls(
            list(pb.removed_fragment_ids),
            copy_messages(pb.updated_fragments, Fragment),
            copy_messages(pb.new_fragments, Fragment),
            list(pb.fields_modified),
            list(pb.fields_for_preserving_frag_bitmap),
            int(pb.update_mode),
            dict(pb.updated_fragment_offsets),
            mw,
        )

    @property
    def rewrites_columns(self) -> bool:
        return self.update_mode == REWRITE_COLUMNS

    def touched_fragment_ids(self) -> set[int]:
        return set(self.removed_fragment_ids) | {f.id for f in self.updated_fragments}

    def parameters(self):
        out = {"mode": "REWRITE_COLUMNS" if self.rewrites_columns else "REWRITE_ROWS"}
        out.update(self.description)
        return out


@dataclass
class UpdateConfig(Operation):
    """Map updates: each map is ``{key: value or None (delete)}`` plus a replace
    flag; None means "not updated"."""

    name: ClassVar[str] = "UpdateConfig"
    proto_field: ClassVar[str] = "update_config"
    config_updates: tuple[dict[str, str | None], bool] | None = None
    table_metadata_updates: tuple[dict[str, str | None], bool] | None = None
    schema_metadata_updates: tuple[dict[str, str | None], bool] | None = None
    field_metadata_updates: dict[int, tuple[dict[str, str | None], bool]] = field(default_factory=dict)
    #: Deprecated forms (read only).
    legacy_upsert: dict[str, str] = field(default_factory=dict)
    legacy_delete: list[str] = field(default_factory=list)

    @staticmethod
    def _fill_map(msg, upd):
        entries, replace = upd
        for k, v in entries.items():
            e = msg.update_entries.add()
            e.key = k
            if v is not None:
                e.value = v
        msg.replace = replace

    @staticmethod
    def _parse_map(msg):
        return ({e.key: (e.value if e.HasField("value") else None) for e in msg.update_entries}, msg.replace)

    def fill(self, pb):
        u = pb.update_config
        u.SetInParent()
        if self.config_updates is not None:
            self._fill_map(u.config_updates, self.config_updates)
        if self.table_metadata_updates is not None:
            self._fill_map(u.table_metadata_updates, self.table_metadata_updates)
        if self.schema_metadata_updates is not None:
            self._fill_map(u.schema_metadata_updates, self.schema_metadata_updates)
        for fid, upd in self.field_metadata_updates.items():
            self._fill_map(u.field_metadata_updates[fid], upd)

    @classmethod
    def parse(cls, pb):
        return cls(
            cls._parse_map(pb.config_updates) if pb.HasField("config_updates") else None,
            cls._parse_map(pb.table_metadata_updates) if pb.HasField("table_metadata_updates") else None,
            cls._parse_map(pb.schema_metadata_updates) if pb.HasField("schema_metadata_updates") else None,
            {k: cls._parse_map(v) for k, v in pb.field_metadata_updates.items()},
            dict(pb.upsert_values),
            list(pb.delete_keys),
        )

    def config_keys(self) -> set[str]:
        keys = set(self.legacy_upsert) | set(self.legacy_delete)
        if self.config_updates is not None:
            keys |= set(self.config_updates[0])
        return keys

    def touches_schema_metadata(self) -> bool:
        return self.schema_metadata_updates is not None or bool(self.field_metadata_updates)


@dataclass
class DataReplacement(Operation):
    name: ClassVar[str] = "DataReplacement"
    proto_field: ClassVar[str] = "data_replacement"
    replacements: list[tuple[int, table_pb2.DataFile]] = field(default_factory=list)

    def fill(self, pb):
        pb.data_replacement.SetInParent()
        for frag_id, f in self.replacements:
            g = pb.data_replacement.replacements.add()
            g.fragment_id = frag_id
            g.new_file.CopyFrom(f)

    @classmethod
    def parse(cls, pb):
        return cls([(g.fragment_id, copy_message(g.new_file)) for g in pb.replacements])

    def fragment_ids(self) -> set[int]:
        return {i for i, _ in self.replacements}

    def field_ids(self) -> set[int]:
        return {x for _, f in self.replacements for x in f.fields if x >= 0}


@dataclass
class Clone(Operation):
    name: ClassVar[str] = "Clone"
    proto_field: ClassVar[str] = "clone"
    message: object = None

    def fill(self, pb):
        pb.clone.CopyFrom(self.message)

    @classmethod
    def parse(cls, pb):
        return cls(copy_message(pb))


@dataclass
class UpdateBases(Operation):
    name: ClassVar[str] = "UpdateBases"
    proto_field: ClassVar[str] = "update_bases"
    new_bases: list[table_pb2.BasePath] = field(default_factory=list)

    def fill(self, pb):
        pb.update_bases.SetInParent()
        pb.update_bases.new_bases.extend(self.new_bases)

    @classmethod
    def parse(cls, pb):
        return cls(copy_messages(pb.new_bases, table_pb2.BasePath))


@dataclass
class UpdateMemWalState(Operation):
    name: ClassVar[str] = "UpdateMemWalState"
    proto_field: ClassVar[str] = "update_mem_wal_state"
    message: object = None

    def fill(self, pb):
        pb.update_mem_wal_state.CopyFrom(self.message)

    @classmethod
    def parse(cls, pb):
        return cls(copy_message(pb))


@dataclass
class UnknownOperation(Operation):
    """An operation this version of lance_ops cannot decode (a newer writer's)."""

    name: ClassVar[str] = "Unknown"

    def fill(self, pb):
        raise CorruptTableError("cannot write an unknown operation")

    @classmethod
    def parse(cls, pb):
        return cls()


OPERATIONS: dict[str, type[Operation]] = {
    c.proto_field: c
    for c in (
        Append, Delete, Overwrite, CreateIndex, Rewrite, Merge, Restore, ReserveFragments,
        Update, Project, UpdateConfig, DataReplacement, Clone, UpdateBases, UpdateMemWalState,
    )
}


@dataclass
class Transaction:
    """One commit's change: read version, uuid, operation, properties."""

    read_version: int
    operation: Operation
    uuid: str = field(default_factory=new_uuid)
    tag: str = ""
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def file_name(self) -> str:
        return transaction_file_name(self.read_version, self.uuid)

    def to_proto(self) -> T:
        pb = T(read_version=self.read_version, uuid=self.uuid, tag=self.tag)
        for k, v in self.properties.items():
            pb.transaction_properties[k] = v
        self.operation.fill(pb)
        return pb

    def to_bytes(self) -> bytes:
        return self.to_proto().SerializeToString()

    @classmethod
    def from_proto(cls, pb: T) -> "Transaction":
        kind = pb.WhichOneof("operation")
        op_cls = OPERATIONS.get(kind) if kind else None
        op = op_cls.parse(getattr(pb, kind)) if op_cls else UnknownOperation()
        return cls(pb.read_version, op, pb.uuid, pb.tag, dict(pb.transaction_properties))

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "") -> "Transaction":
        pb = T()
        try:
            pb.ParseFromString(data)
        except DecodeError as e:
            raise CorruptTableError(f"cannot decode transaction: {e}", path or None) from e
        if pb.WhichOneof("operation") is None and not pb.uuid:
            # Every Lance writer sets a uuid; an operation we do not know
            # (a newer Lance) still has one and reads as "Unknown".
            raise CorruptTableError("transaction holds neither an operation nor a uuid", path or None)
        return cls.from_proto(pb)

    def with_read_version(self, read_version: int) -> "Transaction":
        return dataclasses.replace(self, read_version=read_version)
