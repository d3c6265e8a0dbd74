"""Delta Lake's ``VACUUM`` removes files in the table's directory that no
version tracks once they are older than the retention, whatever their name
(Delta's VACUUM docs); run on Lance tables (``DeltaTable`` -> ``LanceTable``,
the retention check conf renamed). Lance's tracked folders are data/,
_deletions/, _transactions/, _indices/; nothing outside them is touched."""
from __future__ import annotations

import os
import time

from lance_ops import LanceTable

RETENTION_CHECK = "spark.lance_ops.vacuum.retentionDurationCheck.enabled"


def put(path, rel, age_hours):
    full = os.path.join(path, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(b"x")
    t = time.time() - age_hours * 3600
    os.utime(full, (t, t))
    return full


def test_vacuum_removes_untracked_files_of_any_name(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    spark.range(10).coalesce(1).write.format("lance").mode("append").save(path)
    crashed = put(path, "data/part-00000-crashed.lance.inprogress", 3)
    stray = put(path, "_indices/stray/copy.bin", 3)
    fresh = put(path, "data/being-written.tmp", 0)
    outside = put(path, "README.txt", 3)
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        deltaTable = LanceTable.forPath(spark, path)
        deltaTable.vacuum(1)  # vacuum files not required by versions more than 1 hour old
    finally:
        spark.conf.unset(RETENTION_CHECK)
    assert not os.path.exists(crashed) and not os.path.exists(stray)
    assert os.path.exists(fresh) and os.path.exists(outside)
    assert deltaTable.toDF().count() == 10
