"""``build_manifest(read_manifest, transaction)``: the next manifest.

Given the latest committed snapshot (version n) and a transaction, produce the
manifest of version n+1, as pylance 14 builds it:

1. start from the previous manifest (config, table metadata, data format, base
   paths, high-water marks);
2. apply the operation (one function per operation type, dispatched with
   ``functools.singledispatch``) to get the fragment list, schema and indices;
3. give new fragments ids from ``max_fragment_id + 1`` and, with stable row
   ids, fresh row ids from ``next_row_id`` plus lineage version sequences;
4. sort fragments by id, drop data files whose fields are all tombstoned (-2),
   advance ``max_fragment_id``, recompute feature flags, stamp version,
   timestamp, writer version and transaction file;
5. validate (no duplicate fragment ids; data file versions match the format).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import singledispatch
from typing import Callable

import numpy as np
from pyroaring import BitMap

from ..errors import CommitConflictError, CorruptTableError, InvalidArgumentError, UnsupportedFeatureError
from ..format import rowids
from ..format.features import (
    FLAG_MIXED_FILE_VERSIONS,
    FLAG_STABLE_ROW_IDS,
    compute_flags,
)
from ..format.indexremap import compaction_rule
from ..format.messages import copy_message
from ..format.proto import table_pb2
from ..format.schema import Schema
from ..version import __version__
from .idempotence import stamp
from .log import Snapshot
from .operations import (
    Append,
    Clone,
    CreateIndex,
    DataReplacement,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    Transaction,
    Update,
    UpdateBases,
    UpdateConfig,
    UpdateMemWalState,
)

Fragment = table_pb2.DataFragment
WRITER_LIBRARY = "lance_ops"
DEFAULT_DATA_FORMAT = "2.2"


@dataclass
class BuildContext:
    """What building needs besides the previous manifest and the transaction."""

    previous: Snapshot | None
    version: int
    #: For a new table: enable stable row ids / which data file format.
    stable_row_ids: bool = False
    data_format: str | None = None
    #: Loads an older snapshot (Restore).
    load_snapshot: Callable[[int], Snapshot] | None = None
    timestamp: float | None = None
    #: Out: dictionary values of legacy dictionary fields the new manifest
    #: file must carry (by field id), from the manifest its fields came from.
    dictionaries: dict = field(default_factory=dict)


@dataclass
class Draft:
    """The manifest being built: plain Python lists, assembled at the end."""

    manifest: table_pb2.Manifest
    fragments: list[Fragment]
    indices: list[table_pb2.IndexMetadata]
    #: Fragments that need ids (and fresh row ids / lineage).
    new_fragments: list[Fragment] = field(default_factory=list)
    #: For new Update fragments: how many leading rows carry their row ids.
    carried_rows: dict[int, int] = field(default_factory=dict)
    #: Fragments whose every row's last_updated becomes the new version.
    touched_fragments: list[Fragment] = field(default_factory=list)
    stable_row_ids: bool = False


#: Manifest fields that describe one version only and are never carried into
#: the next (set afresh in :func:`_finish`, or left empty): ``version_aux_data``
#: is a position inside the *previous* manifest file ("not inheritable between
#: versions"), the section offsets are positions in the file being written,
#: ``tag`` is unused by pylance 14. Every other field is inherited from the
#: previous manifest unless the operation changes it, or recomputed from the
#: content (flags, fragments, high-water marks); tests/txn/test_manifest_fields
#: classifies each field of the proto.
PER_VERSION_FIELDS = (
    "version", "version_aux_data", "writer_version", "timestamp", "tag", "transaction_file",
    "index_section", "transaction_section", "transaction_section_deprecated",
)


def build_manifest(ctx: BuildContext, txn: Transaction) -> tuple[table_pb2.Manifest, list[table_pb2.IndexMetadata]]:
    prev = ctx.previous
    m = table_pb2.Manifest()
    if prev is not None:
        m.CopyFrom(prev.manifest)
        m.DiscardUnknownFields()
    m.ClearField("fragments")
    for name in PER_VERSION_FIELDS:
        m.ClearField(name)
    previous_fragments = [copy_message(f) for f in prev.fragments] if prev else []
    if prev is not None:
        for f in previous_fragments:
            inline_external_sequences(prev.store, f)
    draft = Draft(
        manifest=m,
        fragments=previous_fragments,
        indices=[copy_message(i) for i in prev.indices] if prev else [],
        stable_row_ids=prev.stable_row_ids if prev else ctx.stable_row_ids,
    )
    if prev is None:
        m.data_format.file_format = "lance"
        m.data_format.version = ctx.data_format or DEFAULT_DATA_FORMAT
    ctx.dictionaries = dict(prev.file.dictionaries) if prev is not None else {}
    apply_operation(txn.operation, draft, ctx)
    _finish(draft, ctx, txn)
    stamp(draft.manifest, txn.properties)
    return draft.manifest, draft.indices


# ---------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------


@singledispatch
def apply_operation(op: Operation, draft: Draft, ctx: BuildContext) -> None:
    raise UnsupportedFeatureError(f"lance_ops cannot commit a {op.name} operation")


def _by_id(draft: Draft) -> dict[int, int]:
    return {f.id: i for i, f in enumerate(draft.fragments)}


def _require_fragments(draft: Draft, ids, what: str) -> None:
    present = {f.id for f in draft.fragments}
    missing = sorted(set(ids) - present)
    if missing:
        raise CommitConflictError(
            f"{what}: fragment(s) {missing} no longer exist in the latest version "
            "(removed by a concurrent commit)",
            retryable=True,
        )


@apply_operation.register
def _(op: Append, draft, ctx):
    news = [copy_message(f) for f in op.fragments]
    draft.fragments.extend(news)
    draft.new_fragments.extend(news)


@apply_operation.register
def _(op: Delete, draft, ctx):
    _require_fragments(draft, [f.id for f in op.updated_fragments] + list(op.deleted_fragment_ids), "delete")
    pos = _by_id(draft)
    for f in op.updated_fragments:
        draft.fragments[pos[f.id]] = copy_message(f)
    gone = set(op.deleted_fragment_ids)
    draft.fragments = [f for f in draft.fragments if f.id not in gone]


@apply_operation.register
def _(op: Overwrite, draft, ctx):
    m = draft.manifest
    news = [copy_message(f) for f in op.fragments]
    draft.fragments = list(news)
    draft.new_fragments = list(news)
    m.ClearField("fields")
    m.fields.extend(op.schema.to_proto())
    m.ClearField("schema_metadata")
    for k, v in op.schema.metadata.items():
        m.schema_metadata[k] = v
    for k, v in op.config_upsert_values.items():
        m.config[k] = v
    if op.initial_bases and not len(m.base_paths):
        m.base_paths.extend(op.initial_bases)
    draft.indices = []


@apply_operation.register
def _(op: Merge, draft, ctx):
    m = draft.manifest
    before = {f.id: f for f in draft.fragments}
    draft.fragments = [copy_message(f) for f in op.fragments]
    for f in draft.fragments:
        old = before.get(f.id)
        if old is not None and list(old.files) != list(f.files):
            draft.touched_fragments.append(f)
    _set_schema(m, op.schema)
    _drop_indices_on_missing_fields(draft, op.schema)


@apply_operation.register
def _(op: Project, draft, ctx):
    m = draft.manifest
    schema = Schema(op.schema.fields, dict(m.schema_metadata))
    keep = {f.id for f in schema.walk()}
    for frag in draft.fragments:
        files = [df for df in frag.files if any(x in keep for x in df.fields if x >= 0)]
        if len(files) != len(frag.files):
            frag.ClearField("files")
            frag.files.extend(files)
    m.ClearField("fields")
    m.fields.extend(schema.to_proto())
    _drop_indices_on_missing_fields(draft, schema)


@apply_operation.register
def _(op: Restore, draft, ctx):
    if ctx.load_snapshot is None:
        raise UnsupportedFeatureError("restore needs access to older versions")
    src = ctx.load_snapshot(op.version)
    m = draft.manifest
    keep_max = m.max_fragment_id if m.HasField("max_fragment_id") else None
    keep_next = m.next_row_id
    m.CopyFrom(src.manifest)
    m.DiscardUnknownFields()
    m.ClearField("fragments")
    m.ClearField("timestamp")
    if keep_max is not None:
        m.max_fragment_id = max(keep_max, m.max_fragment_id if m.HasField("max_fragment_id") else 0)
    m.next_row_id = max(keep_next, m.next_row_id)
    draft.fragments = [copy_message(f) for f in src.fragments]
    draft.indices = [copy_message(i) for i in src.indices]
    draft.stable_row_ids = src.stable_row_ids
    ctx.dictionaries = dict(src.file.dictionaries)


@apply_operation.register
def _(op: ReserveFragments, draft, ctx):
    m = draft.manifest
    # The high-water mark; a manifest that never recorded one has used the ids
    # of its fragments (as pylance's Manifest::max_fragment_id()).
    if m.HasField("max_fragment_id"):
        base = m.max_fragment_id
    else:
        base = max((f.id for f in draft.fragments), default=0)
    m.max_fragment_id = base + op.num_fragments


@apply_operation.register
def _(op: Rewrite, draft, ctx):
    old_ids = op.old_fragment_ids()
    _require_fragments(draft, old_ids, "rewrite")
    for group in op.groups:
        ids = {f.id for f in group.old_fragments}
        positions = [i for i, f in enumerate(draft.fragments) if f.id in ids]
        news = [copy_message(f) for f in group.new_fragments]
        if positions and positions == list(range(positions[0], positions[0] + len(positions))):
            draft.fragments[positions[0] : positions[-1] + 1] = news
        else:
            draft.fragments = [f for f in draft.fragments if f.id not in ids] + news
    _rewrite_index_bitmaps(draft, op)


@apply_operation.register
def _(op: Update, draft, ctx):
    touched = [f.id for f in op.updated_fragments] + list(op.removed_fragment_ids)
    _require_fragments(draft, touched, "update")
    pos = _by_id(draft)
    for f in op.updated_fragments:
        draft.fragments[pos[f.id]] = copy_message(f)
    gone = set(op.removed_fragment_ids)
    draft.fragments = [f for f in draft.fragments if f.id not in gone]
    news = [copy_message(f) for f in op.new_fragments]
    for f in news:
        draft.carried_rows[id(f)] = rowids.count_row_ids(f.inline_row_ids) if f.HasField("inline_row_ids") else 0
    draft.fragments.extend(news)
    draft.new_fragments.extend(news)
    if op.rewrites_columns and draft.stable_row_ids:
        by_id = {f.id: f for f in draft.fragments}
        for frag_id, raw in op.updated_fragment_offsets.items():
            frag = by_id.get(frag_id)
            if frag is None:
                continue
            inline_external_sequences(ctx.previous.store if ctx.previous else None, frag)
            offsets = np.frombuffer(BitMap.deserialize(raw).to_array(), dtype=np.uint32)
            versions = rowids.decode_versions(
                frag.inline_last_updated_at_versions if frag.HasField("inline_last_updated_at_versions") else None,
                frag.physical_rows,
            )
            versions[offsets.astype(np.int64)] = ctx.version
            frag.inline_last_updated_at_versions = rowids.encode_versions(versions)
    # Indices over modified fields no longer cover the fragments they changed.
    if op.fields_modified:
        changed = {f.id for f in op.updated_fragments}
        modified = set(op.fields_modified)
        for idx in draft.indices:
            if modified & set(idx.fields) and idx.fragment_bitmap:
                bm = BitMap.deserialize(idx.fragment_bitmap)
                idx.fragment_bitmap = (bm - BitMap(changed)).serialize()


@apply_operation.register
def _(op: UpdateConfig, draft, ctx):
    m = draft.manifest
    _apply_map(m.config, op.config_updates)
    for k, v in op.legacy_upsert.items():
        m.config[k] = v
    for k in op.legacy_delete:
        m.config.pop(k, None)
    _apply_map(m.table_metadata, op.table_metadata_updates)
    _apply_map(m.schema_metadata, op.schema_metadata_updates, encode=True)
    if op.field_metadata_updates:
        by_id = {f.id: f for f in m.fields}
        for fid, upd in op.field_metadata_updates.items():
            if fid not in by_id:  # (dropped concurrently; pylance 14 refuses too)
                raise InvalidArgumentError(f"field metadata update: field id {fid} does not exist in the schema")
            _apply_map(by_id[fid].metadata, upd, encode=True)


def _apply_map(target, upd, encode: bool = False) -> None:
    if upd is None:
        return
    entries, replace = upd
    if replace:
        target.clear()
    for k, v in entries.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = v.encode() if encode else v


@apply_operation.register
def _(op: DataReplacement, draft, ctx):
    fields = {tuple(df.fields) for _, df in op.replacements}
    if len(fields) > 1:
        raise InvalidArgumentError(
            f"a data replacement must replace the same fields in every fragment, got {sorted(fields)}"
        )
    _require_fragments(draft, op.fragment_ids(), "data replacement")
    pos = _by_id(draft)
    for frag_id, new_file in op.replacements:
        frag = draft.fragments[pos[frag_id]]
        for df in frag.files:
            if list(df.fields) == list(new_file.fields) and (
                df.file_major_version,
                df.file_minor_version,
            ) == (new_file.file_major_version, new_file.file_minor_version):
                df.path = new_file.path
                df.file_size_bytes = new_file.file_size_bytes
                break
        else:
            frag.files.append(new_file)
        # Every row of a fragment that got a file is "updated" now (pylance 14
        # stamps the whole fragment's last-updated versions, too).
        draft.touched_fragments.append(frag)
    # Deviation (pylance 14 keeps them): indices over the replaced fields no
    # longer describe the replaced fragments -- take those out of their
    # fragment bitmaps (scanned, not pruned by stale zones), as an Update does.
    replaced = set(next(iter(fields), ()))
    changed = BitMap(op.fragment_ids())
    for idx in draft.indices:
        if replaced & set(idx.fields) and idx.fragment_bitmap:
            idx.fragment_bitmap = (BitMap.deserialize(idx.fragment_bitmap) - changed).serialize()


@apply_operation.register
def _(op: CreateIndex, draft, ctx):
    names = {i.name for i in op.new_indices}
    removed = {i.uuid.uuid for i in op.removed_indices}
    draft.indices = [i for i in draft.indices if i.name not in names and i.uuid.uuid not in removed]
    draft.indices.extend(copy_message(i) for i in op.new_indices)


@apply_operation.register
def _(op: UpdateBases, draft, ctx):
    m = draft.manifest
    next_id = max((b.id for b in m.base_paths), default=0) + 1
    for b in op.new_bases:
        clash = [x for x in m.base_paths if x.path == b.path or (b.name and x.name == b.name) or (b.id and x.id == b.id)]
        if clash:
            raise InvalidArgumentError(f"base path {b.path!r} (name {b.name!r}, id {b.id}) is already registered")
        nb = copy_message(b)
        if nb.id == 0:
            nb.id = next_id
            next_id += 1
        m.base_paths.append(nb)


@apply_operation.register
def _(op: Clone, draft, ctx):
    raise UnsupportedFeatureError("lance_ops does not create clones")


@apply_operation.register
def _(op: UpdateMemWalState, draft, ctx):
    raise UnsupportedFeatureError("lance_ops does not manage MemWAL state")


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _set_schema(m: table_pb2.Manifest, schema: Schema) -> None:
    m.ClearField("fields")
    m.fields.extend(schema.to_proto())
    m.ClearField("schema_metadata")
    for k, v in schema.metadata.items():
        m.schema_metadata[k] = v


def _drop_indices_on_missing_fields(draft: Draft, schema: Schema) -> None:
    ids = {f.id for f in schema.walk()}
    draft.indices = [i for i in draft.indices if set(i.fields) <= ids]


def _rewrite_index_bitmaps(draft: Draft, op: Rewrite) -> None:
    """Compaction moved rows; each index's fragment bitmap follows pylance
    14's rules (:mod:`lance_ops.format.indexremap`): an index rewritten
    alongside (``rewritten_indices``, remapped files) gets its new uuid, files
    and a bitmap with each group's old ids swapped for its new ones; any other
    index, by how its files address rows: with stable row ids, row-id
    addressed ones (BITMAP) get the same swap, the rest are *narrowed* (old
    ids out, new not in: the new fragments are scanned); without stable row
    ids it is left alone (its old ids name fragments that no longer exist)."""
    rewritten = {bytes(r.old_id.uuid): r for r in op.rewritten_indices}
    old_ids = BitMap(op.old_fragment_ids())
    for idx in draft.indices:
        r = rewritten.get(bytes(idx.uuid.uuid))
        if r is not None:
            idx.uuid.CopyFrom(r.new_id)
            if r.HasField("new_index_details"):
                idx.index_details.CopyFrom(r.new_index_details)
            if r.new_index_version:
                idx.index_version = r.new_index_version
            if len(r.files):
                idx.ClearField("files")
                idx.files.extend(r.files)
            idx.ClearField("base_id")  # (remapped files are the writer's own)
            rule = "extend"
        else:
            rule = compaction_rule(idx, draft.stable_row_ids)
        if not idx.fragment_bitmap or rule == "keep":
            continue
        bm = BitMap.deserialize(idx.fragment_bitmap)
        if rule in ("extend", "remap"):
            for g in op.groups:
                old = BitMap(f.id for f in g.old_fragments)
                if old.issubset(bm):
                    bm |= BitMap(f.id for f in g.new_fragments)
                bm -= old
        else:
            bm -= old_ids
        idx.fragment_bitmap = bm.serialize()


def inline_external_sequences(store, frag: Fragment) -> None:
    """Store a fragment's row id / version sequences inline. Sequences in
    external files (other Lance writers) are read once and inlined -- as
    pylance 14 writes them -- so every rule that reads or extends them
    (moved rows, lineage, REWRITE_COLUMNS) works on one form, and the
    sequences stay valid wherever the manifest is read from (a branch's
    ``ExternalFile`` path would name its own root)."""
    for which in (rowids.ROW_IDS, rowids.CREATED, rowids.UPDATED):
        inline, external = which
        if frag.HasField(external):
            if store is None:
                raise UnsupportedFeatureError(
                    f"fragment {frag.id} keeps its {inline[len('inline_'):]} in an external file; "
                    "reading it needs the table's store"
                )
            setattr(frag, inline, rowids.sequence_bytes(store, frag, which))


def _finish(draft: Draft, ctx: BuildContext, txn: Transaction) -> None:
    m = draft.manifest
    version = ctx.version
    store = ctx.previous.store if ctx.previous is not None else None
    for f in draft.fragments:
        inline_external_sequences(store, f)
    for name in PER_VERSION_FIELDS:  # (a Restore copied the old version's)
        m.ClearField(name)
    # Fragment ids.
    has_max = m.HasField("max_fragment_id")
    next_frag = (m.max_fragment_id + 1) if has_max else 0
    present = [f.id for f in draft.fragments if not any(f is n for n in draft.new_fragments)]
    if present and not has_max:
        next_frag = max(present) + 1
    for f in draft.new_fragments:
        f.id = next_frag
        next_frag += 1
    # Row ids and lineage for new fragments.
    if draft.stable_row_ids:
        next_row = m.next_row_id
        previous_created = None
        for f in draft.new_fragments:
            carried = draft.carried_rows.get(id(f), 0)
            fresh = f.physical_rows - carried
            if carried:
                # Moved rows keep the ids (and created-at versions) they carry;
                # rows after them are fresh inserts.
                f.inline_row_ids = rowids.append_row_id_range(f.inline_row_ids, next_row, fresh)
                if f.HasField("inline_created_at_versions"):
                    created = f.inline_created_at_versions
                else:  # a transaction that does not carry them (pylance's): look them up
                    if previous_created is None:
                        previous_created = _created_by_row_id(ctx.previous)
                    ids = rowids.decode_row_ids(f.inline_row_ids)[:carried]
                    created = rowids.encode_versions(
                        np.array([previous_created.get(int(r), version) for r in ids], dtype=np.uint64)
                    )
                f.inline_created_at_versions = rowids.append_version_run(created, version, fresh)
            else:
                f.inline_row_ids = rowids.encode_row_id_range(next_row, fresh)
                f.inline_created_at_versions = rowids.uniform_versions(version, f.physical_rows)
            next_row += fresh
            f.inline_last_updated_at_versions = rowids.uniform_versions(version, f.physical_rows)
        for f in draft.touched_fragments:
            f.inline_last_updated_at_versions = rowids.uniform_versions(version, f.physical_rows)
        m.next_row_id = next_row
        for f in draft.fragments:
            if not f.HasField("inline_row_ids"):
                raise CorruptTableError(f"fragment {f.id} has no row ids in a table with stable row ids")
    # Order, tombstones, high-water mark.
    draft.fragments.sort(key=lambda f: f.id)
    for f in draft.fragments:
        files = [df for df in f.files if not df.fields or any(x != -2 for x in df.fields)]
        if len(files) != len(f.files):
            f.ClearField("files")
            f.files.extend(files)
    ids = [f.id for f in draft.fragments]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise CommitConflictError(f"the commit would produce two fragments with id {dup[0]}", retryable=True)
    if ids:
        top = max(ids)
        m.max_fragment_id = max(top, m.max_fragment_id) if m.HasField("max_fragment_id") else top
    m.fragments.extend(draft.fragments)
    # Flags, stamps.
    prev_flags = (
        (ctx.previous.manifest.reader_feature_flags, ctx.previous.manifest.writer_feature_flags)
        if ctx.previous
        else (0, 0)
    )
    reader, writer = compute_flags(m, draft.stable_row_ids, prev_flags)
    m.reader_feature_flags = reader
    m.writer_feature_flags = writer
    m.version = version
    ts = ctx.timestamp if ctx.timestamp is not None else time.time()
    m.timestamp.seconds = int(ts)
    m.timestamp.nanos = int((ts - int(ts)) * 1e9)
    m.writer_version.Clear()
    m.writer_version.library = WRITER_LIBRARY
    m.writer_version.version = __version__
    m.transaction_file = txn.file_name
    _validate(m)


def _created_by_row_id(prev: Snapshot | None) -> dict[int, int]:
    out: dict[int, int] = {}
    if prev is None:
        return out
    for f in prev.fragments:
        ids_bytes = rowids.sequence_bytes(prev.store, f, rowids.ROW_IDS)
        if ids_bytes is None:
            continue
        ids = rowids.decode_row_ids(ids_bytes)
        created = rowids.decode_versions(rowids.sequence_bytes(prev.store, f, rowids.CREATED), f.physical_rows)
        out.update(zip(ids.tolist(), created.tolist()))
    return out


def _validate(m: table_pb2.Manifest) -> None:
    if m.reader_feature_flags & FLAG_MIXED_FILE_VERSIONS:
        return
    want = m.data_format.version
    if not want:
        return
    major, _, minor = want.partition(".")
    legacy = major == "0"  # legacy tables record their files as 0.x (pylance 14: 0.2 in a "0.1" table)
    expected = (int(major), int(minor or 0))
    for frag in m.fragments:
        for df in frag.files:
            got = (df.file_major_version, df.file_minor_version)
            if (got[0] != 0) if legacy else got != expected:
                raise CorruptTableError(
                    f"data file {df.path} has version {df.file_major_version}.{df.file_minor_version} "
                    f"but the table's data format is {want}"
                )


__all__ = ["BuildContext", "build_manifest", "apply_operation", "FLAG_STABLE_ROW_IDS"]
