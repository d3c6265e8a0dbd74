"""Job labels through tags (what Spark Connect offers), on the classic
session: every lance_ops job carries the ``lance_ops`` tags while it runs,
and they are removed after."""
from __future__ import annotations

from lance_ops.spark.progress import TAG, operation_tag, spark_job


def test_tags_set_during_a_step_and_removed_after(spark):
    before = set(spark.getTags())
    with spark_job(spark, "delete", "/data/a,b.lance", 3, "scan") as label:
        tags = set(spark.getTags())
        assert {TAG, operation_tag("delete"), label.tag} <= tags
        assert "," not in label.tag and "v3" in label.tag
        assert label == "lance_ops delete /data/a,b.lance v3: scan"
    assert set(spark.getTags()) == before
