"""Zone maps and bloom filter zones as columns, judged a conjunct at a time.

Why: a ZONEMAP holds one zone per 8192 rows, so turning every zone into a
Python object (and calling a Python function per zone) made the driver's
memory and time for every delete / update / read plan grow with the table
(0.2 -> 0.5 MiB from 1M to 10M rows in ``bench_skipping``). Here an index's
zones stay numpy / Arrow columns -- ``fragment_id``, ``start``, ``end``,
``null_count``, ``nan_count``, ``min`` / ``max`` in the comparison domain, the
bloom filter bytes as one binary column -- sorted once by (fragment, start),
and a conjunct is judged against every zone at once (a few numpy or
``pyarrow.compute`` operations give a keep-mask). Driver memory is then flat
in table size: what a plan allocates per zone is a bit or a machine word.

The rules are exactly those of :func:`lance_ops.format.pruning.zone_may_match`
(the per-zone definition; ``tests/format/test_zone_arrays.py`` checks the two
agree on generated zones and conjuncts). Every comparison is exact as
Python's is -- an integer column against a float literal, a float column
against an integer literal that no double holds, literals beyond the
column type's range -- by turning a literal ``v`` into two domain values
``a <= v <= b`` with ``x <= v  <=>  x <= a`` and ``v <= x  <=>  b <= x``
(``a = b = v`` when the domain holds ``v``; floor / ceiling otherwise):
``<`` and ``>`` follow as negations, ``=`` and ``IN`` as range tests.

Comparison domains: integers, booleans, timestamps (integer microseconds,
as :func:`.zones.stat_values`) and dates (days) as int64 / uint64; floats as
float64; strings as Arrow binary (UTF-8 byte order = code point order; a
literal's lone surrogates are encoded with ``surrogatepass``, which keeps
that order). ``min`` / ``max`` nulls are kept as validity masks.
"""
from __future__ import annotations

import datetime
import math
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_EPOCH_DAY = datetime.date(1970, 1, 1)


