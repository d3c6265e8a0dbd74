"""``build_manifest`` per operation kind, on small manifests built in memory
(shared/spec/transactions.md §2-§3). No data files are read: every snapshot is
a :class:`Snapshot` around a hand-made ``Manifest``."""
from __future__ import annotations

import pyarrow as pa
import pytest
from google.protobuf import any_pb2
from pyroaring import BitMap

from lance_ops.errors import (
    CommitConflictError,
    CorruptTableError,
    InvalidArgumentError,
    LanceOpsError,
    UnsupportedFeatureError,
)
from lance_ops.format import rowids
from lance_ops.format.manifest import ManifestFile
from lance_ops.format.naming import ManifestNaming
from lance_ops.format.proto import table_pb2, transaction_pb2
from lance_ops.format.schema import Schema
from lance_ops.storage import ObjectStore
from lance_ops.txn import operations as ops
from lance_ops.txn.build import BuildContext, build_manifest
from lance_ops.txn.log import Snapshot
from lance_ops.version import __version__

SCHEMA_AB = Schema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.int64())]))
SCHEMA_ABC = Schema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.int64()), ("c", pa.int64())]))
SCHEMA_AC = SCHEMA_ABC.project(["a", "c"])

F_DELETIONS, F_STABLE, F_CONFIG, F_BASES = 1, 2, 8, 16
F_MIXED_VERSIONS = 256

TS = 1_700_000_000.25
UUID = "00000000-0000-4000-8000-00000000abcd"


# ---------------------------------------------------------------------------
# Hand-made manifests
# ---------------------------------------------------------------------------


def dfile(path: str, fields, size: int = 10, version=(2, 2)) -> table_pb2.DataFile:
    return table_pb2.DataFile(
        path=path, fields=list(fields), column_indices=list(range(len(fields))),
        file_major_version=version[0], file_minor_version=version[1], file_size_bytes=size,
    )


def frag(i: int, rows: int = 5, *, files=None, row_start: int | None = None, created: int = 1,
         updated: int | None = None, deleted: int = 0) -> table_pb2.DataFragment:
    """Fragment ``i``; with ``row_start``, stable row ids ``row_start..`` and
    uniform created / last-updated versions."""
    f = table_pb2.DataFragment(id=i, physical_rows=rows)
    f.files.extend(files if files is not None else [dfile(f"d{i}.lance", [0, 1])])
    if row_start is not None:
        f.inline_row_ids = rowids.encode_row_id_range(row_start, rows)
        f.inline_created_at_versions = rowids.uniform_versions(created, rows)
        f.inline_last_updated_at_versions = rowids.uniform_versions(updated or created, rows)
    if deleted:
        f.deletion_file.CopyFrom(
            table_pb2.DeletionFile(file_type=table_pb2.DeletionFile.BITMAP, read_version=1, id=9, num_deleted_rows=deleted)
        )
    return f


def new_frag(rows: int, name: str = "new") -> table_pb2.DataFragment:
    """A fragment as a transaction carries it: id 0, no row ids."""
    return table_pb2.DataFragment(id=0, physical_rows=rows, files=[dfile(f"{name}.lance", [0, 1])])


def make_manifest(version: int, frags, *, max_id: int | None = None, next_row_id: int = 0,
                  stable: bool = False, schema: Schema = SCHEMA_AB, config=None, table_metadata=None,
                  flags: tuple[int, int] | None = None) -> table_pb2.Manifest:
    m = table_pb2.Manifest(version=version, next_row_id=next_row_id, tag="old-tag", transaction_file="old.txn")
    m.fields.extend(schema.to_proto())
    for k, v in schema.metadata.items():
        m.schema_metadata[k] = v
    m.fragments.extend(frags)
    if max_id is not None:
        m.max_fragment_id = max_id
    m.data_format.file_format = "lance"
    m.data_format.version = "2.2"
    m.config.update(config or {})
    m.table_metadata.update(table_metadata or {})
    reader = writer = F_STABLE if stable else 0
    if flags is not None:
        reader, writer = flags
    m.reader_feature_flags, m.writer_feature_flags = reader, writer
    m.writer_version.library = "lance"
    m.writer_version.version = "0.38.0"
    m.timestamp.seconds = 1
    return m


@pytest.fixture
def store(tmp_path):
    return ObjectStore(str(tmp_path / "t.lance"))


def snap(store, manifest, indices=()) -> Snapshot:
    return Snapshot(store, manifest.version, ManifestFile(manifest, None, list(indices), 0), ManifestNaming.V2)


def build(prev: Snapshot | None, op, **ctx):
    """(manifest, indices, transaction) of committing ``op`` on top of ``prev``."""
    txn = ops.Transaction(prev.version if prev else 0, op, uuid=UUID)
    version = ctx.pop("version", prev.version + 1 if prev else 1)
    m, indices = build_manifest(BuildContext(previous=prev, version=version, timestamp=TS, **ctx), txn)
    return m, indices, txn


def ids(m) -> list[int]:
    return [f.id for f in m.fragments]


def frag_by_id(m, i) -> table_pb2.DataFragment:
    (f,) = [f for f in m.fragments if f.id == i]
    return f


def row_ids(f) -> list[int]:
    return rowids.decode_row_ids(f.inline_row_ids).tolist()


def created(f) -> list[int]:
    return rowids.decode_versions(f.inline_created_at_versions, f.physical_rows).tolist()


def updated(f) -> list[int]:
    return rowids.decode_versions(f.inline_last_updated_at_versions, f.physical_rows).tolist()


def index(name: str, fields, frags=None, uuid: bytes | None = None) -> table_pb2.IndexMetadata:
    idx = table_pb2.IndexMetadata(name=name, fields=list(fields), uuid=table_pb2.UUID(uuid=uuid or name.encode().ljust(16, b"_")))
    if frags is not None:
        idx.fragment_bitmap = BitMap(frags).serialize()
    return idx


def bitmap(idx) -> list[int]:
    return list(BitMap.deserialize(idx.fragment_bitmap)) if idx.fragment_bitmap else []


# ---------------------------------------------------------------------------
# Stamps common to every operation
# ---------------------------------------------------------------------------


def stable_table(store):
    """Version 3: fragments 0 (row ids 0..4, created v1) and 1 (5..9, v2); max id 1."""
    m = make_manifest(
        3, [frag(0, row_start=0, created=1), frag(1, row_start=5, created=2)],
        max_id=1, next_row_id=10, stable=True, config={"k": "v"}, table_metadata={"t": "x"},
        flags=(F_STABLE, F_STABLE | F_CONFIG),
    )
    m.base_paths.append(table_pb2.BasePath(id=1, path="/base"))
    m.branch = "dev"
    return snap(store, m, [index("a_idx", [0], {0, 1})])


