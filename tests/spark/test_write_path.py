"""The one write path seen from Spark: commit properties on every write,
pre-commit checks that read the staged rows, errors from executors with
their fields, and merge schema evolution that commits nothing when it fails."""
from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException

from lance_ops import LanceTable, Table
from lance_ops.errors import CorruptTableError, DuplicateMatchError, LanceOpsError
from lance_ops.spark.errors import decode, encode
from lance_ops.spark.frames import staged_frame
from tests.helpers import committed


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "t.lance")
    ids = np.arange(30)
    lance.write_dataset(pa.table({"id": ids, "v": ids * 10}), p, max_rows_per_file=10, enable_stable_row_ids=True)
    return p


def files(p):
    return {os.path.relpath(os.path.join(r, f), p) for r, _, fs in os.walk(p) for f in fs}


def test_commit_properties_on_every_write(spark, path):
    t = LanceTable(spark, path)
    props = {"airflow_run_id": "scheduled__2026-11-23", "job": "nightly"}
    t.append(spark.createDataFrame([(100, 1)], "id long, v long"), commitProperties=props)
    t.delete("id = 1", commitProperties=props)
    t.update("id = 2", {"v": "0"}, commitProperties=props)
    t.merge(spark.createDataFrame([(3, 5)], "id long, v long"), "t.id = s.id").whenMatchedUpdateAll().execute(
        commitProperties=props)
    t.addColumns({"w": "v + 1"}, commitProperties=props)
    t.rewriteColumns({"w": "0"}, "id < 5", commitProperties=props)
    t.renameColumn("w", "w2", commitProperties=props)
    t.dropColumns("w2", commitProperties=props)
    t.optimize().executeCompaction(commitProperties=props)
    t.setProperties({"owner": "ml"}, commitProperties=props)
    t.restoreToVersion(2, commitProperties=props)
    h = t.history().orderBy("version").collect()
    assert [r["version"] for r in h] == list(range(1, 13))  # (one version per compaction)
    assert all(r["userMetadata"] == props for r in h[1:]), [(r["version"], r["userMetadata"]) for r in h]
    assert h[0]["userMetadata"] == {}
    assert t.table.history(limit=1)[0]["userMetadata"] == props
    # pylance keeps them as plain transaction properties
    assert lance.dataset(path).get_transactions(1)[0].transaction_properties["job"] == "nightly"


def test_a_check_reads_the_staged_rows_before_the_commit(spark, path):
    """A pre-commit check sees exactly the rows the change writes, through
    Spark, from a manifest that is not a version; refusing leaves nothing."""
    t = LanceTable(spark, path)
    seen = []

    def gate(ctx):
        df = staged_frame(spark, ctx, ["id", "v"])
        seen.append(sorted(tuple(r) for r in df.collect()))
        if df.where("v < 0").count():
            raise LanceOpsError("negative v")

    t.table.checks.append(gate)
    t.append(spark.createDataFrame([(100, 1), (101, 2)], "id long, v long"))
    assert seen == [[(100, 1), (101, 2)]] and t.version == 2
    before = files(path)
    with pytest.raises(LanceOpsError, match="negative v"):
        t.update("id = 5", {"v": "-1"})
    assert seen[-1] == [(5, -1)]
    assert lance.dataset(path).version == 2 and files(path) == before  # no version, no files, no staging left
    assert not os.path.exists(os.path.join(path, "_staging")) or not os.listdir(os.path.join(path, "_staging"))


def test_executor_errors_keep_their_class_and_fields(spark, path):
    err = decode("boom\n" + encode(CorruptTableError("bad\nfile", "/x/y.lance")) + "\ntrailing")
    assert type(err) is CorruptTableError and err.path == "/x/y.lance" and str(err) == "bad\nfile (/x/y.lance)"
    with pytest.raises(DuplicateMatchError):
        src = spark.createDataFrame([(15, 1), (15, 2)], "id long, v long")
        LanceTable(spark, path).merge(src, "t.id = s.id").whenMatchedUpdateAll().execute()
    # A deletion file gone missing under a delete: raised in an executor, arrives as itself.
    lance.dataset(path).delete("id = 0")
    ds = lance.dataset(path)
    dfile = ds.get_fragments()[0].metadata.deletion_file
    os.remove(os.path.join(path, "_deletions", f"0-{dfile.read_version}-{dfile.id}.arrow"))
    with pytest.raises(CorruptTableError) as e:
        LanceTable(spark, path).delete("id = 3")
    assert e.value.path and "_deletions" in e.value.path and "missing" in str(e.value)


def test_schema_evolution_with_a_bad_clause_commits_nothing(spark, path):
    """The issue's defect: the schema-only version used to be committed before
    the clauses were analyzed."""
    t = LanceTable(spark, path)
    src = spark.createDataFrame([(1, 5, "x")], "id long, v long, extra string")
    with pytest.raises(AnalysisException):
        (t.merge(src, "t.id = s.id").whenMatchedUpdateAll(condition="s.extr = 'x'")
         .whenNotMatchedInsertAll().withSchemaEvolution().execute())
    assert lance.dataset(path).version == 1
    # a failure in the job (duplicate matches) commits nothing either
    dup = spark.createDataFrame([(1, 5, "x"), (1, 6, "y")], "id long, v long, extra string")
    before = files(path)
    with pytest.raises(DuplicateMatchError):
        t.merge(dup, "t.id = s.id").whenMatchedUpdateAll().withSchemaEvolution().execute()
    assert lance.dataset(path).version == 1 and "extra" not in lance.dataset(path).schema.names
    assert files(path) - before == set()
    info = committed(t, t.merge(src, "t.id = s.id").whenMatchedUpdateAll().withSchemaEvolution().execute())
    assert (info.version, info.metrics["schemaEvolvedInVersion"], info.metrics["numUpdatedRows"]) == (3, 2, 1)
    rows = {r["id"]: r for r in lance.dataset(path).to_table().to_pylist()}
    assert rows[1]["extra"] == "x" and rows[1]["v"] == 5 and rows[2]["extra"] is None


def test_lance_table_wraps_the_core(spark, path):
    t = LanceTable(spark, path)
    assert isinstance(t.table, Table) and t.table.version == t.version == 1
    t.setProperties({"k": "v"})
    assert t.properties() == {"k": "v"} == lance.dataset(path).config()
    assert t.version == 2 and Table(path).properties() == {"k": "v"}
    assert not LanceTable.isLanceTable(spark, path + "-missing")
