"""Data evolution against concurrent commits (rule table in txn/conflicts.py)."""
import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_ops import LanceTable
from lance_ops.errors import CommitConflictError
from tests.helpers import commits_during


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "t.lance")
    ids = np.arange(300)
    lance.write_dataset(pa.table({"id": ids, "x": ids * 2}), p, max_rows_per_file=100, enable_stable_row_ids=True)
    return p


def test_add_columns_after_concurrent_append_reruns(spark, path):
    t = LanceTable(spark, path)
    with commits_during(lambda: lance.write_dataset(pa.table({"id": [1000], "x": [7]}), path, mode="append")):
        info = t.addColumns({"z": "x + 1"})
    assert (info.rebases, info.reruns, info.version) == (0, 1, 3)
    rows = lance.dataset(path).to_table().to_pylist()
    assert len(rows) == 301 and all(r["z"] == r["x"] + 1 for r in rows)  # the new fragment has it too


def test_add_columns_adopts_concurrent_delete(spark, path):
    """Deviation from pylance (which retries): a delete only changed deletion
    files; the Merge takes them over instead of re-running the backfill."""
    t = LanceTable(spark, path)
    with commits_during(lambda: lance.dataset(path).delete("id < 5 or id between 200 and 299")):  # incl. a fragment
        info = t.addColumns({"z": "x * 10"})
    assert (info.version, info.rebases, info.reruns) == (3, 1, 0)
    ds = lance.dataset(path)
    rows = ds.to_table().to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(5, 200))
    assert all(r["z"] == r["x"] * 10 for r in rows)
    assert len(ds.get_fragments()) == 2


def test_rewrite_columns_after_concurrent_delete_of_same_fragment_reruns(spark, path):
    t = LanceTable(spark, path)
    with commits_during(lambda: lance.dataset(path).delete("id = 3")):
        info = t.rewriteColumns({"x": "x + 1"}, "id < 10")
    assert (info.rebases, info.reruns) == (0, 1)
    rows = {r["id"]: r["x"] for r in lance.dataset(path).to_table().to_pylist()}
    assert 3 not in rows and rows[4] == 9 and rows[50] == 100


def test_drop_column_after_concurrent_add_column_reruns(spark, path):
    t = LanceTable(spark, path)
    with commits_during(lambda: lance.dataset(path).add_columns({"z": "x + 1"})):
        info = t.dropColumns("x")
    assert (info.rebases, info.reruns) == (0, 1)
    assert lance.dataset(path).schema.names == ["id", "z"]


def test_add_columns_after_concurrent_overwrite_fails(spark, path):
    t = LanceTable(spark, path)
    overwrite = lambda: lance.write_dataset(pa.table({"id": [1], "x": [1]}), path, mode="overwrite")  # noqa: E731
    with pytest.raises(CommitConflictError) as e, commits_during(overwrite):
        t.addColumns({"z": "x + 1"})
    assert not e.value.retryable and lance.dataset(path).version == 2
