"""SQL statements against the Python API (and pylance) they map to: same
version, same rows, same row ids and lineage; Delta's result shapes."""
import datetime
import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException

import lance_ops
from lance_ops import LanceTable
from lance_ops.errors import ReadOnlyVersionError, SchemaMismatchError, TableExistsError
from lance_ops.txn.vacuum import RETENTION_CHECK_CONF
from tests.helpers import arrow_rows, pylance_pair

LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]


def start_table(n=300) -> pa.Table:
    ids = np.arange(n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "grp": pa.array(ids % 7, pa.int32()),
        "name": pa.array([None if i % 11 == 0 else f"n{i}" for i in ids]),
        "score": pa.array(ids * 1.5),
    })


@pytest.fixture
def trio(tmp_path):
    """(sql, api, ref): identical pylance-written tables (stable row ids, 5
    fragments, a deletion): one for SQL, one for the Python API, one for
    pylance itself."""
    sql_t, ref = pylance_pair(tmp_path, start_table(), 60, "id % 50 = 49")
    api = str(tmp_path / "api.lance")
    shutil.copytree(ref, api)
    return sql_t, api, ref


def view(path):
    ds = lance.dataset(path)
    return ds.to_table(columns=ds.schema.names + LINEAGE, with_row_id=True)


def assert_same(a, b, fresh_from=None):
    """Same version, rows, row ids and lineage (fresh row ids -- inserted rows
    -- compared as a set: their order follows each side's join order)."""
    assert lance.dataset(a).version == lance.dataset(b).version
    ra, rb = arrow_rows(view(a), ("id",)), arrow_rows(view(b), ("id",))
    if fresh_from is not None:
        fa = sorted(r.pop("_rowid") for r in ra if r["_rowid"] >= fresh_from)
        fb = sorted(r.pop("_rowid") for r in rb if r["_rowid"] >= fresh_from)
        assert fa == fb
    assert ra == rb


def run(spark, text, **kw):
    return lance_ops.sql(spark, text, **kw)


def one(df):
    rows = df.collect()
    assert len(rows) == 1
    return rows[0].asDict()


# ---------------------------------------------------------------------- DML
def test_delete_and_update_match_api_and_pylance(spark, trio):
    s, a, ref = trio
    r = one(run(spark, f"DELETE FROM lance.`{s}` AS x WHERE x.id % 17 = 3"))
    info = LanceTable(spark, a).delete("id % 17 = 3")
    lance.dataset(ref).delete("id % 17 = 3")
    assert r == {"num_affected_rows": info.metrics["numDeletedRows"]} and r["num_affected_rows"] == 18
    assert_same(s, a)
    assert_same(s, ref)
    r = one(run(spark, "UPDATE t SET score = score + 1, name = upper(name) WHERE t.grp = 3", tables={"t": s}))
    info = LanceTable(spark, a).update("grp = 3", {"score": "score + 1", "name": "upper(name)"})
    lance.dataset(ref).update({"score": "score + 1", "name": "upper(name)"}, where="grp = 3")
    assert r == {"num_affected_rows": info.metrics["numUpdatedRows"]} and r["num_affected_rows"] > 30
    assert_same(s, a)
    assert_same(s, ref)


MERGE_SOURCE = "SELECT id, CAST(id % 7 AS INT) AS grp, concat('src', id) AS name, id + 1000.0 AS score FROM range({lo}, {hi})"


