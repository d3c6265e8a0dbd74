"""Per-fragment key bounds remembered by the driver: data skipping for tables
without an index on the column.

The CDC pattern -- a few upserts every few minutes into a table of thousands
of small fragments -- reads every fragment's key column on every merge when
the key has no index. But a fragment's rows never change in place: its data
files are immutable and its deletion vector only grows, in a new file. So the
minimum and maximum of a column over a fragment's live rows, computed once by
a scan that read the whole fragment, stay true for that exact fragment state:
the cache key is (data file path, field id, deletion file). A later version
of the fragment (more deletions: a new deletion file) is a cache miss until a
scan reads it again; an older one (time travel) too, so it never prunes on
bounds narrower than its rows.

Bounds are kept for integer and string columns (exact comparison domains,
as :mod:`.pruning` compares them) and offered to the skip planner as
a zone map with one zone per fragment (:func:`column_index`). The merge's
target scan records them as a side effect (:mod:`lance_ops.spark.datasource`);
this process keeps up to :data:`MAX_ENTRIES`.
"""
from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict

import pyarrow as pa
import pyarrow.compute as pc

from .proto import table_pb2

MAX_ENTRIES = 1_000_000
_LOCK = threading.Lock()
_CACHE: "OrderedDict[tuple, tuple]" = OrderedDict()


def supported(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


def key_of(fragment: table_pb2.DataFragment, field_id: int) -> tuple | None:
    """The cache key of ``fragment``'s state for ``field_id`` (None: no data
    file holds the field -- it reads as NULL)."""
    for df in fragment.files:
        if field_id in df.fields:
            dv = fragment.deletion_file if fragment.HasField("deletion_file") else None
            deletion = (dv.read_version, dv.id, dv.num_deleted_rows) if dv is not None and (dv.id or dv.num_deleted_rows) else None
            return (df.path, int(field_id), deletion)
    return None


def stats(arrays) -> tuple:
    """(min, max, null count) of one fragment's column (its live rows), in
    Python values."""
    lo = hi = None
    nulls = 0
    for arr in arrays:
        if len(arr) == 0:
            continue
        nulls += arr.null_count
        mm = pc.min_max(arr)
        a, b = mm["min"].as_py(), mm["max"].as_py()
        if a is None:
            continue
        lo = a if lo is None or a < lo else lo
        hi = b if hi is None or b > hi else hi
    return lo, hi, nulls


def record(key: tuple, value: tuple) -> None:
    with _LOCK:
        _CACHE[key] = value
        _CACHE.move_to_end(key)
        while len(_CACHE) > MAX_ENTRIES:
            _CACHE.popitem(last=False)


def lookup(key: tuple | None) -> tuple | None:
    if key is None:
        return None
    with _LOCK:
        return _CACHE.get(key)


def prefilter(fragments, schema, conjuncts, may_match) -> tuple[list, list[int]]:
    """(fragments that may hold a row matching every conjunct, ids of those
    the known bounds rule out). ``may_match(zone, conjunct, is_float)`` is the
    skip planner's zone test."""
    from .zones import Zone

    by_name = {f.name: f for f in schema.fields}
    checks = [(c, by_name[c.column]) for c in conjuncts
              if c.column in by_name and supported(by_name[c.column].arrow_type())]
    if not checks or not _CACHE:
        return list(fragments), []
    kept, out = [], []
    with _LOCK:
        cache = dict(_CACHE)  # (a consistent view, without holding the lock per lookup)
    for f in fragments:
        deletion = None
        if f.HasField("deletion_file"):
            dv = f.deletion_file
            if dv.id or dv.num_deleted_rows:
                deletion = (dv.read_version, dv.id, dv.num_deleted_rows)
        ruled = False
        for c, field in checks:
            fid = field.id
            path = next((df.path for df in f.files if fid in df.fields), None)
            found = cache.get((path, fid, deletion)) if path is not None else None
            if found is not None and not may_match(Zone(f.id, 0, f.physical_rows, found[0], found[1], found[2]), c,
                                                   False):
                ruled = True
                break
        (out if ruled else kept).append(f.id if ruled else f)
    return kept, out


# ------------------------------------------------------------- side files
def write_records(directory: str, records: list) -> None:
    """One task's ``[(key, (min, max, nulls)), ...]`` as a JSON file in
    ``directory`` (read back by the driver: :func:`load_records`)."""
    import uuid

    if not records:
        return
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{uuid.uuid4().hex}.tmp")
    with open(tmp, "w") as f:
        json.dump([[list(k[:2]) + [list(k[2]) if k[2] else None], list(v)] for k, v in records], f)
    os.replace(tmp, os.path.join(directory, f"{uuid.uuid4().hex}.json"))


def load_records(directory: str) -> int:
    """Remember the bounds the tasks wrote to ``directory``; how many."""
    n = 0
    try:
        names = [x for x in os.listdir(directory) if x.endswith(".json")]
    except FileNotFoundError:
        return 0
    for name in names:
        try:
            with open(os.path.join(directory, name)) as f:
                for k, v in json.load(f):
                    record((k[0], int(k[1]), tuple(k[2]) if k[2] else None), tuple(v))
                    n += 1
        except (OSError, ValueError):
            continue
    return n
