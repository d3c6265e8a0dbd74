"""Cancelling a running lance_ops operation by its tag on the classic
session: ``lance_ops.cancel(spark, "addColumns")`` from another thread stops
the Spark job; the operation raises OperationCancelledError, commits nothing
and loses nothing, and the files it had written are what a vacuum dry run
lists (then removes). The same run through Spark Connect, cancelled with
``spark.interruptTag("lance_ops-addColumns")``, is in tests/connect."""
import os

import lance

from tests.connect.scenario import cancel_by_tag
from tests.connect.test_connect import check_cancelled


def test_cancel_by_tag_classic(spark, tmp_path):
    from lance_ops import LanceTable

    base = str(tmp_path / "cancel")
    out = cancel_by_tag(spark, base)
    path = os.path.join(base, "c.lance")
    check_cancelled(out, path)
    # vacuum removes exactly those files; the table is as before.
    removed = LanceTable(spark, path).vacuumFiles(retentionHours=0, enforceRetentionDuration=False)
    assert removed == out["orphans"]
    assert not any(os.path.exists(os.path.join(path, o)) for o in removed)
    ds = lance.dataset(path)
    assert ds.version == 1 and sorted(r["id"] for r in ds.to_table().to_pylist()) == list(range(100))
    # The session still works (tags cleaned up): the same operation succeeds.
    info = LanceTable(spark, path).addColumns({"z": "id + 1"})
    assert info.version == 2 and lance.dataset(path).to_table().column("z").to_pylist()[:3] == [1, 2, 3]
    assert "lance_ops" not in spark.getTags()
