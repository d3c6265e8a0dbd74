"""A bloom filter of join keys, probed row by row inside scan tasks.

A merge whose source has too many distinct keys for an ``IN`` list (see
:mod:`lance_ops.ops.mergekeys`) still needs only the target rows whose key
is among the source's. Spark builds a split-block bloom filter of the source
keys (a bit array, two bits a key, sized for the approximate distinct
count), and the target scan's tasks drop every row whose key the filter
rules out *before* the rows cross into the JVM for the join. A filter has no
false negatives, and ``=`` never matches a null, so the join sees every row
that can match.

Both sides must hash equal keys (Spark's ``=``) to the same value, so keys
are canonicalized first: integers of any width as int64, dates as int64
days, timestamps as int64 microseconds, strings (default binary collation) as
their UTF-8 bytes. The hash is vectorized (numpy), not pylance's xxhash: it
never leaves the operation that built it. No Spark here.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

#: Filter bits per distinct key: with two bits a key, about 1.4% false
#: positives (a target row read for nothing now and then is harmless).
BITS_PER_KEY = 16
#: Largest filter built (bytes): about 2M distinct keys.
MAX_BYTES = 1 << 22

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_P = np.uint64(0x100000001B3)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (wrapping uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * _M1
        x = x ^ (x >> np.uint64(27))
        x = x * _M2
        return x ^ (x >> np.uint64(31))


def key_kind(t: pa.DataType) -> str | None:
    """How values of Arrow type ``t`` are hashed ("int" / "str"); None:
    not supported."""
    if pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "int"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    return None


def _int_values(values: pa.Array) -> np.ndarray:
    t = values.type
    if pa.types.is_timestamp(t):
        values = values.cast(pa.timestamp("us", t.tz), safe=False)
    elif pa.types.is_date64(t):
        values = values.cast(pa.date32(), safe=False)
    if not pa.types.is_integer(values.type):
        values = values.view(pa.int64() if values.type.bit_width == 64 else pa.int32())
    return values.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).view(np.uint64)


def _str_hashes(values: pa.Array) -> np.ndarray:
    """A polynomial hash of each string's bytes (then mixed), vectorized over
    the Arrow buffers."""
    arr = values.cast(pa.large_binary()).fill_null(b"")
    n = len(arr)
    _, offs_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offs_buf, dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    start, end = offsets[:-1], offsets[1:]
    lengths = end - start
    data = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0]:offsets[-1]] if data_buf is not None else np.empty(0, np.uint8)
    out = lengths.astype(np.uint64) * _M2
    if len(data):
        rel = start - offsets[0]
        pos = np.arange(len(data), dtype=np.int64) - np.repeat(rel, lengths)
        powers = np.ones(int(lengths.max()), dtype=np.uint64)
        with np.errstate(over="ignore"):
            if len(powers) > 1:
                powers[1:] = np.cumprod(np.full(len(powers) - 1, _P, dtype=np.uint64))
            contrib = (data.astype(np.uint64) + np.uint64(1)) * powers[pos]
        nonempty = lengths > 0
        sums = np.add.reduceat(contrib, rel[nonempty]) if nonempty.any() else np.empty(0, np.uint64)
        with np.errstate(over="ignore"):
            out[nonempty] += sums
    return out


def key_hashes(values: pa.Array) -> np.ndarray:
    """One uint64 hash per value (nulls hash as some value: mask them)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    kind = key_kind(values.type)
    if kind == "int":
        return _mix(_int_values(values))
    if kind == "str":
        return _mix(_str_hashes(values))
    raise TypeError(f"no key filter for {values.type}")


def filter_size(ndv: int) -> int | None:
    """Bytes of a filter for about ``ndv`` distinct keys (a power of two,
    :data:`BITS_PER_KEY` bits a key); None if larger than :data:`MAX_BYTES`."""
    bits = max(1 << 13, int(ndv) * BITS_PER_KEY)
    nbytes = 1 << (int(bits - 1).bit_length() - 3)
    return nbytes if nbytes <= MAX_BYTES else None


def _bits(h: np.ndarray, nbits: int) -> tuple[np.ndarray, np.ndarray]:
    """The two bit positions of each hash (its low and high 32 bits)."""
    mask = np.uint64(nbits - 1)
    return (h & mask).astype(np.int64), ((h >> np.uint64(32)) & mask).astype(np.int64)


def build(values: pa.Array, nbytes: int) -> bytes:
    """The filter (``nbytes``) holding the non-null ``values``."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = values.drop_null()
    bits = np.zeros(nbytes * 8, dtype=bool)
    if len(values):
        a, b = _bits(key_hashes(values), nbytes * 8)
        bits[a] = True
        bits[b] = True
    return np.packbits(bits, bitorder="little").tobytes()


def union(filters: list[bytes]) -> bytes:
    """Filters of the same size united (a key in any is in the result)."""
    acc = np.frombuffer(filters[0], dtype=np.uint8).copy()
    for f in filters[1:]:
        acc |= np.frombuffer(f, dtype=np.uint8)
    return acc.tobytes()


def fold(filter_bytes: bytes, nbytes: int) -> bytes:
    """The filter as if built at the smaller size ``nbytes`` (a power of
    two): a key's bits are its hash modulo the bit count, so halving a
    filter is OR-ing its two halves -- exactly the filter of the same keys
    built at half the size."""
    acc = np.frombuffer(filter_bytes, dtype=np.uint8)
    if nbytes > len(acc) or nbytes & (nbytes - 1):
        raise ValueError(f"cannot fold a {len(acc)}-byte filter to {nbytes} bytes")
    while len(acc) > nbytes:
        half = len(acc) // 2
        acc = acc[:half] | acc[half:]
    return acc.tobytes()


def may_contain_each(filter_bytes: bytes, values: pa.Array) -> pa.Array:
    """Per value: whether the filter may hold it (null: False)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not len(values):
        return pa.array([], pa.bool_())
    packed = np.frombuffer(filter_bytes, dtype=np.uint8)
    a, b = _bits(key_hashes(values), len(packed) * 8)
    hit = ((packed[a >> 3] >> (a & 7).astype(np.uint8)) & (packed[b >> 3] >> (b & 7).astype(np.uint8)) & 1).astype(bool)
    if values.null_count:
        hit &= ~values.is_null().to_numpy(zero_copy_only=False)
    return pa.array(hit, pa.bool_())


__all__ = ["BITS_PER_KEY", "MAX_BYTES", "key_kind", "key_hashes", "filter_size", "build", "union", "may_contain_each"]
