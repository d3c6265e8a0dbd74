"""The change feed with Delta's semantics (issue 30 item 10): ``t.changes`` and
``spark.read.format("lance").option("readChangeFeed", ...)`` against

* a model that applies the same operations to a dict (what Delta's change
  feed reports for them: inserts, pre/post images of updates, deletes);
* pylance reads of the two versions each version sits between (rows paired by
  ``_rowid``: new ones inserted, gone ones deleted, ones whose
  ``_row_last_updated_at_version`` moved updated) -- also through
  compactions, column rewrites and a restore;

written by both engines; no files are written by reading the feed; only
changed rows are read; version filters prune fragments in the data source."""
import datetime
import os

import lance
import pytest
from pyspark.sql import functions as F
from pyspark.sql.datasource import GreaterThan

from lance_ops import LanceTable
from lance_ops.errors import InvalidArgumentError, TableNotFoundError, UnsupportedFeatureError
from lance_ops.format.proto import table_pb2
from lance_ops.format.scan import ROW_ID, ROW_UPDATED
from lance_ops.spark.datasource import LanceScanReaderWithPushdown, ReadOptions
from lance_ops.spark.frames import table_spark_schema
from lance_ops.storage.objectstore import ObjectStore
from lance_ops.txn.changefeed import plan_feed
from lance_ops.txn.log import open_snapshot

DDL = "id long, x long"
LINEAGE = ["_row_created_at_version", "_row_last_updated_at_version"]
CDF = ["_change_type", "_commit_version", "_commit_timestamp"]


def rows(spark, ids):
    return spark.createDataFrame([(i, i) for i in ids], DDL)


class Model:
    """What Delta's change feed says of each version: (change, id, x)."""

    def __init__(self):
        self.rows: dict[int, int] = {}
        self.events: dict[int, list] = {}

    def record(self, version, before: dict, after: dict, updated=()):
        ev = [("delete", k, v) for k, v in before.items() if k not in after]
        ev += [("insert", k, v) for k, v in after.items() if k not in before]
        for k in updated:
            ev += [("update_preimage", k, before[k]), ("update_postimage", k, after[k])]
        self.events[version] = ev
        self.rows = dict(after)

    def between(self, start, end):
        return sorted((v, *e) for v, evs in self.events.items() if start < v <= end for e in evs)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    """A table changed by both engines, with the model of every version."""
    p = str(tmp_path_factory.mktemp("changes") / "t.lance")
    m = Model()
    t = LanceTable.create(spark, p, rows(spark, range(30)).coalesce(1), maxRowsPerFragment=10)
    m.record(t.version, {}, {i: i for i in range(30)})

    def step(change, updated=(), after=None):
        before = dict(m.rows)
        change()
        v = lance.dataset(p).version
        m.record(v, before, after(before) if after else before, updated)
        return v

    step(lambda: t.refresh().append(rows(spark, range(30, 40))),
         after=lambda b: {**b, **{i: i for i in range(30, 40)}})
    step(lambda: t.refresh().update("id < 5", {"x": "x + 100"}), updated=range(5),
         after=lambda b: {k: v + 100 if k < 5 else v for k, v in b.items()})
    step(lambda: lance.dataset(p).delete("id = 3 or id = 31"),
         after=lambda b: {k: v for k, v in b.items() if k not in (3, 31)})
    src = spark.createDataFrame([(i, -1) for i in (20, 21, 22, 500, 501)], DDL)
    step(lambda: t.refresh().merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(),
         updated=(20, 21, 22), after=lambda b: {**b, 20: -1, 21: -1, 22: -1, 500: -1, 501: -1})
    step(lambda: lance.dataset(p).update({"x": "x * 10"}, where="id = 25"), updated=(25,),
         after=lambda b: {**b, 25: 250})
    # compaction (ours): rows move, nothing changes
    t.refresh().optimize().executeCompaction(targetRowsPerFragment=100)
    m.events[lance.dataset(p).version] = []
    step(lambda: t.refresh().delete("id >= 35 and id < 40"),
         after=lambda b: {k: v for k, v in b.items() if not 35 <= k < 40})
    src = spark.createDataFrame([(0, 0), (600, 6)], DDL)
    step(lambda: t.refresh().merge(src, "t.id = s.id").whenMatchedDelete().whenNotMatchedInsertAll().execute(),
         after=lambda b: {**{k: v for k, v in b.items() if k != 0}, 600: 6})
    # an in-place column rewrite: rows stay, lineage marks the rewritten ones
    step(lambda: t.refresh().rewriteColumns({"x": "x + 1"}, condition="id = 10"), updated=(10,),
         after=lambda b: {**b, 10: 11})
    lance.dataset(p).optimize.compact_files(target_rows_per_fragment=100)  # pylance's compaction
    m.events[lance.dataset(p).version] = []
    step(lambda: lance.dataset(p).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
         .execute(__import__("pyarrow").table({"id": [7, 700], "x": [77, 700]})),
         updated=(7,), after=lambda b: {**b, 7: 77, 700: 700})
    return p, m


