"""The staged-commit pipeline without Spark: checks (and their re-runs after
a rebase), re-runs on retryable conflicts with exact counts, the files of a
change that did not commit removed (and only those), commit properties, and
preceding commits."""
from __future__ import annotations

import os
import sys

import lance
import pyarrow as pa
import pytest

from lance_ops.errors import (
    CommitConflictError,
    CommitOutcomeUnknownError,
    InvalidArgumentError,
    LanceOpsError,
)
from lance_ops.format.deletion import read_deletion_vector, write_deletion_vector
from lance_ops.format.messages import copy_message
from lance_ops.format.schema import Schema
from lance_ops.format.writer import write_fragments
from lance_ops.storage import ObjectStore, commit_handler
from lance_ops.txn.commit import NewTable
from lance_ops.txn.log import open_snapshot
from lance_ops.txn.operations import Append, Delete, Merge, Overwrite, ReserveFragments
from lance_ops.txn.pipeline import StagedCommit, WriteOptions, execute, operation_files, snapshot_files
from lance_ops.txn.table import Table

SCHEMA = Schema.from_arrow(pa.schema([("id", pa.int64()), ("v", pa.int64())]))


def rows(start, n):
    return pa.record_batch({"id": pa.array(range(start, start + n), pa.int64()), "v": pa.array([0] * n, pa.int64())})


def files(p):
    return {os.path.relpath(os.path.join(r, f), p) for r, _, fs in os.walk(p) for f in fs}


@pytest.fixture
def store(tmp_path):
    """A table of two fragments (ids 0-9, 10-19), stable row ids, version 1."""
    s = ObjectStore(str(tmp_path / "t.lance"))
    frags = list(write_fragments(s, SCHEMA, [rows(0, 10), rows(10, 10)], "2.2", max_rows_per_fragment=10))
    info = execute(s, None, lambda snap: StagedCommit(Overwrite(frags, SCHEMA)), WriteOptions(new_table=NewTable()))
    assert info.version == 1
    return s


def staged_append(store, start=100, n=3, **kw):
    frags = list(write_fragments(store, SCHEMA, [rows(start, n)], "2.2"))
    return StagedCommit(Append(frags), {"numInsertedRows": n}, {"mode": "append"}, **kw)


def append_now(store, start=200):
    """Another writer's append, committed right away."""
    return execute(store, open_snapshot(store), lambda snap: staged_append(store, start))


def written(staged, snap):
    """The files a staged change wrote (what the pipeline owns)."""
    return operation_files(staged.operation) - snapshot_files(snap)


def staged_delete(store, snap, fragment_id, offsets, with_rows=False):
    frag = copy_message(snap.fragment(fragment_id))
    dv = read_deletion_vector(store, frag).extended(offsets)
    frag.deletion_file.CopyFrom(write_deletion_vector(store, fragment_id, snap.version, dv))
    from pyroaring import BitMap

    affected = {fragment_id: BitMap(offsets)} if with_rows else None
    return StagedCommit(Delete([frag], [], "test", affected_rows=affected), {"numDeletedRows": len(offsets)})


def test_commit_properties_reach_the_transaction_and_history(store):
    info = execute(store, open_snapshot(store), lambda snap: staged_append(store),
                   WriteOptions(commit_properties={"airflow_run_id": "r-1", "job": "ingest"}))
    assert (info.version, info.rebases, info.reruns, info.retries) == (2, 0, 0, 0)
    txn = lance.dataset(store.root).get_transactions(1)[0] if hasattr(lance.LanceDataset, "get_transactions") else None
    h = Table(store.root).history(limit=1)[0]
    assert h["userMetadata"] == {"airflow_run_id": "r-1", "job": "ingest"}
    assert h["operationParameters"] == {"mode": "append", "numFragments": "1"}
    assert h["operationMetrics"] == {"numInsertedRows": "3"}
    if txn is not None:  # pylance sees them as plain transaction properties
        assert txn.transaction_properties["airflow_run_id"] == "r-1"