STAMPED = {
    "Append": lambda: ops.Append([new_frag(2)]),
    "Delete": lambda: ops.Delete([], [1], "a > 4"),
    "Overwrite": lambda: ops.Overwrite([new_frag(2)], SCHEMA_AB, {"k2": "v2"}),
    "Merge": lambda: ops.Merge([frag(0, row_start=0), frag(1, row_start=5, created=2)], SCHEMA_ABC),
    "Project": lambda: ops.Project(SCHEMA_AB.project(["a"])),
    "ReserveFragments": lambda: ops.ReserveFragments(2),
    "Rewrite": lambda: ops.Rewrite([ops.RewriteGroup([frag(1)], [frag(2, row_start=5, created=2)])]),
    "UpdateRows": lambda: ops.Update([1], [], [new_frag(3)]),
    "UpdateConfig": lambda: ops.UpdateConfig(table_metadata_updates=({"t2": "y"}, False)),
    "DataReplacement": lambda: ops.DataReplacement([(0, dfile("r.lance", [1]))]),
    "CreateIndex": lambda: ops.CreateIndex([index("b_idx", [1], {0, 1})]),
    "UpdateBases": lambda: ops.UpdateBases([table_pb2.BasePath(path="/more")]),
}


@pytest.mark.parametrize("name", sorted(STAMPED))
def test_every_operation_stamps_version_time_writer_and_transaction(store, name):
    prev = stable_table(store)
    before = (prev.manifest.SerializeToString(), [i.SerializeToString() for i in prev.indices])
    m, _, txn = build(prev, STAMPED[name]())
    assert m.version == 4
    assert (m.timestamp.seconds, m.timestamp.nanos) == (1_700_000_000, 250_000_000)
    assert (m.writer_version.library, m.writer_version.version) == ("lance_ops", __version__)
    assert m.transaction_file == f"3-{UUID}.txn" == txn.file_name
    assert m.tag == ""
    # Carried from the previous manifest.
    assert (m.data_format.file_format, m.data_format.version) == ("lance", "2.2")
    assert [(b.id, b.path) for b in m.base_paths][0] == (1, "/base")
    assert m.branch == "dev"
    assert m.table_metadata["t"] == "x"
    assert m.config["k"] == "v"
    # Stable row ids stay on; fragments sorted by id; max_fragment_id a high-water mark.
    assert m.reader_feature_flags & F_STABLE and m.writer_feature_flags & F_STABLE
    assert ids(m) == sorted(ids(m))
    assert m.max_fragment_id >= max(ids(m), default=0) and m.max_fragment_id >= 1
    # The previous snapshot is not modified.
    assert (prev.manifest.SerializeToString(), [i.SerializeToString() for i in prev.indices]) == before
    assert (prev.manifest.version, ids(prev.manifest)) == (3, [0, 1])


def test_timestamp_defaults_to_now(store):
    import time

    prev = snap(store, make_manifest(1, [frag(0)], max_id=0))
    before = time.time()
    m, _ = build_manifest(BuildContext(previous=prev, version=2), ops.Transaction(1, ops.Append([new_frag(1)])))
    assert int(before) <= m.timestamp.seconds <= int(time.time())


# ---------------------------------------------------------------------------
# Append
# ---------------------------------------------------------------------------


def test_append_ids_continue_after_max_fragment_id(store):
    # Fragments 2..5 were deleted earlier: the high-water mark is 5.
    prev = snap(store, make_manifest(7, [frag(0), frag(1)], max_id=5, config={"c": "1"}))
    m, indices, _ = build(prev, ops.Append([new_frag(3, "x"), new_frag(2, "y")]))
    assert ids(m) == [0, 1, 6, 7]
    assert [f.files[0].path for f in m.fragments] == ["d0.lance", "d1.lance", "x.lance", "y.lance"]
    assert m.max_fragment_id == 7
    # No stable row ids: nothing row-id related is written.
    assert [f.HasField("inline_row_ids") for f in m.fragments] == [False] * 4
    assert [f.HasField("inline_created_at_versions") for f in m.fragments] == [False] * 4
    assert m.next_row_id == 0
    assert (m.reader_feature_flags, m.writer_feature_flags) == (0, F_CONFIG)
    assert indices == []


@pytest.mark.parametrize(
    "present, expected_ids, expected_max",
    [
        ([0, 3], [0, 3, 4, 5], 5),  # no max_fragment_id: continue after the highest id present
        ([], [0, 1], 1),  # empty table without max_fragment_id: start at 0
    ],
)
def test_append_to_table_without_max_fragment_id(store, present, expected_ids, expected_max):
    prev = snap(store, make_manifest(2, [frag(i) for i in present]))
    assert not prev.manifest.HasField("max_fragment_id")
    m, _, _ = build(prev, ops.Append([new_frag(1), new_frag(1)]))
    assert ids(m) == expected_ids
    assert m.HasField("max_fragment_id") and m.max_fragment_id == expected_max


def test_append_with_stable_row_ids(store):
    prev = stable_table(store)
    m, _, _ = build(prev, ops.Append([new_frag(3), new_frag(2)]))
    assert ids(m) == [0, 1, 2, 3]
    assert [row_ids(f) for f in m.fragments] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12], [13, 14]]
    assert [created(f) for f in m.fragments] == [[1] * 5, [2] * 5, [4] * 3, [4] * 2]
    assert [updated(f) for f in m.fragments] == [[1] * 5, [2] * 5, [4] * 3, [4] * 2]
    assert m.next_row_id == 15
    assert m.max_fragment_id == 3
    assert (m.reader_feature_flags, m.writer_feature_flags) == (F_STABLE | F_BASES, F_STABLE | F_CONFIG | F_BASES)


def test_append_of_a_file_in_another_format_version_is_refused(store):
    prev = snap(store, make_manifest(1, [frag(0)], max_id=0))
    bad = table_pb2.DataFragment(id=0, physical_rows=1, files=[dfile("old.lance", [0, 1], version=(2, 0))])
    with pytest.raises(CorruptTableError, match="version 2.0 but the table's data format is 2.2"):
        build(prev, ops.Append([bad]))
    # ... unless the table allows mixed file versions (carried flag 256).
    mixed = snap(store, make_manifest(1, [frag(0)], max_id=0, flags=(F_MIXED_VERSIONS, F_MIXED_VERSIONS)))
    m, _, _ = build(mixed, ops.Append([bad]))
    assert ids(m) == [0, 1]
    assert (m.reader_feature_flags, m.writer_feature_flags) == (F_MIXED_VERSIONS, F_MIXED_VERSIONS)


