"""The shared benchmark dataset and Lance tables made from it.

One dataset per row count under ``<data-dir>/rows-<N>/``: 40 Parquet files of
``id``, ``f0..f7`` (random doubles) and ``s`` (``name-<id>``) -- about 1 GB at
10M rows -- written by Spark, plus cached Lance copies of it made by lance_ops
and by pylance. Each is built once and reused while its marker file (the row
count) matches; delete the directory to rebuild (e.g. after a change to how
lance_ops writes, if a suite reads the cached lance_ops table).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Callable

import lance
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lance_ops import LanceTable

from .harness import remove

#: Parquet files, and so fragments of the Lance tables made from them.
FILES = 40
FLOAT_COLUMNS = 8


@dataclass(frozen=True)
class Dataset:
    """Where the shared dataset of ``rows`` rows lives."""

    root: str
    rows: int

    @property
    def parquet(self) -> str:
        return os.path.join(self.root, "parquet")

    @property
    def rows_per_fragment(self) -> int:
        """Fragment size that splits the table into :data:`FILES` fragments."""
        return max(1, self.rows // FILES)

    def arrow(self) -> pads.Dataset:
        """The Parquet files as a pyarrow dataset (what pylance writes from)."""
        return pads.dataset(self.parquet, format="parquet")


def shared_dataset(spark, data_dir: str, rows: int) -> Dataset:
    """The dataset of ``rows`` rows, generating its Parquet files if needed."""
    ds = Dataset(os.path.join(os.path.abspath(data_dir), f"rows-{rows}"), rows)
    _cached(ds.parquet, rows, lambda path: _write_parquet(spark, path, rows))
    return ds


def _write_parquet(spark, path: str, rows: int) -> None:
    columns = ["id", *(f"rand({i}) as f{i}" for i in range(FLOAT_COLUMNS)), "concat('name-', cast(id as string)) as s"]
    spark.range(rows).selectExpr(*columns).repartition(FILES).write.parquet(path)


def _cached(path: str, rows: int, build: Callable[[str], object]) -> str:
    """Build ``path`` unless its marker says it holds ``rows`` rows. The marker
    is written last, so an interrupted build is redone rather than reused."""
    marker = path + ".rows"
    if os.path.exists(marker):
        with open(marker) as f:
            if f.read().strip() == str(rows):
                return path
    remove(marker)
    remove(path)
    print(f"  building {path} ...", flush=True)
    build(path)
    with open(marker, "w") as f:
        f.write(f"{rows}\n")
    return path


def create_with_lance_ops(spark, ds: Dataset, path: str) -> LanceTable:
    """Convert the Parquet files into a Lance table of ~40 fragments with Spark."""
    return LanceTable.create(spark, path, spark.read.parquet(ds.parquet), maxRowsPerFragment=ds.rows_per_fragment)


def create_with_pylance(ds: Dataset, path: str) -> lance.LanceDataset:
    """The same conversion with pylance alone: the peer for lance_ops' writes."""
    return lance.write_dataset(
        ds.arrow(), path, max_rows_per_file=ds.rows_per_fragment, enable_stable_row_ids=True
    )


def every_tenth_row(ds: Dataset) -> pads.Scanner:
    """``id % 10 = 0`` (10% of the rows) as a pyarrow scanner over the Parquet
    files: what pylance appends when lance_ops appends
    ``spark.read.parquet(ds.parquet).where("id % 10 = 0")``."""
    return ds.arrow().scanner(filter=pc.modulo(pc.field("id"), 10) == 0)


def lance_ops_table(spark, ds: Dataset) -> str:
    """Path of a cached table created by :func:`create_with_lance_ops`. Read
    it freely; write only to a :func:`fresh_copy`."""
    return _cached(os.path.join(ds.root, "lance_ops.lance"), ds.rows, lambda p: create_with_lance_ops(spark, ds, p))


def pylance_table(ds: Dataset) -> str:
    """Path of a cached table created by :func:`create_with_pylance`. Read it
    freely; write only to a :func:`fresh_copy`."""
    return _cached(os.path.join(ds.root, "pylance.lance"), ds.rows, lambda p: create_with_pylance(ds, p))


def delta_table(ds: Dataset) -> str:
    """Path of a cached Delta table of the dataset. Write only to a copy."""
    return _cached(os.path.join(ds.root, "delta.delta"), ds.rows, lambda p: _write_delta(ds, p))


def _write_delta(ds: Dataset, path: str) -> None:
    from deltalake import write_deltalake

    write_deltalake(path, ds.arrow().to_table())


def engine_tables(spark, ds: Dataset) -> dict[str, str]:
    """The cached copies of the dataset each engine starts from: lance_ops' and
    pylance's own Lance tables, and delta-rs' Delta table."""
    return {"lance_ops": lance_ops_table(spark, ds), "pylance": pylance_table(ds), "delta-rs": delta_table(ds)}


def small_fragments_table(spark, ds: Dataset, rows_per_fragment: int, writer: str) -> str:
    """Path of a cached table of the dataset in fragments of ``rows_per_fragment``
    rows, written by ``writer`` ("lance_ops" or "pylance"). Write only to a copy."""
    path = os.path.join(ds.root, f"{writer}-frag{rows_per_fragment}.lance")

    def build(p: str) -> None:
        if writer == "lance_ops":
            LanceTable.create(spark, p, spark.read.parquet(ds.parquet), maxRowsPerFragment=rows_per_fragment)
        else:
            lance.write_dataset(ds.arrow(), p, max_rows_per_file=rows_per_fragment, enable_stable_row_ids=True)

    return _cached(path, ds.rows, build)


def fresh_copy(src: str, dst: str) -> str:
    """Replace ``dst`` with a copy of the table at ``src`` (for writes that
    must start from the same table every run)."""
    remove(dst)
    shutil.copytree(src, dst)
    return dst
