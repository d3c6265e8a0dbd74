"""pylance -> us: tables written by pylance read by LanceTable.toDF() equal
row for row to lance.dataset(p).to_table(), metadata columns included."""
import datetime

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_ops import LanceTable
from tests.helpers import assert_same_rows

META = ["_rowid", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version"]


def base_table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n)
    vec = pa.FixedSizeListArray.from_arrays(pa.array((ids.repeat(4) * 0.5).astype(np.float32)), 4)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "u32": pa.array(ids % 1000, pa.uint32()),
            "name": pa.array([f"n{i}" if i % 7 else None for i in ids]),
            "score": pa.array(ids / 3.0),
            "ts": pa.array([datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=int(i)) for i in ids], pa.timestamp("us", "UTC")),
            "st": pa.array([{"a": int(i), "b": {"c": str(i)}} for i in ids]),
            "tags": pa.array([[f"t{i}", "x"] if i % 3 else [] for i in ids], pa.list_(pa.string())),
            "props": pa.array([[("k", int(i))] for i in ids], pa.map_(pa.string(), pa.int64())),
            "vec": vec,
        }
    )


def pylance_rows(path, version=None):
    ds = lance.dataset(path, version=version)
    cols = ds.schema.names + ["_row_created_at_version", "_row_last_updated_at_version"]
    return ds.to_table(columns=cols, with_row_id=True, with_row_address=True)


@pytest.mark.parametrize("stable", [True, False])
@pytest.mark.parametrize("v2_paths", [True, False])
def test_evolved_pylance_table(spark, tmp_path, stable, v2_paths):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(250), p, max_rows_per_file=100, enable_stable_row_ids=stable, enable_v2_manifest_paths=v2_paths)
    lance.write_dataset(base_table(120, start=250), p, mode="append", max_rows_per_file=100)
    ds = lance.dataset(p)
    ds.delete("id % 10 = 3 or id between 100 and 199")  # sparse + a whole fragment
    ds = lance.dataset(p)
    ds.add_columns({"double_score": "score * 2"})
    ds = lance.dataset(p)
    ds.drop_columns(["u32"])
    ds = lance.dataset(p)
    ds.update({"score": "score + 1000"}, where="id % 25 = 0")
    t = LanceTable(spark, p)
    assert t.version == lance.dataset(p).version
    assert t.count() == lance.dataset(p).count_rows()
    df = t.toDF(withRowId=True, withRowAddr=True, withLineage=True)
    assert_same_rows(df, pylance_rows(p), sort_by=("id",))
    # time travel to every version
    for v in range(1, t.version + 1):
        old = LanceTable(spark, p, version=v).toDF(withRowId=True, withRowAddr=True, withLineage=True)
        assert_same_rows(old, pylance_rows(p, v), sort_by=("id",))


def test_types_and_schema(spark, tmp_path):
    from tests.format.test_schema import all_types_table

    t = all_types_table().drop_columns(["ts_ns", "dec256", "t32", "t64", "nul", "dur"])
    p = str(tmp_path / "types.lance")
    lance.write_dataset(t, p)
    lt = LanceTable(spark, p)
    schema = {f.name: f.dataType.simpleString() for f in lt.schema.fields}
    assert schema["u8"] == "smallint" and schema["u16"] == "int" and schema["u32"] == "bigint"
    assert schema["u64"] == "decimal(20,0)" and schema["h"] == "float" and schema["ls"] == "string"
    assert schema["ts_s"] == "timestamp_ntz" and schema["ts_ms"] == "timestamp"
    assert schema["fsl"] == "array<float>" and schema["mp"] == "map<string,bigint>"
    assert schema["dict"] == "string" and schema["d64"] == "date"
    assert lt.schema["i8"].metadata == {"fm": "x"} and not lt.schema["i8"].nullable
    expected = lance.dataset(p).to_table(with_row_id=True)
    assert_same_rows(lt.toDF(withRowId=True), expected.cast(_spark_friendly(expected.schema)))


