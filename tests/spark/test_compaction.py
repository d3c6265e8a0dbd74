"""optimize().executeCompaction(): differential against pylance's
compact_files (same plan, rows, row ids, lineage), racing deletes, indices."""
import os
import shutil
import subprocess
import sys

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_ops import LanceTable
from tests.helpers import arrow_rows, commits_during, read_manifest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]


def make(path, sizes, stable=True, start=0):
    """A table whose fragments have the given row counts (ids sequential)."""
    next_id = start
    for i, n in enumerate(sizes):
        ids = np.arange(next_id, next_id + n)
        next_id += n
        t = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(ids * 2.0), "s": pa.array([f"s{i}" for i in ids])})
        lance.write_dataset(t, path, mode="create" if i == 0 else "append", max_rows_per_file=n,
                            enable_stable_row_ids=stable)
    return path


def twin(tmp_path, sizes, stable=True, deletes=()):
    ref = make(str(tmp_path / "ref.lance"), sizes, stable)
    for d in deletes:
        lance.dataset(ref).delete(d)
    ours = str(tmp_path / "ours.lance")
    shutil.copytree(ref, ours)
    return ours, ref


def state(path):
    ds = lance.dataset(path)
    rows = ds.to_table(columns=["id", "v", "s"] + LINEAGE, with_row_id=True, with_row_address=True)
    frags = [(f.metadata.id, f.metadata.physical_rows, f.metadata.deletion_file is not None) for f in ds.get_fragments()]
    return ds.version, frags, arrow_rows(rows, ("id",))


@pytest.mark.parametrize(
    "sizes,deletes,kwargs",
    [
        ([10, 10, 10], [], {}),  # one group
        ([1000, 10, 1000], [], {"targetRowsPerFragment": 1000}),  # isolated small fragment: nothing
        ([300] * 5, [], {"targetRowsPerFragment": 1000}),  # one 1500-row output (no cut at target)
        ([1000, 1000], ["id < 200"], {"targetRowsPerFragment": 1000}),  # 20% deleted: rewritten alone
        ([1000, 1000], ["id < 50"], {"targetRowsPerFragment": 1000}),  # 5%: nothing
        ([1000, 1000], ["id < 300"], {"targetRowsPerFragment": 1000, "materializeDeletions": False}),
        ([1000, 1000], ["id < 300"], {"targetRowsPerFragment": 1000, "materializeDeletionsThreshold": 0.5}),
        ([400, 400, 400, 400, 400, 400], ["id % 3 = 0"], {"targetRowsPerFragment": 500}),  # cuts by live rows
        # fragments over rewrite.READ_AHEAD_FRAGMENT_BYTES streamed between small ones read ahead, in order
        ([150_000, 10, 10, 150_000, 10, 10], ["id % 7 = 3"], {}),
    ],
)
def test_matches_pylance_compact_files(spark, tmp_path, sizes, deletes, kwargs):
    ours, ref = twin(tmp_path, sizes, deletes=deletes)
    t = LanceTable(spark, ours)
    result = t.optimize().executeCompaction(**kwargs).first()
    info = t.lastCommit()
    py = {"targetRowsPerFragment": "target_rows_per_fragment", "materializeDeletions": "materialize_deletions",
          "materializeDeletionsThreshold": "materialize_deletions_threshold"}
    metrics = lance.dataset(ref).optimize.compact_files(**{py[k]: v for k, v in kwargs.items()})
    (v_ours, *same_ours), (v_ref, *same_ref) = state(ours), state(ref)
    assert same_ours == same_ref  # same fragments (ids too), rows, row ids, lineage
    # one version per OPTIMIZE: the new fragments' ids are reserved in the
    # Rewrite's own commit, where pylance commits a ReserveFragments first
    assert v_ours == (v_ref - 1 if metrics.fragments_removed else v_ref)
    assert (info.version is None) == (metrics.fragments_removed == 0)
    assert info.metrics["numRemovedFragments"] == metrics.fragments_removed
    assert info.metrics["numAddedFragments"] == metrics.fragments_added
    # Delta's result: the table path and its metrics, the same numbers
    assert result.path == t.uri and result.metrics.version == info.version
    assert (result.metrics.numFragmentsRemoved, result.metrics.numFilesAdded) == (
        metrics.fragments_removed, info.metrics["numAddedFiles"])
    if info.version is not None:
        txn = read_manifest(ours).transaction()
        assert txn.read_version == info.version - 1  # the plan's version, the one before
        assert lance.dataset(ours).read_transaction(info.version).operation.__class__.__name__ == "Rewrite"


def test_without_stable_row_ids(spark, tmp_path):
    ours, ref = twin(tmp_path, [100] * 6, stable=False, deletes=["id % 4 = 1"])
    LanceTable(spark, ours).optimize().executeCompaction(targetRowsPerFragment=250)
    lance.dataset(ref).optimize.compact_files(target_rows_per_fragment=250)
    assert state(ours)[1:] == state(ref)[1:] and state(ours)[0] == state(ref)[0] - 1  # (no ReserveFragments)