@pytest.mark.parametrize(
    "clauses, api",
    [
        ("WHEN MATCHED AND t.score > 400 THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
         lambda m: m.whenMatchedUpdateAll("t.score > 400").whenNotMatchedInsertAll()),
        ("WHEN MATCHED AND s.id < 280 THEN DELETE WHEN MATCHED THEN UPDATE SET name = s.name, score = t.score + 1 "
         "WHEN NOT MATCHED BY TARGET AND s.id % 2 = 0 THEN INSERT (id, name) VALUES (s.id, 'ins')",
         lambda m: m.whenMatchedDelete("s.id < 280").whenMatchedUpdate(None, {"name": "s.name", "score": "t.score + 1"})
         .whenNotMatchedInsert("s.id % 2 = 0", {"id": "s.id", "name": "'ins'"})),
        ("WHEN NOT MATCHED BY SOURCE AND t.id < 10 THEN UPDATE SET name = 'gone' WHEN NOT MATCHED BY SOURCE "
         "AND t.id < 20 THEN DELETE WHEN NOT MATCHED THEN INSERT *",
         lambda m: m.whenNotMatchedBySourceUpdate("t.id < 10", {"name": "'gone'"})
         .whenNotMatchedBySourceDelete("t.id < 20").whenNotMatchedInsertAll()),
    ],
    ids=["upsert", "matched-delete-update-conditional-insert", "by-source-update-delete"],
)
def test_merge_clause_matrix_matches_api(spark, trio, clauses, api):
    s, a, _ = trio
    src = MERGE_SOURCE.format(lo=250, hi=320)
    # aliases other than t / s, and the target alias used in the clauses
    sql_clauses = clauses.replace("t.", "tgt.").replace("s.", "src.")
    r = one(run(spark, f"MERGE INTO lance.`{s}` tgt USING ({src}) src ON tgt.id = src.id {sql_clauses}"))
    t = LanceTable(spark, a)
    result = one(api(t.merge(spark.sql(src), "t.id = s.id")).execute())
    m = t.lastCommit().metrics
    assert r == result == {  # the API returns what the statement does
        "num_affected_rows": m["numUpdatedRows"] + m["numDeletedRows"] + m["numInsertedRows"],
        "num_updated_rows": m["numUpdatedRows"], "num_deleted_rows": m["numDeletedRows"],
        "num_inserted_rows": m["numInsertedRows"],
    }
    assert r["num_affected_rows"] > 0
    assert_same(s, a, fresh_from=300)


def test_merge_source_table_and_upsert_matches_pylance(spark, trio):
    s, _, ref = trio
    src = spark.sql(MERGE_SOURCE.format(lo=280, hi=330))
    src.createOrReplaceTempView("merge_src")
    r = one(run(spark, f"MERGE INTO lance.`{s}` USING merge_src ON lance.`{s}`.id = merge_src.id "
                       "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"))
    pr = lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.Table.from_pandas(src.toPandas(), preserve_index=False).cast(lance.dataset(ref).schema))
    assert (r["num_updated_rows"], r["num_inserted_rows"]) == (pr["num_updated_rows"], pr["num_inserted_rows"])
    assert_same(s, ref, fresh_from=300)


def test_insert_into_and_overwrite(spark, trio):
    s, a, _ = trio
    r = one(run(spark, f"INSERT INTO lance.`{s}` VALUES (1000, 1, 'a', 1.0), (1001, 2, NULL, 2.5)"))
    assert r == {"num_affected_rows": 2, "num_inserted_rows": 2}
    LanceTable(spark, a).append(spark.createDataFrame([(1000, 1, "a", 1.0), (1001, 2, None, 2.5)], "id long, grp int, name string, score double"))
    assert_same(s, a)
    # a column list (missing columns are null), by name, and Spark's casts
    run(spark, f"INSERT INTO lance.`{s}` (score, id) SELECT 7, 2000")
    run(spark, f"INSERT INTO lance.`{s}` BY NAME SELECT 'x' AS name, 2001L AS id")
    rows = {r["id"]: r for r in lance.dataset(s).to_table().to_pylist() if r["id"] >= 2000}
    assert rows == {2000: {"id": 2000, "grp": None, "name": None, "score": 7.0},
                    2001: {"id": 2001, "grp": None, "name": "x", "score": None}}
    with pytest.raises(SchemaMismatchError):
        run(spark, f"INSERT INTO lance.`{s}` SELECT 1, 2")
    r = one(run(spark, f"INSERT OVERWRITE TABLE lance.`{s}` SELECT id, grp, name, score FROM lance.`{s}` WHERE id < 10"))
    assert r["num_inserted_rows"] == 10
    assert lance.dataset(s).count_rows() == 10
    assert lance.dataset(s).to_table().schema == lance.dataset(a).to_table().schema  # stored types kept