class ZoneArrays:
    """The zones of one ZONEMAP or BLOOMFILTER index, sorted by (fragment,
    start). ``lo`` / ``hi``: ``min`` / ``max`` in the comparison domain
    (numpy for numbers, Arrow binary for strings; None: unknown bounds, as
    bloom filter zones have), ``lo_ok`` / ``hi_ok`` where they are not null.
    ``bloom``: a bloom filter index's filter bytes (Arrow binary, as
    the file's table holds them) or None."""

    def __init__(self, fragment_id, start, end, null_count, nan_count, lo=None, hi=None, bloom=None):
        order = np.lexsort((start, fragment_id))  # (stable: ties keep file order)
        self.fragment_id = np.asarray(fragment_id, dtype=np.int64)[order]
        self.start = np.asarray(start, dtype=np.int64)[order]
        self.end = np.asarray(end, dtype=np.int64)[order]
        self.null_count = np.asarray(null_count, dtype=np.int64)[order]
        self.nan_count = np.asarray(nan_count, dtype=np.int64)[order]
        #: "int" (also booleans, timestamps), "float", "date" (days), "bytes"; None: unknown bounds
        self.kind = None
        self.lo = self.hi = self.lo_ok = self.hi_ok = None
        if lo is not None:
            try:
                self.lo, self.lo_ok, self.kind = _domain(lo, order)
                self.hi, self.hi_ok, _ = _domain(hi, order)
            except TypeError:  # (statistics of a type never pruned: bounds unknown, zones kept)
                lo = None
                self.kind = self.lo = self.hi = self.lo_ok = self.hi_ok = None
        if lo is not None:
            # what every conjunct asks, once per index (plans then allocate
            # a mask or two per conjunct, nothing else per zone)
            self.only_nulls = ~self.lo_ok & ~self.hi_ok & (self.nan_count == 0)
            self.both = self.lo_ok & self.hi_ok
            self.unsure = ~self.only_nulls & ~self.both  # (inconsistent stats: keep)
            if self.kind == "float":
                # a NaN bound (pylance's total order) is unknown in its direction
                lo_nan, hi_nan = np.isnan(self.lo), np.isnan(self.hi)
                self.has_nan = (self.nan_count > 0) | lo_nan | hi_nan
                self.lo_f = np.where(lo_nan, -np.inf, self.lo)
                self.hi_f = np.where(hi_nan, np.inf, self.hi)
        self.bloom = None
        if bloom is not None:
            # the filters stay where the file's table holds them (no copy):
            # per zone, where its bytes start and end in that buffer
            if isinstance(bloom, pa.ChunkedArray):
                bloom = bloom.chunk(0) if bloom.num_chunks == 1 else bloom.combine_chunks()
            if not (pa.types.is_binary(bloom.type) or pa.types.is_large_binary(bloom.type)):
                bloom = bloom.cast(pa.binary())
            large = pa.types.is_large_binary(bloom.type)
            offsets = np.frombuffer(bloom.buffers()[1], dtype=np.int64 if large else np.int32)
            offsets = offsets[bloom.offset:bloom.offset + len(bloom) + 1].astype(np.int64)
            self.bloom_start, self.bloom_end = offsets[:-1][order], offsets[1:][order]
            sizes = self.bloom_end - self.bloom_start
            valid = bloom.is_valid().to_numpy(zero_copy_only=False)[order]
            # (bytes of a split-block filter: whole 32-byte blocks, else unusable)
            self.bloom_ok = valid & (sizes > 0) & (sizes % 32 == 0)
            data = bloom.buffers()[2]
            self.bloom_data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
            self.bloom = bloom
        self.fragments, first = np.unique(self.fragment_id, return_index=True)
        self.offsets = np.append(first, len(self.fragment_id))

    def __len__(self) -> int:
        return len(self.fragment_id)

    def slice_of(self, fragment_id: int) -> tuple[int, int] | None:
        """The positions [a, b) of the fragment's zones (None: it has none)."""
        i = int(np.searchsorted(self.fragments, fragment_id))
        if i == len(self.fragments) or self.fragments[i] != fragment_id:
            return None
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def bloom_bytes(self, i: int):
        """Zone ``i``'s filter bytes (a view, no copy); None when unusable."""
        if self.bloom is None or not self.bloom_ok[i]:
            return None
        return self.bloom_data[self.bloom_start[i]:self.bloom_end[i]]

    # ---------------------------------------------------------- building
    @classmethod
    def from_zonemap(cls, t: pa.Table) -> "ZoneArrays":
        """From a ``zonemap.lance`` table (see :mod:`.zones`)."""
        start = _ints(t.column("zone_start"))
        return cls(_ints(t.column("fragment_id")), start, start + _ints(t.column("zone_length")),
                   _ints(t.column("null_count")), _ints(t.column("nan_count")), t.column("min"), t.column("max"))

    @classmethod
    def from_bloomfilter(cls, t: pa.Table) -> "ZoneArrays":
        """From a ``bloomfilter.lance`` table: unknown bounds, ``has_null``
        as a null count of 0 / 1, the filters."""
        start = _ints(t.column("zone_start"))
        has_null = t.column("has_null").fill_null(False).to_numpy().astype(np.int64)
        bloom = (t.column("bloom_filter_data") if "bloom_filter_data" in t.column_names
                 else pa.nulls(t.num_rows, pa.binary()))
        return cls(_ints(t.column("fragment_id")), start, start + _ints(t.column("zone_length")), has_null,
                   np.zeros(t.num_rows, np.int64), bloom=bloom)


def _ints(col) -> np.ndarray:
    return np.asarray(col.to_numpy(), dtype=np.int64)


