"""Pipelines: appends that leave out feature columns, backfill (DataReplacement
and REWRITE_COLUMNS batches, watermark, resume), CHECK constraints enforced in
the write tasks, and the great_expectations gate -- on real tables, read back
by pylance."""
import json
import os

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lance_ops import LanceTable
from lance_ops.errors import (
    ConstraintViolationError,
    DataQualityError,
    InvalidArgumentError,
    SchemaMismatchError,
)
from tests.helpers import commits_during, read_manifest

LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]


def _rows(spark, lo, hi, parts=2):
    return spark.createDataFrame([(i, float(i)) for i in range(lo, hi)], "id long, f0 double").repartition(parts)


@pytest.fixture
def feature_table(spark, tmp_path):
    """id, f0, g = f0 * 2 (4 fragments), then two appends leaving g out."""
    path = str(tmp_path / "f.lance")
    t = LanceTable.create(spark, path, _rows(spark, 0, 40), maxRowsPerFragment=10)
    t.addColumns({"g": "f0 * 2"})
    t.append(_rows(spark, 40, 60), allowMissingColumns=True)
    t.append(_rows(spark, 60, 70, 1), allowMissingColumns=True)
    return t


def _g_field_id(path):
    return [f.id for f in read_manifest(path).manifest.fields if f.name == "g"][0]


def _table(path, cols=("id", "f0", "g")):
    return lance.dataset(path).to_table(columns=list(cols) + LINEAGE, with_row_id=True).sort_by("id")


def _files(path):
    return set(os.listdir(os.path.join(path, "data")))


def test_append_leaving_out_nullable_columns(spark, feature_table):
    t, path = feature_table, feature_table.uri
    gid = _g_field_id(path)
    m = read_manifest(path).manifest
    new = [f for f in m.fragments if not any(gid in df.fields for df in f.files)]
    assert len(new) == 3 and sum(f.physical_rows for f in new) == 30  # no data file holds g
    got = _table(path)
    assert got.column("g").to_pylist()[:40] == [2.0 * i for i in range(40)]
    assert got.column("g").to_pylist()[40:] == [None] * 30  # pylance reads the missing field as NULL
    assert t.toDF().where("g IS NULL").count() == 30
    assert t.history(1).collect()[0]["operationParameters"]["missingColumns"] == "g"
    # the data source option, and non-nullable columns cannot be left out
    _rows(spark, 70, 72, 1).write.format("lance").mode("append").option("allowMissingColumns", True).save(path)
    assert lance.dataset(path).count_rows("g IS NULL") == 32
    with pytest.raises(SchemaMismatchError, match="allowMissingColumns"):
        t.refresh().append(_rows(spark, 80, 81, 1))
    strict = LanceTable.create(spark, path + "2", spark.createDataFrame([(1, 1.0)], "id long not null, f0 double"))
    with pytest.raises(SchemaMismatchError, match="non-nullable"):
        strict.append(spark.createDataFrame([(2.0,)], "f0 double"), allowMissingColumns=True)


def test_backfill_fills_missing_fragments_as_pylance_data_replacement(spark, feature_table):
    t, path = feature_table, feature_table.uri
    before = _table(path)
    status = t.featureStatus("g")
    assert status["pending"] and status["fragmentsMissing"] == 3 and status["watermark"] is None
    info = t.backfill({"g": "f0 * 2"})
    ds = lance.dataset(path)
    # one DataReplacement (pylance's transaction for "a field the fragment lacks"), then the watermark
    kinds = [tx.operation.__class__.__name__ for tx in ds.get_transactions(2)]
    assert kinds == ["UpdateConfig", "DataReplacement"], kinds
    assert info.metrics["numBackfilledRows"] == 30 and info.metrics["numCommits"] == 1
    after = _table(path)
    assert after.column("g").to_pylist() == [2.0 * i for i in range(70)]
    for c in ("_rowid", "_row_created_at_version", "id", "f0"):
        assert after.column(c) == before.column(c)  # row ids and created-at never change
    filled = info.version - 1  # the DataReplacement's version
    upd = after.column("_row_last_updated_at_version").to_pylist()
    assert upd[:40] == before.column("_row_last_updated_at_version").to_pylist()[:40]
    assert upd[40:] == [filled] * 30  # as pylance 14 stamps a DataReplacement's fragments
    assert ds.config()["lance_ops.feature.g.version"] == str(status["dataVersion"])
    assert not t.featureStatus("g")["pending"]
    # a re-run is a no-op: no commit at all
    again = t.backfill({"g": "f0 * 2"})
    assert again.version is None and lance.dataset(path).version == ds.version