def _spark_friendly(schema: pa.Schema) -> pa.Schema:
    """pylance values as Spark exposes them (dictionary decoded, float16 as float32)."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_float16(t):
            t = pa.float32()
        fields.append(f.with_type(t))
    return pa.schema(fields)


def test_column_projection_and_datasource_options(spark, tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(50), p, enable_stable_row_ids=True)
    df = spark.read.format("lance").option("columns", "id,name").option("withRowId", True).load(p)
    assert df.columns == ["id", "name", "_rowid"]
    assert sorted(r.id for r in df.where("id < 5").collect()) == [0, 1, 2, 3, 4]
    # A user-specified subset schema reads just those columns.
    sub = spark.read.format("lance").schema("id long, score double").load(p)
    assert sub.columns == ["id", "score"] and sub.count() == 50


def test_filter_pushdown_matches_spark(spark, tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(300), p, max_rows_per_file=64)
    df = LanceTable(spark, p).toDF()
    for cond in ["id > 250", "id = 7", "name is null", "name like 'n1%'", "id in (1, 2, 299)", "not (id >= 3)", "u32 <= 5 and name is not null"]:
        got = sorted(r.id for r in df.where(cond).select("id").collect())
        expected = sorted(lance.dataset(p).to_table(filter=cond.replace("like 'n1%'", "like 'n1%'"), columns=["id"])["id"].to_pylist())
        assert got == expected, cond


PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


def test_filter_pushdown_conf_switched_after_registration(spark, tmp_path):
    """The ``lance`` source is registered while pushdown is on (the fixture's
    session); switching the runtime conf off and on again afterwards still
    reads -- Spark refuses a reader with ``pushFilters`` while it is off --
    and pushes the filter exactly when it is on. On a Connect session as on
    a classic one (this file runs in both passes)."""
    from lance_ops import register
    from lance_ops.spark.datasource import read_scan_trace

    p = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(100), p, max_rows_per_file=40)
    register(spark)
    before = spark.conf.get(PUSHDOWN)
    try:
        for k, on in enumerate([False, True, False, True]):
            spark.conf.set(PUSHDOWN, str(on).lower())
            trace = str(tmp_path / f"trace{k}")
            for df in (spark.read.format("lance").option("scanTrace", trace).load(p),
                       LanceTable(spark, p).toDF()):
                assert sorted(r.id for r in df.where("id < 5").select("id").collect()) == [0, 1, 2, 3, 4], on
            filters = {f for r in read_scan_trace(trace) for f in r["filters"]}
            assert bool(filters) == on, (on, filters)
    finally:
        spark.conf.set(PUSHDOWN, before)


def _partitions(df) -> int:
    """Scan partitions (all non-empty here) without the RDD API, which Spark
    Connect lacks."""
    from pyspark.sql import functions as F

    return df.select(F.spark_partition_id().alias("p")).distinct().count()


def test_partitioning(spark, tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(1000), p, max_rows_per_file=100)
    reader = spark.read.format("lance")
    assert _partitions(reader.option("rowsPerPartition", 0).load(p)) == 10  # one per fragment
    assert _partitions(reader.option("rowsPerPartition", 300).load(p)) == 4  # small ones grouped
    lance.write_dataset(base_table(1000, start=1000), p, mode="append", max_rows_per_file=1000)
    split = spark.read.format("lance").option("rowsPerPartition", 250).load(p)
    assert _partitions(split) == 4 + 4  # 10 small ones in 4 groups; the large one in 4 row ranges
    assert split.count() == 2000 and split.select("id").distinct().count() == 2000


def test_time_duration_null_and_nanosecond_types(spark, tmp_path):
    """Types Spark holds only approximately or recently: time (Spark 4's TIME),
    durations (day-time intervals), null, nanosecond timestamps (truncated to
    microseconds, Spark's resolution), decimal256 within precision 38."""
    import datetime as dt
    import decimal

    p = str(tmp_path / "t.lance")
    t = pa.table({
        "t64": pa.array([1_000_000, None], pa.time64("us")),
        "t32": pa.array([1000, 2], pa.time32("ms")),
        "dur": pa.array([5, None], pa.duration("us")),
        "nul": pa.nulls(2),
        "tsn": pa.array([1_500, 2_000_999], pa.timestamp("ns", "UTC")),
        "d256": pa.array([decimal.Decimal("1.25"), None], pa.decimal256(20, 2)),
    })
    lance.write_dataset(t, p)
    df = LanceTable(spark, p).toDF()
    assert [f.dataType.simpleString() for f in df.schema.fields] == [
        "time(6)", "time(6)", "interval day to second", "void", "timestamp", "decimal(20,2)",
    ]
    from lance_ops.spark import jvm

    if jvm.is_connect(spark):
        # Spark 4.3's Connect server cannot send TIME values to a client (its
        # Arrow result path rejects the type); the table itself reads fine.
        with pytest.raises(Exception, match="UNSUPPORTED_TIME_TYPE"):
            df.collect()
        assert df.where("t32 IS NOT NULL").count() == 2
        rows = df.drop("t64", "t32").collect()
        assert rows[0]["dur"] == dt.timedelta(microseconds=5) and rows[1]["dur"] is None
        assert rows[0]["nul"] is None and rows[0]["d256"] == decimal.Decimal("1.25")
        assert rows[1]["tsn"] == dt.datetime(1970, 1, 1, 0, 0, 0, 2000)
        return
    rows = df.collect()
    assert rows[0]["t64"] == dt.time(0, 0, 1) and rows[1]["t32"] == dt.time(0, 0, 0, 2000)
    assert rows[0]["dur"] == dt.timedelta(microseconds=5) and rows[1]["dur"] is None
    assert rows[0]["nul"] is None and rows[0]["d256"] == decimal.Decimal("1.25")
    assert rows[1]["tsn"] == dt.datetime(1970, 1, 1, 0, 0, 0, 2000)  # 2_000_999 ns -> 2000 us


def test_file_uri(spark, tmp_path):
    uri = "file://" + str(tmp_path / "t.lance")
    t = LanceTable.create(spark, uri, spark.range(10).selectExpr("id"))
    t.append(spark.range(10, 15).selectExpr("id"))
    assert LanceTable.isLanceTable(spark, uri) and LanceTable(spark, uri).toDF().count() == 15
    assert lance.dataset(str(tmp_path / "t.lance")).count_rows() == 15
