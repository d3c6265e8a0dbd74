"""Shallow clones (issue 30 item 12): ``clone`` / ``cloneAtVersion`` /
``cloneAtTimestamp`` write a manifest pylance opens, shaped as pylance's own
``shallow_clone`` of the same version, and never write under the source."""
import datetime
import os

import lance
import pyarrow as pa
import pytest

from lance_ops import LanceTable
from lance_ops.errors import TableExistsError, UnsupportedFeatureError
from lance_ops.format.proto import transaction_pb2
from tests.helpers import assert_same_rows, read_manifest

DDL = "id long, x long"


def rows(spark, ids):
    return spark.createDataFrame([(i, i * 10) for i in ids], DDL)


def files_and_mtimes(path):
    out = {}
    for d, _, names in os.walk(path):
        for n in names:
            full = os.path.join(d, n)
            out[os.path.relpath(full, path)] = os.stat(full).st_mtime_ns
    return out


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory):
    """v1 create (2 fragments), v2 delete (deletion file), v3 BTREE index
    (pylance), v4 append; tag "rel" on v2."""
    p = str(tmp_path_factory.mktemp("clone") / "src.lance")
    t = LanceTable.create(spark, p, rows(spark, range(8)).coalesce(1), maxRowsPerFragment=4)
    t.delete("id = 1")
    lance.dataset(p).create_scalar_index("id", "BTREE")
    t.refresh().append(rows(spark, range(8, 10)))
    t.createTag("rel", 2)
    return p


def shape(path):
    """The parts of a clone's manifest that do not depend on where it lives."""
    mf = read_manifest(path)
    m = mf.manifest
    bases = sorted((b.id, b.name, b.is_dataset_root) for b in m.base_paths)
    files = [([f.base_id for f in frag.files], frag.deletion_file.base_id if frag.HasField("deletion_file") else None)
             for frag in m.fragments]
    with open(os.path.join(path, "_transactions", m.transaction_file), "rb") as f:
        clone = transaction_pb2.Transaction.FromString(f.read()).clone
    return {
        "version": m.version, "bases": bases, "files": files, "branch": m.branch,
        "flags": (m.reader_feature_flags, m.writer_feature_flags),
        "indices": sorted((i.name, i.base_id) for i in mf.indices),
        "clone": (clone.is_shallow, clone.ref_version, clone.HasField("ref_name") and clone.ref_name),
        "next_row_id": m.next_row_id, "max_fragment_id": m.max_fragment_id,
    }


@pytest.mark.parametrize("at", [None, 2, "rel", 3])
def test_clone_matches_pylance_shallow_clone(spark, source, tmp_path, at):
    before = files_and_mtimes(source)
    t = LanceTable(spark, source)
    ours = str(tmp_path / "ours.lance")
    clone = t.clone(ours) if at is None else t.cloneAtVersion(at, ours)
    ref = str(tmp_path / "ref.lance")
    lance.dataset(source).shallow_clone(ref, lance.dataset(source).version if at is None else at)

    assert files_and_mtimes(source) == before  # the source is never written
    assert shape(ours) == shape(ref)
    version = lance.dataset(ref).version
    assert clone.version == version and lance.dataset(ours).version == version
    ds = lance.dataset(ours)
    want = lance.dataset(source, version=version).to_table(with_row_id=True)
    assert ds.to_table(with_row_id=True).sort_by("_rowid") == want.sort_by("_rowid")
    assert_same_rows(clone.toDF(withRowId=True), want)
    assert [i.name for i in ds.describe_indices()] == [i.name for i in lance.dataset(ref).describe_indices()]


def test_writes_to_a_clone_stay_under_its_root(spark, source, tmp_path):
    before = files_and_mtimes(source)
    target = str(tmp_path / "c.lance")
    c = LanceTable(spark, source).clone(target, properties={"owner": "team-a"})
    c.append(rows(spark, [100, 101]))
    c.delete("id < 3")
    c.update("id = 5", {"x": "-1"})
    lance.dataset(target).delete("id = 100")  # pylance writes to our clone
    assert files_and_mtimes(source) == before
    assert lance.dataset(target).config()["owner"] == "team-a"
    got = sorted(lance.dataset(target).to_table().to_pylist(), key=lambda r: r["id"])
    want = [{"id": i, "x": -1 if i == 5 else i * 10} for i in [3, 4, 5, 6, 7, 8, 9, 101]]
    assert got == want
    assert_same_rows(LanceTable(spark, target).toDF(withRowId=True), lance.dataset(target).to_table(with_row_id=True))
    # the clone's own new files are under its root; the source's stay where they are
    mf = read_manifest(target).manifest
    own = [f.path for frag in mf.fragments for f in frag.files if not f.HasField("base_id")]
    assert own and all(os.path.exists(os.path.join(target, "data", p)) for p in own)


def test_clone_of_a_branch_and_of_a_pylance_clone(spark, source, tmp_path):
    p = str(tmp_path / "b.lance")
    lance.write_dataset(pa.table({"id": [1, 2], "x": [1, 2]}), p, enable_stable_row_ids=True)
    lance.dataset(p).create_branch("dev")
    lance.write_dataset(pa.table({"id": [3], "x": [3]}), os.path.join(p, "tree", "dev"), mode="append")
    ours, ref = str(tmp_path / "ours.lance"), str(tmp_path / "ref.lance")
    LanceTable(spark, p, branch="dev").clone(ours)
    lance.dataset(p).shallow_clone(ref, ("dev", None))
    assert shape(ours) == shape(ref) and shape(ours)["clone"][2] == "dev"
    assert lance.dataset(ours).to_table().sort_by("id") == lance.dataset(ref).to_table().sort_by("id")
    # a clone of a clone (pylance's), made by us, is read by pylance
    again = str(tmp_path / "again.lance")
    LanceTable(spark, ref).clone(again)
    assert lance.dataset(again).to_table().sort_by("id")["id"].to_pylist() == [1, 2, 3]


def test_clone_at_timestamp(spark, source, tmp_path):
    times = {r["version"]: r["timestamp"] for r in LanceTable(spark, source).table.history()}
    c = LanceTable(spark, source).cloneAtTimestamp(times[2] + datetime.timedelta(microseconds=1), str(tmp_path / "c"))
    assert c.version == 2
    assert sorted(r.id for r in c.toDF().collect()) == [0, 2, 3, 4, 5, 6, 7]


def test_clone_errors_leave_nothing(spark, source, tmp_path):
    t = LanceTable(spark, source)
    taken = str(tmp_path / "taken.lance")
    t.clone(taken)
    before = files_and_mtimes(taken)
    with pytest.raises(TableExistsError):
        t.clone(taken)
    with pytest.raises(UnsupportedFeatureError, match="deep clone"):
        t.clone(str(tmp_path / "deep.lance"), isShallow=False)
    with pytest.raises(UnsupportedFeatureError, match="replace"):
        t.clone(taken, replace=True)
    assert files_and_mtimes(taken) == before
    assert not os.path.exists(tmp_path / "deep.lance")
