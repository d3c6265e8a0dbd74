"""delete / update / merge: differential against pylance on the same starting
table -- rows, _rowid, created/updated lineage and versions equal -- and
pylance reads our result."""
import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from lance_ops import LanceTable
from lance_ops.errors import DuplicateMatchError, InvalidArgumentError, SchemaMismatchError
from tests.conftest import CONNECT_MODE
from tests.helpers import arrow_rows, pylance_pair

LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]


def start_table(n=1000) -> pa.Table:
    ids = np.arange(n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "grp": pa.array(ids % 7, pa.int32()),
            "name": pa.array([None if i % 11 == 0 else f"n{i}" for i in ids]),
            "score": pa.array(ids * 1.5),
            "tags": pa.array([[f"t{i % 3}"] for i in ids], pa.list_(pa.string())),
        }
    )


@pytest.fixture
def pair(tmp_path):
    """(ours, ref): identical pylance-written tables (stable row ids, 5 fragments,
    an existing deletion and a second version)."""
    return pylance_pair(tmp_path, start_table(), 200, "id % 50 = 49")


def view(path):
    ds = lance.dataset(path)
    return ds.to_table(columns=ds.schema.names + LINEAGE, with_row_id=True)


def assert_same_as_pylance(ours, ref, fresh_from=None):
    """Same version, rows and lineage. Rows with ``_rowid >= fresh_from`` were
    inserted fresh: their ids are assigned in write order, which depends on each
    engine's join order, so those ids are compared as a set."""
    assert lance.dataset(ours).version == lance.dataset(ref).version
    a, b = arrow_rows(view(ours), ("id",)), arrow_rows(view(ref), ("id",))
    if fresh_from is not None:
        fresh_a = sorted(r.pop("_rowid") for r in a if r["_rowid"] >= fresh_from)
        fresh_b = sorted(r.pop("_rowid") for r in b if r["_rowid"] >= fresh_from)
        assert fresh_a == fresh_b
    assert a == b


START_NEXT_ROW_ID = 1000


# ------------------------------------------------------------------ delete
@pytest.mark.parametrize(
    "cond",
    [
        "id % 17 = 3",  # sparse, every fragment
        "id < 700",  # dense, across fragments (whole fragments removed)
        "id >= 200 and id < 400",  # exactly one fragment
        "name is null",  # null handling
        "id < 0",  # nothing: commits nothing (as Delta; pylance commits an empty Delete)
    ],
)
def test_delete_matches_pylance(spark, pair, cond):
    ours, ref = pair
    info = LanceTable(spark, ours).delete(cond)
    lance.dataset(ref).delete(cond)
    if cond == "id < 0":
        assert info.version is None and lance.dataset(ours).version == 2
        assert arrow_rows(view(ours), ("id",)) == arrow_rows(view(ref), ("id",))
        return
    assert_same_as_pylance(ours, ref)
    assert info.operation == "Delete" and info.version == 3
    expected = 1000 - 20 - lance.dataset(ref).count_rows() - 0
    assert info.metrics["numDeletedRows"] == 980 - lance.dataset(ref).count_rows() == expected + 0
    # deletion files only: no data file was added
    assert {f.path for fr in lance.dataset(ours).get_fragments() for f in fr.metadata.files} <= {
        f.path for fr in lance.dataset(ours, version=2).get_fragments() for f in fr.metadata.files
    }


def test_delete_all_and_column_condition(spark, pair):
    ours, ref = pair
    t = LanceTable(spark, ours)
    t.delete(F.col("grp") == 3)
    lance.dataset(ref).delete("grp = 3")
    assert_same_as_pylance(ours, ref)
    info = t.delete()
    lance.dataset(ref).delete("true")
    assert info.metrics["numDeletedRows"] == 980 - 140
    assert lance.dataset(ours).count_rows() == 0 and t.count() == 0
    assert lance.dataset(ours).version == lance.dataset(ref).version
    m_ours = LanceTable(spark, ours).detail().first()
    assert m_ours["numFragments"] == 0 and m_ours["maxFragmentId"] == 4


