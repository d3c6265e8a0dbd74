"""Z-order (issue 30 item 13): ``optimize().executeZOrderBy(*cols)`` rewrites
the rows so zone maps skip on each column: a selective read or delete on any
one of them touches at most 20% of the fragments it touched before; pylance
reads the same rows with the same row ids and lineage; indices follow; the
change feed reports nothing; bad columns fail before anything runs."""
import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_ops import LanceTable
from lance_ops.errors import InvalidArgumentError
from lance_ops.spark.datasource import read_skip_report

FRAGMENTS = 64
ROWS = FRAGMENTS * 250
LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """64 fragments (pylance, stable row ids) of uncorrelated random ``a``
    (long) and ``b`` (double), an ascending ``id`` and a string ``s``; a
    BTREE on id and ZONEMAPs on a and b (pylance's)."""
    p = str(tmp_path_factory.mktemp("zorder") / "base.lance")
    rng = np.random.default_rng(7)
    t = pa.table({
        "id": np.arange(ROWS, dtype=np.int64),
        "a": rng.integers(0, 1_000_000, ROWS),
        "b": rng.random(ROWS),
        "s": [f"k{v:06d}" for v in rng.integers(0, 1_000_000, ROWS)],
    })
    lance.write_dataset(t, p, max_rows_per_file=ROWS // FRAGMENTS, enable_stable_row_ids=True)
    lance.dataset(p).create_scalar_index("id", "BTREE")
    for c in ("a", "b"):
        lance.dataset(p).create_scalar_index(c, "ZONEMAP")
    lance.dataset(p).delete("id % 100 = 7")  # deletion files: z-order drops the deleted rows
    return p


def touched(spark, path, pred, tmp_path) -> int:
    report = str(tmp_path / "skip.json")
    spark.read.format("lance").option("skipReport", report).load(path).where(pred).select("id").toArrow()
    return read_skip_report(report)["numFragmentsScanned"]


def last_commit(t):
    """The handle's last CommitInfo (a property today, Delta's ``lastCommit()`` method on issue 30a's branch)."""
    lc = t.lastCommit
    return lc() if callable(lc) else lc


PREDICATES = {"a": "a BETWEEN 400000 AND 402000", "b": "b BETWEEN 0.3 AND 0.302"}


def test_zorder_skips_on_each_column_and_reads_the_same(spark, base, tmp_path):
    p = str(tmp_path / "t.lance")
    shutil.copytree(base, p)
    t = LanceTable(spark, p)
    before = {c: touched(spark, p, pred, tmp_path) for c, pred in PREDICATES.items()}
    assert before == {"a": FRAGMENTS, "b": FRAGMENTS}
    cols = ["id", "a", "b", "s"]
    want = lance.dataset(p).to_table(columns=cols + LINEAGE, with_row_id=True).sort_by("_rowid")
    v = t.version

    result = t.optimize().executeZOrderBy("a", "b", targetRowsPerFragment=ROWS // FRAGMENTS)

    assert result.columns == ["path", "metrics"]
    m = result.head().metrics
    assert m.numFilesRemoved == FRAGMENTS and m.numFilesAdded == len(lance.dataset(p).get_fragments())
    assert m.zOrderStats.strategyName == "all" and m.version == t.version
    info = last_commit(t)
    assert info.operation == "Rewrite" and info.metrics["numIndicesRebuilt"] == 2 and info.metrics["numIndicesRemapped"] == 1
    ds = lance.dataset(p)
    assert abs(len(ds.get_fragments()) - FRAGMENTS) <= 2
    # pylance reads the same rows, ids and lineage; the deleted rows are gone for good
    assert ds.to_table(columns=cols + LINEAGE, with_row_id=True).sort_by("_rowid") == want
    assert not any(f.metadata.deletion_file for f in ds.get_fragments())
    assert ds.to_table(filter="id = 1234")["a"].to_pylist() == want.filter(pa.compute.equal(want["id"], 1234))["a"].to_pylist()
    assert {i.name for i in ds.describe_indices()} == {"id_idx", "a_idx", "b_idx"}
    after = {c: touched(spark, p, pred, tmp_path) for c, pred in PREDICATES.items()}
    for c in PREDICATES:
        assert after[c] <= 0.2 * before[c], (c, before, after)
        assert LanceTable(spark, p).toDF().where(PREDICATES[c]).count() == want.to_pandas().query(
            PREDICATES[c].replace("BETWEEN", ">=").replace(" AND ", f" and {c} <= ")).shape[0]
    # a selective delete touches as few
    n_live = ds.count_rows()
    for c in ("a", "b"):  # (b: a double column, its decimal literals cast to double)
        deleting = LanceTable(spark, p)
        deleting.delete(PREDICATES[c])
        info = last_commit(deleting)
        assert info.metrics["numFragmentsScanned"] <= 0.2 * FRAGMENTS, (c, info.metrics)
        assert lance.dataset(p).count_rows() == n_live - info.metrics["numDeletedRows"]
        n_live -= info.metrics["numDeletedRows"]
    assert lance.dataset(p).count_rows(filter=f"({PREDICATES['a']}) OR ({PREDICATES['b']})") == 0
    # nothing changed in the rows: the change feed of the rewrite is empty
    assert LanceTable(spark, p).changes(v, m.version).count() == 0
    history = {r.version: r for r in LanceTable(spark, p).history().collect()}
    assert history[m.version].operationParameters["zOrderBy"] == '["a", "b"]'


def test_zorder_argument_errors_commit_nothing(spark, base, tmp_path):
    p = str(tmp_path / "t.lance")
    shutil.copytree(base, p)
    t = LanceTable(spark, p)
    v = t.version
    with pytest.raises(InvalidArgumentError, match="no top-level column"):
        t.optimize().executeZOrderBy("a", "nope")
    with pytest.raises(InvalidArgumentError, match="at least one column"):
        t.optimize().executeZOrderBy()
    with pytest.raises(TypeError):
        t.optimize().executeZOrderBy(1)
    with pytest.raises(InvalidArgumentError, match="targetRowsPerFragment"):
        t.optimize().executeZOrderBy("a", targetRowsPerFragment=0)
    assert lance.dataset(p).version == v
    # a list of names works as Delta's executeZOrderBy(["a", "b"]); strings z-order too
    t.optimize().executeZOrderBy(["s"], targetRowsPerFragment=ROWS // 8)
    ds = lance.dataset(p)
    assert len(ds.get_fragments()) <= 9
    bounds = [(min(f.to_table(columns=["s"])["s"].to_pylist()), max(f.to_table(columns=["s"])["s"].to_pylist()))
              for f in ds.get_fragments()]
    bounds.sort()
    assert all(hi <= nxt_lo for (_, hi), (nxt_lo, _) in zip(bounds, bounds[1:]))  # one column: a total order
