"""Faults at the commit point, without Spark: a store that applies the
manifest put and loses its answer (reports "exists" on the retry, or an
error), a store that cannot be asked afterwards, files removed under a
writer before it commits. Every acknowledged change is in the table exactly
once, readable by pylance; an undecidable outcome is
CommitOutcomeUnknownError and keeps every file."""
from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest

from lance_ops.errors import CommitConflictError, CommitOutcomeUnknownError
from lance_ops.format.schema import Schema
from lance_ops.format.writer import write_fragments
from lance_ops.storage import ObjectStore, commit_handler
from lance_ops.storage.commit import LocalCommitHandler
from lance_ops.txn.commit import NewTable
from lance_ops.txn.log import TableLog, open_snapshot
from lance_ops.txn.operations import Append, Overwrite, Update
from lance_ops.txn.pipeline import StagedCommit, WriteOptions, execute, operation_files
from lance_ops.txn.table import Table
from tests.txn.test_pipeline import files, rows, staged_append, staged_delete

SCHEMA = Schema.from_arrow(pa.schema([("id", pa.int64()), ("v", pa.int64())]))


@pytest.fixture(autouse=True)
def _quick_settle(monkeypatch):
    monkeypatch.setattr("lance_ops.txn.commit.MAX_SETTLE_BACKOFF_S", 0.0)


@pytest.fixture
def store(tmp_path):
    s = ObjectStore(str(tmp_path / "t.lance"))
    frags = list(write_fragments(s, SCHEMA, [rows(0, 10), rows(10, 10)], "2.2", max_rows_per_fragment=10))
    execute(s, None, lambda snap: StagedCommit(Overwrite(frags, SCHEMA)), WriteOptions(new_table=NewTable()))
    return s


class LostAnswers:
    """Makes the next ``n`` manifest puts of ``store``'s handler apply and
    then lose their answer: ``mode`` "exists" -- the retry finds the name
    taken (what s3fs reports after a lost 200: FileExistsError -> False);
    "error" -- a transport error reaches the caller."""

    def __init__(self, monkeypatch, store, n=1, mode="exists"):
        self.left, self.mode, self.calls = n, mode, 0
        original = type(commit_handler(store)).put_if_not_exists

        def put(handler, rel, data):
            self.calls += 1
            done = original(handler, rel, data)
            if self.left and rel.startswith("_versions/") and done:
                self.left -= 1
                if self.mode == "exists":
                    return False
                raise ConnectionResetError("connection reset by peer (the put was applied)")
            return done

        monkeypatch.setattr(type(commit_handler(store)), "put_if_not_exists", put)


def ids(store):
    return sorted(lance.dataset(store.root).to_table()["id"].to_pylist())


@pytest.mark.parametrize("mode", ["exists", "error"])
def test_a_lost_answer_on_append_commits_once(store, monkeypatch, mode):
    LostAnswers(monkeypatch, store, mode=mode)
    info = execute(store, open_snapshot(store), lambda s: staged_append(store, 100, 3))
    assert (info.version, info.rebases, info.reruns) == (2, 0, 0)
    assert [loc.version for loc in TableLog(store).versions()] == [1, 2]
    assert ids(store) == list(range(20)) + [100, 101, 102]  # once, not twice
    assert lance.dataset(store.root).version == 2


@pytest.mark.parametrize("mode", ["exists", "error"])
def test_a_lost_answer_on_delete_keeps_its_deletion_file(store, monkeypatch, mode):
    """Before: the delete was re-run as a conflict with itself, its first
    deletion file removed -- the committed version named a missing file."""
    snap = open_snapshot(store)
    LostAnswers(monkeypatch, store, mode=mode)
    staged = staged_delete(store, snap, 0, [1, 2])
    mine = operation_files(staged.operation)
    info = execute(store, snap, lambda s: staged)
    assert (info.version, info.reruns) == (2, 0)
    assert mine <= files(store.root)
    assert ids(store) == [0] + list(range(3, 20))
    assert lance.dataset(store.root).validate() is None


def test_a_lost_answer_on_an_update_leaves_a_readable_table(store, monkeypatch):
    snap = open_snapshot(store)
    new = list(write_fragments(store, SCHEMA, [pa.record_batch({"id": pa.array([5], pa.int64()),
                                                                 "v": pa.array([9], pa.int64())})], "2.2"))
    deleted = staged_delete(store, snap, 0, [5]).operation.updated_fragments
    op = Update(removed_fragment_ids=[], updated_fragments=deleted, new_fragments=new)
    LostAnswers(monkeypatch, store, mode="error")
    info = execute(store, snap, lambda s: StagedCommit(op))
    assert info.version == 2
    t = lance.dataset(store.root).to_table().to_pylist()
    assert sorted((r["id"], r["v"]) for r in t) == sorted([(i, 0) for i in range(20) if i != 5] + [(5, 9)])


def test_a_put_that_failed_before_reaching_the_store_is_put_again(store, monkeypatch):
    calls = []
    original = LocalCommitHandler.put_if_not_exists

    def flaky(handler, rel, data):
        calls.append(rel)
        if len(calls) == 1:
            raise ConnectionResetError("reset before the request was sent")
        return original(handler, rel, data)

    monkeypatch.setattr(LocalCommitHandler, "put_if_not_exists", flaky)
    info = execute(store, open_snapshot(store), lambda s: staged_append(store, 100, 1))
    assert info.version == 2 and len(calls) == 2
    assert ids(store) == list(range(20)) + [100]