def feed(df):
    return sorted((r._commit_version, r._change_type, r.id, r.x) for r in df.collect())


def test_changes_match_the_model(spark, history):
    p, m = history
    latest = lance.dataset(p).version
    t = LanceTable(spark, p)
    df = t.changes(0)
    assert df.columns == ["id", "x", *CDF]
    assert feed(df) == m.between(0, latest)
    for s, e in [(2, 3), (3, 6), (6, 9), (9, latest), (4, 4), (latest - 1, latest)]:
        assert feed(t.changes(s, e)) == m.between(s, e), (s, e)


def oracle(path, v):
    """The feed of version ``v`` from pylance reads of ``v - 1`` and ``v``."""
    def read(version):
        if version < 1:
            return {}
        ds = lance.dataset(path, version=version)
        return {r["_rowid"]: r for r in ds.to_table(columns=["id", "x", *LINEAGE], with_row_id=True).to_pylist()}

    before, after = read(v - 1), read(v)
    out = []
    for rid, r in before.items():
        if rid not in after:
            out.append(("delete", rid, r["id"], r["x"]))
        elif after[rid]["_row_last_updated_at_version"] != r["_row_last_updated_at_version"]:
            out.append(("update_preimage", rid, r["id"], r["x"]))
            a = after[rid]
            out.append(("update_postimage", rid, a["id"], a["x"]))
    out += [("insert", rid, r["id"], r["x"]) for rid, r in after.items() if rid not in before]
    return sorted(out)


def test_each_version_matches_pylance_reads(spark, history, tmp_path):
    p, _ = history
    work = str(tmp_path / "t.lance")
    import shutil

    shutil.copytree(p, work)
    t = LanceTable(spark, work)
    t.addColumns({"y": "x * 2"})  # lineage: every rewritten row updated
    t.refresh().restoreToVersion(5)  # brings back deleted rows, undoes later updates
    lance.dataset(work).delete("id = 4")
    latest = lance.dataset(work).version
    t = LanceTable(spark, work)
    for v in range(1, latest + 1):
        got = sorted((r._change_type, r._rowid, r.id, r.x) for r in t.changes(v - 1, v, withRowId=True).collect())
        assert got == oracle(work, v), v


def test_commit_columns_and_no_files_written(spark, history):
    p, _ = history
    before = {os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs}
    df = spark.read.format("lance").option("readChangeFeed", "true").option("startingVersion", 1).load(p)
    assert [f.name for f in df.schema.fields][-3:] == CDF
    assert dict((f.name, f.dataType.simpleString()) for f in df.schema.fields)["_commit_timestamp"] == "timestamp"
    got = {r[0]: r[1] for r in df.select("_commit_version", F.unix_micros("_commit_timestamp")).distinct().collect()}
    want = {}
    for v in got:
        ts = open_snapshot(ObjectStore(p), v).manifest.timestamp
        want[v] = ts.seconds * 1_000_000 + ts.nanos // 1000
    assert got == want
    assert {os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs} == before