# ---------------------------------------------------------------------- DDL
def test_create_table_as_select_with_properties_and_replace(spark, tmp_path):
    p = str(tmp_path / "c.lance")
    r = one(run(spark, f"CREATE TABLE lance.`{p}` TBLPROPERTIES ('stableRowIds' = 'false', 'maxRowsPerFragment' = 30,"
                       " 'owner' = 'ops') AS SELECT id, id * 2 AS x FROM range(100)"))
    assert r == {"num_affected_rows": 100, "num_inserted_rows": 100}
    ds = lance.dataset(p)
    assert ds.version == 1 and ds.count_rows() == 100 and len(ds.get_fragments()) == 4
    assert ds.config() == {"owner": "ops"}
    assert LanceTable(spark, p).detail().first()["stableRowIds"] is False
    with pytest.raises(TableExistsError):
        run(spark, f"CREATE TABLE lance.`{p}` AS SELECT 1 AS id")
    run(spark, f"CREATE TABLE IF NOT EXISTS lance.`{p}` AS SELECT 1 AS id")  # no-op
    assert lance.dataset(p).version == 1
    run(spark, f"CREATE OR REPLACE TABLE lance.`{p}` AS SELECT id FROM range(5)")
    ds = lance.dataset(p)
    assert ds.version == 2 and ds.count_rows() == 5 and ds.schema.names == ["id"]


def test_registered_name_is_readable_by_spark_sql(spark, tmp_path):
    p = str(tmp_path / "named.lance")
    run(spark, f"CREATE TABLE named_t (id BIGINT, label STRING COMMENT 'what') USING lance LOCATION '{p}'")
    assert lance.dataset(p).count_rows() == 0
    run(spark, "INSERT INTO named_t VALUES (1, 'a'), (2, 'b')")
    assert spark.sql("SELECT count(*) FROM named_t").head()[0] == 2
    LanceTable(spark, p).append(spark.createDataFrame([(3, "c")], "id long, label string"))
    # Spark pins a view over a Python data source to the version it planned:
    # lance_ops.sql reads the latest, spark.sql after REFRESH TABLE
    assert spark.sql("SELECT count(*) FROM named_t").head()[0] == 2
    assert run(spark, "SELECT count(*) FROM named_t").head()[0] == 3
    run(spark, "REFRESH TABLE named_t")
    assert spark.sql("SELECT count(*) FROM named_t").head()[0] == 3
    run(spark, "ALTER TABLE named_t ADD COLUMNS (score DOUBLE)")
    assert spark.table("named_t").columns == ["id", "label", "score"]  # re-created after the schema change
    assert spark.table("named_t").schema["label"].metadata == {"comment": "what"}
    # a second registration of an existing table, then dropping the name keeps the data
    run(spark, f"CREATE TABLE named_again USING lance LOCATION '{p}'")
    assert run(spark, "SELECT sum(id) AS s FROM named_again").head()[0] == 6
    run(spark, "DROP TABLE named_again")
    assert not spark.catalog.tableExists("named_again")
    assert lance.dataset(p).count_rows() == 3
    with pytest.raises(lance_ops.TableNotFoundError, match="table named_again not found"):
        run(spark, "SELECT * FROM named_again")


def test_alter_table_columns_match_api(spark, trio):
    s, a, _ = trio
    run(spark, f"ALTER TABLE lance.`{s}` ADD COLUMNS (note STRING COMMENT 'free text', twice = score * 2)")
    la = LanceTable(spark, a)
    from pyspark.sql import functions as F
    la.addColumns({"note": F.lit(None).cast("string").alias("note", metadata={"comment": "free text"}), "twice": "score * 2"})
    assert_same(s, a)
    ds = lance.dataset(s)
    assert ds.schema.field("note").metadata == {b"comment": b"free text"}
    assert ds.schema.field("note").type == pa.string()
    # one column file per fragment, as addColumns writes
    assert all(len(f.data_files()) == 2 for f in ds.get_fragments())
    # the public API's DDL form: null-filled typed columns
    la.addColumns("flag BOOLEAN COMMENT 'set later'")
    run(spark, f"ALTER TABLE lance.`{s}` ADD COLUMN flag BOOLEAN COMMENT 'set later'")
    assert_same(s, a)
    # backfill from a view keyed by _rowid and by a column
    feats = "SELECT _rowid, score + 0.5 AS f1, name AS f2 FROM lance.`{}`"
    run(spark, f"CREATE OR REPLACE TEMP VIEW feats AS {feats.format(s)}")
    run(spark, f"ALTER TABLE lance.`{s}` ADD COLUMNS f1, f2 FROM feats ON _rowid")
    la.addColumns(LanceTable(spark, a).toDF(withRowId=True).selectExpr("_rowid", "score + 0.5 AS f1", "name AS f2"), on="_rowid")
    assert_same(s, a)
    run(spark, f"ALTER TABLE lance.`{s}` ADD COLUMNS g FROM (SELECT id, grp * 10 AS g FROM lance.`{s}`) ON id")
    la.addColumns(LanceTable(spark, a).toDF().selectExpr("id", "grp * 10 AS g"), on="id")
    assert_same(s, a)
    run(spark, f"ALTER TABLE lance.`{s}` DROP COLUMNS (f1, f2)")
    la.dropColumns(["f1", "f2"])
    run(spark, f"ALTER TABLE lance.`{s}` DROP COLUMN IF EXISTS nothing_here")  # no-op, no version
    run(spark, f"ALTER TABLE lance.`{s}` RENAME COLUMN twice TO double_score")
    la.renameColumn("twice", "double_score")
    assert_same(s, a)
    assert "double_score" in lance.dataset(s).schema.names


