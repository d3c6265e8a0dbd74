"""Bad input gets a documented error and leaves the table unchanged."""
import os

import lance
import pytest

from lance_ops import LanceTable
from lance_ops.errors import (
    ConstraintViolationError,
    CorruptTableError,
    DuplicateMatchError,
    ReadOnlyVersionError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from lance_ops.format.manifest import encode_manifest_file
from tests.helpers import manifest_files, read_manifest


@pytest.fixture
def table(spark, tmp_path):
    p = str(tmp_path / "t.lance")
    LanceTable.create(spark, p, spark.createDataFrame([(1, "a"), (2, "b")], "id long, s string"))
    return p


def snapshot_of_dir(p):
    return sorted((root, tuple(sorted(files))) for root, _, files in os.walk(p))


def test_not_a_table(spark, tmp_path):
    p = str(tmp_path / "nothing")
    assert not LanceTable.isLanceTable(spark, p)
    with pytest.raises(TableNotFoundError, match="no Lance table"):
        LanceTable(spark, p)
    os.makedirs(p)
    with pytest.raises(TableNotFoundError):
        LanceTable.forPath(spark, p)


def test_missing_version_and_tag(spark, table):
    assert LanceTable.isLanceTable(spark, table)
    with pytest.raises(TableNotFoundError, match="version 9"):
        LanceTable(spark, table, version=9)
    with pytest.raises(TableNotFoundError, match="tag 'nope'"):
        LanceTable(spark, table, version="nope")


def test_create_on_existing(spark, table):
    before = snapshot_of_dir(table)
    with pytest.raises(TableExistsError):
        LanceTable.create(spark, table, spark.createDataFrame([(3, "c")], "id long, s string"))
    assert snapshot_of_dir(table) == before


@pytest.mark.parametrize(
    "ddl,row,match",
    [
        ("id long", (3,), "missing column"),
        ("id long, s string, extra int", (3, "c", 1), "unknown column"),
        ("id string, s string", ("3", "c"), "type mismatch"),
    ],
)
def test_schema_mismatched_append(spark, table, ddl, row, match):
    t = LanceTable(spark, table)
    with pytest.raises(SchemaMismatchError, match=match):
        t.append(spark.createDataFrame([row], ddl))
    assert lance.dataset(table).version == 1 and t.version == 1
    assert lance.dataset(table).count_rows() == 2


def test_append_with_other_column_order(spark, table):
    t = LanceTable(spark, table)
    t.append(spark.createDataFrame([("c", 3)], "s string, id long"))
    assert sorted(lance.dataset(table).to_table().to_pylist(), key=lambda r: r["id"])[-1] == {"id": 3, "s": "c"}


def test_write_through_time_travel_handle(spark, table):
    t = LanceTable(spark, table, version=1)
    with pytest.raises(ReadOnlyVersionError):
        t.append(spark.createDataFrame([(3, "c")], "id long, s string"))
    with pytest.raises(ReadOnlyVersionError):
        t.overwrite(spark.createDataFrame([(3, "c")], "id long, s string"))
    assert lance.dataset(table).version == 1


def _rewrite_latest(path, mutate):
    mf = read_manifest(path)
    mutate(mf.manifest)
    data = encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices)
    with open(manifest_files(path)[mf.manifest.version], "wb") as f:
        f.write(data)


def test_unknown_reader_flag(spark, table):
    def bump(m):
        m.reader_feature_flags |= 1 << 13

    _rewrite_latest(table, bump)
    with pytest.raises(UnsupportedFeatureError, match="reader feature"):
        LanceTable(spark, table)


def test_unknown_writer_flag_blocks_writes_only(spark, table):
    def bump(m):
        m.writer_feature_flags |= 1 << 13

    _rewrite_latest(table, bump)
    t = LanceTable(spark, table)
    assert t.toDF().count() == 2
    before = snapshot_of_dir(table)
    with pytest.raises(UnsupportedFeatureError, match="writer feature"):
        t.append(spark.createDataFrame([(3, "c")], "id long, s string"))
    # no new version (data files of the failed write may be left as orphans)
    assert [d for d in snapshot_of_dir(table) if d[0].endswith("_versions")] == [
        d for d in before if d[0].endswith("_versions")
    ]