def test_delete_reads_only_condition_columns(spark, pair):
    ours, _ = pair
    seen = []
    from lance_ops.spark import frames

    orig = frames.scan_frame

    def spy(spark_, snap, columns, metadata=("_rowaddr",), **kw):
        seen.append((list(columns) if columns is not None else None, list(metadata)))
        return orig(spark_, snap, columns, metadata, **kw)

    import lance_ops.ops.rowplan as d
    import lance_ops.spark.frames as fr

    orig_values = d.arrow_values

    def values_spy(*a, **kw):
        av = orig_values(*a, **kw)
        if av is not None:  # what the Arrow tasks will read
            seen.append((av.columns, av.metadata))
        return av

    # Every path reads only the condition's columns: the Spark scan
    # (rowplan.scan_frame), the pushed-filter planning scan (frames.scan_frame)
    # and the analyzed-plan Arrow tasks (arrow_values' columns).
    d.scan_frame = fr.scan_frame = spy
    d.arrow_values = values_spy
    try:
        info = LanceTable(spark, ours).delete("score > 100 and grp = 1")
    finally:
        d.scan_frame = fr.scan_frame = orig
        d.arrow_values = orig_values
    assert info.metrics["evaluation"] == "arrow"
    assert seen == [(["grp", "score"], ["_rowaddr"])]


# ------------------------------------------------------------------ update
@pytest.mark.parametrize(
    "cond,values,pyvalues",
    [
        ("id = 5", {"score": "-1.0"}, {"score": "-1.0"}),
        ("id % 3 = 0", {"score": "score * 2 + id", "grp": "grp + 100"}, {"score": "score * 2 + id", "grp": "grp + 100"}),
        ("name is null", {"name": "'was null'"}, {"name": "'was null'"}),
        ("id < 300", {"name": "NULL"}, {"name": "NULL"}),
        (None, {"score": "0.0"}, {"score": "0.0"}),
    ],
)
def test_update_matches_pylance(spark, pair, cond, values, pyvalues):
    ours, ref = pair
    info = LanceTable(spark, ours).update(cond, values)
    if cond is None:
        lance.dataset(ref).update(pyvalues)
    else:
        lance.dataset(ref).update(pyvalues, where=cond)
    assert_same_as_pylance(ours, ref)
    assert info.operation == "Update"
    changed = lance.dataset(ref).to_table(filter="_row_last_updated_at_version = 3", columns=["id"]).num_rows
    assert info.metrics["numUpdatedRows"] == changed


def test_update_with_column_values_and_type_coercion(spark, pair):
    ours, ref = pair
    LanceTable(spark, ours).update(F.col("id") < 10, {"grp": F.col("grp") * 2, "score": "1"})
    lance.dataset(ref).update({"grp": "grp * 2", "score": "1.0"}, where="id < 10")
    assert_same_as_pylance(ours, ref)


def test_update_errors_leave_no_version(spark, pair):
    from pyspark.errors import AnalysisException, ParseException

    ours, _ = pair
    t = LanceTable(spark, ours)
    with pytest.raises(AnalysisException):
        t.update("no_such > 1", {"score": "1"})
    with pytest.raises(AnalysisException):
        t.update("id > 1", {"score": "no_such + 1"})
    with pytest.raises(ParseException):
        t.delete("id > ")
    with pytest.raises(AnalysisException):
        t.delete("id + 1")  # not a boolean
    with pytest.raises(AnalysisException):
        t.delete("missing_col = 3")
    with pytest.raises(SchemaMismatchError):
        t.update("id > 1", {"nope": "1"})
    assert lance.dataset(ours).version == 2 and t.version == 2


# ------------------------------------------------------------------- merge
#: The merge paths each merge test runs: both join strategies, and the
#: broadcast one also on its fallback path. The Connect pass runs the
#: fallback path only where it differs under Connect (the checkpoints a
#: merge releases): elsewhere it is the shuffle path's grouped changes again.
MERGE_STRATEGIES = ["broadcast", "broadcast-grouped", "shuffle"]


@pytest.fixture(params=["broadcast", "shuffle"] if CONNECT_MODE else MERGE_STRATEGIES)
def merge_strategy(request, spark, monkeypatch):
    """Run a merge test with both join strategies, and the broadcast one also
    on its fallback path (the target side shuffled by fragment, as when a
    clause's plan shuffles the scan's rows) instead of changing fragments in
    the scan's tasks."""
    spark.conf.set("spark.lance_ops.merge.broadcastSourceRows", "0" if request.param == "shuffle" else "2000000")
    if request.param == "broadcast-grouped":
        import lance_ops.ops.merge as merge_module

        monkeypatch.setattr(merge_module, "run_merge_aligned", lambda *a, **k: None)
    yield request.param
    spark.conf.unset("spark.lance_ops.merge.broadcastSourceRows")