# ---------------------------------------------------------------------------
# Feature flags
# ---------------------------------------------------------------------------


def test_flags_are_recomputed_from_content_and_carried_bits_survive(store):
    prev = snap(store, make_manifest(
        2, [frag(0), frag(1, deleted=2)], max_id=1, config={"c": "1"},
        flags=(F_DELETIONS | F_MIXED_VERSIONS, F_DELETIONS | F_MIXED_VERSIONS | F_CONFIG | F_BASES),
    ))
    # Deleting fragment 1 removes the last deletion file; the config empties too.
    m, _, _ = build(prev, ops.Delete([], [1], "x"))
    assert (m.reader_feature_flags, m.writer_feature_flags) == (
        F_MIXED_VERSIONS, F_MIXED_VERSIONS | F_CONFIG,
    )
    m2, _, _ = build(snap(store, m), ops.UpdateConfig(config_updates=({"c": None}, False)))
    assert (m2.reader_feature_flags, m2.writer_feature_flags) == (F_MIXED_VERSIONS, F_MIXED_VERSIONS)


# ---------------------------------------------------------------------------
# Delete
# ---------------------------------------------------------------------------


def test_delete_replaces_and_removes_fragments(store):
    prev = stable_table(store)
    prev.manifest.fragments.append(frag(2, row_start=10, created=3))
    prev.manifest.max_fragment_id = 2
    prev.manifest.next_row_id = 15
    f1 = frag(1, row_start=5, created=2, deleted=3)
    m, indices, _ = build(prev, ops.Delete([f1], [2], "a > 1"))
    assert ids(m) == [0, 1]
    assert frag_by_id(m, 1).deletion_file == f1.deletion_file
    assert frag_by_id(m, 1).deletion_file.num_deleted_rows == 3
    assert not frag_by_id(m, 0).HasField("deletion_file")
    # Row ids and version sequences are those the transaction carries (unchanged).
    assert row_ids(frag_by_id(m, 1)) == [5, 6, 7, 8, 9] and created(frag_by_id(m, 1)) == [2] * 5
    assert m.max_fragment_id == 2  # high-water mark survives the removal of fragment 2
    assert m.next_row_id == 15
    assert m.reader_feature_flags & F_DELETIONS and m.writer_feature_flags & F_DELETIONS
    assert [bitmap(i) for i in indices] == [[0, 1]]  # a delete leaves index coverage alone


def test_delete_of_everything_keeps_the_high_water_mark(store):
    prev = snap(store, make_manifest(4, [frag(0), frag(3)], max_id=3))
    m, _, _ = build(prev, ops.Delete([], [0, 3], "true"))
    assert ids(m) == []
    assert m.max_fragment_id == 3
    m2, _, _ = build(snap(store, m), ops.Append([new_frag(1)]))
    assert ids(m2) == [4]


def test_delete_matching_nothing_still_builds_a_version(store):
    prev = snap(store, make_manifest(4, [frag(0)], max_id=0))
    m, _, _ = build(prev, ops.Delete([], [], "false"))
    assert (m.version, ids(m), m.fragments[0] == prev.manifest.fragments[0]) == (5, [0], True)


# ---------------------------------------------------------------------------
# Missing fragments, duplicate ids, unsupported operations
# ---------------------------------------------------------------------------

MISSING = {
    "Delete": lambda: ops.Delete([frag(7, deleted=1)], [], "x"),
    "Delete(removed)": lambda: ops.Delete([], [7], "x"),
    "UpdateRows": lambda: ops.Update([7], [], [new_frag(1)]),
    "UpdateColumns": lambda: ops.Update([], [frag(7)], [], [1], [1], ops.REWRITE_COLUMNS),
    "Rewrite": lambda: ops.Rewrite([ops.RewriteGroup([frag(0), frag(7)], [frag(9, rows=10)])]),
    "DataReplacement": lambda: ops.DataReplacement([(7, dfile("r.lance", [1]))]),
}


@pytest.mark.parametrize("name", sorted(MISSING))
def test_missing_fragment_is_a_retryable_conflict(store, name):
    prev = snap(store, make_manifest(3, [frag(0), frag(1)], max_id=8))
    with pytest.raises(CommitConflictError, match=r"fragment\(s\) \[7\] no longer exist") as e:
        build(prev, MISSING[name]())
    assert e.value.retryable is True


DUPLICATES = {
    # A compaction whose "reserved" id is in use.
    "Rewrite": lambda: ops.Rewrite([ops.RewriteGroup([frag(0)], [frag(1)])]),
    "Merge": lambda: ops.Merge([frag(0), frag(1), frag(1)], SCHEMA_AB),
}


@pytest.mark.parametrize("name", sorted(DUPLICATES))
def test_duplicate_fragment_ids_are_refused(store, name):
    prev = snap(store, make_manifest(3, [frag(0), frag(1)], max_id=1))
    with pytest.raises(CommitConflictError, match="the commit would produce two fragments with id 1") as e:
        build(prev, DUPLICATES[name]())
    assert e.value.retryable is True


@pytest.mark.parametrize(
    "op, message",
    [
        (ops.Clone(transaction_pb2.Transaction.Clone(is_shallow=True, ref_version=1, ref_path="/src")),
         "lance_ops does not create clones"),
        (ops.UpdateMemWalState(transaction_pb2.Transaction.UpdateMemWalState()),
         "lance_ops does not manage MemWAL state"),
        (ops.UnknownOperation(), "lance_ops cannot commit a Unknown operation"),
    ],
    ids=["Clone", "UpdateMemWalState", "Unknown"],
)
def test_operations_lance_ops_cannot_commit(store, op, message):
    prev = snap(store, make_manifest(1, [frag(0)], max_id=0))
    with pytest.raises(UnsupportedFeatureError) as e:
        build(prev, op)
    assert str(e.value) == message


def test_stable_table_fragment_without_row_ids_is_corrupt(store):
    prev = stable_table(store)
    # A Merge that lost fragment 1's row ids.
    with pytest.raises(CorruptTableError, match="fragment 1 has no row ids in a table with stable row ids"):
        build(prev, ops.Merge([frag(0, row_start=0), frag(1)], SCHEMA_AB))