def test_corrupt_manifest(spark, table):
    path = manifest_files(table)[1]
    with open(path, "r+b") as f:
        f.seek(-4, 2)
        f.write(b"NOPE")
    with pytest.raises(CorruptTableError, match=os.path.basename(path)):
        LanceTable(spark, table)


def test_bad_sql_in_read_is_sparks_error(spark, table):
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException):
        LanceTable(spark, table).toDF().where("no_such_column > 1").collect()


# ------------------------------------------------- errors raised in executors
# Each operation that can meet a lance_ops error inside its Spark tasks (a
# CHECK constraint broken by a written row, a key matching twice, a UDF's
# wrong output, a damaged data file) raises that error's own class, with its
# fields, on the driver -- and through Spark Connect on the client (this file
# runs in the Connect pass of `make test`): never a PythonException or a gRPC
# error. Nothing is committed.

@pytest.fixture(scope="module")
def constrained(spark, tmp_path_factory):
    """One table for every case below: 40 rows in 4 fragments, CHECK
    (v > 0). Each case's operation fails and commits nothing (checked), so
    they share it."""
    p = str(tmp_path_factory.mktemp("executor-errors") / "x.lance")
    t = LanceTable.create(spark, p, spark.createDataFrame([(i, float(i), i % 3) for i in range(1, 41)],
                                                          "id long, v double, k int"), maxRowsPerFragment=10)
    t.addConstraint("positive_v", "v > 0")
    return p, t.refresh()


def _unchanged(p, version, files):
    assert lance.dataset(p).version == version and lance.dataset(p).count_rows() == 40
    assert [d for d in snapshot_of_dir(p) if "_versions" in d[0]] == [d for d in files if "_versions" in d[0]]


def _src(spark, rows):
    return spark.createDataFrame(rows, "id long, v double, k int")


CONSTRAINT_BREAKERS = {
    "append": lambda s, t: t.append(_src(s, [(100, -1.0, 1)])),
    "overwrite": lambda s, t: t.overwrite(_src(s, [(100, 1.0, 1), (101, -1.0, 1)])),
    "update": lambda s, t: t.update("id = 5", {"v": "-v"}),
    "merge update": lambda s, t: t.merge(_src(s, [(5, -3.0, 1), (500, 2.0, 1)]), "t.id = s.id")
    .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(),
    "merge insert": lambda s, t: t.merge(_src(s, [(600, -2.0, 1)]), "t.id = s.id").whenNotMatchedInsertAll().execute(),
    "rewriteColumns": lambda s, t: t.rewriteColumns({"v": "v - 20"}, "id < 30"),
    "backfill": lambda s, t: t.backfill({"v": "v - 100"}, where="id = 7"),
}


@pytest.mark.parametrize("op", list(CONSTRAINT_BREAKERS))
def test_constraint_violation_in_executor_arrives_as_itself(spark, constrained, op):
    p, t = constrained
    version, files = lance.dataset(p).version, snapshot_of_dir(p)
    with pytest.raises(ConstraintViolationError) as e:
        CONSTRAINT_BREAKERS[op](spark, t)
    assert type(e.value) is ConstraintViolationError
    assert (e.value.constraint, e.value.expression) == ("positive_v", "v > 0")
    assert float(e.value.row["v"]) <= 0 and "positive_v" in str(e.value)
    _unchanged(p, version, files)


def _wrong_rows():
    """An Arrow UDF returning one row whatever it gets (nested: pickled by
    value, so a Connect server's workers need nothing of tests/)."""
    import pyarrow as pa

    def fn(b):
        return pa.RecordBatch.from_arrays([pa.array([1], pa.int64())], names=["w"])

    return fn


