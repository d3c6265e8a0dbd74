"""A zoo of tables written by pylance 14 at test time: every data storage
version it writes (legacy, 2.0, 2.1, 2.2), packed structs, stable row ids or
not, deletion files of both kinds, a shallow clone, a branch with its own
commits, BTREE / BITMAP / ZONEMAP indices, tags.

Built once per session (:func:`build_zoo`) under a temporary directory; tests
copy a table (:func:`copy_table`, a directory copy) before changing it. Small
tables: the point is coverage of layouts, not volume.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

import lance
import numpy as np
import pyarrow as pa

PACKED = {"lance-encoding:packed": "true"}


@dataclass
class Zoo:
    name: str
    #: The table's root directory (for a branch: the main root).
    path: str
    stable: bool
    #: Data storage version pylance wrote.
    version: str
    branch: str | None = None
    #: A shallow clone: the source table's root (copy it along).
    source: str | None = None
    legacy: bool = False
    #: Whether pylance can write struct nulls here (not in 2.0 / legacy).
    nulls: bool = True

    def rows(self, ids) -> pa.Table:
        """Rows with ids ``ids`` in this table's schema."""
        return make_rows(ids, self.version, self.nulls)


def schema_for(version: str) -> pa.Schema:
    if version == "legacy":
        return pa.schema([
            ("id", pa.int64()), ("v", pa.float64()), ("s", pa.string()),
            ("d", pa.dictionary(pa.int32(), pa.string())), ("l", pa.list_(pa.int64())),
            ("st", pa.struct([("a", pa.int64()), ("b", pa.string())])),
        ])
    packed = [("x", pa.int32()), ("y", pa.float64())]
    if version == "2.2":
        packed.append(("t", pa.string()))  # variable-width children pack from 2.2 on
    return pa.schema([
        ("id", pa.int64()), ("v", pa.float64()), ("s", pa.string()),
        pa.field("p", pa.struct(packed), metadata=PACKED),
        ("n", pa.struct([("a", pa.int64()), ("b", pa.struct([("c", pa.string())]))])),
        ("l", pa.list_(pa.int64())),
    ])


def make_rows(ids, version: str, nulls: bool = True) -> pa.Table:
    ids = np.asarray(list(ids), dtype=np.int64)
    schema = schema_for(version)
    n = len(ids)
    s = [None if (nulls and i % 9 == 0) else f"s{i}" for i in ids]
    cols = {"id": ids, "v": ids / 4.0, "s": s}
    if version == "legacy":
        cols["d"] = pa.array([["x", "y", "z"][i % 3] for i in ids]).dictionary_encode()
        cols["l"] = [[int(i)] * int(i % 3) for i in ids]
        cols["st"] = [{"a": int(i), "b": f"b{i}"} for i in ids]
    else:
        fields = [f.name for f in schema.field("p").type]
        cols["p"] = [None if (nulls and i % 13 == 0) else
                     {k: {"x": int(i % 1000), "y": i * 0.5, "t": f"t{i}"}[k] for k in fields} for i in ids]
        cols["n"] = [{"a": int(i), "b": {"c": None if (nulls and i % 5 == 0) else f"c{i}"}} for i in ids]
        cols["l"] = [None if (nulls and i % 11 == 0) else [int(i)] * int(i % 3) for i in ids]
    return pa.table({k: pa.array(v, schema.field(k).type) if not isinstance(v, pa.Array) else v
                     for k, v in cols.items()}, schema=schema).slice(0, n)


def _write(path, table, version, stable, **kw):
    lance.write_dataset(table, path, data_storage_version=version, enable_stable_row_ids=stable, **kw)