# ---------------------------------------------------------------------------
# Overwrite
# ---------------------------------------------------------------------------


def test_overwrite_continues_ids_and_row_ids_and_replaces_the_rest(store):
    # pylance 14 (spec §3): max_fragment_id 5 -> new fragment 6, row ids 9, 10.
    schema = Schema.from_arrow(pa.schema([("x", pa.string()), ("y", pa.int32())], metadata={"sm": "new"}))
    prev_schema = Schema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.int64())], metadata={"old": "1"}))
    prev = snap(store, make_manifest(
        6, [frag(5, rows=9, row_start=0)], max_id=5, next_row_id=9, stable=True, schema=prev_schema,
        config={"keep": "1", "k": "old"}, table_metadata={"t": "x"},
    ), [index("a_idx", [0], {5})])
    m, indices, _ = build(prev, ops.Overwrite([new_frag(2)], schema, {"k": "new", "k2": "2"}))
    assert ids(m) == [6]
    assert row_ids(m.fragments[0]) == [9, 10]
    assert created(m.fragments[0]) == [7, 7] and updated(m.fragments[0]) == [7, 7]
    assert (m.next_row_id, m.max_fragment_id) == (11, 6)
    assert [(f.name, f.id, f.logical_type) for f in m.fields] == [("x", 0, "string"), ("y", 1, "int32")]
    assert dict(m.schema_metadata) == {"sm": b"new"}
    assert dict(m.config) == {"keep": "1", "k": "new", "k2": "2"}
    assert dict(m.table_metadata) == {"t": "x"}
    assert indices == []
    assert m.reader_feature_flags & F_STABLE


@pytest.mark.parametrize("stable", [False, True])
def test_overwrite_creating_a_table(stable):
    frags = [new_frag(3, "a"), new_frag(2, "b")]
    m, indices = build_manifest(
        BuildContext(previous=None, version=1, stable_row_ids=stable, timestamp=TS),
        ops.Transaction(0, ops.Overwrite(frags, SCHEMA_AB)),
    )
    assert (m.version, ids(m), m.max_fragment_id) == (1, [0, 1], 1)
    assert (m.data_format.file_format, m.data_format.version) == ("lance", "2.2")
    assert m.transaction_file.startswith("0-")
    assert indices == []
    if stable:
        assert [row_ids(f) for f in m.fragments] == [[0, 1, 2], [3, 4]]
        assert [created(f) for f in m.fragments] == [[1, 1, 1], [1, 1]]
        assert m.next_row_id == 5
        assert (m.reader_feature_flags, m.writer_feature_flags) == (F_STABLE, F_STABLE)
    else:
        assert [f.HasField("inline_row_ids") for f in m.fragments] == [False, False]
        assert m.next_row_id == 0
        assert (m.reader_feature_flags, m.writer_feature_flags) == (0, 0)


def test_creating_a_table_with_a_requested_format_version():
    frag21 = table_pb2.DataFragment(id=0, physical_rows=1, files=[dfile("a.lance", [0, 1], version=(2, 1))])
    m, _ = build_manifest(
        BuildContext(previous=None, version=1, data_format="2.1", timestamp=TS),
        ops.Transaction(0, ops.Overwrite([frag21], SCHEMA_AB)),
    )
    assert m.data_format.version == "2.1"
    assert (ids(m), m.max_fragment_id) == ([0], 0)


# ---------------------------------------------------------------------------
# Merge / Project
# ---------------------------------------------------------------------------


def test_merge_replaces_fragments_and_schema_and_restamps_changed_fragments(store):
    prev = stable_table(store)
    prev.indices.append(index("b_idx", [1], {0, 1}))
    f0 = frag(0, row_start=0, created=1, files=[dfile("d0.lance", [0, 1]), dfile("c0.lance", [2])])
    f1_unchanged = frag(1, row_start=5, created=2)
    m, indices, _ = build(prev, ops.Merge([f0, f1_unchanged], SCHEMA_ABC))
    assert ids(m) == [0, 1]
    assert [[d.path for d in f.files] for f in m.fragments] == [["d0.lance", "c0.lance"], ["d1.lance"]]
    assert [created(f) for f in m.fragments] == [[1] * 5, [2] * 5]
    assert [updated(f) for f in m.fragments] == [[4] * 5, [2] * 5]  # only the fragment whose files changed
    assert [(f.name, f.id) for f in m.fields] == [("a", 0), ("b", 1), ("c", 2)]
    assert [i.name for i in indices] == ["a_idx", "b_idx"]
    assert (m.next_row_id, m.max_fragment_id) == (10, 1)


def test_merge_drops_indices_on_fields_no_longer_in_the_schema(store):
    prev = snap(store, make_manifest(2, [frag(0)], max_id=0), [index("a_idx", [0]), index("b_idx", [1]), index("ab_idx", [0, 1])])
    m, indices, _ = build(prev, ops.Merge([frag(0)], SCHEMA_AC))
    assert [(f.name, f.id) for f in m.fields] == [("a", 0), ("c", 2)]
    assert [i.name for i in indices] == ["a_idx"]
    assert not frag_by_id(m, 0).HasField("inline_last_updated_at_versions")  # no stable row ids


def test_project_drops_files_without_remaining_fields(store):
    schema = Schema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.int64())], metadata={"keep": "me"}))
    f0 = frag(0, files=[dfile("a0.lance", [0]), dfile("b0.lance", [1])])
    f1 = frag(1, files=[dfile("ab1.lance", [0, 1])])
    prev = snap(store, make_manifest(2, [f0, f1], max_id=1, schema=schema), [index("a_idx", [0]), index("b_idx", [1])])
    m, indices, _ = build(prev, ops.Project(Schema([f for f in SCHEMA_AB.fields if f.name == "a"])))
    assert [[(d.path, list(d.fields)) for d in f.files] for f in m.fragments] == [
        [("a0.lance", [0])],
        [("ab1.lance", [0, 1])],  # still holds a: keeps the dropped id in fields
    ]
    assert [(f.name, f.id) for f in m.fields] == [("a", 0)]
    assert dict(m.schema_metadata) == {"keep": b"me"}  # Project carries no schema metadata
    assert [i.name for i in indices] == ["a_idx"]
    assert (ids(m), m.max_fragment_id) == ([0, 1], 1)


def test_project_rename_keeps_field_ids_and_files(store):
    prev = snap(store, make_manifest(2, [frag(0)], max_id=0))
    renamed = SCHEMA_AB.copy()
    renamed.fields[1].name = "bee"
    m, _, _ = build(prev, ops.Project(renamed))
    assert [(f.name, f.id) for f in m.fields] == [("a", 0), ("bee", 1)]
    assert [list(d.fields) for d in m.fragments[0].files] == [[0, 1]]


