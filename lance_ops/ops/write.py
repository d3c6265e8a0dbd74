"""create / append / overwrite: executors write fragments, the driver commits.

The DataFrame is written with ``mapInArrow``: each task streams its partition
into data files of at most ``maxRowsPerFragment`` rows and returns the
fragments' metadata (a few hundred bytes each); the driver collects only that
metadata and stages one Append or Overwrite transaction for the commit
pipeline.
"""
from __future__ import annotations

from ..format.writer import DEFAULT_MAX_ROWS_PER_FRAGMENT
from ..spark.errors import executor_errors
from ..spark.write import FRAGMENT_COLUMN, FRAGMENTS_SCHEMA, map_in_arrow_writer, plan_write, staged_write
from ..txn.log import Snapshot
from ..txn.pipeline import StagedCommit


def write_dataframe(store, df, mode: str, *, stable_row_ids: bool = True, max_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FRAGMENT,
                    planned: list | None = None, properties: dict | None = None):
    """``prepare(snapshot) -> StagedCommit`` writing ``df`` (``snapshot`` None:
    no table yet). ``planned`` (if given) receives each attempt's WritePlan;
    ``properties`` (create / overwrite) become the table config in the same
    commit."""

    def prepare(snap: Snapshot | None) -> StagedCommit:
        plan = plan_write(
            store, df.schema, mode, snapshot=snap, stable_row_ids=stable_row_ids,
            max_rows_per_fragment=max_rows_per_fragment,
        )
        if planned is not None:
            planned.append(plan)
        with executor_errors():
            rows = df.mapInArrow(map_in_arrow_writer(plan), FRAGMENTS_SCHEMA).collect()
        return staged_write(plan, [bytes(r[FRAGMENT_COLUMN]) for r in rows], properties)

    return prepare
