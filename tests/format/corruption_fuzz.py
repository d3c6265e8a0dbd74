"""A seeded corruption fuzzer (issue 18): damage one file of a small
pylance-written table, read it back, and classify what lance_ops did.

Every file kind a pylance 14 table holds (manifests, the version hint,
transaction files, Arrow and bitmap deletion files, index files, data files)
x every damage (flip a byte, truncate, zero a range, append bytes, delete,
replace with another file of the same kind). After a damage, each read ends
in one of:

* ``right``      -- the rows pylance reads from the *undamaged* table (for
                    the version opened), or the undamaged history;
* ``error``      -- a LanceOpsError naming the damaged file (a deleted
                    manifest: TableNotFoundError naming its version);
* ``as-pylance`` -- other rows, but exactly those pylance reads from the
                    damaged table: damage the format cannot detect (Lance 2.x
                    pages and deletion files carry no checksums, so a flipped
                    value byte decodes to another value in both libraries);
* anything else fails the test: ``wrong`` rows, an ``unnamed`` error, a
  ``crash`` (an exception that is not a LanceOpsError).

The base table is built so that a file *replaced* by another of its kind is
always detectable from the manifest (the assumption is asserted): data files
all differ in size (``DataFile.file_size_bytes``), deletion files in
cardinality (``DeletionFile.num_deleted_rows``).
"""
from __future__ import annotations

import collections
import os
import random
import shutil

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import LanceOpsError, TableNotFoundError, UnsupportedFeatureError
from lance_ops.format.scan import FragmentScan, scan_fragment
from lance_ops.storage.objectstore import ObjectStore
from lance_ops.txn.history import history_rows
from lance_ops.txn.log import open_snapshot

KINDS = ("manifest", "hint", "txn", "deletion_arrow", "deletion_bitmap", "index", "data")
DAMAGES = ("flip", "truncate", "zero", "append", "delete", "replace")
OUTCOMES = ("right", "error", "as-pylance", "wrong", "unnamed", "crash")
FAILURES = ("wrong", "unnamed", "crash")
#: The predicate of the fuzzer's deletes.
DELETE_SQL = "id % 5 = 1"


def build_base(path: str) -> None:
    """The fuzzer's table (pylance 14): 4 fragments of different sizes, two
    data files per fragment (a column added), Arrow and bitmap deletion
    files, a BTREE index, 10 versions."""
    import lance

    def rows(lo, hi):
        ids = pa.array(range(lo, hi), pa.int64())
        return pa.table({"id": ids, "s": pa.array([f"s{i}" for i in range(lo, hi)]),
                         "f": pa.array([i / 4 for i in range(lo, hi)], pa.float64())})

    lance.write_dataset(rows(0, 90), path, enable_stable_row_ids=True)                 # v1
    lance.write_dataset(rows(90, 220), path, mode="append")                            # v2
    lance.write_dataset(rows(220, 390), path, mode="append")                           # v3
    lance.dataset(path).delete("id % 7 = 0 and id < 200 or id % 11 = 0 and id >= 200")  # v4
    lance.dataset(path).create_scalar_index("id", "BTREE")                             # v5
    lance.write_dataset(rows(390, 12390), path, mode="append", max_rows_per_file=20000)  # v6
    lance.dataset(path).delete("id >= 390 and id % 2 = 0 or id < 90 and id % 5 = 0")   # v7
    lance.dataset(path).add_columns({"w": "id * 2"})                                   # v8
    lance.dataset(path).delete("id >= 390 and id % 3 = 0 or id >= 90 and id < 110")   # v9
    lance.dataset(path).delete("id > 12000")                                           # v10


def files_by_kind(path: str) -> dict[str, list[str]]:
    out = collections.defaultdict(list)
    for root, _, names in os.walk(path):
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), path)
            top = rel.split(os.sep)[0]
            if top == "_versions":
                out["manifest" if n.endswith(".manifest") else "hint"].append(rel)
            elif top == "_transactions":
                out["txn"].append(rel)
            elif top == "_deletions":
                out["deletion_arrow" if n.endswith(".arrow") else "deletion_bitmap"].append(rel)
            elif top == "_indices":
                out["index"].append(rel)
            elif top == "data":
                out["data"].append(rel)
    # (by size, then name: pylance's file names are random, sizes are not,
    # so a seed picks the same file in every run)
    return {k: sorted(v, key=lambda r: (os.path.getsize(os.path.join(path, r)), r)) for k, v in out.items()}


def id_data_files(path: str) -> list[str]:
    """Data files of the latest version holding the ``id`` column (a delete
    on ``id`` must read them)."""
    snap = open_snapshot(ObjectStore(path))
    rels = {f"data/{df.path}" for frag in snap.fragments for df in frag.files if 0 in df.fields}
    return [r for r in files_by_kind(path)["data"] if r in rels]


