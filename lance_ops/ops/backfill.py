"""backfill: fill existing columns where they are missing, in batches.

``t.backfill({"g": "f0 * 2"})`` or ``t.backfill(fn, readColumns=[...],
outputSchema="g double")`` computes existing columns only where needed:

* fragments with **no data file for the columns** (rows appended with
  ``allowMissingColumns``, which read them as NULL) get a column file holding
  just those columns, row-aligned with the fragment -- what ``addColumns``
  writes -- committed as a ``DataReplacement``: the transaction pylance 14
  commits for exactly this ("the columns being replaced are not covered by
  the fragment: an all-NULL column replaced with real data"). pylance stamps
  every row of such a fragment as last updated at the new version; so do we.
* with ``where`` (``"_row_created_at_version > 12"``, ``"g IS NULL"``) only the
  matching rows are recomputed: fragments lacking the columns still get a
  column file (non-matching rows stay NULL), fragments that have them get a
  new column file with the matching rows recomputed and the others keeping
  their values, committed as an ``Update`` in REWRITE_COLUMNS mode -- what
  ``rewriteColumns`` and pylance's ``merge_insert(...).write_mode
  ("rewrite_columns")`` commit -- only the changed rows get a new
  last-updated version.

Row ids, row addresses and ``_row_created_at_version`` never change.

**NULL values (``fillNulls=True``).** Without it, a fragment that has a
file for the column is done, whatever its values: rows appended with the
column explicitly NULL stay NULL. ``fillNulls=True`` adds the rows whose
column is NULL -- and, for SQL values, whose computed value is not NULL, so
that rows the expression cannot fill are left alone and a re-run writes
nothing -- to what is filled (``where`` narrows them further). It is an
``Update`` in REWRITE_COLUMNS mode for the fragments that have the column, so
only the filled rows get a new last-updated version; finding them is a scan
of the computed and referenced columns.

**Batches.** ``fragmentsPerCommit=N`` commits every N fragments (one kind of
transaction per commit), so readers see progress and a killed job resumes:
each batch re-checks, on the version it commits on, which of its fragments
still need work, and fragments that got their column file are never touched
again -- a re-run is a no-op. (With ``where`` a re-run recomputes the rows
``where`` still matches: write ``where`` so that done rows drop out, e.g.
``"g IS NULL"``, or let the watermark bound it.)

**Data skipping.** With ``where`` on an indexed column, one job over just the
condition's columns (pruned by the indices) first finds the fragments holding
a matching row; fragments that have the columns and hold none are not read
(``numFragmentsSkipped``, ``numRowsScanned``: that job's rows plus the
fragments processed whole).

**Watermark.** When the batches are done, the table config gets
``lance_ops.feature.<column>.version`` = the data version the backfill started
from (:mod:`lance_ops.txn.watermarks`), in one ``UpdateConfig`` commit -- only
if it moved. It means: a backfill (of the rows ``where`` selected) has run
over every row created up to that version, so every fragment created up to it
has a file for the column (and, with ``fillNulls``, no row of those it
covered is NULL unless its value computes to NULL). It does not mean the
values passed a check: the jobs' ``validate --feature COL
--advance-watermark`` (the Airflow DAG's ``validate_<feature>`` task) checks
the rows first and moves it only when they pass. Schedulers compare it with
the table's data version.

**Execution.** An Arrow function without ``where`` and without constraints on
the computed columns runs in plain executor tasks that read the fragments'
input columns themselves (the rows never cross into the JVM, as
``addColumns(fn)``). SQL expressions (and a SQL ``where``) inside the Arrow
evaluation subset (:mod:`lance_ops.arrow_eval`) run the same way, evaluated
with Spark's semantics by Arrow in those tasks, on tables without CHECK
constraints (``spark.lance_ops.arrowEval.enabled``, default on). Anything else
-- a function with ``where`` or constraints, SQL outside the subset, a row
raising in ANSI mode -- goes through one Spark stage: scan of the batch's
fragments -> values (and the constraint checks) -> column files written by
the same tasks. ``metrics["evaluation"]`` says which (``arrow`` / ``spark``).
"""
from __future__ import annotations

