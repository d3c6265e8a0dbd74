"""restoreToVersion on the Spark-free core (``lance_ops.Table``):
differential against pylance's restore() on identical copies (rows, _rowid,
lineage, high-water marks, the history row); tags: both ways between pylance
and us, and the error cases. What the Spark facade adds (Delta's RESTORE
result frame, argument types, a Spark append after a restore) is in
tests/spark/test_restore_tags.py."""
import os
import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_ops import Table
from lance_ops.errors import InvalidArgumentError, ReadOnlyVersionError, TableExistsError, TableNotFoundError
from lance_ops.format.writer import write_fragments
from lance_ops.txn.operations import Append
from lance_ops.txn.pipeline import StagedCommit
from tests.helpers import arrow_rows, manifest_files, read_manifest

LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]


def data(n, start=0) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array(ids * 2, pa.int64())})


@pytest.fixture
def pair(tmp_path):
    """(ours, ref): identical pylance-written tables with 5 versions: create
    (3 fragments), delete, append, update, delete of a whole fragment."""
    ref = str(tmp_path / "ref.lance")
    lance.write_dataset(data(30), ref, max_rows_per_file=10, enable_stable_row_ids=True)
    lance.dataset(ref).delete("id % 4 = 0")
    lance.write_dataset(data(10, 100), ref, mode="append")
    lance.dataset(ref).update({"x": "x + 1"}, where="id > 20")
    lance.dataset(ref).delete("id < 10")
    ours = str(tmp_path / "ours.lance")
    shutil.copytree(ref, ours)
    return ours, ref


def view(path, version=None):
    ds = lance.dataset(path, version=version)
    return arrow_rows(ds.to_table(columns=ds.schema.names + LINEAGE, with_row_id=True), ("_rowid",))


def high_water(path):
    m = read_manifest(path).manifest
    return m.version, m.next_row_id, m.max_fragment_id


def append(t: Table, rows: pa.Table):
    """An Append of ``rows`` (one fragment) through the core's commit pipeline."""
    def prepare(snap):
        frags = write_fragments(t.store, snap.schema, rows.to_batches(), snap.data_format_version)
        return StagedCommit(Append(list(frags)))

    return t.execute(prepare)


def test_restore_matches_pylance(pair):
    ours, ref = pair
    t = Table(ours)
    info = t.restoreToVersion(2)
    lance.dataset(ref, version=2).restore()

    assert (info.version, info.readVersion, info.operation) == (6, 5, "Restore")
    assert info.metrics["numOfFilesAfterRestore"] == 3
    assert t.version == 6 and t.count() == lance.dataset(ref).count_rows() == 22
    assert view(ours) == view(ref) == view(ref, version=2)
    assert high_water(ours) == high_water(ref)
    assert read_manifest(ours).manifest.next_row_id > read_manifest(ours, 2).manifest.next_row_id
    # Later versions stay readable; new rows get ids past every id ever issued.
    assert view(ours, version=5) == view(ref, version=5)
    append(t, data(3, 500))
    lance.write_dataset(data(3, 500), ref, mode="append")
    assert view(ours) == view(ref)
    assert high_water(ours) == high_water(ref)


def test_restore_by_tag_name_and_history(pair):
    ours, ref = pair
    lance.dataset(ours).tags.create("before-append", 2)
    t = Table(ours)
    info = t.restoreToVersion("before-append")
    lance.dataset(ref, version=2).restore()
    assert info.version == 6 and view(ours) == view(ref)
    assert info.metrics["numRowsAfterRestore"] == 22
    top = Table(ours).history(limit=1)[0]
    assert (top["operation"], top["lanceOperation"], top["readVersion"]) == ("RESTORE", "Restore", 5)
    assert top["operationParameters"]["version"] == "2" and top["operationParameters"]["tag"] == "before-append"
    pylance_top = Table(ref).history(limit=1)[0]
    assert (pylance_top["operation"], pylance_top["operationParameters"]["version"]) == ("RESTORE", "2")


def test_restore_errors_leave_no_version(pair):
    ours, _ = pair
    with pytest.raises(ReadOnlyVersionError):
        Table(ours, version=3).restoreToVersion(2)
    t = Table(ours)
    with pytest.raises(TableNotFoundError, match="version 9"):
        t.restoreToVersion(9)
    with pytest.raises(TableNotFoundError, match="tag 'nope'"):
        t.restoreToVersion("nope")
    with pytest.raises(InvalidArgumentError):
        t.restoreToVersion(None)
    assert sorted(manifest_files(ours)) == [1, 2, 3, 4, 5] and t.version == 5


# ------------------------------------------------------------------ tags
def test_pylance_reads_our_tags(pair):
    ours, _ = pair
    t = Table(ours)
    t.createTag("v2", 2)
    Table(ours, version=3).createTag("v3")  # default: the handle's version
    t.createTag("also-v2", "v2")
    tags = lance.dataset(ours).tags.list()
    assert {k: v["version"] for k, v in tags.items()} == {"v2": 2, "v3": 3, "also-v2": 2}
    assert tags["v2"]["manifest_size"] == os.path.getsize(manifest_files(ours)[2])
    assert lance.dataset(ours, version="v2").version == 2
    assert view(ours, version="v3") == view(ours, version=3)
    assert t.listTags() == {"also-v2": 2, "v2": 2, "v3": 3}
    assert t.listTags(details=True)["v2"]["manifestSize"] == tags["v2"]["manifest_size"]


def test_we_read_pylance_tags(pair):
    ours, _ = pair
    lance.dataset(ours).tags.create("pt", 1)
    t = Table(ours)
    assert t.listTags() == {"pt": 1}
    assert Table(ours, version="pt").version == 1
    assert Table(ours, version="pt").count() == 30
    t.deleteTag("pt")
    assert t.listTags() == {} and lance.dataset(ours).tags.list() == {}


@pytest.mark.parametrize("name", ["", "has space", ".hidden", "end.", "a..b", "x.lock", "a/b"])
def test_bad_tag_names(pair, name):
    ours, _ = pair
    with pytest.raises(InvalidArgumentError, match="invalid tag name"):
        Table(ours).createTag(name, 1)
    assert not os.path.exists(os.path.join(ours, "_refs"))


def test_tag_errors(pair):
    ours, _ = pair
    t = Table(ours)
    t.createTag("t", 1)
    with pytest.raises(TableExistsError):
        t.createTag("t", 2)
    with pytest.raises(TableNotFoundError, match="version 42"):
        t.createTag("future", 42)
    with pytest.raises(TableNotFoundError, match="tag 'nope'"):
        t.deleteTag("nope")
    with pytest.raises(TableNotFoundError, match="tag 'nope'"):
        Table(ours, version="nope")
    assert lance.dataset(ours).tags.list().keys() == {"t"} and t.listTags() == {"t": 1}
    assert sorted(manifest_files(ours)) == [1, 2, 3, 4, 5]
