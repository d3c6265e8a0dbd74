"""Portable roaring bitmap bytes as roaring-rs (and so pylance 14) writes them.

pyroaring (CRoaring) serializes contiguous runs as *run containers* (cookie
12347). roaring-rs, which Lance uses, writes only array and bitmap containers
(cookie 12346, always with the offset header): an index file we build must
hold the same bytes pylance would write for the same rows, so its bitmaps are
serialized here from sorted values. Both libraries read either form.

Layout (little endian): cookie ``u32`` 12346, container count ``u32``; per
container its high 16 bits ``u16`` and cardinality - 1 ``u16``; per container
the byte offset of its store from the start ``u32``; the stores: an *array*
(cardinality <= 4096) of ``u16`` low bits, else a *bitmap* of 1024 ``u64``.
"""
from __future__ import annotations

import numpy as np

SERIAL_COOKIE_NO_RUNCONTAINER = 12346
ARRAY_LIMIT = 4096


def serialize_sorted(values: np.ndarray) -> bytes:
    """The portable (no run container) serialization of the set of ``values``
    (uint32, sorted ascending, no duplicates)."""
    v = np.asarray(values, dtype=np.uint32)
    highs = (v >> np.uint32(16)).astype(np.uint16)
    keys, starts, counts = np.unique(highs, return_index=True, return_counts=True)
    n = len(keys)
    header = np.empty(2 * n, dtype="<u2")
    header[0::2] = keys
    header[1::2] = (counts - 1).astype(np.uint16)
    sizes = np.where(counts > ARRAY_LIMIT, 8192, counts * 2)
    first = 8 + 4 * n + 4 * n
    offsets = (first + np.concatenate([[0], np.cumsum(sizes)[:-1]])).astype("<u4") if n else np.empty(0, "<u4")
    out = [np.array([SERIAL_COOKIE_NO_RUNCONTAINER, n], dtype="<u4").tobytes(), header.tobytes(), offsets.tobytes()]
    lows = (v & np.uint32(0xFFFF)).astype("<u2")
    for s, c in zip(starts, counts):
        part = lows[s:s + c]
        if c > ARRAY_LIMIT:
            bits = np.zeros(65536, dtype=bool)
            bits[part] = True
            out.append(np.packbits(bits, bitorder="little").tobytes())
        else:
            out.append(part.tobytes())
    return b"".join(out)


__all__ = ["serialize_sorted"]
