"""vacuum: differential against pylance's cleanup_old_versions on identical
copies of a table with history; kept versions stay readable by both readers;
tags, orphans of concurrent writers, the retention floor and unreadable
manifests.

Old versions are made by moving their manifest ``timestamp`` back (what the
retention reads); old files by moving their mtime back (os.utime).
"""
import datetime
import os
import shutil
import time

import lance
import pytest

from lance_ops import LanceTable, Table
from lance_ops.errors import CorruptTableError, InvalidArgumentError, ReadOnlyVersionError
from lance_ops.format.manifest import encode_manifest_file
from lance_ops.format.naming import new_data_file_name, new_uuid
from lance_ops.txn.vacuum import RETENTION_CHECK_CONF
from tests.helpers import assert_same_rows, manifest_files, read_manifest

HOUR = 3600
DAY = 24 * HOUR
DDL = "id long, x long"


def age_versions(path, versions, seconds):
    """Move the commit timestamps of ``versions`` back by ``seconds``."""
    files = manifest_files(path)
    for v in versions:
        mf = read_manifest(path, v)
        mf.manifest.timestamp.seconds -= seconds
        with open(files[v], "wb") as f:
            f.write(encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices, mf.dictionaries))


def age_table(path, seconds):
    """As if everything committed so far had happened ``seconds`` earlier:
    every version's timestamp and every file's mtime move back together."""
    age_versions(path, versions_of(path), seconds)
    for rel in all_files(path):
        full = os.path.join(path, rel)
        st = os.stat(full)
        os.utime(full, (st.st_atime - seconds, st.st_mtime - seconds))