import json
import logging
from typing import Callable

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ArrowEvalFallback, InvalidArgumentError, SchemaMismatchError
from ..format.scan import METADATA_COLUMNS, ROW_ADDR
from ..results import CommitInfo
from ..spark.arrowtasks import arrow_column_transform, arrow_rewrite_transform, log_evaluation
from ..spark.columnfiles import CHANGED, ColumnFileContext, function_column_files, parse_results
from ..spark.constraints import specs_for, with_checks
from ..spark.errors import executor_task
from ..spark.fanout import run_pair_tasks
from ..spark.frames import (
    as_column,
    checked_columns,
    describe,
    fragment_groups,
    referenced_columns,
    rows_per_partition,
    scan_frame,
    total_cores,
)
from ..spark.journal import journaled
from ..spark.types import spark_arrow_schema, spark_schema
from ..txn.idempotence import TxnId, is_done
from ..txn.log import Snapshot
from ..txn.operations import DataReplacement, UpdateConfig
from ..txn.pipeline import StagedCommit
from ..txn.watermarks import data_version, has_field, watermark, watermark_key
from .common import guarded
from .dml import analysis_frame
from .update import analyzed_assignments

log = logging.getLogger("lance_ops")

FILL, REWRITE = "fill", "rewrite"


class _Plan:
    """What to compute: target columns and how (SQL or an Arrow function)."""

    def __init__(self, spark, snap: Snapshot, source, read_columns, output_schema):
        self.spark = spark
        if isinstance(source, dict):
            if not source:
                raise InvalidArgumentError("backfill needs at least one column")
            self.exprs, self.fn = dict(source), None
            names = list(source)
        elif callable(source) and not isinstance(source, DataFrame):
            if not read_columns:
                raise InvalidArgumentError("backfill(fn, ...) needs readColumns=[...]")
            if output_schema is None:
                raise InvalidArgumentError('backfill(fn, ...) needs outputSchema, e.g. "g double"')
            from .evolve import output_struct

            schema = output_struct(output_schema)
            self.exprs, self.fn = None, source
            self.read_columns = list(read_columns)
            for c in self.read_columns:
                if not snap.schema.has(c) and c not in METADATA_COLUMNS:
                    raise SchemaMismatchError(f"readColumns: unknown column {c!r}")
            names = schema.fieldNames()
        else:
            raise InvalidArgumentError("backfill takes a dict of SQL expressions or an Arrow batch function")
        for n in names:
            if n in METADATA_COLUMNS or not snap.schema.has(n):
                raise SchemaMismatchError(
                    f"backfill computes existing columns; {n!r} is not a column of the table (addColumns adds one)"
                )
        if len(set(names)) != len(names):
            raise SchemaMismatchError(f"backfill: a column is given twice in {names}")
        self.names = names
        self.types = {f.name: f.dataType for f in spark_schema(snap.schema, names).fields}
        # Bad SQL raises Spark's own error here, before any work.
        frame = analysis_frame(spark, snap)
        if self.exprs is not None:
            frame.select(*self.values(frame).values())

    def describe(self) -> str:
        if self.exprs is not None:
            return ", ".join(f"{k} = {describe(v)}" for k, v in self.exprs.items())
        return f"{getattr(self.fn, '__name__', 'fn')}({', '.join(self.read_columns)})"

    def values(self, frame=None) -> dict:
        """column -> Column of the new value (SQL path), cast to its type."""
        return {c: as_column(v).cast(self.types[c]) for c, v in self.exprs.items()}

    def references(self, snap: Snapshot, where) -> list[str]:
        exprs = list(self.exprs.values()) if self.exprs is not None else []
        if where is not None:
            exprs.append(where)
        refs = referenced_columns(analysis_frame(self.spark, snap), exprs) if exprs else []
        if self.fn is not None:
            refs = list(dict.fromkeys(refs + self.read_columns))
        return refs

    def arrow_output(self) -> pa.Schema:
        return spark_arrow_schema(T.StructType([T.StructField(n, self.types[n], True) for n in self.names]))


