"""create / append / overwrite: executors write fragments, the driver commits.

The DataFrame is written with ``mapInArrow``: each task streams its partition
into data files of at most ``maxRowsPerFragment`` rows and returns the
fragments' metadata (a few hundred bytes each); the driver collects only that
metadata and commits one Append or Overwrite transaction.
"""
from __future__ import annotations

from ..format.proto import table_pb2
from ..results import CommitInfo
from ..spark.errors import executor_errors
from ..spark.progress import spark_job
from ..spark.write import FRAGMENT_COLUMN, FRAGMENTS_SCHEMA, commit_write, map_in_arrow_writer, plan_write
from ..txn.log import Snapshot
from .common import commit_info, properties


def write_dataframe(
    spark,
    store,
    df,
    mode: str,
    *,
    snapshot: Snapshot | None = None,
    stable_row_ids: bool = True,
    max_rows_per_fragment: int = 1 << 20,
) -> CommitInfo:
    plan = plan_write(
        store,
        df.schema,
        mode,
        snapshot=snapshot,
        stable_row_ids=stable_row_ids,
        max_rows_per_fragment=max_rows_per_fragment,
    )
    op_name = "Append" if plan.mode == "append" else "Overwrite"
    with spark_job(spark, mode, store.root, plan.read_version, "write fragments"), executor_errors():
        rows = df.mapInArrow(map_in_arrow_writer(plan), FRAGMENTS_SCHEMA).collect()
    fragments = [bytes(r[FRAGMENT_COLUMN]) for r in rows]
    metrics = _metrics(fragments)
    result = commit_write(plan, fragments, properties=properties({"mode": plan.mode}, metrics))
    info = commit_info(result, plan.read_version, metrics)
    info.operation = result.transaction.operation.name or op_name
    return info


def _metrics(fragments: list[bytes]) -> dict:
    rows = files = size = 0
    for b in fragments:
        f = table_pb2.DataFragment.FromString(b)
        rows += f.physical_rows
        files += len(f.files)
        size += sum(df.file_size_bytes for df in f.files)
    return {
        "numInsertedRows": rows,
        "numAddedFragments": len(fragments),
        "numAddedFiles": files,
        "bytesWritten": size,
    }