def check_base(path: str) -> None:
    """The assumptions the fuzzer's "replace" damage relies on."""
    import lance

    kinds = files_by_kind(path)
    assert set(KINDS) <= set(kinds), kinds.keys()
    assert all(len(kinds[k]) >= 2 for k in KINDS if k != "hint"), {k: len(v) for k, v in kinds.items()}
    sizes = [os.path.getsize(os.path.join(path, r)) for r in kinds["data"]]
    assert len(set(sizes)) == len(sizes), sizes
    files = {}
    store = ObjectStore(path)
    for v in range(1, lance.dataset(path).version + 1):
        for frag in open_snapshot(store, v).fragments:
            if frag.HasField("deletion_file"):
                d = frag.deletion_file
                files[(frag.id, d.read_version, d.id)] = d.num_deleted_rows
    assert len(set(files.values())) == len(files), files


def read_all(store: ObjectStore, version: int | None = None, columns=None) -> tuple[int, pa.Table]:
    """Spark-free scan of every fragment of a version: (version, rows by id)."""
    snap = open_snapshot(store, version)
    cols = columns or [f.name for f in snap.schema.fields]
    batches = []
    for frag in snap.fragments:
        batches.extend(scan_fragment(store, snap.schema, FragmentScan(frag, cols)))
    schema = pa.schema([snap.schema.to_arrow().field(c) for c in cols])
    t = pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()
    return snap.version, t.sort_by("id")


def pylance_rows(path: str, version: int) -> pa.Table:
    import lance

    return lance.dataset(path, version=version).to_table().sort_by("id")


def pylance_history(path: str, versions: list[int]) -> list[tuple] | None:
    """pylance's reading of the (damaged) table's transactions, in
    :func:`history_key`'s shape, for the versions ours listed (newest first);
    None when pylance cannot read them."""
    import lance

    try:
        txns = lance.dataset(path).get_transactions(len(versions))
    except BaseException:  # noqa: BLE001 (pylance refuses: not "as-pylance")
        return None
    if len(txns) != len(versions) or any(t is None for t in txns):
        return None
    return [(v, type(t.operation).__name__, t.read_version, t.uuid) for v, t in zip(versions, txns)]


def history_key(rows) -> list[tuple]:
    return [(r["version"], r["operation"], r["readVersion"], r["transactionUuid"]) for r in rows]


def same_rows(a: pa.Table, b: pa.Table) -> bool:
    return a.num_rows == b.num_rows and a.select(b.column_names).to_pylist() == b.to_pylist()


def after_delete(t: pa.Table) -> pa.Table:
    """``t`` without the rows DELETE_SQL removes (ids are non-negative)."""
    ids = t["id"]
    return t.filter(pc.not_equal(pc.subtract(ids, pc.multiply(pc.divide(ids, 5), 5)), 1))


class Reference:
    """pylance's reading of the undamaged base table (every version) and our
    undamaged history."""

    def __init__(self, path: str):
        import lance

        self.path = path
        self.latest = lance.dataset(path).version
        self.rows = {v: pylance_rows(path, v) for v in range(1, self.latest + 1)}
        self.history = history_key(history_rows(ObjectStore(path)))
        self.kinds = files_by_kind(path)


def damage(path: str, rel: str, kind: str, how: str, rng: random.Random, others: list[str]) -> str:
    """Apply damage ``how`` to file ``rel`` of the table at ``path``; returns a
    short description."""
    full = os.path.join(path, rel)
    data = bytearray(open(full, "rb").read())
    if how == "delete":
        os.unlink(full)
        return "deleted"
    if how == "replace":
        if kind == "hint":
            new = b'{"version":%d}' % rng.randint(1, 9)
        else:
            src = rng.choice([o for o in others if o != rel])
            new = open(os.path.join(path, src), "rb").read()
        open(full, "wb").write(new)
        return "replaced"
    if how == "flip":
        i = rng.randrange(len(data))
        data[i] ^= rng.randint(1, 255)
        desc = f"flip at {i}"
    elif how == "truncate":
        n = rng.randrange(len(data))
        del data[n:]
        desc = f"truncate to {n}"
    elif how == "zero":
        i = rng.randrange(len(data))
        n = rng.randint(1, 64)
        data[i:i + n] = bytes(len(data[i:i + n]))
        desc = f"zero {n} at {i}"
    elif how == "append":
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        desc = "append"
    else:
        raise ValueError(how)
    open(full, "wb").write(bytes(data))
    return desc


def _manifest_version(rel: str) -> int:
    """Version of a manifest named by Lance's V2 scheme (u64::MAX - version)."""
    return 2**64 - 1 - int(os.path.basename(rel).split(".")[0])


