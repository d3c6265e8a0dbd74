"""The ``%%lance_sql`` cell magic (IPython's extension API; IPython itself is
not imported, so this module loads without it).

    %load_ext lance_ops

    %%lance_sql [--limit N] [--out NAME] [--quiet]
    OPTIMIZE lance.`{table_uri}`;
    DESCRIBE HISTORY lance.`{table_uri}` LIMIT 5

runs the cell as a script through :func:`lance_ops.sql` on the active Spark
session and shows the last result as a table (at most ``--limit`` rows,
default 50). ``{name}`` and ``$name`` in the cell are expanded from the
notebook's variables, as IPython does for line magics. ``--out NAME`` stores
the last result's DataFrame in the notebook as ``NAME``.
"""
from __future__ import annotations

import argparse
import shlex

DEFAULT_LIMIT = 50


def _args(line: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="%%lance_sql", add_help=False)
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    p.add_argument("--out", default=None)
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(shlex.split(line or ""))


def active_session():
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError(
            "%%lance_sql needs an active Spark session: create one first (e.g. spark = lance_ops.local_session())"
        )
    return spark


def run_cell(ipython, line: str, cell: str):
    from ..table import LanceTable
    from .script import run_script

    args = _args(line)
    text = ipython.var_expand(cell, depth=2) if ipython is not None and hasattr(ipython, "var_expand") else cell
    df = run_script(active_session(), text, LanceTable)
    if args.out and ipython is not None:
        ipython.user_ns[args.out] = df
    if df is None or args.quiet:
        return None
    if not df.columns:
        return None  # ALTER TABLE, tags ...: nothing to show
    return df.limit(args.limit).toPandas()


def register_magics(ipython) -> None:
    def lance_sql(line, cell=None):
        return run_cell(ipython, line, cell or "")

    lance_sql.__doc__ = __doc__
    ipython.register_magic_function(lance_sql, magic_kind="cell", magic_name="lance_sql")