def test_another_writers_version_is_still_a_lost_race(store, monkeypatch):
    """The settle step must not take a concurrent writer's version for ours:
    the put raises, another writer holds the version, ours rebases on top."""
    snap = open_snapshot(store)
    original = LocalCommitHandler.put_if_not_exists
    state = {"first": True}

    def racing(handler, rel, data):
        if state["first"] and rel.startswith("_versions/"):
            state["first"] = False
            execute(store, open_snapshot(store), lambda s: staged_append(store, 300, 1))  # lands as v2
            raise ConnectionResetError("reset")
        return original(handler, rel, data)

    monkeypatch.setattr(LocalCommitHandler, "put_if_not_exists", racing)
    info = execute(store, snap, lambda s: staged_append(store, 100, 1))
    assert (info.version, info.rebases) == (3, 1)
    assert ids(store) == list(range(20)) + [100, 300]


def test_an_undecidable_outcome_is_unknown_and_resolvable_later(store, monkeypatch):
    """The put is applied, then the store answers nothing at all for a while:
    CommitOutcomeUnknownError (version, transaction uuid), every file kept,
    no second copy; once the store answers, resolveCommit finds the version."""
    snap = open_snapshot(store)
    staged = staged_append(store, 100, 2)
    mine = operation_files(staged.operation)
    original = LocalCommitHandler.put_if_not_exists
    down = {"on": False}

    def apply_then_die(handler, rel, data):
        if down["on"]:
            raise TimeoutError("the store is unreachable")
        original(handler, rel, data)
        down["on"] = True
        raise ConnectionResetError("reset after the put was applied")

    real_read = ObjectStore.read_bytes

    def read(self, rel):
        if down["on"]:
            raise TimeoutError("the store is unreachable")
        return real_read(self, rel)

    monkeypatch.setattr(LocalCommitHandler, "put_if_not_exists", apply_then_die)
    monkeypatch.setattr(ObjectStore, "read_bytes", read)
    with pytest.raises(CommitOutcomeUnknownError) as e:
        execute(store, snap, lambda s: staged)
    err = e.value
    assert err.version == 2 and err.operation == "Append" and err.transaction_uuid in str(err)
    monkeypatch.undo()
    assert mine <= files(store.root)
    t = Table(store.root)
    assert t.resolveCommit(err.transaction_uuid, err.version) == 2
    assert t.resolveCommit(err.transaction_uuid) == 2
    assert t.history(limit=1)[0]["transactionUuid"] == err.transaction_uuid
    assert ids(store) == list(range(20)) + [100, 101]


def test_an_undecidable_outcome_that_did_not_commit_resolves_to_none(store, monkeypatch):
    snap = open_snapshot(store)

    def dead(handler, rel, data):
        raise TimeoutError("the store is unreachable")

    monkeypatch.setattr(LocalCommitHandler, "put_if_not_exists", dead)
    with pytest.raises(CommitOutcomeUnknownError) as e:
        execute(store, snap, lambda s: staged_append(store, 100, 1))
    monkeypatch.undo()
    t = Table(store.root)
    assert t.version == 1
    assert t.resolveCommit(e.value.transaction_uuid, e.value.version) is None
    assert t.resolveCommit(e.value.transaction_uuid) is None


def test_an_interrupt_during_the_put_keeps_the_files(store, monkeypatch):
    staged = staged_append(store, 100, 1)
    mine = operation_files(staged.operation)

    def interrupted(handler, rel, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalCommitHandler, "put_if_not_exists", interrupted)
    with pytest.raises(KeyboardInterrupt):
        execute(store, open_snapshot(store), lambda s: staged)
    assert mine <= files(store.root)


def test_files_removed_before_the_commit_are_never_published(store):
    """A vacuum with its retention check overridden removes a write in
    progress: the commit notices (one stat per new file) and prepares the
    change again instead of publishing a version naming missing files."""
    prepared = []

    def prepare(snap):
        staged = staged_append(store, 100 + len(prepared), 1)
        prepared.append(operation_files(staged.operation))
        if len(prepared) == 1:
            for rel in prepared[0]:
                os.remove(os.path.join(store.root, rel))  # the racing vacuum
        return staged

    info = execute(store, open_snapshot(store), prepare)
    assert (info.version, info.reruns) == (2, 1)
    assert ids(store) == list(range(20)) + [101]
    assert lance.dataset(store.root).validate() is None


def test_reusable_changes_are_prepared_again_when_their_files_vanish(store):
    calls = []

    def prepare(snap):
        frags = list(write_fragments(store, SCHEMA, [rows(500 + len(calls), 1)], "2.2"))
        calls.append(1)
        if len(calls) == 1:
            for f in frags:
                os.remove(os.path.join(store.root, "data", f.files[0].path))
        return StagedCommit(Overwrite(frags, SCHEMA), reusable=True)

    info = execute(store, open_snapshot(store), prepare)
    assert len(calls) == 2 and info.version == 2
    assert ids(store) == [501]


def test_missing_files_give_up_after_the_retries(store):
    def prepare(snap):
        staged = staged_append(store, 100, 1)
        for rel in operation_files(staged.operation):
            os.remove(os.path.join(store.root, rel))
        return staged

    with pytest.raises(CommitConflictError, match="removed before it committed"):
        execute(store, open_snapshot(store), prepare, WriteOptions(retries=1))
    assert open_snapshot(store).version == 1


def test_append_through_the_table_core_after_a_lost_answer(store, monkeypatch):
    """The handle moves to the version it committed (not a phantom later one)."""
    t = Table(store.root)
    LostAnswers(monkeypatch, t.store, mode="exists")
    info = t.execute(lambda s: StagedCommit(Append(list(write_fragments(t.store, SCHEMA, [rows(100, 1)], "2.2")))))
    assert info.version == t.version == 2
