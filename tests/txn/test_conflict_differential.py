"""The conflict rules, cell by cell against pylance's own resolver.

For every ordered pair (theirs, ours) of the operations both can produce --
append, delete, update, merge (upsert), add / drop / rename columns, rewrite
columns, compaction, create index, config and schema-metadata changes,
overwrite, restore -- ``theirs`` is committed as version 2 (and 3) on a
table at version 1, then ``ours`` (made by pylance on another copy of version
1) is committed with read version 1:

* pylance's side: ``lance.LanceDataset.commit(table, transaction)``;
* lance_ops' side: the same transaction (its ``.txn`` bytes) through
  :func:`lance_ops.txn.commit.commit`.

Both must decide the same -- commit as is, commit rebased (the committed
read version moves), retryable conflict, incompatible -- and, when both
commit, leave the same table (pylance reads both: equal rows, row ids,
versions). Cells where lance_ops deliberately does better are listed in
:data:`DEVIATIONS`, each naming the test that proves the better behaviour.

Everything here is metadata work (no Spark): the operations' data files are
written once per session by pylance, each cell copies a few small files.
"""
from __future__ import annotations

import glob
import os
import shutil
import warnings

import lance
import pyarrow as pa
import pytest

from lance_ops.errors import CommitConflictError, LanceOpsError
from lance_ops.storage import ObjectStore
from lance_ops.txn.commit import commit
from lance_ops.txn.log import TableLog

BASE_ROWS = {"id": list(range(26)), "x": list(range(100, 126)), "w": [f"w{i}" for i in range(26)]}


OPS = {
    "append": lambda ds, p: lance.write_dataset(pa.table({"id": [100, 101], "x": [1, 2], "w": ["a", "b"]}),
                                                p, mode="append"),
    "delete": lambda ds, p: ds.delete("id = 12"),
    "delete_other": lambda ds, p: ds.delete("id = 2"),
    "update": lambda ds, p: ds.update({"x": "x + 1000"}, where="id = 13"),
    "merge": lambda ds, p: ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": [14, 200], "x": [-1, -2], "w": ["m", "n"]})),
    "add_columns": lambda ds, p: ds.add_columns({"y": "x * 2"}),
    "drop_columns": lambda ds, p: ds.drop_columns(["w"]),
    "rename": lambda ds, p: ds.alter_columns({"path": "w", "name": "w2"}),
    "rewrite_columns": lambda ds, p: ds.merge_insert("id").when_matched_update_all().write_mode("rewrite_columns")
        .execute(pa.table({"id": [15], "x": [-15]})),
    "compaction": lambda ds, p: ds.optimize.compact_files(target_rows_per_fragment=10),
    "create_index": lambda ds, p: ds.create_scalar_index("x", "BTREE"),
    "create_index_other": lambda ds, p: ds.create_scalar_index("id", "BITMAP"),
    "create_zonemap": lambda ds, p: ds.create_scalar_index("x", "ZONEMAP", name="x_zones"),
    "drop_x": lambda ds, p: ds.drop_columns(["x"]),
    "field_metadata": lambda ds, p: ds.update_field_metadata({"w": {"fm": "1"}}) if hasattr(ds, "update_field_metadata") else None,
    "config": lambda ds, p: ds.update_config({"k": "v"}),
    "schema_metadata": lambda ds, p: ds.update_schema_metadata({"m": "1"}),
    "overwrite": lambda ds, p: lance.write_dataset(pa.table({"id": [7, 8], "x": [7, 8], "w": ["o", "p"]}),
                                                   p, mode="overwrite"),
    "restore": lambda ds, p: ds.checkout_version(1).restore(),
}

#: (ours, theirs) -> (lance_ops' decision, pylance's decision, the test that
#: shows lance_ops' behaviour is the better one).
DEVIATIONS = {
    ("add_columns", "delete"): (
        "commit", "retry",
        "tests/txn/test_conflict_matrix.py (adopt!b) and tests/spark/test_evolution_concurrency.py: a Merge "
        "adopts a concurrent Delete's deletion files instead of retrying",
    ),
    ("add_columns", "delete_other"): (
        "commit", "retry",
        "as (add_columns, delete): the Merge adopts the concurrent Delete's deletion files",
    ),
    ("create_index", "drop_x"): (
        "retry", "commit",
        "tests/txn/test_conflict_matrix.py (retry!h): pylance keeps a new index on the dropped column "
        "(listed on '<unknown>'); lance_ops retries and the re-run fails clearly",
    ),
    ("create_zonemap", "drop_x"): (
        "retry", "commit",
        "as (create_index, drop_x)",
    ),
}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """op name -> directory of a copy of the base table that pylance changed
    with that operation (versions 2.. hold it)."""
    root = tmp_path_factory.mktemp("diff")
    base = str(root / "base")
    t = pa.table(BASE_ROWS)
    # Version 1: fragments 0, 1 of 10 rows (ids 0-9, 10-19), 2 and 3 of 3 rows
    # (20-22, 23-25): compaction merges 2 and 3 only.
    frags = []
    for s_, n in ((0, 10), (10, 10), (20, 3), (23, 3)):
        frags += lance.fragment.write_fragments(t.slice(s_, n), base, max_rows_per_file=10)
    lance.LanceDataset.commit(base, lance.LanceOperation.Overwrite(t.schema, frags), enable_stable_row_ids=True)
    assert lance.dataset(base).version == 1
    out = {"base": base}
    for name, op in OPS.items():
        d = str(root / name)
        shutil.copytree(base, d)
        op(lance.dataset(d), d)
        out[name] = d
    return out