def test_reader_options_as_delta(spark, history):
    p, m = history
    latest = lance.dataset(p).version

    def read():
        return spark.read.format("lance").option("readChangeFeed", "true")

    # startingVersion is inclusive; endingVersion too
    assert feed(read().option("startingVersion", 3).option("endingVersion", 5).load(p)) == m.between(2, 5)
    assert feed(read().option("startingVersion", 0).load(p)) == m.between(0, latest)
    # timestamps: the first version committed at/after the start, the last at/before the end
    ts = {v: open_snapshot(ObjectStore(p), v).manifest.timestamp for v in (3, 5)}
    # (local time, as Spark's default session time zone reads a string; exact to the microsecond)
    iso = {v: (datetime.datetime.fromtimestamp(t.seconds) + datetime.timedelta(microseconds=t.nanos // 1000)).isoformat()
           for v, t in ts.items()}
    df = read().option("startingTimestamp", iso[3]).option("endingTimestamp", iso[5]).load(p)
    assert feed(df) == m.between(2, 5)
    t = LanceTable(spark, p)
    assert feed(t.changes(startingTimestamp=iso[3].replace("T", " "), endVersion=5)) == m.between(2, 5)
    for opts, err in [({}, "startingVersion or startingTimestamp"),
                      ({"startingVersion": 1, "startingTimestamp": iso[3]}, "not both"),
                      ({"startingVersion": latest + 1}, "after the latest"),
                      ({"startingVersion": 5, "endingVersion": 3}, "cannot be before")]:
        r = read()
        for k, v in opts.items():
            r = r.option(k, v)
        with pytest.raises(Exception, match=err):
            r.load(p).collect()


def test_argument_errors(spark, history):
    p, _ = history
    t = LanceTable(spark, p)
    latest = lance.dataset(p).version
    with pytest.raises(InvalidArgumentError, match="after endVersion"):
        t.changes(4, 2)
    with pytest.raises(InvalidArgumentError, match="startVersion"):
        t.changes(-1)
    with pytest.raises(InvalidArgumentError, match="endVersion"):
        t.changes(0, "3")
    with pytest.raises(TableNotFoundError, match=f"version {latest + 1}"):
        t.changes(1, latest + 1)
    # a time-travel handle ends at its own version by default
    assert {r.id for r in LanceTable(spark, p, version=3).changes(2).collect()} == set(range(5))


def test_needs_stable_row_ids(spark, tmp_path):
    p = str(tmp_path / "plain.lance")
    t = LanceTable.create(spark, p, rows(spark, range(3)), stableRowIds=False)
    with pytest.raises(UnsupportedFeatureError, match="stable row ids"):
        t.changes(0)


def test_only_changed_rows_are_planned(spark, tmp_path):
    """A delete of one row in a 40-fragment table plans one item reading one
    offset of the version before; an update reads the moved rows only."""
    p = str(tmp_path / "wide.lance")
    t = LanceTable.create(spark, p, rows(spark, range(400)).coalesce(1), maxRowsPerFragment=10)
    t.delete("id = 123")
    plan = plan_feed(ObjectStore(p), t.version - 1, t.version)
    assert len(plan.items) == 1
    item = plan.items[0]
    assert list(item.before_offsets) == [3] and item.weight == 1
    t.update("id in (5, 305)", {"x": "0"})
    plan = plan_feed(ObjectStore(p), t.version - 1, t.version)
    assert sum(i.weight for i in plan.items) == 4  # 2 rows gone from 2 fragments, 2 in the new one
    assert sorted(int(x) for i in plan.items for x in i.changed_ids) == [5, 5, 305, 305]


def test_version_filter_prunes_fragments(history):
    """A pushed ``_row_last_updated_at_version > 5`` plans only fragments whose
    lineage bounds allow such rows (the data source's lineage pruning)."""
    table, _ = history
    snap = open_snapshot(ObjectStore(table))
    schema = table_spark_schema(snap, (ROW_ID, ROW_UPDATED))
    reader = LanceScanReaderWithPushdown(ReadOptions(path=table), snap.version, schema)
    v = snap.version - 1
    assert list(reader.pushFilters([GreaterThan((ROW_UPDATED,), v)])) == [GreaterThan((ROW_UPDATED,), v)]
    planned = {
        table_pb2.DataFragment.FromString(b).id for part in reader.partitions() for b, _, _ in part.pieces
    }
    ds = lance.dataset(table)
    changed = ds.to_table(columns=[], with_row_address=True, filter=f"_row_last_updated_at_version > {v}")
    assert planned == {a >> 32 for a in changed["_rowaddr"].to_pylist()}
    assert len(planned) < len(snap.fragments)
