"""Split-block bloom filters (SBBF) exactly as pylance 14's BLOOMFILTER index
writes and probes them (rust/lance-index/src/scalar/bloomfilter/sbbf.rs: the
Parquet SBBF over xxhash64, seed 0).

* A value's hash is ``xxh64(bytes, seed=0)`` of its little-endian bytes
  (integers, floats, dates and timestamps at the column's own width and
  unit), of its UTF-8 bytes (strings) or of the bytes themselves (binary).
* The filter is a run of 32-byte blocks (8 little-endian u32 words); a hash
  picks block ``((h >> 32) * n_blocks) >> 32`` and sets, in word ``i``, bit
  ``((h as u32) * SALT[i]) >> 27`` (mod 2**32).
* pylance 14 sizes each zone's filter for 8192 items at a false positive
  probability of 0.00057 (schema metadata ``bloomfilter_item``,
  ``bloomfilter_probability``): 2**15 bytes, :func:`num_bytes`.

Probing only says "may contain" or "cannot contain": pruning with it only
drops zones that cannot hold the value.
"""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SALT = np.array(
    [0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31],
    dtype=np.uint64,
)
DEFAULT_ITEMS = 8192
DEFAULT_PROBABILITY = 0.00057
_LOG2_MIN, _LOG2_MAX = 5, 27


def _false_positive_probability(ndv: int, log_space_bytes: int) -> float:
    """sbbf.rs ``false_positive_probability`` (Putze et al.)."""
    word_bits, bucket_words = 32.0, 8.0
    nbytes = float(1 << log_space_bytes)
    if ndv == 0:
        return 0.0
    if ndv / (nbytes * 8) > 2.0:
        return 1.0
    lam = bucket_words * word_bits / ((nbytes * 8) / ndv)
    loglam = math.log(lam)
    result = 0.0
    for i in range(749, -1, -1):
        logp = i * loglam - lam - math.lgamma(i + 1)
        logfinner = bucket_words * math.log(1.0 - (1.0 - 1.0 / word_bits) ** i) if i else -math.inf
        result += math.exp(logp + logfinner)
    return min(result, 1.0)


def num_bytes(ndv: int = DEFAULT_ITEMS, fpp: float = DEFAULT_PROBABILITY) -> int:
    """Filter size pylance picks for ``ndv`` items at probability ``fpp``."""
    low, high = 0, 64
    while high > low + 1:
        mid = (high + low) // 2
        if _false_positive_probability(ndv, mid) <= fpp:
            high = mid
        else:
            low = mid
    return 1 << min(max(high, _LOG2_MIN), _LOG2_MAX)


def hashable(t: pa.DataType) -> bool:
    """Column types whose values this module hashes as pylance does."""
    return (
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
        or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_date(t)
        or pa.types.is_timestamp(t) or pa.types.is_time(t)
    )


def hashes(values: pa.Array) -> np.ndarray:
    """xxh64 (seed 0) of each non-null value, as pylance hashes them."""
    import xxhash

    t = values.type
    vals = values.drop_null()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        raw = [s.encode() for s in vals.to_pylist()]
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        raw = vals.to_pylist()
    else:
        width = t.bit_width // 8
        storage = pa.int64() if width == 8 else {1: pa.int8(), 2: pa.int16(), 4: pa.int32()}[width]
        if pa.types.is_floating(t):
            arr = np.asarray(vals.to_numpy(zero_copy_only=False))
        else:
            arr = np.asarray(pc.cast(vals, storage, safe=False).to_numpy(zero_copy_only=False))
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        raw = [data[i : i + width] for i in range(0, len(data), width)]
    h = xxhash.xxh64_intdigest
    return np.fromiter((h(b) for b in raw), dtype=np.uint64, count=len(raw))


def _positions(h: np.ndarray, n_blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """(block index, 8 bit masks) of each hash."""
    h = h.astype(np.uint64)
    block = ((h >> np.uint64(32)) * np.uint64(n_blocks)) >> np.uint64(32)
    low = (h & np.uint64(0xFFFFFFFF))[:, None]
    bits = ((low * SALT[None, :]) & np.uint64(0xFFFFFFFF)) >> np.uint64(27)
    return block.astype(np.int64), (np.uint32(1) << bits.astype(np.uint32)).astype(np.uint32)


def build(h: np.ndarray, nbytes: int = 0) -> bytes:
    """The filter (``nbytes``; default pylance's size) holding hashes ``h``."""
    nbytes = nbytes or num_bytes()
    n_blocks = nbytes // 32
    words = np.zeros((n_blocks, 8), dtype=np.uint32)
    if len(h):
        block, masks = _positions(h, n_blocks)
        for i in range(8):
            np.bitwise_or.at(words[:, i], block, masks[:, i])
    return words.astype("<u4").tobytes()


def may_contain(filter_bytes: bytes, h: np.ndarray) -> bool:
    """True if the filter may hold any of hashes ``h``."""
    if not len(h):
        return False
    words = np.frombuffer(filter_bytes, dtype="<u4").reshape(-1, 8)
    block, masks = _positions(np.asarray(h, dtype=np.uint64), len(words))
    return bool(((words[block] & masks) == masks).all(axis=1).any())


__all__ = ["hashes", "build", "may_contain", "num_bytes", "hashable", "DEFAULT_ITEMS", "DEFAULT_PROBABILITY"]
