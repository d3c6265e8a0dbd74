"""Delta Lake 4's ``DeltaTable.clone`` / ``cloneAtVersion`` /
``cloneAtTimestamp`` usage, run on Lance tables (``DeltaTable`` ->
``LanceTable``). A Lance shallow clone keeps its source version's number
(pylance's numbering); Delta's clone starts at version 0."""
from __future__ import annotations

import os

import lance
import pytest

from lance_ops import LanceTable
from lance_ops.errors import UnsupportedFeatureError


@pytest.fixture
def source(spark, tmp_path):
    path = str(tmp_path / "source.lance")
    spark.range(5).coalesce(1).write.format("lance").mode("append").save(path)
    spark.range(5, 8).write.format("lance").mode("append").save(path)
    return path


def test_shallow_clone_at_latest_and_at_version(spark, source, tmp_path):
    delta_table = LanceTable.forPath(spark, source)
    target = str(tmp_path / "clone.lance")
    cloned = delta_table.clone(target=target, isShallow=True, replace=False)
    assert isinstance(cloned, LanceTable)
    assert sorted(r.id for r in cloned.toDF().collect()) == list(range(8))
    older = delta_table.cloneAtVersion(version=1, target=str(tmp_path / "at1.lance"), isShallow=True)
    assert sorted(r.id for r in older.toDF().collect()) == list(range(5))
    # pylance opens both; the clone reads the source's files in place (no data copied)
    assert lance.dataset(target).count_rows() == 8
    assert not os.path.exists(os.path.join(target, "data"))
    assert LanceTable.isLanceTable(spark, target)


def test_clone_at_timestamp(spark, source, tmp_path):
    history = {r.version: r.timestamp for r in LanceTable.forPath(spark, source).history().collect()}
    at = history[1].strftime("%Y-%m-%d %H:%M:%S.%f")
    cloned = LanceTable.forPath(spark, source).cloneAtTimestamp(timestamp=at, target=str(tmp_path / "t.lance"),
                                                                isShallow=True)
    assert cloned.toDF().count() == 5


def test_deep_clone_is_not_supported(spark, source, tmp_path):
    with pytest.raises(UnsupportedFeatureError):  # (as in open-source Delta)
        LanceTable.forPath(spark, source).clone(target=str(tmp_path / "deep.lance"), isShallow=False)
