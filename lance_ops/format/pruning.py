"""Data skipping: which fragments, and which row ranges inside them, a
conjunction of simple predicates may match -- judged from scalar index
statistics alone (no Spark, no data read).

A :class:`Conjunct` is one pushable predicate on a top-level column: a
comparison with a literal (``= < <= > >=``), ``in``, ``isnull``, ``notnull``
(BETWEEN arrives as two comparisons). Semantics are Spark SQL's, and pruning
may only drop rows that *cannot* match:

* a comparison with a null literal matches nothing; nulls match only IS NULL;
* floats: NaN equals NaN and is larger than every other value (so ``x > 5``
  matches NaN rows), ``-0.0 = 0.0`` (Python's IEEE comparison gives exactly
  that for non-NaN values); a NaN bound (pylance's total-order min/max) is
  treated as unknown in its direction;
* strings compare by code point (= UTF-8 byte order, Spark's binary
  collation); timestamps as integer microseconds (see ``zones.stat_values``).

Column types outside :func:`prunable_type` are never pruned. A fragment an
index does not cover is read whole; rows deleted since the index was built
only make zones wider than needed (their stats were taken over more rows),
never narrower. Zone ranges are widened to tile the fragment (a zone runs to
the next zone's start, the first from 0, the last to the fragment's end), so
rows in gaps -- deleted when the index was built -- are never lost.

:func:`zone_may_match` states the rules zone by zone; plans judge a ZONEMAP's
or BLOOMFILTER's zones all at once, as columns (:mod:`.zonearrays`: the same
rules, so the driver's memory stays flat in table size).
"""
from __future__ import annotations

import bisect
import datetime
import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import fragbounds, zonearrays
from .zonearrays import ZoneArrays
from .zones import UNKNOWN, BitmapIndex, Zone, zone_arrays

OPS = ("=", "<", "<=", ">", ">=", "in", "isnull", "notnull")
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


@dataclass(frozen=True)
class Conjunct:
    column: str
    op: str
    #: The literal (comparisons) or literals (``in``); python values.
    value: object = None

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"unknown predicate operator {self.op!r}")

    def flipped(self) -> "Conjunct":
        """``5 < x`` read as ``x > 5``."""
        return Conjunct(self.column, _FLIP[self.op], self.value)


class NotPrunable(Exception):
    """A literal that cannot be put in the column's comparison domain."""


def prunable_type(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t)
        or pa.types.is_large_string(t) or pa.types.is_date32(t) or pa.types.is_timestamp(t)
        or pa.types.is_boolean(t)
    )


_EPOCH = datetime.datetime(1970, 1, 1)


def literal(value, t: pa.DataType):
    """``value`` (as Spark hands literals to Python) in the comparison domain
    of a column of Arrow type ``t``; NotPrunable if it does not fit."""
    if value is None:
        return None
    if pa.types.is_boolean(t):
        if isinstance(value, bool):
            return value
        raise NotPrunable(value)
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NotPrunable(value)
        return value
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if isinstance(value, str):
            return value
        raise NotPrunable(value)
    if pa.types.is_date32(t):
        if isinstance(value, datetime.datetime):
            raise NotPrunable(value)  # a timestamp compared with a date: Spark casts the column
        if isinstance(value, datetime.date):
            return value
        raise NotPrunable(value)
    if pa.types.is_timestamp(t):
        if not isinstance(value, datetime.datetime):
            raise NotPrunable(value)
        if t.tz is None:
            if value.tzinfo is not None:
                raise NotPrunable(value)
            # TimestampNTZ: a wall clock, epoch-relative without a zone
            return (value - _EPOCH) // datetime.timedelta(microseconds=1)
        # TimestampType: Spark hands a naive local time (or an aware one)
        secs = int(value.replace(microsecond=0).timestamp())
        return secs * 1_000_000 + value.microsecond
    raise NotPrunable(value)


