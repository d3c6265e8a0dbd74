"""Branches in pylance 14's layout, without Spark (the ``Table`` core):
branches pylance makes are read and written by lance_ops and the other way
round; time travel, tags and history per branch; deleting branches with
pylance's rules; base paths spelled relative to another directory."""
from __future__ import annotations

import json
import os

import lance
import pyarrow as pa
import pytest

from lance_ops.errors import InvalidArgumentError, TableExistsError, TableNotFoundError
from lance_ops.txn.operations import Delete
from lance_ops.txn.pipeline import StagedCommit
from lance_ops.txn.table import Table
from tests.helpers import read_manifest


def rows(ids):
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array([i * 10 for i in ids], pa.int64())})


def pylance_branch(path, name, version=None):
    return lance.dataset(path).checkout_version((name, version))


def ids_of(ds) -> list[int]:
    return sorted(ds.to_table(columns=["id"]).column("id").to_pylist())


def delete_fragment(t: Table, frag_id: int):
    """A Delete of one whole fragment (metadata only: no Spark needed)."""
    return t.execute(lambda snap: StagedCommit(Delete([], [frag_id], "whole fragment"), {}, {}))


@pytest.fixture
def table(tmp_path):
    p = str(tmp_path / "t.lance")
    lance.write_dataset(rows(range(10)), p, max_rows_per_file=5, enable_stable_row_ids=True)
    lance.write_dataset(rows(range(10, 15)), p, mode="append")
    return p


def test_we_read_and_write_a_branch_pylance_made(table):
    lance.dataset(table).create_branch("dev").insert(rows([100, 101]))
    t = Table(table, branch="dev")
    assert (t.branch, t.version, t.count()) == ("dev", 3, 17)
    t.setProperties({"k": "v"})
    dev = pylance_branch(table, "dev")
    assert dev.version == 4 and dev.config()["k"] == "v" and dev.validate() is None
    delete_fragment(t, 0)
    assert ids_of(pylance_branch(table, "dev")) == list(range(5, 15)) + [100, 101]
    assert ids_of(lance.dataset(table)) == list(range(15))  # main untouched
    assert Table(table).version == 2


def test_pylance_reads_and_writes_a_branch_we_made(table):
    b = Table(table).createBranch("ours", version=1)
    assert (b.branch, b.version) == ("ours", 1)
    doc = json.load(open(os.path.join(table, "_refs", "branches", "ours.json")))
    assert doc["parentBranch"] is None and doc["parentVersion"] == 1 and len(doc["identifier"]["version_mapping"]) == 1
    assert set(doc) == {"parentBranch", "identifier", "parentVersion", "createAt", "manifestSize", "metadata"}
    m = read_manifest(os.path.join(table, "tree", "ours")).manifest
    assert m.branch == "ours" and [(p.id, p.is_dataset_root, p.path) for p in m.base_paths] == [(0, True, Table(table).uri)]
    assert all(df.HasField("base_id") and df.base_id == 0 for f in m.fragments for df in f.files)
    assert m.reader_feature_flags & 16  # base paths
    listed = lance.dataset(table).branches.list()
    assert listed["ours"]["parent_version"] == 1 and listed["ours"]["parent_branch"] is None
    dev = pylance_branch(table, "ours")
    assert ids_of(dev) == list(range(10)) and dev.validate() is None
    dev.insert(rows([200]))
    assert Table(table, branch="ours").count() == 11
    # a branch of our branch: the parent's root becomes base path 1, named "ours"
    sub = Table(table, branch="ours").createBranch("ours/sub")
    m = read_manifest(os.path.join(table, "tree", "ours", "sub")).manifest
    assert [(p.id, p.name if p.HasField("name") else None) for p in m.base_paths] == [(0, None), (1, "ours")]
    sub_doc = json.load(open(os.path.join(table, "_refs", "branches", "ours%2Fsub.json")))
    assert sub_doc["identifier"]["version_mapping"][:1] == doc["identifier"]["version_mapping"]
    assert sub_doc["parentBranch"] == "ours" and sub.version == 2
    assert ids_of(pylance_branch(table, "ours/sub")) == list(range(10)) + [200]
    assert Table(table).listBranches().keys() == {"ours", "ours/sub"}


