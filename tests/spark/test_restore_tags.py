"""What the Spark facade adds to restore and tags (the behaviour itself is the
Spark-free core's, checked against pylance in tests/txn/test_restore_tags.py):
Delta's RESTORE result frame, argument types, a Spark append after a restore
(ids past every id ever issued, as pylance), and LanceTable's tag methods."""
import lance
import pytest

from lance_ops import LanceTable
from lance_ops.errors import ArgumentTypeError, TableNotFoundError
from tests.txn.test_restore_tags import data, high_water, pair, view  # noqa: F401 (fixture)


def test_restore_frame_and_a_spark_append_after_it(spark, pair):  # noqa: F811
    ours, ref = pair
    t = LanceTable(spark, ours)
    result = t.restoreToVersion(2).first()
    info = t.lastCommit()
    lance.dataset(ref, version=2).restore()
    assert (info.version, info.readVersion, info.operation) == (6, 5, "Restore")
    # Delta's RESTORE result: the same numbers as the history's metrics
    assert result.num_of_files_after_restore == info.metrics["numOfFilesAfterRestore"] == 3
    assert (result.table_size_after_restore, result.num_restored_files, result.num_removed_files) == (
        info.metrics["tableSizeAfterRestore"], info.metrics["numRestoredFiles"], info.metrics["numRemovedFiles"])
    assert t.version == 6 and t.count() == 22 and view(ours) == view(ref)
    t.append(spark.createDataFrame(data(3, 500).to_pandas()).coalesce(1))
    lance.write_dataset(data(3, 500), ref, mode="append")
    assert view(ours) == view(ref)
    assert high_water(ours) == high_water(ref)
    for bad in (None, True, 2.0):
        with pytest.raises(ArgumentTypeError):
            t.restoreToVersion(bad)
    assert t.version == 7


def test_tags_through_the_facade(spark, pair):  # noqa: F811
    ours, _ = pair
    t = LanceTable(spark, ours)
    t.createTag("v2", 2)
    LanceTable(spark, ours, version=3).createTag("v3")  # default: the handle's version
    assert t.listTags() == {"v2": 2, "v3": 3} == {k: v["version"] for k, v in lance.dataset(ours).tags.list().items()}
    assert LanceTable(spark, ours, version="v3").version == 3
    t.deleteTag("v2")
    assert t.listTags() == {"v3": 3}
    with pytest.raises(TableNotFoundError, match="tag 'nope'"):
        LanceTable(spark, ours, version="nope")