def test_a_chunk_holding_a_renamed_column_is_read_fragment_by_fragment(spark, tmp_path):
    """Tiny fragments are read ahead in chunks, as one table; a chunk holding
    fragments whose files call a column by its old name (a rename) is read
    fragment by fragment instead -- the same rows, ids and lineage as
    pylance."""
    ours, ref = twin(tmp_path, [10] * 5, deletes=["id % 4 = 1"])
    for p in (ours, ref):
        lance.dataset(p).alter_columns({"path": "v", "name": "w"})  # the 5 files still call it v
        for i in range(5):  # 5 more files that call it w
            ids = np.arange(50 + 10 * i, 60 + 10 * i)
            lance.write_dataset(pa.table({"id": ids, "w": ids * 2.0, "s": [f"s{x}" for x in ids]}), p, mode="append")
    LanceTable(spark, ours).optimize().executeCompaction()
    lance.dataset(ref).optimize.compact_files()

    def rows(p):
        ds = lance.dataset(p)
        return len(ds.get_fragments()), arrow_rows(ds.to_table(columns=["id", "w", "s"] + LINEAGE, with_row_id=True,
                                                                with_row_address=True), ("id",))

    assert rows(ours) == rows(ref)
    assert rows(ours)[0] == 1


def test_keeps_lineage_after_updates_and_drops_dropped_columns(spark, tmp_path):
    p = make(str(tmp_path / "t.lance"), [200] * 4)
    t = LanceTable(spark, p)
    t.update("id % 10 = 0", {"v": "-v"})
    t.addColumns({"z": "id + 1"})
    t.dropColumns("s")
    before = arrow_rows(lance.dataset(p).to_table(columns=["id", "v", "z"] + LINEAGE, with_row_id=True), ("_rowid",))
    t.optimize().executeCompaction(targetRowsPerFragment=10_000)
    info = t.lastCommit()
    assert info.metrics["numRowsRewritten"] == 800 and info.metrics["numAddedFragments"] == 1
    after = arrow_rows(lance.dataset(p).to_table(columns=["id", "v", "z"] + LINEAGE, with_row_id=True), ("_rowid",))
    assert before == after
    frag = read_manifest(p).manifest.fragments[0]
    assert len(frag.files) == 1 and list(frag.files[0].fields) == [0, 1, 3]  # s (id 2) gone from disk
    assert not frag.HasField("deletion_file")


def test_nothing_to_do_commits_nothing(spark, tmp_path):
    p = make(str(tmp_path / "t.lance"), [100])
    m = LanceTable(spark, p).optimize().executeCompaction().first().metrics
    assert m.version is None and m.numFilesAdded == 0 and lance.dataset(p).version == 1


def test_race_with_delete_commits_other_groups_and_replans(spark, tmp_path):
    """A delete lands between planning and commit on a fragment of one group: the
    other groups commit, the affected one is re-planned -- nothing is lost."""
    p = make(str(tmp_path / "t.lance"), [100] * 8)
    t = LanceTable(spark, p)  # plans from version 8
    with commits_during(lambda: lance.dataset(p).delete("id = 5")):  # fragment 0, in the first group
        t.optimize().executeCompaction(targetRowsPerFragment=400)
    info = t.lastCommit()
    # the untouched group committed over the delete (one rebase), the other was
    # planned and committed again on the new version (one re-run)
    assert (info.rebases, info.reruns, info.metrics["numRemovedFragments"]) == (1, 1, 8)
    ds = lance.dataset(p)
    ids = sorted(ds.to_table(columns=["id"])["id"].to_pylist())
    assert ids == [i for i in range(800) if i != 5]
    assert sorted(ds.to_table(with_row_id=True)["_rowid"].to_pylist()) == [i for i in range(800) if i != 5]
    assert all(f.metadata.physical_rows >= 399 for f in ds.get_fragments())  # both groups compacted in the end


RACER = """
import sys, lance
path = sys.argv[1]
for k in range(12):
    lance.dataset(path).delete(f"id = {k * 60 + 7}")
"""


def test_compaction_racing_deletes_in_another_process(spark, tmp_path, processes):
    p = make(str(tmp_path / "t.lance"), [60] * 12)
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    proc = subprocess.Popen([sys.executable, str(script), p], cwd=ROOT)
    try:
        for _ in range(3):
            LanceTable(spark, p).optimize().executeCompaction(targetRowsPerFragment=200, materializeDeletionsThreshold=0.0)
    finally:
        assert proc.wait(timeout=300) == 0
    LanceTable(spark, p).optimize().executeCompaction(targetRowsPerFragment=200)
    ds = lance.dataset(p)
    deleted = {k * 60 + 7 for k in range(12)}
    assert sorted(ds.to_table(columns=["id"])["id"].to_pylist()) == sorted(set(range(720)) - deleted)
    assert sorted(ds.to_table(with_row_id=True)["_rowid"].to_pylist()) == sorted(set(range(720)) - deleted)


def _expected(q, ids):
    return sorted(i for i in ids if eval(q, {"id": i}))


