"""Spark-free commits for the object-store tests and the commit benchmarks:
create a tiny table, append rows, delete a fragment, set a property -- each
one write through the staged-commit pipeline (``Table.execute``), so retries,
rebases and cleanup are the product's own."""
from __future__ import annotations

import pyarrow as pa

from lance_ops.format.schema import Schema
from lance_ops.format.writer import write_fragments
from lance_ops.storage import ObjectStore
from lance_ops.txn.commit import NewTable
from lance_ops.txn.log import latest_or_none, open_snapshot
from lance_ops.txn.operations import Append, Delete, Overwrite
from lance_ops.txn.pipeline import StagedCommit, WriteOptions, execute
from lance_ops.txn.table import Table

ARROW_SCHEMA = pa.schema([("writer", pa.int64()), ("seq", pa.int64())])


def batch(writer: int, seqs) -> pa.RecordBatch:
    seqs = list(seqs)
    return pa.record_batch({"writer": pa.array([writer] * len(seqs), pa.int64()), "seq": pa.array(seqs, pa.int64())})


def create(uri: str, options: dict, rows: int = 3) -> Table:
    store = ObjectStore(uri, options)
    schema = Schema.from_arrow(ARROW_SCHEMA)

    def prepare(snap):
        frags = list(write_fragments(store, schema, [batch(-1, range(rows))], "2.2"))
        return StagedCommit(Overwrite(frags, schema), {}, {"mode": "create"})

    execute(store, latest_or_none(store), prepare, WriteOptions(new_table=NewTable()))
    return Table(uri, options)


def append(table: Table, writer: int, seqs) -> int:
    """Append rows; returns the id of the appended fragment."""
    def prepare(snap):
        frags = list(write_fragments(table.store, snap.schema, [batch(writer, seqs)], snap.data_format_version))
        return StagedCommit(Append(frags), {}, {"mode": "append"})

    info = table.execute(prepare)
    # (the version just committed: cached, no request -- the handle itself
    # would ask the store for the latest)
    return open_snapshot(table.store, info.version).fragments[-1].id


def delete_fragment(table: Table, fragment_id: int) -> None:
    table.execute(lambda snap: StagedCommit(Delete(deleted_fragment_ids=[fragment_id], predicate=f"fragment {fragment_id}"),
                                            {}, {"predicate": f"fragment {fragment_id}"}))


def set_property(table: Table, key: str, value: str) -> None:
    table.setProperties({key: value})
