"""One committer process of the commits benchmark.

    python benchmarks/commit_worker.py URI WRITER COUNT lance_ops|pylance

Storage options from ``LANCE_OPS_BENCH_STORAGE`` (JSON). Imports and opens
everything, prints ``ready``, waits for a line on stdin, then makes COUNT
1-row appends and prints one JSON line: ``{"start", "end", "ok", "errors"}``
(monotonic clock of this machine, comparable across processes).
"""
from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def main(uri: str, writer: int, count: int, engine: str) -> None:
    options = json.loads(os.environ["LANCE_OPS_BENCH_STORAGE"])
    from tests.objectstores import workload as wl

    if engine == "pylance":
        import lance

        def append(i):
            lance.write_dataset(wl.batch(writer, [i]), uri, mode="append", storage_options=options)
    else:
        from lance_ops.txn.table import Table

        table = Table(uri, options)

        def append(i):
            wl.append(table, writer, [i])
    # Warm: the imports and first calls a long-running committer has behind
    # it (pyarrow loads pandas lazily on the first record batch: seconds).
    wl.batch(writer, [0])
    import lance.file  # noqa: F401
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    ok, errors = 0, []
    for i in range(count):
        try:
            append(i)
            ok += 1
        except Exception as e:  # reported, counted as lost by the suite
            errors.append(f"{type(e).__name__}: {str(e)[:200]}")
    print(json.dumps({"start": start, "end": time.monotonic(), "ok": ok, "errors": errors}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