def test_time_travel_tags_and_history_per_branch(table):
    b = lance.dataset(table).create_branch("dev")
    b.insert(rows([100]))
    pylance_branch(table, "dev").insert(rows([101]))
    t = Table(table, branch="dev")
    assert t.version == 4
    assert Table(table, branch="dev", version=3).count() == 16
    assert [h["version"] for h in t.history()] == [4, 3, 2]  # the branch's own versions
    assert t.history()[-1]["lanceOperation"] == "Clone" and t.history()[-1]["operation"] == "SHALLOW CLONE"
    t.createTag("dev-3", 3)
    assert lance.dataset(table).tags.list()["dev-3"]["branch"] == "dev"
    assert lance.dataset(table).checkout_version("dev-3").to_table().num_rows == 16
    assert t.listTags() == {"dev-3": 3} and Table(table).listTags() == {}
    opened = Table(table, version="dev-3")  # a tag names its branch
    assert (opened.branch, opened.version) == ("dev", 3)
    lance.dataset(table).tags.create("main-1", 1)
    with pytest.raises(InvalidArgumentError, match="branch main"):
        Table(table, branch="dev", version="main-1")
    b2 = Table(table, branch="dev").createBranch("from-tag", version="dev-3")
    assert b2.version == 3 and pylance_branch(table, "from-tag").to_table().num_rows == 16


def test_delete_branch_as_pylance(table):
    t = Table(table)
    t.createBranch("a")
    Table(table, branch="a").createBranch("a/b")
    with pytest.raises(InvalidArgumentError, match="forked"):
        t.deleteBranch("a")
    Table(table, branch="a/b").createTag("keep", 2)
    with pytest.raises(InvalidArgumentError, match="tag"):
        t.deleteBranch("a/b")
    t.deleteTag("keep")
    t.deleteBranch("a/b")
    assert not os.path.exists(os.path.join(table, "tree", "a", "b"))
    assert os.path.exists(os.path.join(table, "tree", "a", "_versions"))  # the parent's files stay
    t.deleteBranch("a")
    tree = os.path.join(table, "tree")
    assert not os.path.exists(tree) or not os.listdir(tree)
    assert lance.dataset(table).branches.list() == {}
    with pytest.raises(TableNotFoundError):
        t.deleteBranch("a")
    with pytest.raises(TableNotFoundError):
        Table(table, branch="a")


def test_branch_names_and_existing_branches(table):
    t = Table(table)
    for bad in ("", "main", "a//b", "/a", "a/", "a..b", "a.lock", "bad name"):
        with pytest.raises(InvalidArgumentError):
            t.createBranch(bad)
    lance.dataset(table).create_branch("dev")
    with pytest.raises(TableExistsError):
        t.createBranch("dev")
    assert Table(table).listBranches()["dev"]["parentVersion"] == 2


def test_relative_base_paths(tmp_path, monkeypatch):
    """pylance records the parent's root as the caller spelled it; a table
    opened through a relative path has relative base paths, which lance_ops
    resolves from anywhere."""
    monkeypatch.chdir(tmp_path)
    lance.write_dataset(rows(range(6)), "rel.lance")
    lance.dataset("rel.lance").create_branch("dev").insert(rows([50]))
    lance.dataset("rel.lance").checkout_version(("dev", None)).create_branch("dev/sub").insert(rows([60]))
    paths = [p.path for p in read_manifest(str(tmp_path / "rel.lance" / "tree" / "dev" / "sub")).manifest.base_paths]
    assert sorted(paths) == ["rel.lance", "rel.lance/tree/dev"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    t = Table(str(tmp_path / "rel.lance"), branch="dev/sub")
    assert t.count() == 8
    from lance_ops.format.scan import FragmentScan, scan_fragment

    snap = t.snapshot
    got = sorted(r["id"] for f in snap.fragments
                 for b in scan_fragment(snap.store, snap.schema, FragmentScan(f, ["id"])) for r in b.to_pylist())
    assert got == [0, 1, 2, 3, 4, 5, 50, 60]