# ---------------------------------------------------------------------------
# Restore
# ---------------------------------------------------------------------------


def test_restore_copies_the_old_version_but_keeps_high_water_marks(store):
    v1 = make_manifest(1, [frag(0, rows=10, row_start=0)], max_id=0, next_row_id=10, stable=True,
                       schema=SCHEMA_AB.project(["a"]), config={"y": "2"}, table_metadata={"tv": "1"})
    old = snap(store, v1, [index("a_idx", [0], {0})])
    prev = snap(store, make_manifest(
        3, [frag(0, rows=10, row_start=0), frag(3, row_start=10), frag(4, row_start=20)],
        max_id=4, next_row_id=30, stable=True, config={"x": "1"},
    ), [index("b_idx", [1], {3, 4})])
    loaded = []

    def load(v):
        loaded.append(v)
        return {1: old}[v]

    m, indices, txn = build(prev, ops.Restore(1), load_snapshot=load)
    assert loaded == [1]
    assert ids(m) == [0] and row_ids(m.fragments[0]) == list(range(10))
    assert [(f.name, f.id) for f in m.fields] == [("a", 0)]
    assert dict(m.config) == {"y": "2"} and dict(m.table_metadata) == {"tv": "1"}
    assert [i.name for i in indices] == ["a_idx"]
    assert (m.max_fragment_id, m.next_row_id) == (4, 30)
    assert m.version == 4 and m.transaction_file == txn.file_name
    assert (m.timestamp.seconds, m.writer_version.library) == (1_700_000_000, "lance_ops")
    assert (m.reader_feature_flags, m.writer_feature_flags) == (F_STABLE, F_STABLE | F_CONFIG)
    # Appending afterwards continues after the high-water marks.
    m2, _, _ = build(snap(store, m), ops.Append([new_frag(2)]))
    assert ids(m2) == [0, 5] and row_ids(m2.fragments[1]) == [30, 31]


def test_restore_needs_older_versions(store):
    prev = snap(store, make_manifest(3, [frag(0)], max_id=0))
    with pytest.raises(UnsupportedFeatureError, match="restore needs access to older versions"):
        build(prev, ops.Restore(1))


# ---------------------------------------------------------------------------
# ReserveFragments
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "present, max_id, n, expected",
    [
        ([0, 1, 2, 3, 4], 4, 1, 5),  # spec §3 observed: 4 -> 5
        ([0, 1], 6, 3, 9),
        ([], None, 2, 2),  # unset, no fragments: treat as 0
    ],
)
def test_reserve_fragments_advances_max_fragment_id_only(store, present, max_id, n, expected):
    prev = snap(store, make_manifest(5, [frag(i) for i in present], max_id=max_id, next_row_id=0))
    m, _, _ = build(prev, ops.ReserveFragments(n))
    assert m.max_fragment_id == expected
    assert ids(m) == present
    assert list(m.fragments) == list(prev.manifest.fragments)
    m2, _, _ = build(snap(store, m), ops.Append([new_frag(1)]))
    assert ids(m2) == present + [expected + 1]


def test_reserve_fragments_without_max_fragment_id_reserves_after_existing_fragments(store):
    prev = snap(store, make_manifest(5, [frag(i) for i in range(4)]))
    m, _, _ = build(prev, ops.ReserveFragments(2))
    assert m.max_fragment_id == 5  # ids 4 and 5 reserved


# ---------------------------------------------------------------------------
# Rewrite
# ---------------------------------------------------------------------------


def compaction_table(store, stable=False, indices=()):
    """Version 5: fragments 0..3 (5 rows each), ids 4 and 5 reserved."""
    frags = [frag(i, row_start=5 * i if stable else None) for i in range(4)]
    return snap(store, make_manifest(5, frags, max_id=5, next_row_id=20 if stable else 0, stable=stable), indices)


def compacted(i: int, rows: int, row_ids_from=None) -> table_pb2.DataFragment:
    f = table_pb2.DataFragment(id=i, physical_rows=rows, files=[dfile(f"c{i}.lance", [0, 1])])
    if row_ids_from is not None:
        f.inline_row_ids = rowids.encode_row_ids([row_ids_from])
    return f


def test_rewrite_replaces_groups_with_reserved_ids(store):
    prev = compaction_table(store)
    op = ops.Rewrite([
        ops.RewriteGroup([frag(1), frag(2)], [compacted(4, 10)]),
        ops.RewriteGroup([frag(0)], [compacted(5, 5)]),
    ])
    m, _, _ = build(prev, op)
    assert ids(m) == [3, 4, 5]  # compacted fragments with higher ids move after fragment 3
    assert [f.files[0].path for f in m.fragments] == ["d3.lance", "c4.lance", "c5.lance"]
    assert m.max_fragment_id == 5


def test_rewrite_of_non_contiguous_fragments(store):
    prev = compaction_table(store)
    m, _, _ = build(prev, ops.Rewrite([ops.RewriteGroup([frag(0), frag(2)], [compacted(4, 10)])]))
    assert ids(m) == [1, 3, 4]
    assert m.max_fragment_id == 5


def test_rewrite_with_stable_row_ids_keeps_moved_row_ids(store):
    prev = compaction_table(store, stable=True)
    moved = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    m, _, _ = build(prev, ops.Rewrite([ops.RewriteGroup([frag(1), frag(2)], [compacted(4, 10, moved)])]))
    assert ids(m) == [0, 3, 4]
    assert row_ids(frag_by_id(m, 4)) == moved
    assert m.next_row_id == 20  # no fresh row ids
    with pytest.raises(CorruptTableError, match="fragment 4 has no row ids"):
        build(prev, ops.Rewrite([ops.RewriteGroup([frag(1), frag(2)], [compacted(4, 10)])]))