TASK_ERRORS = {
    # several source rows modify one target row
    "merge duplicate match": (DuplicateMatchError, lambda s, t: t.merge(
        _src(s, [(5, 1.0, 1), (5, 2.0, 1)]), "t.id = s.id").whenMatchedUpdateAll().execute()),
    # a keyed DataFrame whose key matches one row twice
    "addColumns by key, duplicate key": (DuplicateMatchError, lambda s, t: t.addColumns(
        s.createDataFrame([(5, 1), (5, 2)], "id long, w long"), on="id")),
    # an Arrow UDF that returns the wrong number of rows
    "addColumns fn, wrong output": (SchemaMismatchError, lambda s, t: t.addColumns(
        _wrong_rows(), readColumns=["v"], outputSchema="w long")),
}


@pytest.mark.parametrize("op", list(TASK_ERRORS))
def test_task_errors_arrive_as_themselves(spark, constrained, op):
    cls, run = TASK_ERRORS[op]
    p, t = constrained
    version, files = lance.dataset(p).version, snapshot_of_dir(p)
    with pytest.raises(cls) as e:
        run(spark, t)
    assert type(e.value) is cls, repr(e.value)
    assert "lance_ops-error" not in str(e.value)  # the payload decoded, not shown
    _unchanged(p, version, files)


@pytest.fixture(scope="module")
def damaged(spark, constrained, tmp_path_factory):
    """A copy of the table above whose last data file is truncated."""
    import shutil

    p = str(tmp_path_factory.mktemp("executor-damaged") / "x.lance")
    shutil.copytree(constrained[0], p)
    frag = lance.dataset(p).get_fragments()[-1]
    data = os.path.join(p, "data", frag.data_files()[0].path)
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    return p, LanceTable(spark, p), data


DAMAGED_FILE_OPS = {
    "delete": lambda s, t: t.delete("v > 35"),
    "update": lambda s, t: t.update("v > 35", {"k": "k + 1"}),
    "compaction": lambda s, t: t.optimize().executeCompaction(targetRowsPerFragment=1000),
}


@pytest.mark.parametrize("op", list(DAMAGED_FILE_OPS))
def test_damaged_data_file_in_executor_arrives_as_corrupt_table_error(spark, damaged, op):
    p, t, data = damaged
    version = lance.dataset(p).version
    with pytest.raises(CorruptTableError) as e:
        DAMAGED_FILE_OPS[op](spark, t)
    assert type(e.value) is CorruptTableError
    assert e.value.path and os.path.basename(data) in e.value.path
    assert lance.dataset(p).version == version


def test_damaged_data_file_in_a_read_carries_the_error(spark, damaged):
    """A read's action is the caller's (``collect`` on ``toDF()``): Spark's
    own error reaches it, carrying the lance_ops error as data that
    ``lance_ops.spark.errors.decode`` turns back into it -- through Connect
    too (the payload survives the server's error message)."""
    from lance_ops.spark.errors import decode

    p, t, data = damaged
    with pytest.raises(Exception) as e:
        t.toDF().collect()
    err = decode(str(e.value))
    assert type(err) is CorruptTableError and os.path.basename(data) in err.path


def test_a_store_failure_writing_a_data_file_names_the_file(spark, table):
    """The executors cannot write data files (here ``data`` is a plain file,
    not a directory): the append fails with StorageIOError naming the data
    file -- a lance_ops error, not a PythonException wrapping an OSError --
    and no version is committed."""
    import shutil

    from lance_ops.errors import StorageIOError

    data = os.path.join(table, "data")
    shutil.rmtree(data)
    with open(data, "w") as f:
        f.write("in the way")
    t = LanceTable(spark, table)
    with pytest.raises(StorageIOError) as e:
        t.append(spark.createDataFrame([(3, "c")], "id long, s string"))
    assert e.value.path and "/data/" in e.value.path and e.value.path.endswith(".lance")
    assert "writing data file failed" in str(e.value)
    assert LanceTable(spark, table).version == 1
