"""``python dag_client.py OUT.json``: run the ``lance_maintenance`` DAG with
``dag.test()`` in this process, its tasks calling lance_ops in process with
``SPARK_REMOTE`` (set by the caller) naming a Connect server. Writes the run's
states and what kind of Spark session the tasks used. Used by
test_connect_dag.py (a process of its own: a Connect session switches the
whole process to Connect mode)."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def main(out: str) -> None:
    # A metadata DB of this run's own (AIRFLOW_HOME is a fresh directory the
    # caller made): no runs of other tests' DAGs to collide with.
    from airflow.utils import db

    db.initdb()
    from tests.airflow.conftest import DAGS, load_dag

    if DAGS not in sys.path:
        sys.path.insert(0, DAGS)
    dag = load_dag("lance_maintenance", {})
    run = dag.test()
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    import pyspark

    from lance_ops.spark import jvm
    from lance_ops.spark.session import remote_session

    spark = remote_session()  # (getOrCreate: the session the tasks used, SPARK_REMOTE's)
    result = {"state": str(run.state), "states": states, "connect": jvm.is_connect(spark),
              # no classic SparkContext (no JVM) was ever started in this process
              "jvmStarted": getattr(pyspark, "SparkContext", None) is not None
              and getattr(pyspark.SparkContext, "_active_spark_context", None) is not None}
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