def source(spark, ids, score_offset=1000.0):
    rows = [(int(i), int(i) % 7, f"src{i}", float(i) + score_offset, [f"s{i}"]) for i in ids]
    return spark.createDataFrame(rows, "id long, grp int, name string, score double, tags array<string>")


def source_arrow(ids, score_offset=1000.0):
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "grp": pa.array([int(i) % 7 for i in ids], pa.int32()),
            "name": pa.array([f"src{i}" for i in ids]),
            "score": pa.array([float(i) + score_offset for i in ids]),
            "tags": pa.array([[f"s{i}"] for i in ids], pa.list_(pa.string())),
        }
    )


def test_merge_upsert_matches_pylance(spark, pair, merge_strategy):
    ours, ref = pair
    ids = list(range(950, 1100))  # half updates (some of them deleted rows), half inserts
    t = LanceTable(spark, ours)
    result = t.merge(source(spark, ids), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    info = t.lastCommit()
    r = lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source_arrow(ids))
    assert_same_as_pylance(ours, ref, fresh_from=START_NEXT_ROW_ID)
    assert info.metrics["numSourceRows"] == 150
    assert info.metrics["numInsertedRows"] == r["num_inserted_rows"]
    assert info.metrics["numUpdatedRows"] == r["num_updated_rows"]
    assert result.first().asDict() == {  # Delta's result, pylance's counts
        "num_affected_rows": r["num_inserted_rows"] + r["num_updated_rows"], "num_updated_rows": r["num_updated_rows"],
        "num_deleted_rows": 0, "num_inserted_rows": r["num_inserted_rows"]}