def test_rewrite_narrows_or_remaps_index_bitmaps(store):
    any_details = any_pb2.Any(type_url="t/remapped", value=b"\x01")
    prev = compaction_table(store, indices=[
        index("plain", [0], {0, 1, 2, 3}, uuid=b"P" * 16),
        index("remapped", [0], {0, 1, 2}, uuid=b"R" * 16),
        index("partial", [1], {0, 1}, uuid=b"Q" * 16),
        index("unrelated", [1], {0, 3}, uuid=b"U" * 16),
        index("nobitmap", [1], None, uuid=b"N" * 16),
    ])
    rewritten = [
        transaction_pb2.Transaction.Rewrite.RewrittenIndex(
            old_id=table_pb2.UUID(uuid=b"R" * 16), new_id=table_pb2.UUID(uuid=b"S" * 16),
            new_index_details=any_details, new_index_version=3,
            files=[table_pb2.IndexFile(path="page_data.lance", size_bytes=42)],
        ),
        transaction_pb2.Transaction.Rewrite.RewrittenIndex(
            old_id=table_pb2.UUID(uuid=b"Q" * 16), new_id=table_pb2.UUID(uuid=b"T" * 16),
        ),
    ]
    op = ops.Rewrite([ops.RewriteGroup([frag(1), frag(2)], [compacted(4, 10)])], rewritten)
    m, indices, _ = build(prev, op)
    got = {i.name: (bytes(i.uuid.uuid)[:1], bitmap(i)) for i in indices}
    assert got == {
        "plain": (b"P", [0, 1, 2, 3]),  # left alone (pylance 14, no stable row ids): 4 reads as unindexed
        "remapped": (b"S", [0, 4]),  # the whole group was indexed: the new fragment is covered
        "partial": (b"T", [0]),  # only part of the group was indexed: not covered
        "unrelated": (b"U", [0, 3]),
        "nobitmap": (b"N", []),
    }
    # With stable row ids an index that is not remapped is narrowed, unless its
    # files address rows by row id (BITMAP): then the bitmap follows the rows.
    bitmap_details = any_pb2.Any(type_url="/lance.table.BitmapIndexDetails")
    stable = compaction_table(store, stable=True, indices=[
        index("plain", [0], {0, 1, 2, 3}, uuid=b"P" * 16),
        index("bitmap", [0], {0, 1, 2, 3}, uuid=b"B" * 16),
    ])
    for i in stable.indices:
        if i.name == "bitmap":
            i.index_details.CopyFrom(bitmap_details)
    moved = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    _, stable_indices, _ = build(stable, ops.Rewrite([ops.RewriteGroup([frag(1), frag(2)], [compacted(4, 10, moved)])]))
    assert {i.name: bitmap(i) for i in stable_indices} == {"plain": [0, 3], "bitmap": [0, 3, 4]}
    remapped = [i for i in indices if i.name == "remapped"][0]
    assert remapped.index_version == 3
    assert remapped.index_details.type_url == "t/remapped"
    assert [(f.path, f.size_bytes) for f in remapped.files] == [("page_data.lance", 42)]
    # The previous snapshot's index list is untouched.
    assert [bitmap(i) for i in prev.indices][:2] == [[0, 1, 2, 3], [0, 1, 2]]


# ---------------------------------------------------------------------------
# Update: REWRITE_ROWS
# ---------------------------------------------------------------------------


def moved_fragment(carried_ids, fresh: int, carried_created=None) -> table_pb2.DataFragment:
    """A new fragment of an update: moved rows first (their row ids inline),
    then ``fresh`` inserted rows without ids."""
    f = new_frag(len(carried_ids) + fresh, "moved")
    f.inline_row_ids = rowids.encode_row_ids(rowids.contiguous_runs(carried_ids))
    if carried_created is not None:
        f.inline_created_at_versions = rowids.encode_versions(carried_created)
    return f


def test_update_rows_moves_rows_with_their_ids_and_created_versions(store):
    prev = stable_table(store)  # fragment 0: ids 0..4 created v1; fragment 1: ids 5..9 created v2
    f1 = frag(1, row_start=5, created=2, deleted=2)  # rows 5, 6 moved out
    op = ops.Update(
        removed_fragment_ids=[0],  # all of fragment 0 moved
        updated_fragments=[f1],
        new_fragments=[moved_fragment([0, 1, 2, 3, 4, 5, 6], 2), new_frag(3, "inserted")],
        fields_for_preserving_frag_bitmap=[1],
    )
    m, _, _ = build(prev, op)
    assert ids(m) == [1, 2, 3]
    moved, inserted = frag_by_id(m, 2), frag_by_id(m, 3)
    assert row_ids(moved) == [0, 1, 2, 3, 4, 5, 6, 10, 11]  # carried, then fresh
    assert created(moved) == [1, 1, 1, 1, 1, 2, 2, 4, 4]  # created-at carried per row
    assert updated(moved) == [4] * 9
    assert row_ids(inserted) == [12, 13, 14]
    assert created(inserted) == [4] * 3 and updated(inserted) == [4] * 3
    assert frag_by_id(m, 1).deletion_file.num_deleted_rows == 2
    assert row_ids(frag_by_id(m, 1)) == [5, 6, 7, 8, 9] and updated(frag_by_id(m, 1)) == [2] * 5
    assert (m.next_row_id, m.max_fragment_id) == (15, 3)


def test_update_rows_keeps_created_versions_the_transaction_carries(store):
    prev = stable_table(store)
    f = moved_fragment([5, 6], 1, carried_created=[7, 8])
    m, _, _ = build(prev, ops.Update([], [frag(1, row_start=5, created=2, deleted=2)], [f]))
    new = frag_by_id(m, 2)
    assert (row_ids(new), created(new), updated(new)) == ([5, 6, 10], [7, 8, 4], [4, 4, 4])
    assert m.next_row_id == 11


def test_update_rows_without_stable_row_ids(store):
    prev = snap(store, make_manifest(3, [frag(0), frag(1)], max_id=1))
    m, _, _ = build(prev, ops.Update([0], [frag(1, deleted=1)], [new_frag(6)]))
    assert ids(m) == [1, 2]
    assert not frag_by_id(m, 2).HasField("inline_row_ids")
    assert (m.next_row_id, m.max_fragment_id) == (0, 2)
    assert m.reader_feature_flags == F_DELETIONS


# ---------------------------------------------------------------------------
# Update: REWRITE_COLUMNS
# ---------------------------------------------------------------------------


def columns_table(store, stable: bool):
    frags = [
        frag(0, files=[dfile("a0.lance", [0]), dfile("b0.lance", [1])], row_start=0 if stable else None, created=2),
        frag(1, row_start=5 if stable else None, created=2),
        frag(2, row_start=10 if stable else None, created=2),
    ]
    return snap(store, make_manifest(3, frags, max_id=2, next_row_id=15 if stable else 0, stable=stable),
                [index("a_idx", [0], {0, 1, 2}), index("b_idx", [1], {0, 1, 2})])


