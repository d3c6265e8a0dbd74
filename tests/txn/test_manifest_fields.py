"""Every field of the ``Manifest`` proto has a rule for the next version, and
``build_manifest`` follows it.

The rules (written here by hand from the format, not taken from build.py):

* ``inherited``  -- copied from the previous version unless the operation
  changes it (config, table metadata, data format, base paths, branch);
* ``operation``  -- the schema: inherited, replaced by schema-changing ops;
* ``recomputed`` -- derived from the new content (fragments, flags,
  high-water marks);
* ``per-version`` -- describes this version only, set afresh (version,
  timestamp, writer, transaction file, file positions);
* ``reset``      -- describes the previous version only and must not be
  carried: ``version_aux_data`` is a position inside the previous manifest
  file ("not inheritable between versions"), ``tag`` and the deprecated
  transaction section field are not written.

A field added to the proto and not classified here fails
:func:`test_every_manifest_field_is_classified`.
"""
from __future__ import annotations

import time

import pyarrow as pa
import pytest

from lance_ops.format import rowids
from lance_ops.format.manifest import ManifestFile, decode_manifest_file, encode_manifest_file
from lance_ops.format.naming import ManifestNaming
from lance_ops.format.proto import table_pb2
from lance_ops.format.schema import Schema
from lance_ops.storage import ObjectStore
from lance_ops.txn import operations as ops
from lance_ops.txn.build import BuildContext, build_manifest
from lance_ops.txn.log import Snapshot

RULES = {
    "fields": "operation",
    "schema_metadata": "operation",
    "fragments": "recomputed",
    "version": "per-version",
    "version_aux_data": "reset",
    "writer_version": "per-version",
    "index_section": "per-version",
    "timestamp": "per-version",
    "tag": "reset",
    "reader_feature_flags": "recomputed",
    "writer_feature_flags": "recomputed",
    "max_fragment_id": "recomputed",
    "transaction_file": "per-version",
    "transaction_section_deprecated": "reset",
    "transaction_section": "per-version",
    "next_row_id": "recomputed",
    "data_format": "inherited",
    "config": "inherited",
    "table_metadata": "inherited",
    "base_paths": "inherited",
    "branch": "inherited",
}

SCHEMA = Schema.from_arrow(pa.schema([("a", pa.int64())]))


def test_every_manifest_field_is_classified():
    fields = set(table_pb2.Manifest.DESCRIPTOR.fields_by_name)
    assert fields - set(RULES) == set(), "classify the new Manifest field(s) in RULES and in build.py"
    assert set(RULES) - fields == set(), "RULES names fields the proto no longer has"


def previous_manifest() -> table_pb2.Manifest:
    """Version 7 with every field set to something a next version must not
    blindly copy (or must copy, for inherited ones)."""
    m = table_pb2.Manifest(version=7, version_aux_data=4242, tag="old-tag", transaction_file="6-old.txn",
                           next_row_id=10, max_fragment_id=3, branch="dev")
    m.fields.extend(SCHEMA.to_proto())
    m.schema_metadata["s"] = b"1"
    f = m.fragments.add(id=3, physical_rows=10)
    f.files.add(path="d.lance", fields=[0], column_indices=[0], file_major_version=2, file_minor_version=2)
    f.inline_row_ids = rowids.encode_row_id_range(0, 10)
    f.inline_created_at_versions = rowids.uniform_versions(1, 10)
    f.inline_last_updated_at_versions = rowids.uniform_versions(1, 10)
    m.writer_version.library, m.writer_version.version = "lance", "14.0.2"
    m.index_section = 111
    m.timestamp.seconds = 1000
    # 2 = stable row ids; 4 = the deprecated v2 bit, which nothing derives
    m.reader_feature_flags, m.writer_feature_flags = 2 | 4, 2 | 4 | 8 | 16
    m.transaction_section_deprecated = 222
    m.transaction_section = 333
    m.data_format.file_format, m.data_format.version = "lance", "2.2"
    m.config["k"] = "v"
    m.table_metadata["t"] = "m"
    m.base_paths.add(id=0, is_dataset_root=True, path="/somewhere/parent")
    return m