def test_merges_of_one_shape_analyze_their_clauses_once(spark, pair, monkeypatch):
    """A merge of the same shape as an earlier one (the CDC loop: same SQL,
    same schemas, new rows) reuses its clause analysis -- the same rows as
    pylance either way; another clause text, a Column, the table's schema
    changing, or a setting name resolution follows, analyze again; bad SQL
    still fails as Spark's own error before any job."""
    from pyspark.errors import AnalysisException

    import lance_ops.ops.merge as merge_module

    monkeypatch.setattr(merge_module, "_ANALYSES", merge_module._AnalysisCache())
    calls = []
    analyze = merge_module.MergePlan.analyze

    def counted(self):
        calls.append(1)
        return analyze(self)

    monkeypatch.setattr(merge_module.MergePlan, "analyze", counted)
    ours, ref = pair
    t = LanceTable(spark, ours)

    def upsert(ids, ref_too=True):
        t.merge(source(spark, ids), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        if ref_too:
            lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all() \
                .execute(source_arrow(ids))
        return t.lastCommit().metrics

    first = upsert(range(990, 1010))
    second = upsert(range(1005, 1030))
    assert len(calls) == 1
    assert second.get("planInspection") == first.get("planInspection")  # (how the plan was read: replayed)
    assert_same_as_pylance(ours, ref, fresh_from=START_NEXT_ROW_ID)

    def bump(ids, how):
        t.merge(source(spark, ids), "t.id = s.id").whenMatchedUpdate(set={"score": how}).execute()

    bump([3, 4], "s.score + 1")
    bump([5], "s.score + 1")
    assert len(calls) == 2  # (another clause text: analyzed once, then reused)
    bump([6], "s.score + 2")
    assert len(calls) == 3
    before = lance.dataset(ours).version
    with pytest.raises(AnalysisException):  # (an insert clause sees the source only)
        t.merge(source(spark, [7]), "t.id = s.id").whenNotMatchedInsert(values={"id": "s.id", "grp": "t.grp"}) \
            .execute()
    assert lance.dataset(ours).version == before
    t.merge(source(spark, [8]), F.expr("t.id = s.id")).whenMatchedUpdateAll().execute()
    t.merge(source(spark, [9]), F.expr("t.id = s.id")).whenMatchedUpdateAll().execute()
    assert len(calls) == 6  # (Columns: analyzed each time)
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        upsert([10], ref_too=False)
    finally:
        spark.conf.unset("spark.sql.caseSensitive")
    assert len(calls) == 7
    t.addColumns({"extra": "id * 2"})
    bump([11], "s.score + 1")  # (a shape seen before, over another table schema)
    assert len(calls) == 8
    rows = {r["id"]: r for r in arrow_rows(lance.dataset(ours).to_table(), ("id",))}
    assert rows[11]["score"] == 1012.0 and rows[11]["extra"] == 22 and rows[6]["score"] == 6 + 1000.0 + 2


def test_release_checkpoint_frees_it_now(spark):
    """``jvm.release_checkpoint``: under Spark Connect the server-side
    relation is removed at the call (a request with a deadline) and the
    plan's finalizer disarmed (pyspark's blocking, deadline-less gRPC call,
    run by the garbage collector at an arbitrary point, blocked the client
    for good: an update hung that way after merges). Classic: unpersist."""
    from lance_ops.spark import jvm

    df = spark.range(0, 10, 1, 1).localCheckpoint(eager=True)
    plan = getattr(df, "_plan", None)
    rid = getattr(plan, "_relation_id", None)
    assert jvm.is_connect(spark) == (rid is not None)
    jvm.release_checkpoint(df)
    if rid is not None:
        from pyspark.sql.connect.dataframe import DataFrame
        from pyspark.sql.connect.plan import CachedRemoteRelation

        assert plan._relation_id is None
        stale = DataFrame(CachedRemoteRelation(rid, spark), spark)
        try:
            from pyspark.errors import PySparkException

            with pytest.raises(PySparkException):
                stale.count()  # the server no longer holds it
        finally:
            stale._plan._relation_id = None


@pytest.mark.parametrize("merge_strategy", MERGE_STRATEGIES, indirect=True)
def test_merge_releases_its_checkpoints(spark, pair, merge_strategy, monkeypatch):
    """A merge releases the checkpoint it made of its source (``all``: even
    one it could replay) before it returns or raises; the matched rows are
    never checkpointed (inserts and the markers of matched source rows meet
    in the change job's shuffle)."""
    import lance_ops.ops.merge as merge_mod

    released = []
    release = merge_mod.release_checkpoint
    monkeypatch.setattr(merge_mod, "release_checkpoint", lambda df: (released.append(df), release(df)))
    ours, _ = pair
    t = LanceTable(spark, ours)
    spark.conf.set(merge_mod.MATERIALIZE_SOURCE, "all")
    try:
        t.merge(source(spark, range(990, 1010)), "t.id = s.id").whenMatchedUpdateAll() \
            .whenNotMatchedInsertAll().execute()
        assert t.lastCommit().metrics["numSourceRows"] == 20 and len(released) == 1
        with pytest.raises(DuplicateMatchError):
            t.merge(source(spark, [5, 5, 2000]), "t.id = s.id").whenMatchedUpdateAll().execute()
        assert len(released) == 2
        if jvm_connect(spark):
            assert all(df._plan._relation_id is None for df in released)
        # a file source is replayed, not checkpointed (auto)
        spark.conf.set(merge_mod.MATERIALIZE_SOURCE, "auto")
        file_src = str(pair[0]) + "-src.parquet"
        source(spark, range(2000, 2010)).write.parquet(file_src)
        t.merge(spark.read.parquet(file_src), "t.id = s.id").whenMatchedUpdateAll() \
            .whenNotMatchedInsertAll().execute()
        assert t.lastCommit().metrics["numInsertedRows"] == 10 and len(released) == 2
        spark.conf.set(merge_mod.MATERIALIZE_SOURCE, "sometimes")
        with pytest.raises(InvalidArgumentError):
            t.merge(spark.read.parquet(file_src), "t.id = s.id").whenMatchedUpdateAll().execute()
    finally:
        spark.conf.unset(merge_mod.MATERIALIZE_SOURCE)


def jvm_connect(spark) -> bool:
    from lance_ops.spark import jvm

    return jvm.is_connect(spark)


def test_merge_insert_only_and_conditional(spark, pair, merge_strategy):
    ours, ref = pair
    ids = list(range(990, 1010))
    LanceTable(spark, ours).merge(source(spark, ids), "t.id = s.id").whenNotMatchedInsertAll().execute()
    lance.dataset(ref).merge_insert("id").when_not_matched_insert_all().execute(source_arrow(ids))
    assert_same_as_pylance(ours, ref, fresh_from=START_NEXT_ROW_ID)
    ids2 = list(range(0, 60))
    src = source(spark, ids2, score_offset=-50.0)
    t = LanceTable(spark, ours)
    t.merge(src, "t.id = s.id").whenMatchedUpdateAll("s.score > t.score").execute()
    lance.dataset(ref).merge_insert("id").when_matched_update_all(condition="source.score > target.score").execute(source_arrow(ids2, -50.0))
    # no source score is higher: nothing changes, and (as Delta) nothing is committed -- pylance commits
    assert t.lastCommit().version is None and lance.dataset(ours).version == lance.dataset(ref).version - 1
    a, b = arrow_rows(view(ours), ("id",)), arrow_rows(view(ref), ("id",))
    for rows in (a, b):
        for r in rows:
            r.pop("_rowid") if r["_rowid"] >= START_NEXT_ROW_ID else None
    assert a == b


def test_merge_delete_by_source_matches_pylance(spark, pair, merge_strategy):
    ours, ref = pair
    ids = list(range(0, 1000, 3))
    t = LanceTable(spark, ours)
    t.merge(source(spark, ids), "t.id = s.id").whenNotMatchedBySourceDelete().execute()
    info = t.lastCommit()
    lance.dataset(ref).merge_insert("id").when_not_matched_by_source_delete().execute(source_arrow(ids))
    assert_same_as_pylance(ours, ref)
    assert info.metrics["numDeletedRows"] == 980 - lance.dataset(ref).count_rows()
    # deletes only: no new fragment
    assert info.metrics["numAddedFragments"] == 0


def test_merge_all_clause_kinds(spark, pair, merge_strategy):
    """Delta semantics (no pylance equivalent for by-source update): clauses of a
    kind in order, first match wins."""
    ours, _ = pair
    t = LanceTable(spark, ours)
    src = source(spark, list(range(0, 20)) + [5000, 5001])
    (
        t.merge(src, "t.id = s.id")
        .whenMatchedDelete("t.id < 5")
        .whenMatchedUpdate("t.id < 10", {"name": "'first'"})
        .whenMatchedUpdate(None, {"name": "'second'", "score": "s.score"})
        .whenNotMatchedInsert("s.id = 5000", {"id": "s.id", "name": "'ins'"})
        .whenNotMatchedBySourceUpdate("t.id between 990 and 995", {"name": "concat(t.name, '!')"})
        .whenNotMatchedBySourceDelete("t.id >= 996")
        .execute()
    )
    rows = {r["id"]: r for r in lance.dataset(ours).to_table().to_pylist()}
    assert all(i not in rows for i in range(5))
    assert all(rows[i]["name"] == "first" for i in range(5, 10))
    assert all(rows[i]["name"] == "second" and rows[i]["score"] == i + 1000.0 for i in range(10, 20))
    assert rows[5000]["name"] == "ins" and rows[5000]["score"] is None and 5001 not in rows
    assert rows[991]["name"] == "n991!" and rows[990]["name"] is None and all(i not in rows for i in (996, 997, 998))
    assert 999 not in rows  # was deleted at the start
    m = t.lastCommit().metrics
    assert (m["numInsertedRows"], m["numDeletedRows"], m["numSourceRows"]) == (1, 5 + 3, 22)
    assert m["numUpdatedRows"] == 15 + 6


def test_merge_duplicate_match_error(spark, pair, merge_strategy):
    ours, _ = pair
    t = LanceTable(spark, ours)
    dup = spark.createDataFrame([(10, 1.0), (10, 2.0)], "id long, score double")
    with pytest.raises(DuplicateMatchError, match="several source rows"):
        t.merge(dup, "t.id = s.id").whenMatchedUpdate(set={"score": "s.score"}).execute()
    assert lance.dataset(ours).version == 2
    # allowed when no matched clause applies ...
    t.merge(dup, "t.id = s.id").whenMatchedUpdate("s.score > 100", {"score": "s.score"}).execute()
    # ... and for an unconditional delete
    t.merge(dup, "t.id = s.id").whenMatchedDelete().execute()
    assert lance.dataset(ours).to_table(filter="id = 10").num_rows == 0


def test_merge_column_mapping_errors_and_schema_evolution(spark, pair, merge_strategy):
    ours, _ = pair
    t = LanceTable(spark, ours)
    missing = spark.createDataFrame([(1, 2.0)], "id long, score double")
    with pytest.raises(SchemaMismatchError, match="no column"):
        t.merge(missing, "t.id = s.id").whenMatchedUpdateAll().execute()
    extra = source(spark, [1, 2000]).withColumn("extra", F.lit("x"))
    with pytest.raises(SchemaMismatchError, match="withSchemaEvolution"):
        t.merge(extra, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert lance.dataset(ours).version == 2
    t.merge(extra, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().execute()
    info = t.lastCommit()
    ds = lance.dataset(ours)
    assert ds.version == 4 and "extra" in ds.schema.names
    rows = {r["id"]: r["extra"] for r in ds.to_table(columns=["id", "extra"]).to_pylist()}
    assert rows[1] == "x" and rows[2000] == "x" and rows[3] is None
    assert info.metrics["schemaEvolvedInVersion"] == 3


@pytest.fixture
def plain_pair(tmp_path):
    """Identical pylance tables without stable row ids (_rowid = row address)."""
    ref = str(tmp_path / "ref.lance")
    lance.write_dataset(start_table(600), ref, max_rows_per_file=200)
    ours = str(tmp_path / "ours.lance")
    shutil.copytree(ref, ours)
    return ours, ref


def test_dml_without_stable_row_ids(spark, plain_pair, merge_strategy):
    ours, ref = plain_pair
    t = LanceTable(spark, ours)
    t.delete("id % 13 = 2")
    lance.dataset(ref).delete("id % 13 = 2")
    t.update("id % 10 = 1", {"score": "score + 0.5"})
    lance.dataset(ref).update({"score": "score + 0.5"}, where="id % 10 = 1")
    ids = list(range(580, 640))
    t.merge(source(spark, ids), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    lance.dataset(ref).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source_arrow(ids))
    assert lance.dataset(ours).version == lance.dataset(ref).version
    cols = ["id", "grp", "name", "score", "tags"]
    assert arrow_rows(lance.dataset(ours).to_table(columns=cols), ("id",)) == arrow_rows(lance.dataset(ref).to_table(columns=cols), ("id",))
    assert not LanceTable(spark, ours).detail().first()["stableRowIds"]


def test_dml_on_fragments_with_several_data_files(spark, pair):
    """After data evolution a fragment's columns live in several files: updates
    read the unassigned ones back from all of them."""
    ours, ref = pair
    LanceTable(spark, ours).addColumns({"extra": "id * 3"})
    lance.dataset(ref).add_columns({"extra": "id * 3"})
    LanceTable(spark, ours).update("id % 4 = 0", {"score": "score + extra"})
    lance.dataset(ref).update({"score": "score + extra"}, where="id % 4 = 0")
    LanceTable(spark, ours).delete("extra > 2900")
    lance.dataset(ref).delete("extra > 2900")
    assert_same_as_pylance(ours, ref)


def test_condition_with_a_shuffle_join_is_regrouped(spark, pair):
    """A condition with a subquery can plan a shuffle join between the scan and
    the per-fragment work; rows are then regrouped by fragment, nothing lost."""
    ours, ref = pair
    spark.range(0, 1000, 3).createOrReplaceTempView("victims")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        info = LanceTable(spark, ours).delete("id in (select id from victims)")
        LanceTable(spark, ours).update("id in (select id + 1 from victims)", {"score": "-1.0"})
        # (a merge's clause too: its broadcast path then shuffles by fragment)
        t = LanceTable(spark, ours)
        t.merge(source(spark, range(0, 300)), "t.id = s.id") \
            .whenMatchedUpdateAll("t.id in (select id + 2 from victims)").execute()
        merged = t.lastCommit()
        LanceTable(spark, ours).addColumns({"flag": "id in (select id + 2 from victims)"})
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
        spark.conf.unset("spark.sql.adaptive.enabled")
    lance.dataset(ref).delete("id % 3 = 0")
    lance.dataset(ref).update({"score": "-1.0"}, where="id % 3 = 1")
    r = lance.dataset(ref).merge_insert("id").when_matched_update_all("target.id % 3 = 2") \
        .execute(source_arrow(list(range(0, 300))))
    assert merged.metrics["numUpdatedRows"] == r["num_updated_rows"] > 50
    strategy = next(h["operationParameters"]["strategy"] for h in LanceTable(spark, ours).table.history()
                    if h["version"] == merged.version)
    assert strategy == "broadcast, shuffled by fragment"
    lance.dataset(ref).add_columns({"flag": "id % 3 = 2"})
    assert_same_as_pylance(ours, ref)
    assert info.metrics["numDeletedRows"] == 980 - lance.dataset(ref, version=3).count_rows()