def _isnan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def zone_may_match(zone: Zone, c: Conjunct, is_float: bool) -> bool:
    """False only if no row the zone's stats describe can satisfy ``c``.

    The definition, zone by zone: BITMAP keys and BTREE pages are judged
    by it, zone maps by :func:`.zonearrays.may_match` (all zones at once,
    the same rules; tests check they agree)."""
    if c.op == "isnull":
        return zone.null_count > 0
    lo, hi = zone.min, zone.max
    if lo is UNKNOWN or hi is UNKNOWN:
        return True
    only_nulls = lo is None and hi is None and zone.nan_count == 0
    if c.op == "notnull":
        return not only_nulls
    if c.op == "in":
        vals = c.value
        if not is_float and len(vals) > 8 and lo is not None and hi is not None:
            try:  # (normalize sorted them) the first key >= min decides
                i = bisect.bisect_left(vals, lo)
                return i < len(vals) and vals[i] <= hi
            except TypeError:
                return True
        return any(zone_may_match(zone, Conjunct(c.column, "=", v), is_float) for v in vals if v is not None)
    v = c.value
    if v is None or only_nulls:
        return False
    if lo is None or hi is None:  # (inconsistent stats: be safe)
        return True
    if is_float:
        has_nan = zone.nan_count > 0 or _isnan(hi) or _isnan(lo)
        lo_f = -math.inf if _isnan(lo) else lo
        hi_f = math.inf if _isnan(hi) else hi
        if _isnan(v):
            return {"=": has_nan, ">": False, ">=": has_nan, "<": True, "<=": True}[c.op]
        if c.op == "=":
            return lo_f <= v <= hi_f
        if c.op == ">":
            return has_nan or hi_f > v
        if c.op == ">=":
            return has_nan or hi_f >= v
        if c.op == "<":
            return lo_f < v
        return lo_f <= v
    try:
        if c.op == "=":
            return lo <= v <= hi
        if c.op == ">":
            return hi > v
        if c.op == ">=":
            return hi >= v
        if c.op == "<":
            return lo < v
        return lo <= v
    except TypeError:
        return True


def _key_zone(key, is_float: bool) -> Zone:
    """A BITMAP key judged as a one-value zone (NULL key: all null; NaN: all NaN)."""
    if key is None:
        return Zone(0, 0, 0, None, None, 1, 0)
    if is_float and _isnan(key):
        return Zone(0, 0, 0, None, None, 0, 1)
    return Zone(0, 0, 0, key, key, 0, 0)


def bitmap_fragments(index: BitmapIndex, c: Conjunct, is_float: bool) -> set[int] | None:
    """Fragments holding a row whose key may satisfy ``c`` (None: cannot
    tell). Keys are exact values, so each is judged as a one-value zone."""
    out: set[int] = set()
    for key, m in zip(index.keys, index.maps):
        if zone_may_match(_key_zone(key, is_float), c, is_float):
            out.update(m.keys())
    return out


def _probe_values(v, t: pa.DataType) -> pa.Array | None:
    """The column values equal (Spark semantics) to literal ``v`` (in the
    comparison domain), as an Arrow array of the column's own type to hash as
    pylance does; None when that set cannot be stated exactly (then the bloom
    filter is not used)."""
    if v is None:
        return pa.array([], t)  # = NULL matches nothing
    try:
        if pa.types.is_integer(t):
            if type(v) is not int:
                return None  # (a float literal: Spark compares as double)
            return pa.array([v], t)
        if pa.types.is_float64(t):
            if not isinstance(v, float) or math.isnan(v):
                return None  # every NaN bit pattern equals NaN in Spark
            return pa.array([0.0, -0.0] if v == 0 else [v], t)
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return pa.array([v], t) if isinstance(v, str) else None
        if pa.types.is_date32(t):
            return pa.array([v], t)
        if pa.types.is_timestamp(t) and t.unit == "us":
            return pa.array([v], pa.int64()).cast(t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None
    return None


def probe_hashes(c: Conjunct, t: pa.DataType):
    """The hashes to probe bloom filters with for ``c`` (None: ``c`` is not
    an ``=`` / ``in`` whose equal values can be stated exactly)."""
    if c.op not in ("=", "in"):
        return None
    from . import bloom

    values = [c.value] if c.op == "=" else list(c.value)
    arrays = []
    for v in values:
        a = _probe_values(v, t)
        if a is None:
            return None
        arrays.append(a)
    probe = pa.concat_arrays(arrays) if arrays else pa.array([], t)
    return bloom.hashes(probe)


def bloom_may_match(zone: Zone, c: Conjunct, t: pa.DataType, hashes=False) -> bool:
    """False only if the zone's bloom filter proves no row equals the
    literal(s) of an ``=`` / ``in`` conjunct (``hashes``: its
    :func:`probe_hashes`, computed once per plan)."""
    if zone.bloom is None or c.op not in ("=", "in"):
        return True
    from . import bloom

    h = probe_hashes(c, t) if hashes is False else hashes
    return True if h is None else bloom.may_contain(zone.bloom, h)


def bitmap_row_ids(index: BitmapIndex, c: Conjunct, is_float: bool):
    """Sorted uint64 row ids (a row-id BITMAP: map key = high 32 bits) whose
    key may satisfy ``c``; None when a map says "every id" (cannot tell)."""

    parts = []
    for key, m in zip(index.keys, index.maps):
        if not zone_may_match(_key_zone(key, is_float), c, is_float):
            continue
        for hi, lows in m.items():
            if lows is None:
                return None
            parts.append((np.uint64(hi) << np.uint64(32)) | np.asarray(lows.to_array(), dtype=np.uint64))
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.uint64)