def classify_error(e: BaseException, rel: str, kind: str, how: str, version: int | None = None,
                   data_files: set[str] | None = None) -> str:
    if not isinstance(e, LanceOpsError):
        return "crash"
    msg = str(e)
    if os.path.basename(rel) in msg:
        return "error"
    if kind == "manifest" and how in ("delete", "truncate") and isinstance(e, TableNotFoundError):
        return "error"  # a manifest gone: "version k does not exist"
    if kind == "index" and os.path.dirname(rel).split(os.sep)[-1] in msg:
        return "error"
    if kind == "manifest" and "named by the manifest is missing" in msg and getattr(e, "path", None) \
            and os.path.basename(str(e.path)) not in (data_files or ()):
        # a damaged byte inside a data file's name: the manifest names a file
        # no writer made (the error names that path, which only the manifest holds)
        return "error"
    if kind == "manifest" and isinstance(e, UnsupportedFeatureError) and f"version {_manifest_version(rel)}:" in msg:
        # a damaged file-format version number in the manifest of the version named
        return "error"
    return "unnamed"


def run_case(base: str, ref: Reference, work: str, kind: str, how: str, seed: int) -> dict:
    """One damage, then Spark-free reads of the latest version, every
    version (time travel) and history. Returns {check: (outcome, detail)} and
    the damaged copy's path under ``work``."""
    rng = random.Random(f"{kind}/{how}/{seed}")
    path = os.path.join(work, f"{kind}-{how}-{seed}")
    shutil.copytree(base, path)
    files = ref.kinds[kind]
    rel = rng.choice(files)
    desc = damage(path, rel, kind, how, rng, files)
    out: dict = {"_file": rel, "_damage": desc, "_path": path}
    out["latest"] = read_check(path, ref, None, rel, kind, how)
    for v in range(1, ref.latest + 1):
        out[f"v{v}"] = read_check(path, ref, v, rel, kind, how)
    try:
        got = history_key(history_rows(ObjectStore(path)))
        if got == ref.history:
            out["history"] = ("right", "")
        elif kind == "manifest" and how == "delete" and got == [h for h in ref.history if h[0] in {g[0] for g in got}]:
            out["history"] = ("right", "a version less")
        elif got == pylance_history(path, [g[0] for g in got]):
            out["history"] = ("as-pylance", "")
        else:
            out["history"] = ("wrong", f"{got} != {ref.history}")
    except BaseException as e:  # noqa: BLE001 (classified)
        out["history"] = (classify_error(e, rel, kind, how), f"{type(e).__name__}: {e}")
    return out


def read_check(path: str, ref: Reference, version: int | None, rel: str, kind: str, how: str):
    try:
        v, got = read_all(ObjectStore(path), version)
    except BaseException as e:  # noqa: BLE001 (classified)
        known = {os.path.basename(f) for f in ref.kinds["data"]}
        return classify_error(e, rel, kind, how, version, known), f"{type(e).__name__}: {e}"
    if same_rows(got, ref.rows[v]):
        return "right", f"v{v}"
    try:
        theirs = pylance_rows(path, v)
    except BaseException as e:  # noqa: BLE001
        return "wrong", f"v{v}: pylance raises on the damaged table ({type(e).__name__}: {e})"
    if same_rows(got, theirs):
        return "as-pylance", f"v{v}"
    return "wrong", f"v{v}: {got.num_rows} rows, undamaged {ref.rows[v].num_rows}, pylance {theirs.num_rows}"


def tally(results: list[dict], table: dict | None = None) -> dict:
    """(damage, kind) -> Counter of outcomes over every check of every case."""
    table = table if table is not None else collections.defaultdict(collections.Counter)
    for r in results:
        key = (r["_how"], r["_kind"])
        for check, val in r.items():
            if not check.startswith("_"):
                table[key][val[0]] += 1
    return table


def format_table(table: dict) -> str:
    lines = ["| damage | file kind | " + " | ".join(OUTCOMES) + " |", "|---|---|" + "---|" * len(OUTCOMES)]
    for how in DAMAGES:
        for kind in KINDS:
            c = table.get((how, kind))
            if c:
                lines.append(f"| {how} | {kind} | " + " | ".join(str(c.get(o, 0)) for o in OUTCOMES) + " |")
    return "\n".join(lines)


def failures(results: list[dict]) -> list[str]:
    bad = []
    for r in results:
        for check, val in r.items():
            if not check.startswith("_") and val[0] in FAILURES:
                bad.append(f"{r['_kind']}/{r['_how']} {r['_file']} ({r['_damage']}) {check}: {val[0]} {val[1]}")
    return bad


def fuzz(base: str, ref: Reference, work: str, seeds, kinds=KINDS, damages=DAMAGES) -> list[dict]:
    results = []
    for seed in seeds:
        for kind in kinds:
            for how in damages:
                r = run_case(base, ref, work, kind, how, seed)
                r["_kind"], r["_how"] = kind, how
                shutil.rmtree(r["_path"], ignore_errors=True)
                results.append(r)
    return results


def write_report(name: str, results: list[dict]) -> None:
    """Outcome table to $LANCE_OPS_FUZZ_REPORT/<name>.md when set (for the
    issue note)."""
    where = os.environ.get("LANCE_OPS_FUZZ_REPORT")
    if not where:
        return
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, f"{name}.md"), "w") as f:
        f.write(f"{len(results)} cases\n\n" + format_table(tally(results)) + "\n")
