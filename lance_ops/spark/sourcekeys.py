"""A bloom filter of a merge source's keys built in the target scan's own
tasks, from the source's Parquet files.

A merge whose source is a bare scan of local Parquet files learns the
source's row count and key range from the files' footers
(:mod:`lance_ops.ops.sourcefooters`) -- no Spark job. The bloom filter of
the source's keys, which lets the target scan drop the rows no source key
can match before they reach the JVM (:mod:`lance_ops.format.keyfilter`),
needed the statistics job all the same: a Spark job over the source on the
merge's critical path (~0.2 s of a 100k-row upsert into 10M rows here,
plus its planning), whose answer the target scan waited for.

Where the keys are integers the files hold as Spark reads them (the
footers' own condition: the Parquet type is the Spark type's), each target
scan task instead reads the source's key column from the files itself and
builds the same filter (the same hashes, the same size) once per Python
worker: ~10 ms for 100k keys, paid in parallel with the scan, and the
statistics job is gone. The filter only drops target rows that cannot match
(Spark's join decides the rest), so what matters is that it holds every key
Spark reads: the values of the very files ``inputFiles()`` named, read by
the same column match the footers checked.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class ParquetKeys:
    """Where a task finds the source's keys: (local path, the file's column
    name, its size, its modification time in ns -- as the footers were read)
    per file, and the filter's size in bytes."""

    files: tuple
    nbytes: int

    def spec(self) -> str:
        """The ``keyFilter`` option's payload (JSON: never base64's alphabet)."""
        return json.dumps({"files": [list(f) for f in self.files], "nbytes": self.nbytes})

    @classmethod
    def parse(cls, text: str) -> "ParquetKeys":
        d = json.loads(text)
        return cls(tuple((str(p), str(c), int(n), int(t)) for p, c, n, t in d["files"]), int(d["nbytes"]))

    def filter_bytes(self) -> bytes | None:
        """The filter; None (filter nothing) when a file is no longer the one
        whose footers the merge read -- a source rewritten in place (a CDC
        batch file reused) must not be filtered by its old keys."""
        for path, _column, size, mtime in self.files:
            try:
                if file_identity(path) != (size, mtime):
                    return None
            except OSError:
                return None
        return _built(self)


def file_identity(path: str) -> tuple[int, int]:
    """(size, modification time in ns) of a source file, as planned."""
    import os

    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=4)
def _built(keys: ParquetKeys) -> bytes:
    """The filter, once per Python worker (its tasks share it; a rewritten
    file has another identity, so another entry)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..format.keyfilter import build

    chunks = []
    for path, column, _size, _mtime in keys.files:
        chunks += pq.read_table(path, columns=[column]).column(column).chunks
    values = pa.chunked_array(chunks) if chunks else pa.array([], pa.int64())
    return build(values, keys.nbytes)