def _domain(arr, order: np.ndarray):
    """A ``min`` / ``max`` column in the comparison domain, in ``order``;
    where it is not null; the domain's kind."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.take(pa.array(order))
    ok = arr.is_valid().to_numpy(zero_copy_only=False)
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return arr.cast(pa.large_binary()).fill_null(b""), ok, "bytes"
    kind = "date" if pa.types.is_date(t) else "float" if pa.types.is_floating(t) else "int"
    if pa.types.is_timestamp(t):  # (as zones.stat_values: microseconds, finer units truncated)
        arr = arr.cast(pa.timestamp("us", t.tz), safe=False).cast(pa.int64())
    elif pa.types.is_date64(t):
        arr = arr.cast(pa.date32(), safe=False)
    if pa.types.is_date32(arr.type):
        arr = arr.cast(pa.int32())
    if pa.types.is_boolean(arr.type):
        arr = arr.cast(pa.int8())
    if pa.types.is_floating(arr.type):
        return arr.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False), ok, kind
    if pa.types.is_unsigned_integer(arr.type):
        return arr.cast(pa.uint64()).fill_null(0).to_numpy(zero_copy_only=False), ok, kind
    if pa.types.is_integer(arr.type):
        return arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), ok, kind
    raise TypeError(f"no comparison domain for zone statistics of type {t}")


# ------------------------------------------------------------------ literals
class _Foreign(Exception):
    """A literal Python cannot order against the domain (a TypeError in
    ``zone_may_match``: the zone is kept)."""


def _bounds(v, kind: str):
    """``(a, b)`` for literal ``v`` in a domain of ``kind`` (see the module
    docstring): domain values, or Python numbers outside the domain's range
    (``_le`` / ``_ge`` know), or +-inf; None for NaN outside floats (no
    comparison holds). Raises _Foreign when Python could not compare."""
    if isinstance(v, np.generic):
        v = v.item()
    if kind == "bytes":
        if not isinstance(v, str):
            raise _Foreign(v)
        s = pa.scalar(v.encode("utf-8", "surrogatepass"), pa.large_binary())
        return s, s
    if kind == "date":
        if not isinstance(v, datetime.date) or isinstance(v, datetime.datetime):
            raise _Foreign(v)
        d = (v - _EPOCH_DAY).days
        return d, d
    if not isinstance(v, (int, float)):
        raise _Foreign(v)
    if kind == "float":
        if isinstance(v, float) or _float_exact(v):
            return float(v), float(v)
        a = _float_floor(v)  # (no double is v: the two around it)
        return a, math.nextafter(a, math.inf)
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if math.isinf(v):
            return v, v
        return math.floor(v), math.ceil(v)
    return int(v), int(v)


def _float_exact(v: int) -> bool:
    try:
        return float(v) == v
    except OverflowError:
        return False


def _float_floor(v: int) -> float:
    """The largest double <= integer ``v`` (none is equal)."""
    try:
        f = float(v)
    except OverflowError:
        return sys.float_info.max if v > 0 else -math.inf
    return math.nextafter(f, -math.inf) if f > v else f


def _le(x, a) -> np.ndarray:
    """``x <= a`` elementwise, exactly (``a`` may lie outside x's range)."""
    if isinstance(x, pa.Array):
        return pc.less_equal(x, a).to_numpy(zero_copy_only=False)
    if x.dtype.kind in "iu" and not isinstance(a, float):
        info = np.iinfo(x.dtype)
        if a >= info.max:
            return np.ones(len(x), bool)
        if a < info.min:
            return np.zeros(len(x), bool)
        return x <= x.dtype.type(a)
    return x <= a


def _ge(x, b) -> np.ndarray:
    """``x >= b`` elementwise, exactly."""
    if isinstance(x, pa.Array):
        return pc.greater_equal(x, b).to_numpy(zero_copy_only=False)
    if x.dtype.kind in "iu" and not isinstance(b, float):
        info = np.iinfo(x.dtype)
        if b <= info.min:
            return np.ones(len(x), bool)
        if b > info.max:
            return np.zeros(len(x), bool)
        return x >= x.dtype.type(b)
    return x >= b


def _isnan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


# ------------------------------------------------------------------ judging
def may_match(zs: ZoneArrays, c, is_float: bool) -> np.ndarray:
    """Keep-mask over ``zs``: False only where no row a zone's stats
    describe can satisfy conjunct ``c`` (normalized: see
    :func:`.pruning.normalize`). Zone by zone, this is exactly
    :func:`.pruning.zone_may_match`."""
    n = len(zs)
    if c.op == "isnull":
        return zs.null_count > 0
    if zs.kind is None:  # (unknown bounds)
        return np.ones(n, bool)
    if c.op == "notnull":
        return ~zs.only_nulls
    if c.op == "in":
        values = [v for v in c.value if v is not None]
        if not values:
            return np.zeros(n, bool)
        m = _any_equal(zs, values, is_float)
    elif c.value is None:
        return np.zeros(n, bool)
    else:
        m = _compare(zs, c.op, c.value, is_float)
    m = m if m.flags.writeable else m.copy()
    m &= zs.both
    m |= zs.unsure
    return m


def _bounds_of(zs: ZoneArrays, is_float: bool):
    return (zs.lo_f, zs.hi_f) if is_float and zs.kind == "float" else (zs.lo, zs.hi)


def _compare(zs: ZoneArrays, op: str, v, is_float: bool) -> np.ndarray:
    """Where zones with both bounds may hold a row ``x op v``."""
    n = len(zs)
    lo, hi = _bounds_of(zs, is_float)
    if is_float and _isnan(v):
        return {"=": zs.has_nan.copy(), ">": np.zeros(n, bool), ">=": zs.has_nan.copy(),
                "<": np.ones(n, bool), "<=": np.ones(n, bool)}[op]
    try:
        ab = _bounds(v, zs.kind)
    except _Foreign:
        return np.ones(n, bool)
    if ab is None:
        return np.zeros(n, bool)
    a, b = ab
    if op == "=":
        m = _le(lo, a)
        m &= _ge(hi, b)
        return m
    if op in (">", ">="):
        m = ~_le(hi, a) if op == ">" else _ge(hi, b)
        if is_float:
            m |= zs.has_nan
        return m
    return ~_ge(lo, b) if op == "<" else _le(lo, a)


def _any_equal(zs: ZoneArrays, values: list, is_float: bool) -> np.ndarray:
    """Where zones with both bounds may hold a row equal to one of
    ``values`` (no None): every literal turned into its (a, b), then one
    sorted search for all zones (the first a >= min has the smallest b)."""
    n = len(zs)
    out = np.zeros(n, bool)
    lo, hi = _bounds_of(zs, is_float)
    if is_float and any(_isnan(v) for v in values):
        out |= zs.has_nan
        values = [v for v in values if not _isnan(v)]
    pairs = []
    for v in values:
        try:
            ab = _bounds(v, zs.kind)
        except _Foreign:
            return np.ones(n, bool)
        if ab is not None:
            pairs.append(ab)
    if not pairs:
        return out
    if zs.kind == "bytes":  # (ranks: one integer order for bounds and literals)
        lits = pa.array([p[0].as_py() for p in pairs], pa.large_binary())
        ranks = pc.rank(pa.concat_arrays([lo, hi, lits]), tiebreaker="dense").to_numpy().astype(np.int64)
        lo, hi = ranks[:n], ranks[n:2 * n]
        a = b = np.sort(ranks[2 * n:])
    else:
        if lo.dtype.kind in "iu":  # (a literal outside the type's range equals no value)
            info = np.iinfo(lo.dtype)
            pairs = [(a, b) for a, b in pairs if info.min <= a and b <= info.max]
            if not pairs:
                return out
        pairs.sort()
        a = np.array([p[0] for p in pairs], dtype=lo.dtype)
        b = np.array([p[1] for p in pairs], dtype=lo.dtype)
    i = np.searchsorted(a, lo, side="left")
    found = i < len(a)
    return out | (found & (b[np.minimum(i, len(a) - 1)] <= hi))


# ------------------------------------------------------------------ ranges
def fragment_ranges(zs: ZoneArrays, at: tuple[int, int], keep: np.ndarray, physical_rows: int) -> list:
    """Merged row ranges of the kept zones ``keep`` (a mask over positions
    ``at``) of one fragment, tiled as :func:`.pruning._tile` does: the first
    zone from 0, each to the next zone's start, the last to the fragment's
    end (rows in gaps, deleted when the index was built, are never lost)."""
    a, b = at
    s = zs.start[a:b]
    starts = s.copy()
    starts[0] = 0
    ends = np.append(s[1:], physical_rows)
    kept = keep & (ends > starts)
    ks, ke = starts[kept], ends[kept]
    if not len(ks):
        return []
    # tiles are ordered and touch: a new range starts where one does not
    breaks = np.flatnonzero(ks[1:] > ke[:-1])
    first = np.concatenate(([0], breaks + 1))
    last = np.concatenate((breaks, [len(ks) - 1]))
    return list(zip(ks[first].tolist(), ke[last].tolist()))


__all__ = ["ZoneArrays", "may_match", "fragment_ranges"]
