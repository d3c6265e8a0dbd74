"""Helpers shared by tests: pylance-side table inspection and row comparison."""
from __future__ import annotations

import contextlib
import datetime
import decimal
import glob
import math
import os
import shutil

import pyarrow as pa

from lance_ops.format.manifest import decode_manifest_file
from lance_ops.format.naming import parse_manifest_name


def pylance_pair(tmp_path, table: pa.Table, rows_per_file: int, delete: str | None = None) -> tuple[str, str]:
    """(ours, ref): two identical tables written by pylance with stable row ids
    (``rows_per_file`` rows per fragment, then ``delete`` if given) -- one for
    lance_ops to change, one for pylance to change the same way."""
    import lance

    ref = str(tmp_path / "ref.lance")
    lance.write_dataset(table, ref, max_rows_per_file=rows_per_file, enable_stable_row_ids=True)
    if delete:
        lance.dataset(ref).delete(delete)
    ours = str(tmp_path / "ours.lance")
    shutil.copytree(ref, ours)
    return ours, ref


def manifest_files(path: str) -> dict[int, str]:
    out = {}
    for p in glob.glob(os.path.join(path, "_versions", "*.manifest")):
        parsed = parse_manifest_name(os.path.basename(p))
        if parsed:
            out[parsed[1]] = p
    return out


def read_manifest(path: str, version: int | None = None):
    files = manifest_files(path)
    v = max(files) if version is None else version
    with open(files[v], "rb") as f:
        return decode_manifest_file(f.read(), files[v])


def norm(v):
    """A Python value normalized so Spark rows and Arrow rows compare equal."""
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if hasattr(v, "asDict"):
        return {k: norm(x) for k, x in v.asDict(recursive=False).items()}
    if isinstance(v, (list, tuple)):
        # Map columns come from Arrow as lists of (key, value) tuples.
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v) and isinstance(v, list):
            return {norm(k): norm(x) for k, x in v}
        return [norm(x) for x in v]
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else v
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return v.replace(microsecond=v.microsecond)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def spark_rows(df, sort_by) -> list[dict]:
    rows = [norm(r.asDict(recursive=False)) for r in df.collect()]
    return sorted(rows, key=lambda r: tuple(r[k] for k in sort_by))


def arrow_rows(table: pa.Table, sort_by) -> list[dict]:
    rows = [norm(r) for r in table.to_pylist()]
    return sorted(rows, key=lambda r: tuple(r[k] for k in sort_by))


def assert_same_rows(df, table: pa.Table, sort_by=("_rowid",)):
    a = spark_rows(df, sort_by)
    b = arrow_rows(table, sort_by)
    assert len(a) == len(b), f"row counts differ: spark {len(a)} vs pylance {len(b)}"
    assert set(a[0].keys()) == set(b[0].keys()) if a else True, (sorted(a[0]), sorted(b[0]))
    for i, (x, y) in enumerate(zip(a, b)):
        assert x == y, f"row {i} differs:\n  ours:    {x}\n  pylance: {y}"


def many_versions(path: str, n: int, append_every: int = 0, delete_every: int = 0) -> None:
    """A table of ``n`` versions, fast: version 1 holds 10 rows; later
    versions are UpdateConfig commits -- every ``append_every``-th an Append of
    one row, every ``delete_every``-th a Delete of the fragment appended last
    (data files churn) -- each built by lance_ops' manifest build and written
    straight to the file system with its transaction file (no commit loop:
    a listing per commit would make 30,000 versions take minutes)."""
    import lance
    import pyarrow as pa

    from lance_ops.format.manifest import ManifestFile, encode_manifest_file
    from lance_ops.format.naming import TRANSACTIONS_DIR, ManifestNaming
    from lance_ops.format.writer import write_fragments
    from lance_ops.storage import ObjectStore
    from lance_ops.txn.build import BuildContext, build_manifest
    from lance_ops.txn.log import Snapshot, open_snapshot
    from lance_ops.txn.operations import Append, Delete, Transaction, UpdateConfig

    lance.write_dataset(pa.table({"id": pa.array(range(10), pa.int64())}), path)
    store = ObjectStore(path)
    snap = open_snapshot(store)
    appended = None
    for v in range(2, n + 1):
        if append_every and v % append_every == 0:
            batch = pa.record_batch({"id": pa.array([1000 + v], pa.int64())})
            op = Append(list(write_fragments(store, snap.schema, [batch], snap.data_format_version)))
        elif delete_every and v % delete_every == 0 and appended is not None:
            op = Delete(deleted_fragment_ids=[appended], predicate=f"fragment {appended}")
            appended = None
        else:
            op = UpdateConfig(config_updates=({"k": str(v)}, False))
        txn = Transaction(v - 1, op)
        ctx = BuildContext(previous=snap, version=v, stable_row_ids=True, data_format=None,
                           load_snapshot=lambda x: open_snapshot(store, x))
        manifest, indices = build_manifest(ctx, txn)
        if isinstance(op, Append):
            appended = max(f.id for f in manifest.fragments)
        data = txn.to_bytes()
        with open(os.path.join(path, TRANSACTIONS_DIR, txn.file_name), "wb") as f:
            f.write(data)
        blob = encode_manifest_file(manifest, data, indices, ctx.dictionaries)
        with open(os.path.join(path, ManifestNaming.V2.path(v)), "wb") as f:
            f.write(blob)
        snap = Snapshot(store, v, ManifestFile(manifest, data, indices, len(blob), ctx.dictionaries), ManifestNaming.V2)
@contextlib.contextmanager
def commits_during(*writers):
    """Run each of ``writers`` (another writer's commit: a pylance call, a
    second handle's write) while the next lance_ops write is under way: after
    it prepared its change, before it commits -- as when a concurrent commit
    really lands in the middle of an operation (a handle reads the latest
    version when an operation starts, so only this makes one stale). The
    write then rebases over them, re-runs or fails, as the conflict rules say.
    One writer per lance_ops write, in order; the writers' own lance_ops
    commits pass through."""
    import lance_ops.txn.pipeline as pipeline

    pending = list(writers)
    original = pipeline.commit
    busy = []

    def commit(*args, **kwargs):
        if pending and not busy:
            busy.append(1)
            try:
                pending.pop(0)()
            finally:
                busy.pop()
        return original(*args, **kwargs)

    pipeline.commit = commit
    try:
        yield
    finally:
        pipeline.commit = original
    assert not pending, f"{len(pending)} concurrent writer(s) never ran: no lance_ops write committed"


def committed(t, _result=None):
    """The CommitInfo of the write through ``t`` that just returned
    ``_result`` (a Delta-shaped DataFrame: a merge's, an OPTIMIZE's)."""
    return t.lastCommit()