def _copy_new_files(src: str, dst: str) -> None:
    for sub in ("data", "_deletions", "_indices"):
        for f in glob.glob(os.path.join(src, sub, "**", "*"), recursive=True):
            if os.path.isfile(f):
                rel = os.path.relpath(f, src)
                target = os.path.join(dst, rel)
                if not os.path.exists(target):
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copy2(f, target)


def _decision_pylance(cell: str, txn) -> tuple[str, int | None]:
    try:
        ds = lance.LanceDataset.commit(cell, txn, read_version=1)
    except BaseException as e:
        msg = str(e)
        if "Retryable commit conflict" in msg or getattr(e, "retryable", False) is True:
            return "retry", None
        if "Incompatible transaction" in msg or "Commit conflict" in msg or getattr(e, "retryable", None) is False:
            return "fail", None
        return f"error: {msg.splitlines()[0][:160]}", None
    return "commit", ds.read_transaction(ds.version).read_version


def _decision_ours(cell: str, txn_bytes: bytes) -> tuple[str, int | None]:
    from lance_ops.format.naming import new_uuid
    from lance_ops.txn.operations import Transaction

    txn = Transaction.from_bytes(txn_bytes).with_read_version(1)
    # A transaction of its own: for ours == theirs the cell's version 2 holds
    # this very transaction (same uuid), which the commit loop would rightly
    # take for an earlier commit of ours (pylance does not compare uuids).
    txn.uuid = new_uuid()
    try:
        result = commit(ObjectStore(cell), txn)
    except CommitConflictError as e:
        return ("retry" if e.retryable else "fail"), None
    except LanceOpsError as e:
        return f"error: {str(e).splitlines()[0][:160]}", None
    return "commit", result.transaction.read_version


def _ours_transaction(d: str) -> bytes:
    store = ObjectStore(d)
    tlog = TableLog(store)
    mf = tlog.read_manifest(tlog.latest_version())
    return mf.transaction_bytes


def _reserve(cell: str, n: int) -> int:
    """Commit ReserveFragments(n) (with lance_ops' commit loop, as any writer
    of the format may); returns the first reserved id."""
    from lance_ops.txn.operations import ReserveFragments, Transaction

    store = ObjectStore(cell)
    latest = TableLog(store).latest_version()
    result = commit(store, Transaction(latest, ReserveFragments(n)))
    return result.snapshot.manifest.max_fragment_id - n + 1


def _reserved(cell: str, py_txn):
    frags = [f for g in py_txn.operation.groups for f in g.new_fragments]
    first = _reserve(cell, len(frags))
    for i, f in enumerate(frags):
        f.id = first + i
    return py_txn


def _reserved_bytes(cell: str, data: bytes) -> bytes:
    from lance_ops.txn.operations import Transaction

    txn = Transaction.from_bytes(data)
    frags = [f for g in txn.operation.groups for f in g.new_fragments]
    first = _reserve(cell, len(frags))
    for i, f in enumerate(frags):
        f.id = first + i
    return txn.to_bytes()


#: Committing operations whose cells also compare the index lists: a rebased
#: CreateIndex must cover exactly the fragments pylance's covers. (Not every
#: cell: pylance 14's Update also extends unmodified-field indices over the
#: fragments a pure row rewrite wrote -- lance_ops' Update leaves them
#: uncovered, i.e. scanned; see the issue 13 note.)
INDEX_OPS = {"create_index", "create_index_other", "create_zonemap"}


def _table(path, indices: bool = False):
    """Version, rows with row ids (and the indices: name, fields, covered
    fragments)."""
    ds = lance.dataset(path)
    out = (ds.version, ds.to_table(with_row_id=True).sort_by("_rowid").to_pylist(), ds.validate())
    if indices:
        with warnings.catch_warnings():  # (list_indices is deprecated; describe_indices has no fragments)
            warnings.simplefilter("ignore", DeprecationWarning)
            listed = ds.list_indices()
        out += (sorted((i["name"], i["fields"], sorted(i["fragment_ids"])) for i in listed),)
    return out


PAIRS = [(ours, theirs) for ours in OPS for theirs in OPS]


@pytest.mark.parametrize("ours,theirs", PAIRS, ids=[f"{o}-after-{t}" for o, t in PAIRS])
def test_decides_as_pylance(made, tmp_path, ours, theirs):
    py_cell, our_cell = str(tmp_path / "py"), str(tmp_path / "ours")
    for cell in (py_cell, our_cell):
        shutil.copytree(made[theirs], cell)
        _copy_new_files(made[ours], cell)
    ours_ds = lance.dataset(made[ours])
    py_txn = ours_ds.read_transaction(ours_ds.version)
    py_txn.read_version = 1
    our_bytes = _ours_transaction(made[ours])
    if ours == "compaction":
        # a compaction reserves its fragment ids first: reserve them in each
        # table and renumber the Rewrite's new fragments, as it would have
        py_txn, our_bytes = _reserved(py_cell, py_txn), _reserved_bytes(our_cell, our_bytes)
    expected = _decision_pylance(py_cell, py_txn)
    got = _decision_ours(our_cell, our_bytes)
    dev = DEVIATIONS.get((ours, theirs))
    if dev is not None:
        assert (got[0], expected[0]) == dev[:2], f"deviation no longer as documented: {dev[2]}"
        return
    category = lambda d: "error" if d.startswith("error") else d  # noqa: E731 (messages differ)
    assert category(got[0]) == category(expected[0]), f"{ours} after {theirs}: lance_ops {got}, pylance {expected}"
    if got[0] == "commit":
        assert got[1] == expected[1], f"{ours} after {theirs}: committed read version (rebase) differs"
        idx = ours in INDEX_OPS
        assert _table(our_cell, idx) == _table(py_cell, idx), f"{ours} after {theirs}: the tables differ"