def test_backfill_function_in_batches_resumes_after_a_failure(spark, feature_table):
    t, path = feature_table, feature_table.uri
    t.append(_rows(spark, 70, 100, 3), allowMissingColumns=True)  # 6 fragments lack g now
    start = t.version

    def broken(batch):
        if pc.max(batch.column("f0")).as_py() >= 90:
            raise ValueError("feature service down")
        return pa.RecordBatch.from_arrays([pc.multiply(batch.column("f0"), 3)], names=["g"])

    with pytest.raises(Exception, match="feature service down"):
        t.backfill(broken, readColumns=["f0"], outputSchema="g double", fragmentsPerCommit=2)
    done = lance.dataset(path)
    assert done.version > start  # the batches before the failing one are committed
    partial = done.to_table(columns=["id", "g"]).sort_by("id").column("g").to_pylist()
    assert None in partial[40:]

    def fixed(batch):
        return pa.RecordBatch.from_arrays([pc.multiply(batch.column("f0"), 3)], names=["g"])

    info = t.refresh().backfill(fixed, readColumns=["f0"], outputSchema="g double", fragmentsPerCommit=2)
    assert info.metrics["evaluation"] == "arrow"
    got = lance.dataset(path).to_table(columns=["id", "g"]).sort_by("id").column("g").to_pylist()
    # the fragments committed before the failure kept their values (not recomputed)
    assert got[:40] == [2.0 * i for i in range(40)]
    assert got[40:] == [p if p is not None else 3.0 * (40 + i) for i, p in enumerate(partial[40:])]
    assert all(v is not None for v in got)
    assert t.backfill(fixed, readColumns=["f0"], outputSchema="g double").version is None


def test_backfill_where_rewrites_only_matching_rows(spark, feature_table):
    t, path = feature_table, feature_table.uri
    t.backfill({"g": "f0 * 2"})
    before = _table(path)
    info = t.backfill({"g": "f0 * 10"}, where="id >= 35 AND id < 45")
    assert info.operation == "Update"
    tx = lance.dataset(path).get_transactions(1)[0]
    assert tx.operation.__class__.__name__ == "Update" and "REWRITE_COLUMNS" in str(tx.operation.update_mode).upper()
    after = _table(path)
    g = after.column("g").to_pylist()
    assert g == [10.0 * i if 35 <= i < 45 else 2.0 * i for i in range(70)]
    upd = after.column("_row_last_updated_at_version").to_pylist()
    old = before.column("_row_last_updated_at_version").to_pylist()
    assert [i for i in range(70) if upd[i] != old[i]] == list(range(35, 45))
    assert after.column("_rowid") == before.column("_rowid")
    n_frags = len(t.refresh().snapshot.fragments)
    assert info.metrics["numFragmentsScanned"] == n_frags and "numRowsScanned" not in info.metrics

    # with a zone map on id, only the fragments holding ids 35..44 are read
    t.createIndex("id", "ZONEMAP")
    info = t.backfill({"g": "f0 * 3"}, where="id >= 38 AND id < 42")
    g = _table(path).column("g").to_pylist()
    assert g == [3.0 * i if 38 <= i < 42 else (10.0 * i if 35 <= i < 45 else 2.0 * i) for i in range(70)]
    # (appends are round-robin repartitioned: ids interleave across fragments)
    ids = lance.dataset(path).to_table(columns=["id"], with_row_address=True).to_pylist()
    by_frag: dict = {}
    for r in ids:
        by_frag.setdefault(r["_rowaddr"] >> 32, []).append(r["id"])
    holding = {f for f, v in by_frag.items() if any(38 <= i < 42 for i in v)}
    zones = {f for f, v in by_frag.items() if min(v) < 42 and max(v) >= 38}  # what the zone map keeps
    assert (info.metrics["numFragmentsScanned"], info.metrics["numFragmentsSkipped"]) == (
        len(holding), n_frags - len(holding))
    # the pre-pass reads the zones it keeps, then the matching fragments are rewritten whole
    assert info.metrics["numRowsScanned"] == sum(len(by_frag[f]) for f in zones) + sum(len(by_frag[f]) for f in holding)
    assert len(zones) < n_frags


