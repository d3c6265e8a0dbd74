"""The commit protocol without Spark: manifests pylance accepts, concurrent
appends from several processes, conflicts, memory:// stores."""
import os
import subprocess
import sys

import lance
import pyarrow as pa
import pytest

from lance_ops.errors import CommitConflictError
from lance_ops.format.schema import Schema
from lance_ops.format.writer import write_fragments
from lance_ops.storage import ObjectStore
from lance_ops.txn.commit import NewTable, commit
from lance_ops.txn.conflicts import describe_rules
from lance_ops.txn.log import TableLog, open_snapshot
from lance_ops.txn.operations import Append, Delete, Overwrite, Restore, Transaction

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def create(store, stable=True, rows=10):
    schema = Schema.from_arrow(pa.schema([("writer", pa.int64()), ("seq", pa.int64())]))
    batch = pa.record_batch({"writer": pa.array([-1] * rows, pa.int64()), "seq": pa.array(range(rows), pa.int64())})
    frags = list(write_fragments(store, schema, [batch], "2.2"))
    return commit(store, Transaction(0, Overwrite(frags, schema)), new_table=NewTable(stable_row_ids=stable))


def append(store, read_version, rows=5, writer=0):
    snap = open_snapshot(store, read_version)
    batch = pa.record_batch({"writer": pa.array([writer] * rows, pa.int64()), "seq": pa.array(range(rows), pa.int64())})
    frags = list(write_fragments(store, snap.schema, [batch], "2.2"))
    return commit(store, Transaction(read_version, Append(frags)))


def test_two_processes_appending(tmp_path, processes):
    p = str(tmp_path / "t.lance")
    store = ObjectStore(p)
    create(store)
    env = dict(os.environ, PYTHONPATH=ROOT)
    procs = [
        subprocess.Popen([sys.executable, "-m", "tests.txn.appender", p, str(w), "12", "7"], cwd=ROOT, env=env)
        for w in (1, 2)
    ]
    assert [pr.wait(timeout=300) for pr in procs] == [0, 0]
    log = TableLog(store)
    versions = [loc.version for loc in log.versions()]
    assert versions == list(range(1, 26))  # contiguous, nothing lost
    kinds = [log.read_transaction(v).operation.name for v in versions]
    assert kinds == ["Overwrite"] + ["Append"] * 24
    ds = lance.dataset(p)
    t = ds.to_table(with_row_id=True)
    assert t.num_rows == 10 + 2 * 12 * 7
    assert sorted(t["_rowid"].to_pylist()) == list(range(t.num_rows))  # unique, no gaps
    counts = pa.TableGroupBy(t, "writer").aggregate([("seq", "count")]).to_pylist()
    assert {r["writer"]: r["seq_count"] for r in counts} == {-1: 10, 1: 84, 2: 84}
    # every fragment id unique and max_fragment_id a high-water mark
    m = open_snapshot(store).manifest
    ids = [f.id for f in m.fragments]
    assert len(set(ids)) == len(ids) and m.max_fragment_id == max(ids)


def test_stale_append_is_rebased(tmp_path):
    store = ObjectStore(str(tmp_path / "t"))
    create(store)
    append(store, 1)
    r = append(store, 1)  # read version 1, but version 2 exists
    assert r.version == 3 and r.concurrent == 1
    assert r.transaction.read_version == 1  # compatible ops keep their read version
    t = lance.dataset(store.root).to_table(with_row_id=True)
    assert sorted(t["_rowid"].to_pylist()) == list(range(20))


def test_append_after_concurrent_overwrite_is_incompatible(tmp_path):
    store = ObjectStore(str(tmp_path / "t"))
    create(store)
    snap = open_snapshot(store)
    frags = list(write_fragments(store, snap.schema, [pa.record_batch({"writer": [1], "seq": [1]})], "2.2"))
    commit(store, Transaction(1, Overwrite(frags, snap.schema)))
    with pytest.raises(CommitConflictError) as e:
        append(store, 1)
    assert not e.value.retryable and e.value.conflicting_version == 2
    assert TableLog(store).latest_version() == 2


def test_missing_transaction_is_a_conflict(tmp_path):
    store = ObjectStore(str(tmp_path / "t"))
    create(store)
    # Version 2 written by a writer that recorded no transaction at all.
    r = append(store, 1)
    m = r.snapshot.manifest
    m.transaction_file = ""
    from lance_ops.format.manifest import encode_manifest_file

    data = encode_manifest_file(m, None, [])
    store.write_bytes(r.snapshot.naming.path(2), data)
    for name in os.listdir(os.path.join(store.root, "_transactions")):
        if name.startswith("1-"):
            os.unlink(os.path.join(store.root, "_transactions", name))
    # (another process's view: this store remembers what it committed)
    store = ObjectStore(store.root)
    snap = open_snapshot(store, 1)
    dv_frag = snap.fragments[0]
    with pytest.raises(CommitConflictError, match="missing transaction") as e:
        commit(store, Transaction(1, Delete([dv_frag], [], "x")))
    assert e.value.retryable


def test_memory_store_commits():
    store = ObjectStore("memory://lance_ops-test/t1")
    create(store, stable=False)
    append(store, 1)
    append(store, 1)
    snap = open_snapshot(store)
    assert snap.version == 3 and snap.num_rows() == 20
    assert not snap.stable_row_ids


def test_restore_keeps_high_water_marks(tmp_path):
    store = ObjectStore(str(tmp_path / "t"))
    create(store)
    append(store, 1)
    append(store, 2)
    r = commit(store, Transaction(3, Restore(1)))
    m = r.snapshot.manifest
    assert r.version == 4 and len(m.fragments) == 1
    assert m.next_row_id == 20 and m.max_fragment_id == 2
    ds = lance.dataset(store.root)
    assert ds.count_rows() == 10
    ds.insert(pa.table({"writer": [9], "seq": [9]}))
    assert max(lance.dataset(store.root).to_table(with_row_id=True)["_rowid"].to_pylist()) == 20


def test_rule_table_is_complete_and_readable():
    text = describe_rules()
    assert "Append" in text and "same_rows" in text
    from lance_ops.txn.conflicts import COLUMNS, RULES

    assert all(len(cells) == len(COLUMNS) for cells in RULES.values())
    assert set(COLUMNS) <= set(RULES)
