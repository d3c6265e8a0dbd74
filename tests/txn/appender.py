"""A separate process appending to a table through the txn layer.

Usage: python -m tests.txn.appender PATH WRITER_ID COUNT ROWS
Each append writes ROWS rows whose ``writer`` column is WRITER_ID.
"""
import sys

import pyarrow as pa

from lance_ops.format.writer import write_fragments
from lance_ops.storage import ObjectStore
from lance_ops.txn.commit import commit
from lance_ops.txn.log import open_snapshot
from lance_ops.txn.operations import Append, Transaction


def main(path: str, writer: int, count: int, rows: int) -> None:
    store = ObjectStore(path)
    for i in range(count):
        snap = open_snapshot(store)
        batch = pa.record_batch(
            {"writer": pa.array([writer] * rows, pa.int64()), "seq": pa.array([i] * rows, pa.int64())}
        )
        frags = list(write_fragments(store, snap.schema, [batch], snap.data_format_version))
        commit(store, Transaction(snap.version, Append(frags)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
