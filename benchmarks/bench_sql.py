"""SQL: a filtered sum through ``lance_ops.sql`` vs the same query on Parquet.

Goal (SQL issue): ``lance_ops.sql`` reads each Lance table with only the
columns the query uses, so the filtered sum reaches at least half of Parquet's
rate (``toDF()`` without pruning reached 0.25x).
"""
from __future__ import annotations

import math

import lance_ops
from lance_ops import LanceTable

from . import data
from .harness import Context, Result, Section

TITLE = "SQL: filtered sum through lance_ops.sql vs Parquet"
GOAL = 0.5
QUERY = "SELECT sum(f0) FROM {table} WHERE id % 100 = 7"


def run(ctx: Context) -> Section:
    spark = ctx.spark
    ds = data.shared_dataset(spark, ctx.data_dir, ctx.rows)
    table = data.lance_ops_table(spark, ds)
    section = Section(TITLE, f"""\
Data: the shared {ds.rows:,}-row dataset (`id`, `f0`..`f7`, `s`; 10 columns) as Parquet and as the cached
lance_ops Lance table ({data.FILES} fragments). Query: `{QUERY.format(table="<t>")}`.

- **lance_ops.sql**: `lance_ops.sql(spark, query)` with `<t>` = ``lance.`<path>` ``: the query is analyzed
  (sqlglot), the table read with only `id` and `f0` (and the filter pushed into the scan), then run by Spark.
- **spark.sql, registered name**: `CREATE TABLE t USING lance LOCATION ...` through lance_ops.sql, then
  `spark.sql(query)` on the name: Spark reads the temp view with every column (no pruning in Spark 4.3's
  Python data sources) -- for contrast, no goal.
- **toDF(columns=...)**: the same read through the Python API with the columns named by hand (what
  `lance_ops.sql` should match: its own overhead is the sqlglot analysis, milliseconds).
- **toDF(columns=..., filter=...)**: the same, the filter handed to `toDF` (the read tasks evaluate it with
  Arrow, so only matching rows cross into the JVM; `lance_ops.sql` does the same with a single-table WHERE).
- peer: `spark.sql(query)` over a temp view of `spark.read.parquet(...)` (Parquet prunes to 2 columns).

Interleaved in one process, best of {ctx.repeat} runs after one untimed warm-up; *rate* = Parquet s / ours
(goal >= {GOAL}).""")
    spark.read.parquet(ds.parquet).createOrReplaceTempView("bench_sql_parquet")
    lance_ops.sql(spark, f"CREATE OR REPLACE TABLE bench_sql_lance USING lance LOCATION '{table}'")

    def one(df) -> float:
        return df.collect()[0][0]

    t = ctx.interleave(
        {
            "parquet": lambda: one(spark.sql(QUERY.format(table="bench_sql_parquet"))),
            "sql": lambda: one(lance_ops.sql(spark, QUERY.format(table=f"lance.`{table}`"))),
            "name": lambda: one(spark.sql(QUERY.format(table="bench_sql_lance"))),
            "api": lambda: one(LanceTable(spark, table).toDF(columns=["id", "f0"]).where("id % 100 = 7").selectExpr("sum(f0)")),
            "filter": lambda: one(LanceTable(spark, table).toDF(columns=["id", "f0"], filter="id % 100 = 7")
                                  .selectExpr("sum(f0)")),
        },
        warmup=True,
    )
    for key in ("sql", "name", "api", "filter"):
        if not math.isclose(t[key].value, t["parquet"].value, rel_tol=1e-9):
            raise RuntimeError(f"sum(f0) of {key} is {t[key].value!r}, Parquet's is {t['parquet'].value!r}")
    section.add(Result("filtered sum, `lance_ops.sql`", t["sql"], "`spark.sql` on Parquet", t["parquet"], "rate", GOAL))
    section.add(Result("filtered sum, `spark.sql` on a registered name (unpruned)", t["name"], "`spark.sql` on Parquet",
                       t["parquet"], "rate", None))
    section.add(Result('filtered sum, `toDF(columns=["id","f0"])` (the API, pruned by hand)', t["api"],
                       "`spark.sql` on Parquet", t["parquet"], "rate", None))
    section.add(Result('filtered sum, `toDF(columns=["id","f0"], filter=...)` (the filter evaluated in the read tasks)',
                       t["filter"], "`spark.sql` on Parquet", t["parquet"], "rate", None))
    section.note(ctx.memory_note())
    return section