def test_constraints_are_enforced_inside_every_write(spark, tmp_path):
    path = str(tmp_path / "c.lance")
    df = spark.createDataFrame([(i, float(i), i % 3) for i in range(1, 41)], "id long, v double, k int")
    t = LanceTable.create(spark, path, df, maxRowsPerFragment=10)
    with pytest.raises(ConstraintViolationError, match=r"30 row\(s\)") as e:
        t.addConstraint("small_v", "v <= 10")  # existing rows break it: refused, like Delta
    assert e.value.constraint == "small_v" and "v" in e.value.row
    t.addConstraint("positive_v", "v > 0")
    assert t.constraints() == {"positive_v": "v > 0"}
    assert lance.dataset(path).config()["lance_ops.constraint.positive_v"] == "v > 0"

    def refused(write):
        version, files = t.refresh().version, _files(path)
        with pytest.raises(ConstraintViolationError) as err:
            write()
        assert err.value.constraint == "positive_v" and err.value.expression == "v > 0"
        assert lance.dataset(path).version == version and _files(path) == files  # nothing committed, files removed
        return err.value

    err = refused(lambda: t.append(spark.createDataFrame([(100, -1.0, 1)], "id long, v double, k int")))
    assert err.row == {"id": "100", "v": "-1.0", "k": "1"} and "positive_v" in str(err)
    refused(lambda: t.append(spark.createDataFrame([(101, None, 1)], "id long, v double, k int")))  # NULL fails
    refused(lambda: t.update("id = 5", {"v": "-v"}))
    src = spark.createDataFrame([(5, -3.0, 1), (500, 2.0, 1)], "id long, v double, k int")
    refused(lambda: t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    refused(lambda: t.merge(spark.createDataFrame([(600, -2.0, 1)], "id long, v double, k int"), "t.id = s.id")
            .whenNotMatchedInsertAll().execute())
    # the updates pass and are written (by the target's scan tasks), the insert
    # fails in the job after them: their files are removed too
    src = spark.createDataFrame([(5, 3.0, 1), (7, 4.0, 1), (700, -2.0, 1)], "id long, v double, k int")
    refused(lambda: t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    refused(lambda: t.rewriteColumns({"v": "v - 20"}, "id < 30"))
    refused(lambda: t.backfill({"v": "v - 100"}, where="id = 7"))
    # a constraint on a column a merge does not assign sees the row's old value
    t.addConstraint("k_small", "k < 3")
    refused_k = t.merge(spark.createDataFrame([(6, 1.0, 1)], "id long, v double, k int"), "t.id = s.id")
    refused_k.whenMatchedUpdate(set={"v": "s.v"}).execute()  # k unchanged (0): fine
    with pytest.raises(ConstraintViolationError, match="k_small"):
        t.update("id = 6", {"k": "k + 7"})
    # writes that keep the constraints commit
    assert t.update("id = 5", {"v": "v + 1"}).operation == "Update"
    # the data source writer cannot evaluate SQL in its tasks: refused, never unchecked
    with pytest.raises(Exception, match="CHECK constraints"):
        spark.createDataFrame([(900, 1.0, 1)], "id long, v double, k int").write.format("lance").mode("append").save(path)
    with pytest.raises(SchemaMismatchError, match="k_small"):
        t.dropColumns(["k"])
    with pytest.raises(InvalidArgumentError, match="addConstraint"):
        t.setProperties({"lance_ops.constraint.x": "true"})
    t.dropConstraint("k_small")
    assert t.constraints() == {"positive_v": "v > 0"}
    assert t.dropConstraint("nope", ifExists=True) is None


def test_constraints_outlive_overwrite_and_addColumns(spark, tmp_path):
    """As Delta: CHECK constraints are table properties, kept by an overwrite
    (whose rows must pass them) and by addColumns; an overwrite whose schema
    leaves out a column a constraint uses is refused up front."""
    path = str(tmp_path / "o.lance")
    t = LanceTable.create(spark, path, spark.createDataFrame([(1, 1.0)], "id long, v double"))
    t.addConstraint("positive_v", "v > 0")
    version, files = lance.dataset(path).version, _files(path)
    with pytest.raises(ConstraintViolationError, match="positive_v"):
        t.overwrite(spark.createDataFrame([(2, -1.0)], "id long, v double"))
    with pytest.raises(SchemaMismatchError, match=r"overwrite the table without column\(s\) \['v'\].*positive_v"):
        t.overwrite(spark.createDataFrame([(2, 1.0)], "id long, w double"))
    assert lance.dataset(path).version == version and _files(path) == files
    assert t.overwrite(spark.createDataFrame([(2, 3.0), (3, 4.0)], "id long, v double")).operation == "Overwrite"
    assert t.refresh().constraints() == {"positive_v": "v > 0"}
    assert t.addColumns({"z": "v * 2"}).operation == "Merge"
    assert t.refresh().constraints() == {"positive_v": "v > 0"}
    with pytest.raises(ConstraintViolationError, match="zbig"):
        t.addConstraint("zbig", "z > 7")  # z = 6.0 on one row
    t.addConstraint("zpos", "z > 0")
    with pytest.raises(ConstraintViolationError, match="zpos"):
        t.append(spark.createDataFrame([(9, 1.0, -1.0)], "id long, v double, z double"))
    assert lance.dataset(path).to_table().sort_by("id").to_pylist() == [
        {"id": 2, "v": 3.0, "z": 6.0}, {"id": 3, "v": 4.0, "z": 8.0}]


def test_constraint_added_concurrently_is_enforced_on_rebase(spark, tmp_path):
    path = str(tmp_path / "r.lance")
    t = LanceTable.create(spark, path, spark.createDataFrame([(1, 1.0)], "id long, v double"))
    files = _files(path)
    # prepared on the version without the constraint, which lands before it
    # commits; the pre-commit check sees it after the rebase and the append is
    # prepared again -- and refused
    with pytest.raises(ConstraintViolationError), \
            commits_during(lambda: LanceTable(spark, path).addConstraint("positive_v", "v > 0")):
        t.append(spark.createDataFrame([(2, -5.0)], "id long, v double"))
    assert lance.dataset(path).version == 2 and LanceTable(spark, path).constraints() == {"positive_v": "v > 0"}
    assert _files(path) == files  # the refused append's data files are gone


def test_expectations_gate(spark, tmp_path):
    import great_expectations as gx

    from lance_ops.ops.quality import as_suite

    path = str(tmp_path / "q.lance")
    t = LanceTable.create(spark, path, _rows(spark, 0, 20))
    suite = as_suite({"name": "events", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "f0", "min_value": 0, "max_value": 1000}},
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}},
    ]})
    assert isinstance(suite, gx.ExpectationSuite)
    ok = t.append(_rows(spark, 20, 30), expectations=suite)
    summary = json.loads(t.history(1).collect()[0]["operationParameters"]["dataQuality"])
    assert summary == {"suite": "events", "success": True, "evaluated": 2, "successful": 2, "unsuccessful": 0,
                       "failed": []}
    version, files = ok.version, _files(path)
    bad = spark.createDataFrame([(31, 5000.0)], "id long, f0 double")
    with pytest.raises(DataQualityError, match="expect_column_values_to_be_between") as e:
        t.append(bad, expectations=suite)
    assert e.value.result.success is False
    assert lance.dataset(path).version == version and _files(path) == files
    # the gate sees only the rows written: the same suite passes an update of good rows
    assert t.update("id = 3", {"f0": "f0 + 1"}, expectations=suite).version == version + 1