def update_columns(stable: bool) -> ops.Update:
    f0 = frag(0, files=[dfile("a0.lance", [0]), dfile("b0.lance", [-2]), dfile("nb0.lance", [1])],
              row_start=0 if stable else None, created=2)
    f1 = frag(1, files=[dfile("d1.lance", [0, -2]), dfile("nb1.lance", [1])], row_start=5 if stable else None, created=2)
    return ops.Update(
        [], [f0, f1], [], fields_modified=[1], fields_for_preserving_frag_bitmap=[1],
        update_mode=ops.REWRITE_COLUMNS,
        updated_fragment_offsets={0: BitMap([1]).serialize(), 1: BitMap([0, 3]).serialize()},
    )


@pytest.mark.parametrize("stable", [True, False])
def test_update_columns(store, stable):
    m, indices, _ = build(columns_table(store, stable), update_columns(stable))
    assert ids(m) == [0, 1, 2]
    assert [[(d.path, list(d.fields)) for d in f.files] for f in m.fragments] == [
        [("a0.lance", [0]), ("nb0.lance", [1])],  # b0.lance held only -2: dropped
        [("d1.lance", [0, -2]), ("nb1.lance", [1])],
        [("d2.lance", [0, 1])],
    ]
    # Indices over the modified field no longer cover the updated fragments.
    assert {i.name: bitmap(i) for i in indices} == {"a_idx": [0, 1, 2], "b_idx": [2]}
    assert m.max_fragment_id == 2
    if stable:
        assert [updated(f) for f in m.fragments] == [[2, 4, 2, 2, 2], [4, 2, 2, 4, 2], [2] * 5]
        assert [created(f) for f in m.fragments] == [[2] * 5] * 3
        assert [row_ids(f) for f in m.fragments] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]
        assert m.next_row_id == 15
    else:
        assert [f.HasField("inline_last_updated_at_versions") for f in m.fragments] == [False] * 3
        assert m.next_row_id == 0


# ---------------------------------------------------------------------------
# UpdateConfig
# ---------------------------------------------------------------------------


def config_table(store):
    schema = Schema.from_arrow(pa.schema(
        [pa.field("a", pa.int64(), metadata={"m": "1", "m2": "2"}), ("b", pa.int64())], metadata={"s": "1", "s2": "2"}
    ))
    return snap(store, make_manifest(
        2, [frag(0)], max_id=0, schema=schema, config={"a": "1", "b": "2"}, table_metadata={"t": "x", "u": "y"},
        flags=(0, F_CONFIG),
    ))


UPDATE_CONFIG = [
    # (id, operation, config, table metadata, schema metadata, field 0 metadata, field 1 metadata)
    ("config upsert and delete", ops.UpdateConfig(config_updates=({"a": "9", "b": None, "c": "3"}, False)),
     {"a": "9", "c": "3"}, {"t": "x", "u": "y"}, {"s": b"1", "s2": b"2"}, {"m": b"1", "m2": b"2"}, {}),
    ("config delete of a missing key", ops.UpdateConfig(config_updates=({"zz": None}, False)),
     {"a": "1", "b": "2"}, {"t": "x", "u": "y"}, {"s": b"1", "s2": b"2"}, {"m": b"1", "m2": b"2"}, {}),
    ("config replace", ops.UpdateConfig(config_updates=({"z": "1", "gone": None}, True)),
     {"z": "1"}, {"t": "x", "u": "y"}, {"s": b"1", "s2": b"2"}, {"m": b"1", "m2": b"2"}, {}),
    ("config emptied", ops.UpdateConfig(config_updates=({"a": None, "b": None}, False)),
     {}, {"t": "x", "u": "y"}, {"s": b"1", "s2": b"2"}, {"m": b"1", "m2": b"2"}, {}),
    ("legacy upsert and delete", ops.UpdateConfig(legacy_upsert={"c": "3"}, legacy_delete=["a"]),
     {"b": "2", "c": "3"}, {"t": "x", "u": "y"}, {"s": b"1", "s2": b"2"}, {"m": b"1", "m2": b"2"}, {}),
    ("table metadata", ops.UpdateConfig(table_metadata_updates=({"t": None, "v": "z"}, False)),
     {"a": "1", "b": "2"}, {"u": "y", "v": "z"}, {"s": b"1", "s2": b"2"}, {"m": b"1", "m2": b"2"}, {}),
    ("table metadata replace", ops.UpdateConfig(table_metadata_updates=({"v": "z"}, True)),
     {"a": "1", "b": "2"}, {"v": "z"}, {"s": b"1", "s2": b"2"}, {"m": b"1", "m2": b"2"}, {}),
    ("schema metadata", ops.UpdateConfig(schema_metadata_updates=({"s": None, "s3": "3"}, False)),
     {"a": "1", "b": "2"}, {"t": "x", "u": "y"}, {"s2": b"2", "s3": b"3"}, {"m": b"1", "m2": b"2"}, {}),
    ("schema metadata replace", ops.UpdateConfig(schema_metadata_updates=({"s3": "3"}, True)),
     {"a": "1", "b": "2"}, {"t": "x", "u": "y"}, {"s3": b"3"}, {"m": b"1", "m2": b"2"}, {}),
    ("field metadata", ops.UpdateConfig(field_metadata_updates={
        0: ({"m": None, "n": "5"}, False), 1: ({"k": "v"}, True)}),
     {"a": "1", "b": "2"}, {"t": "x", "u": "y"}, {"s": b"1", "s2": b"2"}, {"m2": b"2", "n": b"5"}, {"k": b"v"}),
    ("field metadata replace", ops.UpdateConfig(field_metadata_updates={0: ({"n": "5"}, True)}),
     {"a": "1", "b": "2"}, {"t": "x", "u": "y"}, {"s": b"1", "s2": b"2"}, {"n": b"5"}, {}),
]


@pytest.mark.parametrize("op, config, table_md, schema_md, field0_md, field1_md",
                         [c[1:] for c in UPDATE_CONFIG], ids=[c[0] for c in UPDATE_CONFIG])
def test_update_config(store, op, config, table_md, schema_md, field0_md, field1_md):
    prev = config_table(store)
    m, _, _ = build(prev, op)
    assert dict(m.config) == config
    assert dict(m.table_metadata) == table_md
    assert dict(m.schema_metadata) == schema_md
    assert [(f.id, dict(f.metadata)) for f in m.fields] == [(0, field0_md), (1, field1_md)]
    # Writer flag 8 follows config emptiness; reader flags never carry it.
    assert (m.reader_feature_flags, m.writer_feature_flags) == (0, F_CONFIG if config else 0)
    assert (ids(m), m.max_fragment_id) == ([0], 0)