def _kinds(snap: Snapshot, fields, where) -> dict[int, str]:
    """fragment id -> FILL (no file for any of the columns) / REWRITE (some or
    all present: only with ``where``, or when partly present)."""
    out = {}
    for frag in snap.fragments:
        present = [has_field(frag, f) for f in fields]
        if not any(present):
            out[frag.id] = FILL
        elif where is not None or not all(present):
            out[frag.id] = REWRITE
    return out


def _with_null_rows(plan: _Plan, where):
    """``where`` narrowed to the rows ``fillNulls`` recomputes: a computed
    column is NULL -- and, for SQL values, the value computed for it is not
    (a row whose expression yields NULL stays as it is, so a re-run finds
    nothing to do instead of rewriting it again)."""
    if plan.exprs is not None and all(isinstance(v, str) for v in plan.exprs.values()):
        nulls = " OR ".join(f"(`{n}` IS NULL AND CAST(({v}) AS {plan.types[n].simpleString()}) IS NOT NULL)"
                            for n, v in plan.exprs.items())
    else:  # a function (or Column values): every NULL row is recomputed
        nulls = " OR ".join(f"`{n}` IS NULL" for n in plan.names)
    if where is None:
        return nulls
    if isinstance(where, str):
        return f"({where}) AND ({nulls})"
    return as_column(where) & F.expr(nulls)


def _chunks(ids: list[int], size: int | None) -> list[list[int]]:
    if not ids:
        return []
    size = len(ids) if not size or size <= 0 else int(size)
    return [ids[i:i + size] for i in range(0, len(ids), size)]


