"""The pyspark internals lance_ops reads (lance_ops/spark/pyspark_internals.py)
are still where it looks: an upgrade that moves them fails here, loudly,
instead of quietly turning filter pushdown into the lance data source off."""
import pyspark

from lance_ops.spark.pyspark_internals import check_internals, planner_pushdown


def test_the_planner_workers_are_where_lance_ops_looks():
    assert check_internals() == [], f"pyspark {pyspark.__version__}: update lance_ops/spark/pyspark_internals.py"


def test_outside_a_planner_worker_there_is_no_answer():
    assert planner_pushdown() is None