@pytest.mark.parametrize("stable", [True, False])
def test_btree_index_is_remapped_and_stays_correct(spark, tmp_path, stable):
    """pylance's BTREE index is remapped to the rows' new addresses (as
    pylance's own compaction does, tests/spark/test_compaction_indices.py):
    it covers the new fragment and every query stays right."""
    p = make(str(tmp_path / "t.lance"), [1000, 1000, 300, 300, 300], stable=stable)
    lance.dataset(p).create_scalar_index("id", "BTREE")
    lance.dataset(p).delete("id % 5 = 0")
    t = LanceTable(spark, p)
    t.optimize().executeCompaction(targetRowsPerFragment=1000, materializeDeletions=False)
    info = t.lastCommit()
    assert info.metrics["numRemovedFragments"] == 3
    assert info.metrics["numIndicesRemapped"] == 1 and info.metrics["numIndicesNarrowed"] == 0
    ds = lance.dataset(p)
    from pyroaring import BitMap

    idx = read_manifest(p).indices
    new_ids = {f.id for f in read_manifest(p).manifest.fragments} - {0, 1}
    assert set(BitMap.deserialize(idx[0].fragment_bitmap)) == {0, 1} | new_ids
    assert ds.stats.index_stats("id_idx")["num_unindexed_fragments"] == 0
    assert "ScalarIndexQuery" in ds.scanner(filter="id = 7", columns=["id"]).explain_plan()
    live = [i for i in range(2900) if i % 5 != 0]
    for q in ("id == 7", "id == 2100", "id < 40", "2095 <= id <= 2110", "id >= 2890"):
        sql = q.replace("==", "=") if "<= id <=" not in q else "id between 2095 and 2110"
        assert sorted(ds.to_table(filter=sql, columns=["id"])["id"].to_pylist()) == _expected(q, live), q


@pytest.mark.parametrize("indexed", [False, True])
def test_one_version_ids_taken_by_a_concurrent_append(spark, tmp_path, indexed):
    """The Rewrite takes its fragment ids in its own commit: an append (pylance's)
    landing meanwhile takes the ids it planned with, so the rebase numbers the
    new fragment again -- metadata only; with a BTREE index (its remapped row
    addresses hold the planned ids) the compaction is prepared again instead,
    since no Spark job runs in the commit phase. pylance reads the result, its
    index stays right, and its next writes keep numbering after it."""
    p = make(str(tmp_path / "t.lance"), [100] * 4, stable=False)
    if indexed:
        lance.dataset(p).create_scalar_index("id", "BTREE")
    t = LanceTable(spark, p)
    append = lambda: lance.write_dataset(  # noqa: E731  (fragment 4: the id the compaction planned with)
        pa.table({"id": pa.array([1000], pa.int64()), "v": [1.0], "s": ["x"]}), p, mode="append")
    with commits_during(append):
        t.optimize().executeCompaction(targetRowsPerFragment=1000)
    info = t.lastCommit()
    assert (info.rebases, info.reruns) == ((0, 1) if indexed else (1, 0))
    ds = lance.dataset(p)
    assert [f.metadata.id for f in ds.get_fragments()] == [4, 5] and read_manifest(p).manifest.max_fragment_id == 5
    assert [v["version"] for v in ds.versions()][-2:] == [info.version - 1, info.version]
    assert sorted(ds.to_table(columns=["id"])["id"].to_pylist()) == list(range(400)) + [1000]
    if indexed:
        assert info.metrics["numIndicesRemapped"] == 1
        assert ds.to_table(filter="id = 7", columns=["id"])["id"].to_pylist() == [7]
        assert sorted(ds.to_table(filter="id >= 398", columns=["id"])["id"].to_pylist()) == [398, 399, 1000]
        from pyroaring import BitMap

        assert set(BitMap.deserialize(read_manifest(p).indices[0].fragment_bitmap)) == {5}  # the renumbered one
        idx = os.path.join(p, "_indices")
        assert sum(1 for d in os.listdir(idx) if os.listdir(os.path.join(idx, d))) == 2  # the first remap's files removed
    lance.write_dataset(pa.table({"id": pa.array([2000], pa.int64()), "v": [2.0], "s": ["y"]}), p, mode="append")
    assert [f.metadata.id for f in lance.dataset(p).get_fragments()] == [4, 5, 6]


def test_where_limits_compaction_to_matching_fragments(spark, tmp_path):
    """optimize().where(predicate): only fragments holding a matching row are
    compacted (Delta limits OPTIMIZE to the partitions a filter selects)."""
    p = make(str(tmp_path / "t.lance"), [100] * 6)
    t = LanceTable(spark, p)
    m = t.optimize().where("id >= 300").executeCompaction(targetRowsPerFragment=1000).first().metrics
    assert (m.numFragmentsRemoved, m.numFragmentsAdded) == (3, 1)
    assert [f.metadata.physical_rows for f in lance.dataset(p).get_fragments()] == [100, 100, 100, 300]
    h = t.history(1).first()
    assert (h.operation, h.lanceOperation, h.operationParameters["predicate"]) == ("OPTIMIZE", "Rewrite", '["id >= 300"]')
    assert t.optimize().where("id > 10000").executeCompaction().first().metrics.version is None