#: A BTREE is used only when at most this many of its pages may match a
#: conjunct (their ids are read in the driver: 4096 per page).
BTREE_MAX_PAGES = 256


_COMPARE = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}


def _literal_scalar(v, t: pa.DataType):
    """A comparison literal (comparison domain) as an Arrow scalar to compare
    a column of type ``t`` with as Spark does; None if unsure (NaN, out of
    the type's range)."""
    if v is None or _isnan(v):
        return None
    try:
        if pa.types.is_timestamp(t):
            return pa.scalar(v, pa.int64()).cast(t) if t.unit == "us" else None
        if pa.types.is_floating(t) or (pa.types.is_integer(t) and isinstance(v, float)):
            return pa.scalar(float(v), pa.float64())  # (Spark widens the column to double)
        return pa.scalar(v, t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None


def btree_ids(pages, c: Conjunct, is_float: bool):
    """Sorted unique uint64 row addresses of the BTREE pages whose value
    range may satisfy ``c`` (a superset of the matching rows); None when too
    many pages may match to be worth reading."""
    chosen = [z for z in pages.zones if zone_may_match(z, c, is_float)]
    if len(chosen) > BTREE_MAX_PAGES:
        return None
    if len(chosen) == len(pages.zones) and all(_zone_all_match(z, c, is_float) for z in chosen):
        return None  # (every indexed row may match: no pruning, and no pass over the whole index to learn it)
    if not chosen:
        return np.empty(0, dtype=np.uint64)
    # IS NULL and comparisons (=, IN, <, ...) with non-NaN literals: only the
    # rows that match (Spark's semantics: NaN above every number, -0.0 = 0.0,
    # NULL matches nothing), else every row of the chosen pages
    keep = None
    if c.op == "isnull":
        def keep(values):
            return values.is_null()
    elif c.op in ("=", "<", "<=", ">", ">=", "in"):
        ops = [("=", v) for v in c.value] if c.op == "in" else [(c.op, c.value)]
        tests = [(op, _literal_scalar(v, pages.arrow_type)) for op, v in ops if v is not None]
        if all(lit is not None for _, lit in tests):
            def keep(values):
                mask = pa.array([False] * len(values), pa.bool_())
                for op, lit in tests:
                    m = _COMPARE[op](values, lit)
                    if is_float and op in (">", ">="):
                        m = pc.or_(m, pc.is_nan(values))
                    mask = pc.or_(mask, m.fill_null(False))
                return mask
    return np.unique(pages.read_ids(chosen, keep))


def _zone_all_match(zone: Zone, c: Conjunct, is_float: bool) -> bool:
    """True only if every non-null value in the zone satisfies a range
    conjunct ``c`` (``<``, ``<=``, ``>``, ``>=``; not over floats, whose NaNs
    the stats may not bound). False whenever unsure: the caller then reads
    the page's row ids."""
    if is_float or c.op not in (">", ">=", "<", "<="):
        return False
    lo, hi, v = zone.min, zone.max, c.value
    if lo is UNKNOWN or hi is UNKNOWN or lo is None or hi is None or v is None:
        return False
    try:
        return bool({">": lo > v, ">=": lo >= v, "<": hi < v, "<=": hi <= v}[c.op])
    except TypeError:
        return False


def _holds_any(row_ids, wanted) -> bool:
    if row_ids is None:
        return True  # (no sequence: cannot tell)
    if not len(wanted) or not len(row_ids):
        return False
    pos = np.searchsorted(wanted, row_ids)
    pos[pos == len(wanted)] = 0
    return bool((wanted[pos] == row_ids).any())


# ------------------------------------------------------------------ plans
Range = tuple[int, int]


@dataclass
class ColumnIndex:
    """One index on one column, as pruning needs it."""

    name: str
    column: str
    arrow_type: pa.DataType
    covered: set[int]
    #: A ZONEMAP's or BLOOMFILTER's zones, as columns (a dict fragment id ->
    #: Zone list is turned into them: tests, hand-made indices).
    zones: ZoneArrays | None = None
    bitmap: BitmapIndex | None = None
    #: For a BITMAP holding stable row *ids* (not addresses): fragment ->
    #: its row ids (physical order), to find the fragments of matching ids.
    row_ids_of: object = None
    #: A BTREE's pages (:class:`~.zones.BTreePages`).
    btree: object = None

    def __post_init__(self):
        if isinstance(self.zones, dict):
            self.zones = zone_arrays([z for zs in self.zones.values() for z in zs], self.arrow_type)


@dataclass
class SkipPlan:
    """Per fragment id: the row ranges to read (absent: skip the fragment).
    A fragment with ``[(0, physical_rows)]`` is read whole."""

    ranges: dict[int, list[Range]]
    skipped: list[int]
    #: Index names that pruned something (for logs).
    used: list[str] = field(default_factory=list)

    def rows(self) -> int:
        return sum(e - s for rs in self.ranges.values() for s, e in rs)

    def metrics(self) -> dict:
        return {"numFragmentsScanned": len(self.ranges), "numFragmentsSkipped": len(self.skipped),
                "numRowsScanned": self.rows()}


def _tile(zones: list[Zone], physical_rows: int) -> list[tuple[Zone, Range]]:
    """Zone by zone, the row range each zone stands for (the definition
    :func:`.zonearrays.fragment_ranges` follows; tests compare them)."""
    zs = sorted(zones, key=lambda z: z.start)
    out = []
    for i, z in enumerate(zs):
        start = 0 if i == 0 else z.start
        end = physical_rows if i == len(zs) - 1 else zs[i + 1].start
        if end > start:
            out.append((z, (start, end)))
    return out


def _merge(ranges: list[Range]) -> list[Range]:
    out: list[Range] = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _intersect(a: list[Range], b: list[Range]) -> list[Range]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def normalize(conjuncts, types: dict[str, pa.DataType]) -> list[Conjunct]:
    """Conjuncts on prunable columns with literals in the comparison domain;
    the rest are dropped (they just do not prune)."""
    out = []
    for c in conjuncts:
        t = types.get(c.column)
        if t is None or not prunable_type(t):
            continue
        try:
            if c.op == "in":
                value = tuple(literal(v, t) for v in c.value)
                if not pa.types.is_floating(t):
                    # NULLs (and NaN: not a float column) in an IN list
                    # match nothing; sorted for bisection (a NaN would
                    # break the order)
                    value = tuple(sorted(v for v in value if v is not None and not _isnan(v)))
            elif c.op in ("isnull", "notnull"):
                value = None
            else:
                value = literal(c.value, t)
        except NotPrunable:
            continue
        out.append(Conjunct(c.column, c.op, value))
    return out


def plan(fragments, indices: list[ColumnIndex], conjuncts: list[Conjunct]) -> SkipPlan:
    """The skip plan of ``conjuncts`` (already :func:`normalize`-d) over
    ``fragments`` (DataFragment messages, in order), using ``indices``."""
    by_col: dict[str, list[ColumnIndex]] = {}
    for ix in indices:
        by_col.setdefault(ix.column, []).append(ix)
    ranges: dict[int, list[Range]] = {}
    skipped: list[int] = []
    used: set[str] = set()
    probes: dict[tuple[int, str], object] = {}
    masks: dict[tuple[int, str], np.ndarray] = {}
    vetoes = _zone_vetoes(conjuncts, by_col, masks) + _btree_vetoes(conjuncts, by_col, probes)
    for frag in fragments:
        veto = next((ix for ix, kept in vetoes if kept.get(frag.id, True) is False and frag.id in ix.covered), None)
        if veto is not None:  # (no zone of it may match a conjunct: what the loop below finds, sooner)
            used.add(veto.name)
            skipped.append(frag.id)
            continue
        phys = frag.physical_rows
        current: list[Range] = [(0, phys)]
        for ci, c in enumerate(conjuncts):
            for ix in by_col.get(c.column, ()):
                if frag.id not in ix.covered:
                    continue
                is_float = pa.types.is_floating(ix.arrow_type)
                if ix.btree is not None:
                    held = _btree_fragments(probes, ci, ix, c)
                    if held is not None and frag.id not in held:
                        current = []
                        used.add(ix.name)
                    continue
                if ix.bitmap is not None and ix.row_ids_of is not None:
                    key = (ci, ix.name)
                    if key not in probes:
                        probes[key] = bitmap_row_ids(ix.bitmap, c, is_float)
                    ids = probes[key]
                    if ids is not None and not _holds_any(ix.row_ids_of(frag), ids):
                        current = []
                        used.add(ix.name)
                    continue
                if ix.bitmap is not None:
                    frags = bitmap_fragments(ix.bitmap, c, is_float)
                    if frags is not None and frag.id not in frags:
                        current = []
                        used.add(ix.name)
                    continue
                zs = ix.zones
                at = zs.slice_of(frag.id) if zs is not None else None
                if at is None:
                    continue
                key = (ci, ix.name)
                if key not in masks:  # (every zone of the index at once)
                    masks[key] = zonearrays.may_match(zs, c, is_float)
                keep = masks[key][at[0]:at[1]]
                if zs.bloom is not None and c.op in ("=", "in"):
                    if key not in probes:
                        probes[key] = probe_hashes(c, ix.arrow_type)
                    keep = _bloom_keep(zs, at, keep, probes[key])
                merged = zonearrays.fragment_ranges(zs, at, keep, phys)
                if merged != [(0, phys)]:
                    used.add(ix.name)
                current = _intersect(current, merged)
            if not current:
                break
        if current:
            ranges[frag.id] = current
        else:
            skipped.append(frag.id)
    return SkipPlan(ranges, skipped, sorted(used))


def _btree_fragments(probes: dict, ci: int, ix: ColumnIndex, c: Conjunct) -> set[int] | None:
    """Ids of the fragments holding a row of BTREE ``ix`` that may satisfy
    conjunct ``ci`` (None: the index does not narrow it), probed once."""
    key = (ci, ix.name)
    if key not in probes:
        ids = btree_ids(ix.btree, c, pa.types.is_floating(ix.arrow_type))
        probes[key] = None if ids is None else set(np.unique(ids >> np.uint64(32)).tolist())
    return probes[key]


def _btree_vetoes(conjuncts: list[Conjunct], by_col: dict, probes: dict) -> list[tuple[ColumnIndex, dict]]:
    """:func:`_zone_vetoes` for BTREE indices: (the index, fragment id ->
    whether it holds a row that may match) for each conjunct the index
    narrows, so :func:`plan` skips the others with one lookup each."""
    out = []
    for ci, c in enumerate(conjuncts):
        for ix in by_col.get(c.column, ()):
            if ix.btree is None:
                continue
            held = _btree_fragments(probes, ci, ix, c)
            if held is not None:
                out.append((ix, {f: f in held for f in ix.covered}))
    return out


def _zone_vetoes(conjuncts: list[Conjunct], by_col: dict, masks: dict) -> list[tuple[ColumnIndex, dict]]:
    """For each conjunct and zone map on its column: (the index, fragment id
    -> whether any of its zones may match). A fragment with no such zone is
    skipped whatever the other conjuncts say -- the loop of :func:`plan`
    would build its row ranges conjunct by conjunct to find out; a selective
    plan over thousands of fragments skips almost all of them this way, one
    lookup each. ``masks``: the zone masks, shared with that loop."""
    out = []
    for ci, c in enumerate(conjuncts):
        for ix in by_col.get(c.column, ()):
            zs = ix.zones
            if ix.btree is not None or ix.bitmap is not None or zs is None or not len(zs):
                continue
            key = (ci, ix.name)
            if key not in masks:
                masks[key] = zonearrays.may_match(zs, c, pa.types.is_floating(ix.arrow_type))
            kept = np.logical_or.reduceat(masks[key], zs.offsets[:-1])
            if not kept.all():
                out.append((ix, dict(zip(zs.fragments.tolist(), kept.tolist()))))
    return out


def _bloom_keep(zs: ZoneArrays, at: tuple[int, int], keep: np.ndarray, hashes) -> np.ndarray:
    """``keep`` narrowed by the bloom filters of the zones it still keeps
    (probed one by one: only those zones' bytes are looked at)."""
    from . import bloom

    if hashes is None:
        return keep
    keep = keep.copy()
    for i in np.flatnonzero(keep):
        data = zs.bloom_bytes(at[0] + int(i))
        if data is not None and not bloom.may_contain(data, hashes):
            keep[i] = False
    return keep


def load_indices(store, indices, schema, columns=None, stable_row_ids: bool = False) -> list[ColumnIndex]:
    """The pruning view of a version's ``indices`` (IndexMetadata) on
    top-level columns of ``schema`` (only ``columns`` if given): zone maps,
    bitmaps, bloom filter zones, BTREE pages (their ids are read per plan,
    only for the pages a conjunct may match). Indices of other types, on several or nested
    fields, or on types that are never pruned are left out. Files are read
    through ``lance.file`` (metadata-sized: a zone map is ~100 bytes per 8192
    rows). A BITMAP of a table with stable row ids maps keys to row *ids*
    (checked with pylance 14.0.2), not row addresses: their high bits are no
    fragment id, so with ``stable_row_ids`` a fragment is kept when its row
    id sequence holds a matching id."""
    from .zones import (
        BITMAP,
        BLOOMFILTER,
        BTREE,
        ZONEMAP,
        covered_fragments,
        index_kind,
        read_bitmap,
        read_btree,
        read_zone_arrays,
    )

    top = {f.id: f for f in schema.fields}
    out = []
    for idx in indices:
        kind = index_kind(idx)
        if kind not in (ZONEMAP, BITMAP, BLOOMFILTER, BTREE) or len(idx.fields) != 1 or idx.fields[0] not in top:
            continue

        f = top[idx.fields[0]]
        if columns is not None and f.name not in columns:
            continue
        t = f.arrow_type()
        if not prunable_type(t):
            continue
        ci = ColumnIndex(idx.name, f.name, t, covered_fragments(idx))
        if kind == BTREE:
            # (row addresses, with stable row ids too: pylance 14 remaps
            # BTREEs on compaction)
            ci.btree = read_btree(store, idx)
            if ci.btree is None:
                continue
        elif kind == BITMAP:
            ci.bitmap = read_bitmap(store, idx)
            if stable_row_ids:
                ci.row_ids_of = _row_ids_reader(store)
        else:
            ci.zones = read_zone_arrays(store, idx)
        out.append(ci)
    return out


def _row_ids_reader(store):
    """fragment -> its stable row ids (None: it has no sequence)."""
    from .rowids import ROW_IDS, decode_row_ids, sequence_bytes

    def row_ids(frag):
        data = sequence_bytes(store, frag, ROW_IDS)
        return None if data is None else decode_row_ids(data)

    return row_ids


def skip_plan(snapshot, conjuncts, fragments=None) -> SkipPlan:
    """:func:`plan` for a snapshot (``fragments``: a subset of its
    fragments to plan over; default all)."""
    fragments = list(snapshot.fragments if fragments is None else fragments)
    schema = snapshot.schema
    types = {f.name: f.arrow_type() for f in schema.fields}
    conj = normalize(conjuncts, types)
    if not conj:
        return SkipPlan({f.id: [(0, f.physical_rows)] for f in fragments}, [])
    # fragments' own bounds this process saw (:mod:`.fragbounds`) rule whole
    # fragments out first: one comparison per fragment and conjunct
    kept, ruled_out = fragbounds.prefilter(fragments, schema, conj, zone_may_match)
    if not snapshot.indices:
        return SkipPlan({f.id: [(0, f.physical_rows)] for f in kept}, ruled_out)
    stable = bool(getattr(snapshot, "stable_row_ids", False))
    indices = load_indices(snapshot.store, snapshot.indices, schema, {c.column for c in conj}, stable)
    found = plan(kept, indices, conj)
    return SkipPlan(found.ranges, sorted(set(found.skipped) | set(ruled_out)), found.used)


__all__ = ["load_indices", "skip_plan", "Conjunct", "ColumnIndex", "SkipPlan", "plan", "normalize", "zone_may_match",
           "bloom_may_match", "literal", "prunable_type"]