def put_file(path, rel, age_seconds):
    """A file at ``rel`` whose mtime is ``age_seconds`` ago."""
    full = os.path.join(path, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(b"not referenced")
    t = time.time() - age_seconds
    os.utime(full, (t, t))
    return rel


def all_files(path) -> set[str]:
    return {
        os.path.relpath(os.path.join(root, f), path) for root, _, names in os.walk(path) for f in names
    }


def rows(spark, n, start=0):
    return spark.createDataFrame([(i, i) for i in range(start, start + n)], DDL)


def versions_of(path) -> list[int]:
    return sorted(manifest_files(path))


def assert_versions_readable(spark, path):
    """Every remaining version reads the same through our reader and pylance's."""
    for v in versions_of(path):
        ds = lance.dataset(path, version=v)
        ref = ds.to_table(with_row_id=True)
        assert_same_rows(LanceTable(spark, path, version=v).toDF(withRowId=True), ref)


@pytest.fixture(scope="module")
def history_template(spark, tmp_path_factory):
    """A table with 7 versions -- create, append, delete (pylance), update,
    BTREE index (pylance), overwrite, append -- whose versions 1-5 (and their
    files) were written 10 days ago."""
    p = str(tmp_path_factory.mktemp("vacuum") / "hist.lance")
    t = LanceTable.create(spark, p, rows(spark, 30), maxRowsPerFragment=10)
    t.append(rows(spark, 10, 30))
    lance.dataset(p).delete("id % 7 = 0")
    t.refresh().update("id < 5", {"x": "x + 100"})
    lance.dataset(p).create_scalar_index("id", "BTREE")
    age_table(p, 10 * DAY)
    t.refresh().overwrite(rows(spark, 8, 100))
    t.append(rows(spark, 4, 200))
    assert versions_of(p) == [1, 2, 3, 4, 5, 6, 7]
    return p


@pytest.fixture
def history(history_template, tmp_path):
    """A fresh copy of the template (mtimes preserved)."""
    p = str(tmp_path / "hist.lance")
    shutil.copytree(history_template, p)
    return p


def copies(path, tmp_path):
    ours, ref = str(tmp_path / "ours.lance"), str(tmp_path / "ref.lance")
    shutil.copytree(path, ours)  # copy2: mtimes preserved
    shutil.copytree(path, ref)
    return ours, ref


# ------------------------------------------------------------------ differential
def test_vacuum_matches_pylance_cleanup(spark, history, tmp_path):
    old = [
        put_file(history, f"data/{new_data_file_name()}", 10 * DAY),
        put_file(history, f"_transactions/7-{new_uuid()}.txn", 10 * DAY),
        put_file(history, "_deletions/0-7-12345.arrow", 10 * DAY),
        put_file(history, f"_indices/{new_uuid()}/page_data.lance", 10 * DAY),
        put_file(history, "_versions/.tmp-leftover", 10 * DAY),
    ]
    fresh = [  # a concurrent writer's files, not committed yet
        put_file(history, f"data/{new_data_file_name()}", 0),
        put_file(history, f"_transactions/7-{new_uuid()}.txn", 0),
    ]
    unknown = [put_file(history, "other.txt", 10 * DAY)]
    # pylance keeps an old file of the managed folders whose name it does not
    # know; we remove it as an orphan (issue 30 item 14: Delta's VACUUM)
    odd = [put_file(history, "data/notes.txt", 10 * DAY)]
    ours, ref = copies(history, tmp_path)
    before = all_files(ours)

    removed = LanceTable(spark, ours).vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    stats = lance.dataset(ref).cleanup_old_versions(older_than=datetime.timedelta(hours=24))

    assert all_files(ours) == all_files(ref) - set(odd)
    assert set(odd) <= set(removed)
    assert removed == sorted(before - all_files(ours))
    assert versions_of(ours) == [6, 7]
    assert stats.old_versions == 5
    assert set(old) <= set(removed)
    assert not (set(fresh) | set(unknown) | {"_versions/latest_version_hint.json"}) & set(removed)
    assert not any(p.startswith("_indices/") for p in all_files(ours))  # index only in removed versions
    assert_versions_readable(spark, ours)


def test_dry_run_lists_without_deleting(spark, history):
    before = all_files(history)
    planned = LanceTable(spark, history).vacuumFiles(retentionHours=24, dryRun=True, enforceRetentionDuration=False)
    assert all_files(history) == before
    assert planned == sorted(planned) and len(planned) > 5
    removed = LanceTable(spark, history).vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    assert removed == planned == sorted(before - all_files(history))


def test_default_retention_keeps_recent_versions(spark, history):
    before = all_files(history)
    # Versions 1-5 are 10 days old: the default 7 days removes them, not 6 and 7.
    assert LanceTable(spark, history).vacuumFiles()
    assert versions_of(history) == [6, 7]
    age_versions(history, [6], 6 * DAY)
    assert LanceTable(spark, history).vacuumFiles() == []
    assert versions_of(history) == [6, 7] and all_files(history) < before


def test_tagged_old_version_is_kept_with_its_files(spark, history, tmp_path):
    t = LanceTable(spark, history)
    t.createTag("audit", 5)
    ours, ref = copies(history, tmp_path)

    LanceTable(spark, ours).vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    with pytest.raises(OSError, match="tagged version"):  # pylance's default refuses
        lance.dataset(ref).cleanup_old_versions(older_than=datetime.timedelta(hours=24))
    lance.dataset(ref).cleanup_old_versions(
        older_than=datetime.timedelta(hours=24), error_if_tagged_old_versions=False
    )

    assert versions_of(ours) == versions_of(ref) == [5, 6, 7]
    assert all_files(ours) == all_files(ref)
    assert any(p.startswith("_indices/") for p in all_files(ours))  # version 5's index
    assert lance.dataset(ours, version="audit").to_table().num_rows == 34
    assert_versions_readable(spark, ours)


def test_files_of_removed_versions_go_by_their_age(spark, history):
    """Vacuum does not read the manifests of the versions it removes (it stays
    linear in the number of versions): a file only they referenced goes as any
    unreferenced file, once older than the retention -- it always is, having
    been written before its version committed; a file whose mtime was reset
    (a copied table) waits until it is."""
    txn = "_transactions/" + read_manifest(history, 2).manifest.transaction_file
    os.utime(os.path.join(history, txn))
    removed = LanceTable(spark, history).vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    assert txn not in removed and os.path.exists(os.path.join(history, txn))
    old = time.time() - 2 * DAY
    os.utime(os.path.join(history, txn), (old, old))
    assert txn in LanceTable(spark, history).vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    assert not os.path.exists(os.path.join(history, txn))


def test_vacuum_after_compaction(spark, tmp_path):
    """Compaction's Rewrite (one version): once the versions before it are
    gone, so are the compacted fragments' data and deletion files."""
    p = str(tmp_path / "c.lance")
    t = LanceTable.create(spark, p, rows(spark, 40).coalesce(1), maxRowsPerFragment=10)
    t.delete("id % 3 = 0")
    t.optimize().executeCompaction(targetRowsPerFragment=100)
    age_table(p, 10 * DAY)
    # a fresh handle: age_table rewrote the manifests in place, which a handle
    # that cached them (manifests are immutable) would not see
    t = LanceTable(spark, p)
    removed = t.vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    assert versions_of(p) == [t.version]
    assert any(r.startswith("_deletions/") for r in removed) and not os.listdir(os.path.join(p, "_deletions"))
    live = {f.path for frag in lance.dataset(p).get_fragments() for f in frag.metadata.files}
    assert {r[len("data/"):] for r in all_files(p) if r.startswith("data/")} == live
    assert_versions_readable(spark, p)


# ------------------------------------------------------------------ safety
def test_concurrent_writers_files_younger_than_retention_survive(spark, history):
    fresh = put_file(history, f"data/{new_data_file_name()}", 5 * 60)
    stale = put_file(history, f"data/{new_data_file_name()}", 2 * HOUR)
    removed = LanceTable(spark, history).vacuumFiles(retentionHours=1, enforceRetentionDuration=False)
    assert stale in removed and fresh not in removed
    assert os.path.exists(os.path.join(history, fresh)) and not os.path.exists(os.path.join(history, stale))


def test_leftovers_of_interrupted_writes(spark, history):
    """Our write-then-rename temporaries (which pylance would keep as unknown
    files) go once older than the retention, like pylance's ``.tmp*``."""
    old = [
        put_file(history, f"_transactions/7-{new_uuid()}.txn.tmp-0a1b", 2 * HOUR),
        put_file(history, "_deletions/0-7-99.arrow.tmp-0a1b", 2 * HOUR),
        put_file(history, "_versions/latest_version_hint.json.tmp-0a1b", 2 * HOUR),
    ]
    fresh = put_file(history, "_versions/.tmp-0a1b", 0)
    removed = LanceTable(spark, history).vacuumFiles(retentionHours=1, enforceRetentionDuration=False)
    assert set(old) <= set(removed) and fresh not in removed
    assert os.path.exists(os.path.join(history, "_versions/latest_version_hint.json"))


def test_orphans_by_any_name_in_the_managed_folders(spark, history):
    """Issue 30 item 14: every untracked file older than the retention under
    data/, _deletions/, _indices/, _transactions/ goes, whatever its name,
    suffix or depth; files younger than the retention, files outside those
    folders and every file a kept version references stay."""
    old = [
        put_file(history, "data/part-0001.lance.uploading", 2 * HOUR),  # a crashed upload
        put_file(history, "data/copy of data file.lance.bak", 2 * HOUR),
        put_file(history, "data/nested/deeper/stray.parquet", 2 * HOUR),
        put_file(history, "_deletions/0-1-2.arrow.partial", 2 * HOUR),
        put_file(history, "_deletions/README", 2 * HOUR),
        put_file(history, "_transactions/crash.json", 2 * HOUR),
        put_file(history, "_indices/stray.idx", 2 * HOUR),
        put_file(history, "_indices/not-a-uuid/part.bin", 2 * HOUR),
        put_file(history, f"_indices/{new_uuid()}/index.idx", 2 * HOUR),
    ]
    young = [
        put_file(history, "data/upload-in-progress.tmp", 10 * 60),
        put_file(history, "_indices/building/part.bin", 10 * 60),
        put_file(history, "_transactions/in-flight.json", 10 * 60),
    ]
    outside = [
        put_file(history, "notes.txt", 2 * HOUR),
        put_file(history, "_refs/other.json", 2 * HOUR),
        put_file(history, "docs/data/x.lance", 2 * HOUR),
        put_file(history, "_versions/README", 2 * HOUR),
        put_file(history, "tree/README", 2 * HOUR),
    ]
    snap = LanceTable(spark, history).snapshot
    from lance_ops.txn.vacuum import references

    referenced = references(snap.file)
    # what the latest version references is made old too: it stays
    assert referenced
    for r in referenced:
        full = os.path.join(history, r)
        for f in [full] if os.path.isfile(full) else [os.path.join(d, n) for d, _, ns in os.walk(full) for n in ns]:
            os.utime(f, (time.time() - 3 * HOUR,) * 2)
    def listing(t):  # (the list of paths; issue 30a's vacuum returns a DataFrame and vacuumFiles the list)
        return getattr(t, "vacuumFiles", None) or t.vacuum

    dry = listing(LanceTable(spark, history))(retentionHours=1, enforceRetentionDuration=False, dryRun=True)
    removed = listing(LanceTable(spark, history))(retentionHours=1, enforceRetentionDuration=False)
    assert dry == removed
    assert set(old) <= set(removed)
    assert not (set(young) | set(outside)) & set(removed)
    left = all_files(history)
    assert not set(old) & left and (set(young) | set(outside)) <= left
    for r in referenced:
        assert any(f == r or f.startswith(r + "/") for f in left), r
    assert_versions_readable(spark, history)


def test_a_handle_vacuums_from_the_latest_version(spark, history):
    """A handle follows the table: one opened before another writer's commit
    vacuums against the latest version (8), as Delta's does; what protects
    readers of older versions is the retention (7 was the latest until just
    now: kept)."""
    t = LanceTable(spark, history, version=None)
    LanceTable(spark, history).append(rows(spark, 2, 300))
    age_versions(history, [6, 7], 10 * DAY)
    t.vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    assert versions_of(history) == [7, 8] and t.version == 8
    assert_versions_readable(spark, history)


def test_vacuum_returns_a_dataframe_of_the_files(spark, history):
    """Delta's vacuum() returns a DataFrame: ours lists the files removed (full
    paths; Delta's is empty), as VACUUM ... DRY RUN does."""
    t = LanceTable(spark, history)
    planned = t.vacuum(retentionHours=24, dryRun=True, enforceRetentionDuration=False)
    assert planned.columns == ["path"]
    paths = sorted(r.path for r in planned.collect())
    assert paths == [f"{t.uri}/{p}" for p in t.vacuumFiles(retentionHours=24, dryRun=True,
                                                             enforceRetentionDuration=False)]
    assert sorted(r.path for r in t.vacuum(24, enforceRetentionDuration=False).collect()) == paths
    assert t.vacuum(24, enforceRetentionDuration=False).count() == 0


def test_unreadable_manifest_fails_without_deleting(spark, history):
    """A kept version's manifest (here version 6, within the retention) that
    cannot be decoded aborts vacuum before anything is deleted: its
    references are unknown. A damaged manifest of a version being removed is
    removed unread (vacuum does not read what it removes; the files only it
    referenced go by age, as any unreferenced file)."""
    files = manifest_files(history)
    with open(files[6], "r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(b"XXXX")  # footer magic
    before = all_files(history)
    with pytest.raises(CorruptTableError):
        Table(history).vacuum(retentionHours=24, enforceRetentionDuration=False)
    assert all_files(history) == before
    with open(files[6], "r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(b"LANC")
    with open(files[2], "r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(b"XXXX")
    removed = LanceTable(spark, history).vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    assert os.path.relpath(files[2], history) in removed
    assert versions_of(history) == [6, 7]
    assert_versions_readable(spark, history)


def test_retention_floor(spark, history):
    before = all_files(history)
    t = LanceTable(spark, history)
    with pytest.raises(InvalidArgumentError, match="retentionDurationCheck"):
        t.vacuumFiles(retentionHours=24)
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        t.vacuumFiles(retentionHours=-1, enforceRetentionDuration=False)
    assert all_files(history) == before
    spark.conf.set(RETENTION_CHECK_CONF, "false")
    try:
        assert t.vacuumFiles(retentionHours=24, dryRun=True)
    finally:
        spark.conf.unset(RETENTION_CHECK_CONF)


def test_refused_on_time_travel_handle(spark, history):
    with pytest.raises(ReadOnlyVersionError):
        LanceTable(spark, history, version=6).vacuumFiles()


# ------------------------------------------------------------------ branches
def branched_table(tmp_path, name="b.lance") -> str:
    """pylance: a table (v1), branch ``dev`` from v1 with an append of its own,
    main overwritten (v2) and appended to (v3), a tag on dev's v2 (which must
    not protect main's v2); everything 10 days old. (Made afresh for each
    library: a copy would keep base paths pointing at the original.)"""
    import pyarrow as pa

    p = str(tmp_path / name)
    ds = lance.write_dataset(pa.table({"id": list(range(10)), "x": list(range(10))}), p, enable_stable_row_ids=True)
    ds.create_branch("dev").insert(pa.table({"id": [100], "x": [1]}))
    lance.write_dataset(pa.table({"id": [5], "x": [5]}), p, mode="overwrite")
    lance.write_dataset(pa.table({"id": [6], "x": [6]}), p, mode="append")
    lance.dataset(p).tags.create("dev-2", ("dev", 2))
    age_table(p, 10 * DAY)
    age_versions(os.path.join(p, "tree", "dev"), [1, 2], 10 * DAY)
    return p


def test_vacuum_keeps_files_a_branch_references(spark, tmp_path):
    """Issue 16 item 1: main's old data files that the branch reads through its
    base path survive, as with pylance's cleanup (same files kept)."""
    ours, ref = branched_table(tmp_path, "ours.lance"), branched_table(tmp_path, "ref.lance")
    dev_rows = lance.dataset(ours).checkout_version(("dev", None)).to_table().sort_by("id")
    v2 = "_versions/" + os.path.basename(manifest_files(ours)[2])

    removed = LanceTable(spark, ours).vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    lance.dataset(ref).cleanup_old_versions(older_than=datetime.timedelta(hours=24))

    def shape(path):  # file names are random: compare what kind of file is where
        return sorted((os.path.dirname(f), os.path.splitext(f)[1]) for f in all_files(path))

    assert shape(ours) == shape(ref)
    assert versions_of(ours) == versions_of(ref) == [1, 3]  # v1: dev's fork point (kept, as pylance)
    assert v2 in removed
    dev = lance.dataset(ours).checkout_version(("dev", None))
    assert dev.to_table().sort_by("id") == dev_rows
    assert lance.dataset(ours).checkout_version(("dev", 1)).to_table().num_rows == 10
    assert_versions_readable(spark, ours)


def test_vacuum_of_a_branch_never_touches_its_parents_files(spark, tmp_path):
    ours, ref = branched_table(tmp_path, "ours.lance"), branched_table(tmp_path, "ref.lance")
    main_before = {f for f in all_files(ours) if not f.startswith("tree/")}
    LanceTable(spark, os.path.join(ours, "tree", "dev")).vacuumFiles(retentionHours=24, enforceRetentionDuration=False)
    lance.dataset(ref).checkout_version(("dev", None)).cleanup_old_versions(older_than=datetime.timedelta(hours=24))

    assert {f for f in all_files(ours) if not f.startswith("tree/")} == main_before
    assert sorted(manifest_files(os.path.join(ours, "tree", "dev"))) == [2]
    assert sorted(manifest_files(os.path.join(ref, "tree", "dev"))) == [2]
    assert len(all_files(ours)) == len(all_files(ref))
    assert lance.dataset(ours).checkout_version(("dev", None)).to_table().num_rows == 11
