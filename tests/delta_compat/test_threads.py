"""``df.write.format("lance").save()`` from a thread other than the one that
made the session: there the session is not active (the JVM's active session
is thread-local; so is Spark Connect's), so ``import lance_ops`` in that
thread found nothing to register the data source in and the write failed
with DATA_SOURCE_NOT_FOUND. A process of its own: in this one lance_ops is
long imported and registered."""
import os
import subprocess
import sys

import lance

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import sys, threading
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[1]").config("spark.sql.shuffle.partitions", "1").getOrCreate()
out = []

def job():
    import lance_ops  # noqa: F401  (first imported here, where no session is active)
    try:
        spark.createDataFrame([(1,), (2,)], "id long").write.format("lance").mode("append").save(sys.argv[1])
        out.append("ok")
    except Exception as e:
        out.append(str(e)[:800])

th = threading.Thread(target=job)
th.start()
th.join()
print(out[0])
spark.stop()
"""


def test_first_import_and_write_in_another_thread(tmp_path, processes):
    path = str(tmp_path / "t.lance")
    script = tmp_path / "thread_write.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_REMOTE")}
    env.update(PYTHONPATH=ROOT, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    r = subprocess.run([sys.executable, str(script), path], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "ok", r.stdout[-2000:]
    assert sorted(lance.dataset(path).to_table()["id"].to_pylist()) == [1, 2]