class Backfill:
    def __init__(self, table, source, read_columns=None, output_schema=None, where=None,
                 fragments_per_commit: int | None = None, expectations=None, commit_properties=None,
                 advance_watermark: bool = True, fill_nulls: bool = False, txn=(None, None)):
        if fragments_per_commit is not None and int(fragments_per_commit) <= 0:
            raise InvalidArgumentError("fragmentsPerCommit must be a positive number of fragments")
        self.table = table
        self.spark = table._spark
        snap = table.snapshot
        self.plan = _Plan(self.spark, snap, source, read_columns, output_schema)
        self.fill_nulls = bool(fill_nulls)
        if self.fill_nulls:
            where = _with_null_rows(self.plan, where)
        if where is not None:
            analysis_frame(self.spark, snap).where(as_column(where))  # Spark's error for bad SQL
        self.where = where
        self.per_commit = fragments_per_commit
        self.advance = advance_watermark
        #: (txnAppId, txnVersion): an idempotent backfill, recorded by its last commit
        self.txn = TxnId.of(*txn)
        self.expectations = expectations
        self.commit_properties = commit_properties
        self.params = {"columns": ", ".join(self.plan.names), "source": self.plan.describe(),
                       "predicate": describe(where) if where is not None else None}
        if self.fill_nulls:
            self.params["fillNulls"] = "true"

    # ------------------------------------------------------------- driver
    def run(self) -> CommitInfo:
        t = self.table
        start = t.snapshot
        done = is_done(start, self.txn)
        if done is not None:
            return CommitInfo(version=None, readVersion=start.version, operation="", skipped=str(done))
        fields = [start.schema.field(n) for n in self.plan.names]
        kinds = _kinds(start, fields, self.where)
        pre = self._skip_unmatched(start, kinds)
        batches = [(FILL, c) for c in _chunks([i for i, k in kinds.items() if k == FILL], self.per_commit)]
        batches += [(REWRITE, c) for c in _chunks([i for i, k in kinds.items() if k == REWRITE], self.per_commit)]
        log.info("backfill %s: %d fragment(s) to fill, %d to rewrite, %d commit(s) planned", self.params["columns"],
                 sum(k == FILL for k in kinds.values()), sum(k == REWRITE for k in kinds.values()), len(batches))
        totals: dict = {}
        committed: list[CommitInfo] = []
        # which commit records an idempotent backfill: the watermark's, else the last batch's
        advances = self.advance and any((watermark(start, n) or -1) < data_version(start) for n in self.plan.names)
        for n, (kind, ids) in enumerate(batches, 1):
            last = n == len(batches) and not advances
            info = t._run("backfill", self._prepare(kind, ids), self.commit_properties, self.expectations,
                          operation="BACKFILL", txnAppId=self.txn.app_id if self.txn and last else None,
                          txnVersion=self.txn.version if self.txn and last else None)
            if info.version is None:
                log.info("backfill %s: batch %d/%d had nothing left to do", self.params["columns"], n, len(batches))
                continue
            committed.append(info)
            for k, v in info.metrics.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    totals[k] = totals.get(k, 0) + v
                else:
                    totals[k] = v
            log.info("backfill %s: batch %d/%d committed version %d (%s, %d fragment(s))", self.params["columns"],
                     n, len(batches), info.version, info.operation, len(ids))
        mark = data_version(start)
        info = self._advance_watermark(mark) if self.advance else None
        totals.update(numCommits=len(committed), watermark=mark)
        if pre is not None:
            totals["numFragmentsSkipped"] = totals.get("numFragmentsSkipped", 0) + pre["skipped"]
            totals["numRowsScanned"] = pre["numRowsScanned"] + sum(
                f.physical_rows for f in start.fragments if f.id in kinds)
        last = info or (committed[-1] if committed else None)
        return CommitInfo(
            version=last.version if last else None,
            readVersion=start.version,
            operation=(committed[-1].operation if committed else (info.operation if info else "")),
            retries=sum(c.retries for c in committed),
            metrics=totals,
            rebases=sum(c.rebases for c in committed),
            reruns=sum(c.reruns for c in committed),
        )

    def _skip_unmatched(self, snap: Snapshot, kinds: dict) -> dict | None:
        """Data skipping for ``where``: when an index covers a column it
        references, one job over just those columns (the zones data skipping
        keeps) finds the fragments holding a matching row; fragments to
        rewrite that hold none are dropped from ``kinds`` (they would be read
        whole to change nothing). Fragments lacking the columns still get
        their file. Returns the pre-pass metrics (None: no pre-pass)."""
        if self.where is None or not any(k == REWRITE for k in kinds.values()):
            return None
        from .dml import fragments_matching, has_index_on

        refs = referenced_columns(analysis_frame(self.spark, snap), [self.where])
        if not has_index_on(snap, refs):
            return None
        meta = [ROW_ADDR] + [c for c in refs if c in METADATA_COLUMNS and c != ROW_ADDR]
        ids, scanned = fragments_matching(self.spark, snap, self.where, [c for c in refs if c in snap.schema.names],
                                          meta)
        matching = set(ids)
        dropped = [i for i, k in kinds.items() if k == REWRITE and i not in matching]
        for i in dropped:
            del kinds[i]
        log.info("backfill %s: data skipping: %d fragment(s) hold no row matching the condition (%d rows read)",
                 self.params["columns"], len(dropped), scanned["numRowsScanned"])
        return dict(scanned, skipped=len(dropped))

    def _advance_watermark(self, mark: int) -> CommitInfo | None:
        t = self.table
        keys = {watermark_key(n): str(mark) for n in self.plan.names
                if (watermark(t.snapshot, n) or -1) < mark}
        if not keys:
            return None

        def prepare(snap: Snapshot) -> StagedCommit | None:
            todo = {k: v for k, v in keys.items() if int(snap.manifest.config.get(k, "-1") or -1) < mark}
            if not todo:
                return None
            return StagedCommit(UpdateConfig(config_updates=(todo, False)), {}, {"properties": json.dumps(todo)})

        info = t.table.execute(prepare, commitProperties=self.commit_properties, operation="SET TBLPROPERTIES",
                               txnAppId=self.txn.app_id if self.txn else None,
                               txnVersion=self.txn.version if self.txn else None)
        return info if info.version is not None else None

    def _prepare(self, kind: str, ids: list[int]):
        names = self.plan.names

        def prepare(snap: Snapshot) -> StagedCommit | None:
            fields = [snap.schema.field(n) for n in names]
            now = _kinds(snap, fields, self.where)
            todo = [i for i in ids if now.get(i) == kind]
            if not todo:
                return None
            specs = specs_for(snap)
            checked = set(checked_columns(self.spark, snap, specs)) & set(names)
            direct = self.plan.fn is not None and self.where is None and not checked
            frags = {f.id: f for f in snap.fragments if f.id in set(todo)}
            ctx = ColumnFileContext(
                store=snap.store, schema=snap.schema, fields=fields, file_version=snap.data_format_version,
                fragments={i: f.SerializeToString() for i, f in frags.items()},
                fill="old", has_changed_flag=self.where is not None, checks=[] if direct else specs,
            )
            results = None
            if direct:
                results = self._direct(snap, ctx, [frags[i] for i in todo])
                evaluation = "arrow"
            elif self.plan.exprs is not None:
                arrow = analyzed_assignments(self.spark, snap, self.where, self.plan.exprs, specs)
                if arrow is not None:
                    try:
                        results = self._arrow_sql(snap, ctx, [frags[i] for i in todo], arrow)
                        evaluation = "arrow"
                    except ArrowEvalFallback as e:
                        log.info("backfill %s v%s: %s; evaluating on Spark", snap.store.root, snap.version, e)
                        ctx.transform, ctx.journal = None, None
            if results is None:
                results = self._through_spark(snap, ctx, todo, specs)
                evaluation = "spark"
            log_evaluation("backfill", snap, evaluation)
            written = {i: r for i, r in results.items() if r[0] is not None}
            files = [df for df, _ in written.values()]
            metrics = {
                "numBackfilledRows": sum(
                    len(bm) if self.where is not None else frags[i].physical_rows - _deleted(frags[i])
                    for i, (_, bm) in written.items()
                ),
                "numUpdatedFragments": len(written),
                "numAddedFiles": len(files),
                "bytesWritten": sum(df.file_size_bytes for df in files),
                "numFragmentsScanned": len(todo),
                "numFragmentsSkipped": len(todo) - len(written),
                "evaluation": evaluation,
            }
            if not written:
                return None
            if kind == FILL:
                op = DataReplacement([(i, df) for i, (df, _) in sorted(written.items())])
            else:
                from .evolve import _rewrite_op

                op = _rewrite_op(snap, fields, written)
            return guarded(StagedCommit(op, metrics, dict(self.params, kind=kind)), snap)

        return prepare

    # ----------------------------------------------------------- the jobs
    def _direct(self, snap: Snapshot, ctx: ColumnFileContext, frags) -> dict:
        """Executor tasks over whole fragments: read the input columns, call
        the function, write the column files (no JVM round trip)."""
        from .evolve import _checked_udf

        plan = self.plan
        data_cols = [c for c in plan.read_columns if snap.schema.has(c)]
        meta = [ROW_ADDR] + [c for c in plan.read_columns if c in METADATA_COLUMNS and c != ROW_ADDR]
        arrow_in = spark_arrow_schema(spark_schema(snap.schema, data_cols, meta))
        ctx.transform = _checked_udf(plan.fn, plan.arrow_output())
        task = function_column_files(ctx, plan.read_columns, data_cols, meta, arrow_in, snap.stable_row_ids)
        # About rows_per_partition rows per task, but never fewer tasks than
        # the cluster has slots (x2) while there are fragments to spread:
        # appended fragments are small and each has a fixed cost.
        slots = max(1, total_cores(self.spark) * 2)
        target = rows_per_partition(self.spark, sum(f.physical_rows for f in frags))
        n = max(min(len(frags), slots), -(-sum(f.physical_rows for f in frags) // max(1, target)))
        groups: list[list[bytes]] = [[] for _ in range(min(n, len(frags)))]
        for i, f in enumerate(frags):
            groups[i % len(groups)].append(f.SerializeToString())
        return run_fragment_tasks(self.spark, groups, task)

    def _arrow_sql(self, snap: Snapshot, ctx: ColumnFileContext, frags, arrow) -> dict:
        """SQL values (and ``where``) Arrow evaluates (``arrow``: their
        analyzed trees, :func:`.update.analyzed_assignments`) in executor
        tasks that read the fragments' referenced columns and write the column
        files: one stage, no JVM crossing, the same writer as the Spark path.
        With ``where`` the tasks also read the computed columns (old values
        where it is not true, NULL in fragments lacking them) and flag the
        changed rows. An ANSI error row raises ArrowEvalFallback."""
        names = self.plan.names
        wanted = set(arrow.columns) | (set(names) if self.where is not None else set())
        data = [c for c in snap.schema.names if c in wanted]
        arrow_in = spark_arrow_schema(spark_schema(snap.schema, data, arrow.metadata))
        target = self.plan.arrow_output()
        if self.where is None:
            ctx.transform = arrow_column_transform(arrow, target)
        else:
            ctx.transform = arrow_rewrite_transform(arrow, target, CHANGED)
        groups = fragment_groups(frags, rows_per_partition(self.spark, sum(f.physical_rows for f in frags)))
        with journaled(ctx.store) as token:
            ctx.journal = token
            task = function_column_files(ctx, arrow_in.names, data, arrow.metadata, arrow_in, snap.stable_row_ids)
            return parse_results(run_pair_tasks(self.spark, groups, task))

    def _through_spark(self, snap: Snapshot, ctx: ColumnFileContext, ids: list[int], specs) -> dict:
        from .evolve import _column_files

        plan, where = self.plan, self.where
        refs = plan.references(snap, where)
        checked = checked_columns(self.spark, snap, specs)
        data_cols = [c for c in snap.schema.names if c in refs or c in plan.names or c in checked]
        meta = [ROW_ADDR] + [c for c in refs if c in METADATA_COLUMNS and c != ROW_ADDR]
        frame = scan_frame(self.spark, snap, data_cols, meta, split_fragments=False, fragment_ids=ids)
        if plan.fn is not None:
            frame, computed = _apply_function(frame, plan)
        else:
            computed = plan.values()
        if where is not None:
            frame = frame.withColumn(CHANGED, F.coalesce(as_column(where), F.lit(False)))
            computed = {c: F.when(F.col(CHANGED), v).otherwise(F.col(f"`{c}`")) for c, v in computed.items()}
        rows = with_checks(frame.withColumns(computed), specs)
        out = rows.select(ROW_ADDR, *[F.col(f"`{c}`") for c in plan.names],
                          *([CHANGED] if where is not None else []), *[s.column for s in specs])
        return _column_files(self.spark, out, ctx)


def _deleted(frag) -> int:
    return frag.deletion_file.num_deleted_rows if frag.HasField("deletion_file") else 0


def _apply_function(frame: DataFrame, plan: _Plan):
    """``frame`` plus the function's outputs (temporary names) computed by
    ``mapInArrow`` in the scan's own tasks; column -> Column of new values."""
    from .evolve import _checked_udf

    tmp = {n: f"__lance_value_{i}" for i, n in enumerate(plan.names)}
    out_schema = T.StructType(frame.schema.fields + [T.StructField(tmp[n], plan.types[n], True) for n in plan.names])
    arrow_out = spark_arrow_schema(out_schema)
    apply = _checked_udf(plan.fn, plan.arrow_output())
    read_columns = plan.read_columns

    @executor_task
    def run(batches):
        for b in batches:
            res = apply(b.select(read_columns))
            arrays = list(b.columns) + list(res.columns)
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_out)

    return frame.mapInArrow(run, out_schema), {n: F.col(tmp[n]) for n in plan.names}


def run_fragment_tasks(spark, groups: list[list[bytes]], task: Callable) -> dict:
    """Run ``task(group)`` (-> (kind, payload) pairs) once per group of
    serialized fragments, one Spark task each; returns the parsed column files."""
    return parse_results(run_pair_tasks(spark, groups, task))