def build_zoo(root: str) -> dict[str, Zoo]:
    zoo: dict[str, Zoo] = {}

    # 2.2, stable row ids, packed struct with a string child, BTREE / BITMAP /
    # ZONEMAP indices and an unindexed fragment, a small delete (arrow
    # deletion file) and a large one (bitmap deletion file), a tag.
    p = os.path.join(root, "v22")
    _write(p, make_rows(range(0, 200), "2.2"), "2.2", True, max_rows_per_file=100)
    lance.write_dataset(make_rows(range(1000, 7000), "2.2"), p, mode="append", max_rows_per_file=6000)
    ds = lance.dataset(p)
    ds.tags.create("t1", ds.version)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("s", "BITMAP")
    ds.create_scalar_index("v", "ZONEMAP")
    lance.write_dataset(make_rows(range(8000, 8050), "2.2"), p, mode="append")  # an unindexed fragment
    ds = lance.dataset(p)
    ds.delete("id = 3 OR id = 150")
    lance.dataset(p).delete("id >= 1000 AND id < 6600 AND id % 10 != 0")  # >= 5000 rows: a bitmap
    zoo["v22"] = Zoo("v22", p, True, "2.2")

    p = os.path.join(root, "v21")
    _write(p, make_rows(range(0, 300), "2.1"), "2.1", False, max_rows_per_file=120)
    lance.dataset(p).delete("id % 17 = 4")
    zoo["v21"] = Zoo("v21", p, False, "2.1")

    p = os.path.join(root, "v20")  # 2.0 encodes no struct validity: no null structs
    _write(p, make_rows(range(0, 150), "2.0", nulls=False), "2.0", True, max_rows_per_file=60)
    lance.dataset(p).delete("id % 10 = 5")
    zoo["v20"] = Zoo("v20", p, True, "2.0", nulls=False)

    p = os.path.join(root, "legacy")
    _write(p, make_rows(range(0, 120), "legacy"), "legacy", False, max_rows_per_file=50)
    lance.dataset(p).delete("id % 8 = 1")
    zoo["legacy"] = Zoo("legacy", p, False, "legacy", legacy=True, nulls=False)

    # A shallow clone of v21 (version 1), with commits of its own.
    p = os.path.join(root, "clone")
    lance.dataset(zoo["v21"].path).shallow_clone(p, 1)
    lance.write_dataset(make_rows(range(500, 520), "2.1"), p, mode="append")
    lance.dataset(p).delete("id % 6 = 0")
    zoo["clone"] = Zoo("clone", p, False, "2.1", source=zoo["v21"].path)

    # Several base paths: a bare data directory (is_dataset_root false) and
    # another table-shaped root (is_dataset_root true), pylance's multi-base.
    p = os.path.join(root, "multibase")
    b1, b2 = os.path.join(root, "mb_bare"), os.path.join(root, "mb_root")
    os.makedirs(b1)
    os.makedirs(b2)
    bases = [lance.DatasetBasePath(b1, name="b1", is_dataset_root=False),
             lance.DatasetBasePath(b2, name="b2", is_dataset_root=True)]
    _write(p, make_rows(range(0, 60), "2.2"), "2.2", True, max_rows_per_file=30, initial_bases=bases,
           target_bases=["b1"])
    lance.write_dataset(make_rows(range(60, 90), "2.2"), p, mode="append", target_bases=["b2"])
    lance.dataset(p).delete("id % 8 = 3")
    zoo["multibase"] = Zoo("multibase", p, True, "2.2")

    p = os.path.join(root, "branched")
    build_branched(p)
    zoo["branch"] = Zoo("branch", p, True, "2.2", branch="dev")

    return zoo


def build_branched(p: str) -> None:
    """A branch with commits of its own (and a tag); main moves on after the fork."""
    _write(p, make_rows(range(0, 100), "2.2"), "2.2", True, max_rows_per_file=40)
    b = lance.dataset(p).create_branch("dev")
    b.insert(make_rows(range(700, 730), "2.2"))
    lance.dataset(p).checkout_version(("dev", None)).delete("id % 4 = 1")
    lance.write_dataset(make_rows(range(900, 910), "2.2"), p, mode="append")
    lance.dataset(p).checkout_version(("dev", None)).tags.create("dev-t", ("dev", 2))


def copy_table(z: Zoo, dest_dir: str) -> Zoo:
    """A private copy of a zoo table. A clone keeps pointing at the original
    source (never written); a branched table is built afresh (a branch's base
    path names its parent's root, which a directory copy would not move)."""
    dest = os.path.join(dest_dir, z.name)
    if z.branch:
        os.makedirs(dest_dir, exist_ok=True)
        build_branched(dest)
    else:
        shutil.copytree(z.path, dest)
    return Zoo(**{**z.__dict__, "path": dest})


def pylance_dataset(z: Zoo):
    ds = lance.dataset(z.path)
    return ds.checkout_version((z.branch, None)) if z.branch else ds