@pytest.mark.parametrize("bad", [{"lance_ops.param.x": "1"}, {"__lance_commit_message": "m"}, {"": "x"}, ["k"]])
def test_reserved_or_malformed_commit_properties_are_refused(store, bad):
    before = files(store.root)
    with pytest.raises(InvalidArgumentError):
        execute(store, open_snapshot(store), lambda snap: staged_append(store), WriteOptions(commit_properties=bad))
    assert open_snapshot(store).version == 1
    assert files(store.root) - before == set()  # the staged data files were removed


def test_checks_run_again_after_every_rebase(store):
    """A concurrent append lands while the first run of the checks is going on:
    the put loses the race, the commit rebases and the checks run again on the
    state actually committed."""
    seen = []

    def check(ctx):
        seen.append((ctx.base.version, ctx.staged.version, ctx.rebases, len(ctx.staged.fragments)))
        if len(seen) == 1:
            append_now(store)

    info = execute(store, open_snapshot(store), lambda snap: staged_append(store), WriteOptions(checks=[check]))
    assert seen == [(1, 2, 0, 3), (2, 3, 1, 4)]
    assert (info.version, info.rebases, info.reruns, info.retries) == (3, 1, 0, 1)


def test_a_failing_check_commits_nothing_and_removes_the_files(store):
    staged = staged_append(store)
    written = operation_files(staged.operation)
    assert written <= files(store.root)

    def refuse(ctx):
        raise LanceOpsError("no")

    with pytest.raises(LanceOpsError, match="no"):
        execute(store, open_snapshot(store), lambda snap: staged, WriteOptions(checks=[refuse]))
    assert open_snapshot(store).version == 1
    assert not written & files(store.root)


def test_retryable_conflict_reruns_and_removes_the_first_attempts_files(store):
    """Two deletes of fragment 0 without row-level information: the second must
    re-run on the new version (exactly once); the deletion file of its first
    attempt is removed."""
    attempts = []

    def prepare(snap):
        if not attempts:  # another writer deletes from fragment 0 meanwhile
            execute(store, open_snapshot(store), lambda s: staged_delete(store, s, 0, [1]))
        staged = staged_delete(store, snap, 0, [1, 2, 3] if snap.version == 1 else [2, 3])
        attempts.append((snap.version, written(staged, snap)))
        return staged

    info = execute(store, open_snapshot(store), prepare)
    assert [v for v, _ in attempts] == [1, 2]
    assert (info.version, info.reruns, info.rebases, info.retries) == (3, 1, 0, 1)
    assert not attempts[0][1] & files(store.root)  # first attempt's deletion file removed
    assert attempts[1][1] <= files(store.root)
    assert sorted(lance.dataset(store.root).to_table()["id"].to_pylist()) == [0] + list(range(4, 20))


def test_row_level_rebase_removes_the_superseded_deletion_file(store):
    """Disjoint deletes in one fragment with row-level information: one rebase,
    no re-run; the merged vector replaces ours, whose file is removed."""
    snap = open_snapshot(store)
    staged = staged_delete(store, snap, 0, [5, 6], with_rows=True)
    mine = written(staged, snap)
    assert len(mine) == 1
    execute(store, open_snapshot(store), lambda s: staged_delete(store, s, 0, [1], with_rows=True))
    info = execute(store, snap, lambda s: staged)
    assert (info.version, info.rebases, info.reruns) == (3, 1, 0)
    assert not mine & files(store.root)
    assert sorted(lance.dataset(store.root).to_table()["id"].to_pylist()) == [0, 2, 3, 4] + list(range(7, 20))


def test_incompatible_conflict_raises_and_leaves_no_trace(store):
    snap = open_snapshot(store)
    staged = staged_delete(store, snap, 0, [1])
    mine = written(staged, snap)
    assert len(mine) == 1
    frags = list(write_fragments(store, SCHEMA, [rows(500, 2)], "2.2"))
    execute(store, snap, lambda s: StagedCommit(Overwrite(frags, SCHEMA)))  # another writer overwrites
    with pytest.raises(CommitConflictError) as e:
        execute(store, snap, lambda s: staged)
    assert not e.value.retryable and e.value.conflicting_version == 2
    assert open_snapshot(store).version == 2 and not mine & files(store.root)