def test_table_properties_are_pylance_config(spark, trio):
    s, _, _ = trio
    run(spark, f"ALTER TABLE lance.`{s}` SET TBLPROPERTIES ('team' = 'ops', 'retention.days' = 30)")
    assert lance.dataset(s).config() == {"team": "ops", "retention.days": "30"}
    rows = run(spark, f"SHOW TBLPROPERTIES lance.`{s}`").collect()
    assert [(r.key, r.value) for r in rows] == [("retention.days", "30"), ("team", "ops")]
    assert run(spark, f"SHOW TBLPROPERTIES lance.`{s}` ('team')").head().value == "ops"
    run(spark, f"ALTER TABLE lance.`{s}` UNSET TBLPROPERTIES ('team')")
    assert lance.dataset(s).config() == {"retention.days": "30"}
    v = lance.dataset(s).version
    with pytest.raises(lance_ops.InvalidArgumentError):
        run(spark, f"ALTER TABLE lance.`{s}` UNSET TBLPROPERTIES ('team')")
    assert lance.dataset(s).version == v
    run(spark, f"ALTER TABLE lance.`{s}` UNSET TBLPROPERTIES IF EXISTS ('team')")


# -------------------------------------------------------------- maintenance
def test_optimize_vacuum_restore_history_detail(spark, trio):
    s, a, _ = trio
    r = one(run(spark, f"OPTIMIZE lance.`{s}` WITH (targetRowsPerFragment = 1000, materializeDeletions = true)"))
    t = LanceTable(spark, a)
    api = one(t.optimize().executeCompaction(targetRowsPerFragment=1000))
    info = t.lastCommit()
    assert r["path"] == LanceTable(spark, s).uri
    m = r["metrics"].asDict()
    assert (m["numFragmentsRemoved"], m["numFragmentsAdded"], m["numRowsRewritten"], m["numFilesAdded"]) == (
        info.metrics["numRemovedFragments"], info.metrics["numAddedFragments"], info.metrics["numRowsRewritten"],
        info.metrics["numAddedFiles"])
    assert {k: v for k, v in m.items() if not k.endswith("TimeMs")} == {
        k: v for k, v in api["metrics"].asDict().items() if not k.endswith("TimeMs")}  # the same as the API's
    assert m["version"] == info.version == lance.dataset(s).version
    assert_same(s, a)
    hist = run(spark, f"DESCRIBE HISTORY lance.`{s}` LIMIT 2").collect()
    # one version per OPTIMIZE: no ReserveFragments before it
    assert (hist[0].operation, hist[0].lanceOperation) == ("OPTIMIZE", "Rewrite")
    assert hist[1].lanceOperation != "ReserveFragments" and hist[1].version == hist[0].readVersion
    assert hist[0].operationParameters["targetRowsPerFragment"] == "1000"
    assert hist[0].operationMetrics["numAddedFiles"] == str(m["numFilesAdded"])  # Delta's history name
    detail = one(run(spark, f"DESCRIBE DETAIL lance.`{s}`"))
    assert detail["format"] == "lance" and detail["numFragments"] == 1 and detail["numRows"] == 294
    assert detail["numFiles"] == 1 and detail["version"] == m["version"]
    frags = run(spark, f"DESCRIBE FRAGMENTS lance.`{s}`").collect()
    assert [(f.live_rows, f.deleted_rows) for f in frags] == [(294, 0)]
    # vacuum: dry run lists, retention check as the API
    with pytest.raises(lance_ops.InvalidArgumentError):
        run(spark, f"VACUUM lance.`{s}` RETAIN 0 HOURS")
    # (set on the session, not patched into this process: a Connect session's
    # `conf` is a new object per access and the server holds the value)
    spark.conf.set(RETENTION_CHECK_CONF, "false")
    try:
        dry = {r.path for r in run(spark, f"VACUUM lance.`{s}` RETAIN 0 HOURS DRY RUN").collect()}
        expected = set(LanceTable(spark, s).vacuumFiles(0, dryRun=True, enforceRetentionDuration=False))
        root = LanceTable(spark, s).uri
        assert dry == {f"{root}/{p}" for p in expected} and dry
        out = run(spark, f"VACUUM lance.`{s}` RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset(RETENTION_CHECK_CONF)
    assert [r.path for r in out] == [root]
    assert lance.dataset(s).count_rows() == 294
    # restore to the latest kept version's parent: only the latest is left, so tag and restore a new one
    run(spark, f"DELETE FROM lance.`{s}` WHERE id < 100")
    v_before = lance.dataset(s).version
    r = one(run(spark, f"RESTORE TABLE lance.`{s}` TO VERSION AS OF {v_before - 1}"))
    assert lance.dataset(s).version == v_before + 1 and lance.dataset(s).count_rows() == 294
    assert r["num_of_files_after_restore"] == 1 and r["num_restored_files"] == 0 and r["num_removed_files"] == 0


def test_tags_time_travel_and_read_only(spark, trio):
    s, _, _ = trio
    v2 = lance.dataset(s).version
    run(spark, f"DELETE FROM lance.`{s}` WHERE id < 100")
    run(spark, f"ALTER TABLE lance.`{s}` CREATE TAG before_delete AS OF VERSION {v2}")
    run(spark, f"ALTER TABLE lance.`{s}@v{v2}` CREATE TAG also_before")  # a time-travel reference tags its version
    assert lance.dataset(s).tags.list()["before_delete"]["version"] == v2
    tags = run(spark, f"SHOW TAGS lance.`{s}`").collect()
    assert [(t.tag, t.version) for t in tags] == [("also_before", v2), ("before_delete", v2)]
    count = "SELECT count(*) FROM {}"
    n_old, n_now = 294, 294 - 98
    for ref in (f"lance.`{s}@v{v2}`", f"lance.`{s}` VERSION AS OF {v2}", f"lance.`{s}@before_delete`",
                f"lance.`{s}` VERSION AS OF 'before_delete'", f"t@v{v2}", "t@before_delete"):
        assert run(spark, count.format(ref), tables={"t": s}).head()[0] == n_old, ref
    assert run(spark, count.format(f"lance.`{s}`")).head()[0] == n_now
    # v2's commit time, exact to the microsecond (the manifest's nanoseconds truncated). Not pylance's
    # versions(): it takes the microseconds of a float (nanos % 1e9), 1 us early now and then -- then
    # v2 is after the given time (seen in CI) -- and a local-time naive datetime.
    ts = next(r for r in LanceTable(spark, s).table.history() if r["version"] == v2)["timestamp"]
    when = ts.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    got = run(spark, f"SELECT count(*) FROM lance.`{s}` TIMESTAMP AS OF '{when}'").head()[0]
    assert got == n_old
    run(spark, f"RESTORE lance.`{s}` TO TIMESTAMP AS OF '{when}'")
    assert lance.dataset(s).count_rows() == n_old
    assert LanceTable(spark, s).history(1).head().operationParameters["version"] == str(v2)
    run(spark, f"DELETE FROM lance.`{s}` WHERE id < 100")
    # writes through a time-travel reference: ReadOnlyVersionError, no new version
    v = lance.dataset(s).version
    for stmt in (f"DELETE FROM lance.`{s}@v{v2}` WHERE id = 200", f"UPDATE t@v{v2} SET score = 0",
                 f"INSERT INTO lance.`{s}@v{v2}` VALUES (1, 1, 'a', 1.0)",
                 f"OPTIMIZE lance.`{s}@before_delete`", f"ALTER TABLE lance.`{s}@v{v2}` ADD COLUMNS (z INT)",
                 f"MERGE INTO t@v{v2} USING t ON t.id = t.id WHEN MATCHED THEN DELETE",
                 f"VACUUM lance.`{s}@v{v2}`", f"RESTORE TABLE lance.`{s}@v{v2}` TO VERSION AS OF 1"):
        with pytest.raises(ReadOnlyVersionError):
            run(spark, stmt, tables={"t": s})
    assert lance.dataset(s).version == v
    run(spark, f"ALTER TABLE lance.`{s}` DROP TAG before_delete")
    run(spark, f"ALTER TABLE lance.`{s}` DROP TAG IF EXISTS before_delete")
    assert list(lance.dataset(s).tags.list()) == ["also_before"]


def test_table_changes_and_describe(spark, trio):
    s, _, _ = trio
    v = lance.dataset(s).version
    run(spark, f"UPDATE lance.`{s}` SET score = -1 WHERE id < 3")
    run(spark, f"INSERT INTO lance.`{s}` VALUES (500, 1, 'new', 1.0)")
    run(spark, f"CREATE TABLE changes_t USING lance LOCATION '{s}'")
    for target in (s, "changes_t"):
        # Delta's table_changes: from version v + 1 (included) on
        rows = run(spark, f"SELECT id, _change_type, _commit_version FROM table_changes('{target}', {v + 1}) "
                          "ORDER BY id, _change_type").collect()
        assert [(r.id, r._change_type, r._commit_version) for r in rows] == [
            (i, kind, v + 1) for i in range(3) for kind in ("update_postimage", "update_preimage")
        ] + [(500, "insert", v + 2)]
    rows = run(spark, f"SELECT count(*) FROM table_changes('{s}', {v + 1}, {v + 1})").head()[0]
    assert rows == 6
    desc = run(spark, "DESCRIBE changes_t").collect()
    assert [(d.col_name, d.data_type) for d in desc] == [("id", "bigint"), ("grp", "int"), ("name", "string"), ("score", "double")]
    ext = {r.col_name: r.data_type for r in run(spark, "DESCRIBE TABLE EXTENDED changes_t").collect()}
    assert ext["Provider"] == "lance" and ext["Version"] == str(v + 2)


# ------------------------------------------------------------------- errors
def test_errors_leave_no_version(spark, trio):
    s, _, _ = trio
    v = lance.dataset(s).version
    with pytest.raises(AnalysisException):
        run(spark, f"DELETE FROM lance.`{s}` WHERE no_such_column > 1")
    with pytest.raises(AnalysisException):
        run(spark, f"UPDATE lance.`{s}` SET score = no_such(1)")
    with pytest.raises(AnalysisException):
        run(spark, f"SELECT no_such_column FROM lance.`{s}`")
    with pytest.raises(lance_ops.TableNotFoundError, match="table no_such_table_anywhere not found"):
        run(spark, "SELECT * FROM no_such_table_anywhere")
    with pytest.raises(lance_ops.TableNotFoundError, match="table no_such_source not found"):
        run(spark, f"MERGE INTO lance.`{s}` t USING no_such_source s ON t.id = s.id WHEN MATCHED THEN DELETE")
    with pytest.raises(SchemaMismatchError):
        run(spark, f"ALTER TABLE lance.`{s}` ADD COLUMNS (score DOUBLE)")
    with pytest.raises(lance_ops.TableNotFoundError):
        run(spark, f"SELECT * FROM lance.`{s}@v99`")
    # a parse error anywhere in a script: nothing runs
    with pytest.raises(lance_ops.SqlParseError) as e:
        run(spark, f"DELETE FROM lance.`{s}` WHERE id = 1;\nDELETE FROM lance.`{s}` WHERE")
    assert e.value.line == 2
    assert lance.dataset(s).version == v
    # a failing statement stops the script after the ones before it
    with pytest.raises(AnalysisException):
        run(spark, f"DELETE FROM lance.`{s}` WHERE id = 1; DELETE FROM lance.`{s}` WHERE nope = 1; "
                   f"DELETE FROM lance.`{s}` WHERE id = 2")
    assert lance.dataset(s).version == v + 1
    assert lance.dataset(s).count_rows(filter="id = 2") == 1


def test_errors_name_what_the_user_wrote(spark, trio, caplog):
    """A misspelled table, in any statement: TableNotFoundError naming it;
    a misspelled column: Spark's error class with the table's columns as
    suggestions -- no internal view, placeholder or metadata column names, no
    plan dump; one log record per failed statement; a malformed UPDATE: a
    SqlParseError at its place."""
    import logging

    from pyspark.logger import PySparkLogger

    s = trio[0]
    run(spark, f"CREATE OR REPLACE TABLE events_named USING lance LOCATION '{s}'")
    v = lance.dataset(s).version
    for stmt in ("DESCRIBE HISTORY evnts_named", "DESCRIBE DETAIL evnts_named", "OPTIMIZE evnts_named",
                 "VACUUM evnts_named RETAIN 168 HOURS", "RESTORE TABLE evnts_named TO VERSION AS OF 1",
                 "DELETE FROM evnts_named WHERE id = 1", "UPDATE evnts_named SET score = 1",
                 "SELECT * FROM events_named e JOIN evnts_named f ON e.id = f.id"):
        with pytest.raises(lance_ops.TableNotFoundError, match=r"table evnts_named not found.*Did you mean events_named\?"):
            run(spark, stmt)
    query_context = []
    handler = logging.Handler()
    handler.emit = query_context.append
    pyspark_logger = PySparkLogger.getLogger("SQLQueryContextLogger")
    pyspark_logger.addHandler(handler)
    caplog.clear()
    try:
        for stmt in ("SELECT nme FROM events_named", "DELETE FROM events_named WHERE nme = 1",
                     f"SELECT id FROM lance.`{s}` WHERE nme = 'a'", "UPDATE events_named SET score = nme"):
            with pytest.raises(AnalysisException) as e:
                run(spark, stmt)
            msg = str(e.value)
            assert e.value.getCondition() == "UNRESOLVED_COLUMN.WITH_SUGGESTION", msg
            assert "`name`" in msg and "`score`" in msg, msg
            for internal in ("_pyspark_", "__lance_ops_", "_rowid", "_rowaddr", "_row_created", "RelationV2"):
                assert internal not in msg, (stmt, msg)
    finally:
        pyspark_logger.removeHandler(handler)
    ours = [r for r in caplog.records if r.name == "lance_ops.sql" and r.levelno >= logging.WARNING]
    assert len(ours) == 4 and query_context == []  # one record per failed statement, and only ours
    assert "nme" in ours[0].getMessage()
    with pytest.raises(lance_ops.SqlParseError) as e:
        run(spark, "SELECT 1;\nUPDATE events_named SET WHERE id = 1")
    assert (e.value.line, e.value.column, e.value.token) == (2, 25, "WHERE")
    assert "SET" in e.value.reason and "dict" not in str(e.value)
    assert lance.dataset(s).version == v


def test_script_results_and_table_sql(spark, trio):
    s, _, _ = trio
    outs = run(spark, f"SELECT count(*) AS n FROM lance.`{s}`; DELETE FROM lance.`{s}` WHERE id < 10", allResults=True)
    assert [o.columns for o in outs] == [["n"], ["num_affected_rows"]]
    t = LanceTable(spark, s)
    assert t.sql("SELECT count(*) FROM this").head()[0] == 284
    t.sql("DELETE FROM this WHERE id = 10", commitProperties={"job": "nightly"})
    assert t.refresh().count() == 283
    assert t.history(1).head().userMetadata == {"job": "nightly"}
    old = LanceTable(spark, s, version=2)
    assert old.sql("SELECT count(*) FROM this").head()[0] == 294
    with pytest.raises(ReadOnlyVersionError):
        old.sql("DELETE FROM this")


def test_check_constraints_through_sql(spark, trio):
    s, _api, _ref = trio
    v = lance.dataset(s).version
    run(spark, f"ALTER TABLE lance.`{s}` ADD CONSTRAINT score_pos CHECK (score >= 0 AND id IS NOT NULL)")
    assert lance.dataset(s).version == v + 1
    assert lance.dataset(s).config()["lance_ops.constraint.score_pos"]
    assert "score_pos" in LanceTable(spark, s).constraints()
    with pytest.raises(lance_ops.ConstraintViolationError) as e:
        run(spark, f"INSERT INTO lance.`{s}` (id, score) VALUES (1000, -1.0)")
    assert e.value.constraint == "score_pos"
    assert lance.dataset(s).version == v + 1
    # existing rows that break a new constraint: refused, nothing committed
    with pytest.raises(lance_ops.ConstraintViolationError):
        run(spark, f"ALTER TABLE lance.`{s}` ADD CONSTRAINT small CHECK (id < 10)")
    assert lance.dataset(s).version == v + 1
    run(spark, f"ALTER TABLE lance.`{s}` DROP CONSTRAINT score_pos")
    run(spark, f"ALTER TABLE lance.`{s}` DROP CONSTRAINT IF EXISTS score_pos")
    run(spark, f"INSERT INTO lance.`{s}` (id, score) VALUES (1000, -1.0)")
    assert lance.dataset(s).version == v + 3
    assert "lance_ops.constraint.score_pos" not in lance.dataset(s).config()
