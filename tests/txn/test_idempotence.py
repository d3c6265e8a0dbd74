"""Idempotent writes (Delta's txnAppId / txnVersion) without Spark: a write
whose version is not newer than the last committed for its app id is
skipped (nothing committed, its files removed); the watermark is in the
table config of the version that committed it, survives pylance's later
commits, and two retries of one write racing each other land once."""
from __future__ import annotations

import threading

import lance
import pyarrow as pa
import pytest

from lance_ops.errors import InvalidArgumentError
from lance_ops.format.writer import write_fragments
from lance_ops.txn.operations import Append
from lance_ops.txn.pipeline import StagedCommit, operation_files
from lance_ops.txn.table import Table
from tests.txn.test_commit_faults import SCHEMA, store  # noqa: F401 (fixture)
from tests.txn.test_pipeline import files, rows


def appender(t: Table, start: int, seen: list | None = None):
    def prepare(snap):
        staged = StagedCommit(Append(list(write_fragments(t.store, SCHEMA, [rows(start, 2)], "2.2"))))
        if seen is not None:
            seen.append(operation_files(staged.operation))
        return staged
    return prepare


def ids(store):  # noqa: F811
    return sorted(lance.dataset(store.root).to_table()["id"].to_pylist())


def test_a_repeated_write_is_skipped(store):  # noqa: F811
    t = Table(store.root)
    info = t.execute(appender(t, 100), txnAppId="ingest", txnVersion=1)
    assert info.version == 2 and info.skipped is None
    assert t.txnVersion("ingest") == 1 and t.txnVersion("other") is None
    assert lance.dataset(store.root).config()["lance_ops.txn.ingest"] == "1"  # what pylance sees
    params = t.history(limit=1)[0]["operationParameters"]
    assert (params["txnAppId"], params["txnVersion"]) == ("ingest", "1")
    before = files(store.root)
    for again in (1, 0):
        info = t.execute(appender(t, 200), txnAppId="ingest", txnVersion=again)
        assert info.version is None and "skipped" in info.skipped and "ingest" in info.skipped
    assert files(store.root) == before  # nothing prepared: the handle's version already held it
    info = t.execute(appender(t, 300), txnAppId="ingest", txnVersion=2)
    assert info.version == 3 and t.txnVersion("ingest") == 2
    assert ids(store) == list(range(20)) + [100, 101, 300, 301]
    # other app ids are independent
    assert t.execute(appender(t, 400), txnAppId="backfill", txnVersion=0).version == 4


def test_the_watermark_survives_other_writers(store):  # noqa: F811
    t = Table(store.root)
    t.execute(appender(t, 100), txnAppId="job", txnVersion=7)
    lance.write_dataset(pa.table({"id": pa.array([900], pa.int64()), "v": pa.array([0], pa.int64())}), store.root,
                        mode="append")
    t.setProperties({"owner": "team"})
    assert lance.dataset(store.root).config()["lance_ops.txn.job"] == "7"
    t.refresh()
    assert t.execute(appender(t, 500), txnAppId="job", txnVersion=7).skipped
    assert ids(store) == list(range(20)) + [100, 101, 900]


def test_a_write_learns_the_watermark_at_commit(store):  # noqa: F811
    """Another retry of the same write lands while this one is prepared: the
    pre-commit check (run again after the rebase) skips it; its files go."""
    from tests.helpers import commits_during

    mine, other = Table(store.root), Table(store.root)
    seen: list = []
    with commits_during(lambda: other.execute(appender(other, 100), txnAppId="job", txnVersion=3)):
        info = mine.execute(appender(mine, 200, seen), txnAppId="job", txnVersion=3)
    assert info.version is None and info.skipped
    assert not seen[0] & files(store.root)
    assert ids(store) == list(range(20)) + [100, 101]


def test_two_retries_racing_land_once(store):  # noqa: F811
    """Both pass their first check before either commits; one wins the
    manifest put, the other rebases over it, its check runs again and stops."""
    barrier = threading.Barrier(2, timeout=30)
    results = []

    def wait_once(ctx):
        if ctx.rebases == 0:
            barrier.wait()

    def run(start):
        t = Table(store.root)
        t.checks.append(wait_once)
        results.append(t.execute(appender(t, start), txnAppId="retry", txnVersion=1))

    threads = [threading.Thread(target=run, args=(s,)) for s in (100, 200)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(r.version is None for r in results) == [False, True]
    assert len([i for i in ids(store) if i >= 100]) == 2
    assert Table(store.root).version == 2


@pytest.mark.parametrize("app,version", [("a", None), (None, 1), ("", 1), ("a", -1), ("a", "x"), ("a", True)])
def test_bad_txn_arguments(store, app, version):  # noqa: F811
    t = Table(store.root)
    with pytest.raises(InvalidArgumentError):
        t.execute(appender(t, 100), txnAppId=app, txnVersion=version)
    assert t.version == 1


def test_history_with_a_limit_reads_that_many_manifests(store, monkeypatch):  # noqa: F811
    """history(limit=n) costs n manifest reads, not one per version (a
    streaming table has tens of thousands)."""
    from lance_ops.storage import ObjectStore

    t = Table(store.root)
    for i in range(30):
        t.setProperties({"k": str(i)})
    reads = []
    real = ObjectStore.read_bytes

    def counting(self, rel):
        reads.append(rel)
        return real(self, rel)

    monkeypatch.setattr(ObjectStore, "read_bytes", counting)
    rows = Table(store.root).history(limit=3)
    assert [r["version"] for r in rows] == [31, 30, 29]
    manifests = [r for r in reads if r.startswith("_versions/")]
    assert len(manifests) <= 4, manifests  # the 3 newest (+ the latest, when the handle opens)


def test_vacuum_of_hundreds_of_versions_keeps_what_pylance_keeps(tmp_path):
    """Vacuum no longer reads the versions it removes (linear in the number
    of versions): on 400 versions with data files appended and deleted along
    the way, it leaves exactly the files pylance's cleanup leaves on a copy."""
    import datetime
    import shutil

    from tests.helpers import many_versions

    base = str(tmp_path / "base.lance")
    many_versions(base, 400, append_every=7, delete_every=11)
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    removed = Table(ours).vacuum(retentionHours=0, enforceRetentionDuration=False)
    lance.dataset(theirs).cleanup_old_versions(older_than=datetime.timedelta(0), delete_unverified=True)

    def tree(p):
        import os

        return sorted(os.path.relpath(os.path.join(r, f), p) for r, _, fs in os.walk(p) for f in fs
                      if "latest_version_hint" not in f)

    assert tree(ours) == tree(theirs)
    assert len([r for r in removed if r.startswith("_versions/")]) == 399
    assert lance.dataset(ours).to_table().equals(lance.dataset(base).to_table())
