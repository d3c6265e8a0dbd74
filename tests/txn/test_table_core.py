"""lance_ops.Table, the Spark-free core: everything a sensor, a CLI or a
look-only notebook needs, checked against pylance on the same table."""
from __future__ import annotations

import datetime
import os

import lance
import pyarrow as pa
import pytest

from lance_ops import Table
from lance_ops.errors import (
    CorruptTableError,
    InvalidArgumentError,
    ReadOnlyVersionError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from tests.helpers import manifest_files, read_manifest


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": list(range(10)), "x": list(range(10))}), p, enable_stable_row_ids=True)
    lance.write_dataset(pa.table({"id": [10, 11], "x": [1, 1]}), p, mode="append")
    lance.dataset(p).delete("id < 3")
    return p


def test_open_count_schema_detail(path):
    t = Table(path)
    assert (t.version, t.count()) == (3, 9)
    assert t.schema == pa.schema([("id", pa.int64()), ("x", pa.int64())])
    d = t.detail()
    assert (d["numFragments"], d["numRows"], d["numDeletedRows"], d["stableRowIds"]) == (2, 9, 3, True)
    old = Table(path, version=1)
    assert (old.version, old.count(), old.pinned) == (1, 10, True)


def test_history_of_another_writer(path):
    h = Table(path).history()
    assert [r["version"] for r in h] == [3, 2, 1]
    # Delta's words, the Lance transaction in a column of its own
    assert [r["operation"] for r in h] == ["DELETE", "WRITE", "WRITE"]
    assert [r["lanceOperation"] for r in h] == ["Delete", "Append", "Overwrite"]
    assert [r["operationParameters"].get("mode") for r in h] == [None, "Append", "Overwrite"]
    assert [r["isBlindAppend"] for r in h] == [False, True, False]
    assert h[0]["operationParameters"]["predicate"] == '["id < 3"]'  # Delta's JSON list
    assert all(r["userMetadata"] == {} for r in h)
    assert isinstance(h[0]["timestamp"], datetime.datetime)
    assert [r["version"] for r in Table(path, version=2).history()] == [2, 1]
    assert [r["version"] for r in Table(path).history(limit=1)] == [3]


def test_properties_round_trip_through_pylance(path):
    t = Table(path)
    info = t.setProperties({"owner": "ml-team", "lance.auto_cleanup.interval": "10"},
                           commitProperties={"job": "config"})
    assert (info.version, info.operation, t.version) == (4, "UpdateConfig", 4)
    assert lance.dataset(path).config() == {"owner": "ml-team", "lance.auto_cleanup.interval": "10"}
    assert t.properties() == lance.dataset(path).config()
    lance.dataset(path).update_config({"from_pylance": "1"})
    t.refresh()
    assert t.properties()["from_pylance"] == "1"
    t.unsetProperties(["owner"])
    assert lance.dataset(path).config() == {"lance.auto_cleanup.interval": "10", "from_pylance": "1"}
    assert [(r["operation"], r["lanceOperation"]) for r in t.history(limit=3)] == [
        ("UNSET TBLPROPERTIES", "UpdateConfig"), ("SET TBLPROPERTIES", "UpdateConfig"),
        ("SET TBLPROPERTIES", "UpdateConfig")]
    assert t.history(limit=1)[0]["operationParameters"] == {"properties": '["owner"]', "ifExists": "true"}
    with pytest.raises(InvalidArgumentError):
        t.unsetProperties(["nope"], ifExists=False)
    assert t.history(limit=3)[2]["userMetadata"] == {"job": "config"}
    assert read_manifest(path).manifest.writer_feature_flags & 8  # table config flag, as pylance sets it


def test_tags_restore_and_time_travel(path):
    t = Table(path)
    t.createTag("before-delete", 2)
    assert t.listTags() == {"before-delete": 2} == {k: v["version"] for k, v in lance.dataset(path).tags.list().items()}
    info = t.restoreToVersion("before-delete", commitProperties={"reason": "undo"})
    assert (info.version, info.operation, info.metrics["numRowsAfterRestore"]) == (4, "Restore", 12)
    assert lance.dataset(path).count_rows() == 12
    assert t.history(limit=1)[0]["operationParameters"] == {"version": "2", "tag": "before-delete"}
    assert t.history(limit=1)[0]["operation"] == "RESTORE"
    t.deleteTag("before-delete")
    assert lance.dataset(path).tags.list() == {}
    with pytest.raises(TableNotFoundError):
        t.restoreToVersion(99)
    assert Table(path).version == 4


def test_handles_follow_the_table_time_travel_stays(path):
    latest, pinned = Table(path), Table(path, version=3)
    lance.write_dataset(pa.table({"id": [99], "x": [9]}), path, mode="append")  # another writer
    assert (latest.version, latest.count()) == (4, 10)  # follows: no refresh needed
    assert (pinned.version, pinned.count()) == (3, 9)
    info = latest.setProperties({"a": "b"})  # starts from the latest: no conflict, no rebase
    assert (info.readVersion, info.version, info.retries) == (4, 5, 0)
    assert [r["version"] for r in pinned.history()] == [3, 2, 1]


def test_time_travel_handles_are_read_only(path):
    t = Table(path, version=2)
    for call in (lambda: t.setProperties({"a": "b"}), lambda: t.restoreToVersion(1), lambda: t.vacuum(),
                 lambda: t.refresh()):
        with pytest.raises(ReadOnlyVersionError):
            call()
    assert Table(path).version == 3


def test_vacuum_without_spark(path):
    files = manifest_files(path)
    for v in (1, 2):  # make versions 1 and 2 old
        mf = read_manifest(path, v)
        mf.manifest.timestamp.seconds -= 10 * 24 * 3600
        from lance_ops.format.manifest import encode_manifest_file

        with open(files[v], "wb") as f:
            f.write(encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices))
    t = Table(path)
    planned = t.vacuum(retentionHours=24, dryRun=True, enforceRetentionDuration=False)
    assert planned == t.vacuum(retentionHours=24, enforceRetentionDuration=False)
    assert sorted(manifest_files(path)) == [3]
    assert lance.dataset(path).count_rows() == 9
    with pytest.raises(InvalidArgumentError):
        t.vacuum(retentionHours=1)


def test_exists_answers_false_only_for_no_table(tmp_path, path):
    assert Table.exists(path) and not Table.exists(str(tmp_path / "nothing"))
    bad = str(tmp_path / "mixed.lance")
    os.makedirs(os.path.join(bad, "_versions"))
    for name in ("1.manifest", "18446744073709551613.manifest"):  # V1 and V2 names: a damaged table
        open(os.path.join(bad, "_versions", name), "wb").close()
    with pytest.raises(CorruptTableError):
        Table.exists(bad)


@pytest.mark.parametrize("what", ["data_format", "file_version"])
def test_unknown_versions_are_refused(path, what):
    mf = read_manifest(path)
    if what == "data_format":
        mf.manifest.data_format.version = "9.1"
    else:
        mf.manifest.fragments[0].files[0].file_major_version = 3
    from lance_ops.format.manifest import encode_manifest_file

    with open(manifest_files(path)[3], "wb") as f:
        f.write(encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices))
    with pytest.raises(UnsupportedFeatureError, match="9.1" if what == "data_format" else "3.2"):
        Table(path)
    t = Table(path, version=2)  # older versions still read
    assert t.count() == 12