def test_update_config_of_a_missing_field_is_refused(store):
    # pylance 14 refuses a field metadata update for a field id the schema
    # does not have (e.g. dropped concurrently) as invalid input
    with pytest.raises(InvalidArgumentError, match="field id 9"):
        build(config_table(store), ops.UpdateConfig(field_metadata_updates={9: ({"x": "y"}, False)}))


def test_update_config_sets_the_config_flag_on_a_table_without_config(store):
    prev = snap(store, make_manifest(2, [frag(0)], max_id=0))
    m, _, _ = build(prev, ops.UpdateConfig(config_updates=({"k": "v"}, False)))
    assert (dict(m.config), m.reader_feature_flags, m.writer_feature_flags) == ({"k": "v"}, 0, F_CONFIG)


# ---------------------------------------------------------------------------
# DataReplacement
# ---------------------------------------------------------------------------


def test_data_replacement_swaps_matching_files_and_adds_missing_ones(store):
    f0 = frag(0, files=[dfile("a0.lance", [0]), dfile("b0.lance", [1])])
    f1 = frag(1, files=[dfile("a1.lance", [0])])  # column b was all null: no file
    prev = snap(store, make_manifest(2, [f0, f1, frag(2)], max_id=2))
    op = ops.DataReplacement([(0, dfile("nb0.lance", [1], size=99)), (1, dfile("nb1.lance", [1], size=77))])
    m, _, _ = build(prev, op)
    assert [[(d.path, list(d.fields), d.file_size_bytes) for d in f.files] for f in m.fragments] == [
        [("a0.lance", [0], 10), ("nb0.lance", [1], 99)],
        [("a1.lance", [0], 10), ("nb1.lance", [1], 77)],
        [("d2.lance", [0, 1], 10)],
    ]
    assert (ids(m), m.max_fragment_id) == ([0, 1, 2], 2)


def test_data_replacement_with_another_file_version_is_added_and_refused(store):
    prev = snap(store, make_manifest(2, [frag(0, files=[dfile("a0.lance", [0]), dfile("b0.lance", [1])])], max_id=0))
    with pytest.raises(CorruptTableError, match="data file nb0.lance has version 2.1"):
        build(prev, ops.DataReplacement([(0, dfile("nb0.lance", [1], version=(2, 1)))]))


def test_data_replacement_with_different_fields_is_refused(store):
    f0 = frag(0, files=[dfile("a0.lance", [0]), dfile("b0.lance", [1])])
    prev = snap(store, make_manifest(2, [f0, frag(1)], max_id=1))
    with pytest.raises(LanceOpsError):
        build(prev, ops.DataReplacement([(0, dfile("n0.lance", [1])), (1, dfile("n1.lance", [0]))]))


def test_data_replacement_uncovers_replaced_fragments_in_indices_of_the_field(store):
    """Deviation from pylance 14 (keeps them): a zone map over b built before a
    backfill of b would prune by stale zones; the replaced fragments leave the
    bitmaps of indices on b (scanned), indices on other fields keep theirs."""
    f0 = frag(0, files=[dfile("a0.lance", [0]), dfile("b0.lance", [1])])
    f1 = frag(1, files=[dfile("a1.lance", [0]), dfile("b1.lance", [1])])
    prev = snap(store, make_manifest(2, [f0, f1, frag(2)], max_id=2),
                [index("b_idx", [1], {0, 1, 2}), index("a_idx", [0], {0, 1, 2})])
    _, indices, _ = build(prev, ops.DataReplacement([(0, dfile("nb0.lance", [1])), (2, dfile("nb2.lance", [1]))]))
    assert {i.name: bitmap(i) for i in indices} == {"b_idx": [1], "a_idx": [0, 1, 2]}


# ---------------------------------------------------------------------------
# CreateIndex
# ---------------------------------------------------------------------------


def test_create_index_replaces_by_name_and_removes_by_uuid(store):
    prev = snap(store, make_manifest(2, [frag(0)], max_id=0), [
        index("a_idx", [0], {0}, uuid=b"1" * 16),
        index("b_idx", [1], {0}, uuid=b"2" * 16),
        index("c_idx", [1], {0}, uuid=b"3" * 16),
    ])
    op = ops.CreateIndex(
        [index("a_idx", [0], {0}, uuid=b"4" * 16), index("d_idx", [0, 1], {0}, uuid=b"5" * 16)],
        [index("whatever-name", [1], uuid=b"3" * 16)],
    )
    m, indices, _ = build(prev, op)
    assert [(i.name, bytes(i.uuid.uuid)[:1]) for i in indices] == [("b_idx", b"2"), ("a_idx", b"4"), ("d_idx", b"5")]
    assert (ids(m), m.max_fragment_id, list(m.fragments) == list(prev.manifest.fragments)) == ([0], 0, True)
    assert [i.name for i in prev.indices] == ["a_idx", "b_idx", "c_idx"]


# ---------------------------------------------------------------------------
# UpdateBases
# ---------------------------------------------------------------------------


def test_update_bases_assigns_ids_after_the_highest(store):
    m0 = make_manifest(2, [frag(0)], max_id=0)
    m0.base_paths.append(table_pb2.BasePath(id=1, path="/a", is_dataset_root=True))
    m, _, _ = build(snap(store, m0), ops.UpdateBases([
        table_pb2.BasePath(path="/b"), table_pb2.BasePath(path="/c", name="cee"), table_pb2.BasePath(id=7, path="/d"),
    ]))
    assert [(b.id, b.path, b.name if b.HasField("name") else None) for b in m.base_paths] == [
        (1, "/a", None), (2, "/b", None), (3, "/c", "cee"), (7, "/d", None),
    ]
    assert (m.reader_feature_flags, m.writer_feature_flags) == (F_BASES, F_BASES)


def test_update_bases_on_a_table_without_bases_starts_at_1(store):
    m, _, _ = build(snap(store, make_manifest(2, [frag(0)], max_id=0)), ops.UpdateBases([table_pb2.BasePath(path="/b")]))
    assert [(b.id, b.path) for b in m.base_paths] == [(1, "/b")]


def test_update_bases_refuses_a_duplicate_path(store):
    m0 = make_manifest(2, [frag(0)], max_id=0)
    m0.base_paths.append(table_pb2.BasePath(id=1, path="/a"))
    with pytest.raises(LanceOpsError):
        build(snap(store, m0), ops.UpdateBases([table_pb2.BasePath(path="/a")]))