def build(prev: table_pb2.Manifest, op, store, load=None):
    snap = Snapshot(store, prev.version, ManifestFile(prev, None, [], 0), ManifestNaming.V2)
    txn = ops.Transaction(prev.version, op)
    ctx = BuildContext(previous=snap, version=prev.version + 1, load_snapshot=load)
    m, _ = build_manifest(ctx, txn)
    return m, txn


def check_rules(prev: table_pb2.Manifest, m: table_pb2.Manifest, txn, *, restored: table_pb2.Manifest | None = None):
    for name, rule in RULES.items():
        before, after = getattr(prev, name), getattr(m, name)
        if rule == "inherited":
            assert after == before, f"{name} must be inherited"
        elif rule == "reset":
            if m.DESCRIPTOR.fields_by_name[name].has_presence:
                assert not m.HasField(name), f"{name} must not be carried into the next version"
            else:
                assert not after, f"{name} must not be carried into the next version"
    # per-version: set for this version, never the previous one's
    assert m.version == prev.version + 1
    assert m.transaction_file == txn.file_name != prev.transaction_file
    assert m.writer_version.library == "lance_ops"
    assert abs(m.timestamp.seconds - time.time()) < 60
    assert not m.HasField("index_section") and not m.HasField("transaction_section")  # positions: set when encoded
    # recomputed: the derived flags follow the content; the deprecated bit 4 is not carried
    assert m.reader_feature_flags == 2 | 16 and m.writer_feature_flags == 2 | 8 | 16
    src = restored or prev
    assert m.max_fragment_id >= max(prev.max_fragment_id, max((f.id for f in m.fragments), default=0))
    assert m.next_row_id >= src.next_row_id


@pytest.fixture
def store(tmp_path):
    return ObjectStore(str(tmp_path / "t.lance"))


def test_append_follows_the_rules(store):
    prev = previous_manifest()
    new = table_pb2.DataFragment(physical_rows=5)
    new.files.add(path="n.lance", fields=[0], column_indices=[0], file_major_version=2, file_minor_version=2)
    m, txn = build(prev, ops.Append([new]), store)
    check_rules(prev, m, txn)
    assert m.fields == prev.fields and m.schema_metadata == prev.schema_metadata  # (operation: unchanged by Append)
    assert [f.id for f in m.fragments] == [3, 4] and m.max_fragment_id == 4 and m.next_row_id == 15


def test_config_change_follows_the_rules(store):
    prev = previous_manifest()
    m, txn = build(prev, ops.UpdateConfig(config_updates=({"k2": "v2"}, False)), store)
    for name in ("config",):
        assert dict(getattr(m, name)) == {"k": "v", "k2": "v2"}
    prev.config["k2"] = "v2"  # (the operation's own change)
    check_rules(prev, m, txn)


def test_restore_does_not_carry_the_restored_versions_per_version_fields(store):
    old = previous_manifest()
    old.version, old.version_aux_data, old.tag = 5, 99, "restored-tag"
    latest = previous_manifest()
    old_snap = Snapshot(store, 5, ManifestFile(old, None, [], 0), ManifestNaming.V2)
    m, txn = build(latest, ops.Restore(5), store, load=lambda v: old_snap)
    check_rules(latest, m, txn, restored=old)
    assert not m.version_aux_data and not m.tag


def test_encoded_positions_are_this_files(store):
    """The section positions in an encoded manifest point into that file."""
    prev = previous_manifest()
    m, txn = build(prev, ops.UpdateConfig(config_updates=({"x": "y"}, False)), store)
    data = encode_manifest_file(m, txn.to_bytes(), [table_pb2.IndexMetadata(name="i", fields=[0])])
    back = decode_manifest_file(data)
    assert back.transaction_bytes == txn.to_bytes()
    assert [i.name for i in back.indices] == ["i"]
    assert not back.manifest.version_aux_data and not back.manifest.HasField("transaction_section_deprecated")