def test_reruns_are_bounded(store):
    calls = []

    def prepare(snap):
        calls.append(snap.version)
        execute(store, open_snapshot(store), lambda s: staged_delete(store, s, 1, [len(calls)]))  # always one ahead
        return staged_delete(store, snap, 1, [9])

    with pytest.raises(CommitConflictError, match="conflictRetries=2"):
        execute(store, open_snapshot(store), prepare, WriteOptions(retries=2))
    assert calls == [1, 2, 3]


def test_unknown_commit_outcome_keeps_the_files(store, monkeypatch):
    """An error from the store during the put may hide a successful commit:
    the change's files must stay (vacuum removes them if they are orphans)."""
    monkeypatch.setattr("lance_ops.txn.commit.MAX_SETTLE_BACKOFF_S", 0.0)
    staged = staged_append(store)
    written = operation_files(staged.operation)

    def broken(*a, **k):
        raise OSError("connection reset")

    monkeypatch.setattr(commit_handler(store), "commit", broken)
    with pytest.raises(CommitOutcomeUnknownError) as e:
        execute(store, open_snapshot(store), lambda s: staged)
    assert isinstance(e.value.__cause__, OSError) and e.value.version == 2
    assert written <= files(store.root)


def test_reusable_change_is_committed_again_without_preparing(store):
    """An overwrite does not depend on what it read: after a concurrent
    overwrite (retryable) the same files commit on the latest version."""
    snap = open_snapshot(store)
    frags = list(write_fragments(store, SCHEMA, [rows(700, 2)], "2.2"))
    calls = []

    def prepare(s):
        calls.append(s.version)
        return StagedCommit(Overwrite(frags, SCHEMA), reusable=True)

    other = list(write_fragments(store, SCHEMA, [rows(800, 1)], "2.2"))
    execute(store, snap, lambda s: StagedCommit(Overwrite(other, SCHEMA)))
    info = execute(store, snap, prepare)
    assert calls == [1] and (info.version, info.reruns) == (3, 1)
    assert lance.dataset(store.root).to_table()["id"].to_pylist() == [700, 701]


def test_preceding_commits_and_finish(store):
    """``before`` commits first (here: a schema-only Merge adding a column and
    a fragment-id reservation), ``finish`` sees their results, the main
    transaction reads the version they made."""
    snap = open_snapshot(store)
    schema = SCHEMA.copy()
    from lance_ops.format.schema import field_from_arrow

    schema.fields.append(field_from_arrow(pa.field("w", pa.string())))
    schema.assign_ids(2)
    seen = []
    staged = staged_append(store)
    staged.flow.before = [Merge(list(snap.fragments), schema), ReserveFragments(2)]
    staged.flow.finish = lambda results: seen.extend(r.version for r in results)
    info = execute(store, snap, lambda s: staged)
    assert seen == [2, 3] and info.version == 4 and info.rebases == 0
    ds = lance.dataset(store.root)
    assert ds.schema.names == ["id", "v", "w"] and ds.count_rows() == 23
    assert ds.get_transactions(1)[0].read_version == 3 if hasattr(ds, "get_transactions") else True


def test_prepare_returning_none_commits_nothing(store):
    info = execute(store, open_snapshot(store), lambda s: None)
    assert info.version is None and info.readVersion == 1 and open_snapshot(store).version == 1


def test_pipeline_imports_without_spark(processes):
    """In a fresh interpreter that cannot import pyspark at all."""
    import subprocess

    code = (
        "import sys\n"
        "class B:\n"
        "    def find_spec(self, n, p=None, t=None):\n"
        "        if n == 'pyspark' or n.startswith('pyspark.'): raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, B())\n"
        "import lance_ops\n"
        "from lance_ops import Table\n"
        "import lance_ops.txn.pipeline, lance_ops.txn.table, lance_ops.txn.vacuum, lance_ops.txn.compaction\n"
        "import lance_ops.txn.conflicts, lance_ops.txn.build, lance_ops.storage.commit, lance_ops.cli.table\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
