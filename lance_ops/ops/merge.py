"""merge(source, condition): Delta's MERGE INTO on a Lance table.

Clauses (``whenMatched*``, ``whenNotMatched*``, ``whenNotMatchedBySource*``)
are evaluated by Spark over one join of the source (alias ``s``) with the
target (alias ``t``), in Delta's semantics: clauses of a kind apply in order,
the first whose condition holds wins, rows no clause applies to are left
alone. A target row matched by several source rows is an error when more than
one of them would modify it (unless the only matched clause is an
unconditional delete).

The target side of the join reads only the columns the condition, clause
conditions and values reference, plus the row address; columns of updated rows
that no clause assigns are read back later by row address, in the executor
that rewrites that fragment. Updated rows move to new fragments keeping their
stable row ids; inserted rows get fresh ids; replaced and deleted target rows
get deletion vectors; everything commits as one Update transaction, as
pylance's merge_insert does.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..errors import InvalidArgumentError, SchemaMismatchError
from ..format.scan import ROW_ADDR
from ..spark import sqltext as sql
from ..spark.background import in_background
from ..spark.constraints import specs_for, with_checks
from ..spark.frames import (
    SkipReport,
    as_column,
    checked_columns,
    describe,
    empty_frame,
    planned_scan_frame,
    record_inspection,
    recording_inspection,
    referenced_alias_columns,
    table_spark_schema,
    total_cores,
)
from ..spark.jvm import release_checkpoint
from ..spark.plans import bare_parquet_scan, local_relation, replayable
from ..spark.rowchanges import ACTION, DELETE, INSERT_ACTION, MATCH_MARK, SOURCE_ID, UPDATE
from ..txn.log import Snapshot
from ..txn.operations import REWRITE_ROWS, Merge, Update
from ..txn.pipeline import StagedCommit
from . import args
from .columns import schema_with_new_fields
from .common import guarded
from .dml import change_context, run_grouped_changes, run_merge_aligned
from .mergekeys import MAX_KEY_SET, SourceBounds, equi_keys


def _plan_sections(source: DataFrame) -> dict[str, str]:
    """The source's ``explain`` sections ({} when Spark cannot explain it)."""
    from ..spark.plans import explain_sections

    try:
        return explain_sections(source)
    except Exception:
        return {}

MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE = "matched", "notMatched", "notMatchedBySource"
T_PRESENT, S_PRESENT, CLAUSE = "__lance_t", "__lance_s", "__lance_clause"


@dataclass
class Clause:
    kind: str  # MATCHED / NOT_MATCHED / NOT_MATCHED_BY_SOURCE
    action: str  # "update" / "delete" / "insert"
    condition: object = None
    assignments: dict | None = None
    all_columns: bool = False


class MergeBuilder:
    """Built by ``LanceTable.merge(source, condition)``; run by ``execute()``.
    Arguments are checked as each method is called (TypeError / ValueError,
    as Delta's builder)."""

    def __init__(self, table, source: DataFrame, condition, target_alias: str | None = None):
        self._table = table
        self._source = args.dataframe(source, "'source' in merge")
        self._condition = args.condition(condition, "'condition' in merge", required=True)
        self._target_alias = target_alias
        self._clauses: list[Clause] = []
        self._schema_evolution = False

    def _add(self, clause: Clause) -> "MergeBuilder":
        self._clauses.append(clause)
        return self

    def whenMatchedUpdate(self, condition=None, set: dict | None = None) -> "MergeBuilder":  # noqa: A002
        assignments = args.column_mapping(set, "'set' in whenMatchedUpdate")  # (first, as Delta)
        return self._add(Clause(MATCHED, "update", args.condition(condition), assignments))

    def whenMatchedUpdateAll(self, condition=None) -> "MergeBuilder":
        return self._add(Clause(MATCHED, "update", args.condition(condition), None, True))

    def whenMatchedDelete(self, condition=None) -> "MergeBuilder":
        return self._add(Clause(MATCHED, "delete", args.condition(condition)))

    def whenNotMatchedInsert(self, condition=None, values: dict | None = None) -> "MergeBuilder":
        values = args.column_mapping(values, "'values' in whenNotMatchedInsert")
        return self._add(Clause(NOT_MATCHED, "insert", args.condition(condition), values))

    def whenNotMatchedInsertAll(self, condition=None) -> "MergeBuilder":
        return self._add(Clause(NOT_MATCHED, "insert", args.condition(condition), None, True))

    def whenNotMatchedBySourceUpdate(self, condition=None, set: dict | None = None) -> "MergeBuilder":  # noqa: A002
        assignments = args.column_mapping(set, "'set' in whenNotMatchedBySourceUpdate")
        return self._add(Clause(NOT_MATCHED_BY_SOURCE, "update", args.condition(condition), assignments))

    def whenNotMatchedBySourceDelete(self, condition=None) -> "MergeBuilder":
        return self._add(Clause(NOT_MATCHED_BY_SOURCE, "delete", args.condition(condition)))

    def withSchemaEvolution(self) -> "MergeBuilder":
        """Let updateAll / insertAll add source columns the target lacks (as
        nullable columns, committed first as a schema-only version), and
        accept a source that lacks some target columns: inserted rows get
        NULL there, updated rows keep their value (Delta's rules)."""
        self._schema_evolution = True
        return self

    def execute(self, commitProperties: dict | None = None, expectations=None, txnAppId: str | None = None,
                txnVersion: int | None = None):
        """Run the merge; returns Delta's result: a one-row DataFrame
        ``num_affected_rows, num_updated_rows, num_deleted_rows,
        num_inserted_rows`` (``t.lastCommit()`` is the CommitInfo).
        ``expectations``: a great_expectations suite the written rows must
        pass before the commit. ``txnAppId`` / ``txnVersion``: an idempotent
        merge (e.g. per ``foreachBatch`` batch id), skipped when the table
        already holds it."""
        from .shapes import merge_frame

        t = self._table
        t._writable()
        snap = t.snapshot
        snap.new_data_file_version("merge")
        aliases = resolve_aliases(self._target_alias, self._source, self._condition, self._clauses)
        clauses = [c if c.all_columns or c.assignments is None else
                   Clause(c.kind, c.action, c.condition, target_keys(c.assignments, aliases[0], snap.schema.names))
                   for c in self._clauses]
        prepare = merge(t._spark, snap, self._source, self._condition, clauses, self._schema_evolution, aliases)
        info = t._run("merge", prepare, commitProperties, expectations, start=snap, operation="MERGE",
                      txnAppId=txnAppId, txnVersion=txnVersion)
        return merge_frame(t._spark, info)


def _texts(condition, clauses: list[Clause]) -> list[str]:
    out = [describe(condition)]
    for c in clauses:
        if c.condition is not None:
            out.append(describe(c.condition))
        for v in (c.assignments or {}).values():
            out.append(describe(v))
    return out


def _qualifiers(texts: list[str]) -> list[str]:
    """Table qualifiers of the column references in SQL texts, most used first."""
    import sqlglot
    from sqlglot import exp

    counts: dict[str, int] = {}
    for text in texts:
        try:
            tree = sqlglot.parse_one(text, read="spark")
        except Exception:
            continue
        for col in tree.find_all(exp.Column):
            if col.table:
                counts[col.table] = counts.get(col.table, 0) + 1
    return sorted(counts, key=lambda q: -counts[q])


def resolve_aliases(target_alias: str | None, source: DataFrame, condition, clauses: list[Clause]) -> tuple[str, str]:
    """(target alias, source alias) of a merge: the target's from
    ``t.alias(...)`` (default ``t``); the source's is the qualifier the
    condition and clauses use for a side other than the target -- Delta reads
    it from ``source.alias(...)``, which a DataFrame does not tell through
    the public API, so a candidate is checked by resolving ``alias.*``
    against the source (default ``s``)."""
    ta = target_alias or "t"
    candidates = [q for q in _qualifiers(_texts(condition, clauses)) if q.lower() != ta.lower()]
    if not candidates or any(q.lower() == "s" for q in candidates):
        return ta, "s"
    if len(candidates) == 1:
        return ta, candidates[0]
    for q in candidates:
        try:
            _ = source.select(F.col(f"{sql.quoted(q)}.*")).schema
            return ta, q
        except Exception:
            continue
    return ta, candidates[0]


def target_keys(assignments: dict, target_alias: str, columns: list[str]) -> dict:
    """``set`` / ``values`` keys as target column names: ``"t.x"`` (the
    target's alias, optionally back-quoted) means column ``x``, as Delta
    accepts; a column whose name has a dot keeps it."""
    out = {}
    for key, value in assignments.items():
        name = key
        if key not in columns:
            parts = [p.strip("`") for p in re.split(r"\.(?=(?:[^`]*`[^`]*`)*[^`]*$)", key)]
            if len(parts) == 2 and parts[0].lower() == target_alias.lower():
                name = parts[1]
            elif len(parts) == 1:
                name = parts[0]
        out[name] = value
    return out


# ---------------------------------------------------------------------------


def _new_columns(snapshot: Snapshot, source: DataFrame, clauses: list[Clause], evolve: bool) -> list:
    """Check the column mapping; the source columns schema evolution adds
    (empty without ``withSchemaEvolution()``). With it, an updateAll /
    insertAll source may also lack target columns: inserted rows get NULL
    there and updated rows keep their value (Delta's rule) -- a NOT NULL
    column an insert would leave NULL is an error."""
    table_cols = snapshot.schema.names
    src_cols = source.columns
    extra = []
    if any(c.all_columns for c in clauses):
        missing = [c for c in table_cols if c not in src_cols]
        if missing and not evolve:
            raise SchemaMismatchError(
                f"updateAll/insertAll: the source has no column(s) {missing} of the target; use "
                "withSchemaEvolution() to leave them unchanged in updated rows and NULL in inserted ones"
            )
        required = [c for c in missing if not snapshot.schema.field(c).nullable]
        if required and any(c.all_columns and c.action == "insert" for c in clauses):
            raise SchemaMismatchError(f"insertAll: the source has no column(s) {required}, which are NOT NULL")
        extra = [c for c in src_cols if c not in table_cols]
        if extra and not evolve:
            raise SchemaMismatchError(
                f"updateAll/insertAll: source column(s) {extra} are not in the target; "
                "use withSchemaEvolution() to add them"
            )
    names = set(table_cols) | set(extra)
    for c in clauses:
        for col in (c.assignments or {}):
            if col not in names:
                raise SchemaMismatchError(f"{c.kind} {c.action}: unknown target column {col!r}")
    return [source.schema[c] for c in extra]


_KIND_SQL = {MATCHED: "MATCHED", NOT_MATCHED: "NOT MATCHED", NOT_MATCHED_BY_SOURCE: "NOT MATCHED BY SOURCE"}


def check_clause_order(clauses: list[Clause]) -> None:
    """Delta's rule: of several clauses of one kind, only the last may omit its
    condition (an unconditional clause would make the ones after it dead)."""
    for kind, name in _KIND_SQL.items():
        of_kind = [c for c in clauses if c.kind == kind]
        if any(c.condition is None for c in of_kind[:-1]):
            raise InvalidArgumentError(
                f"When there are more than one {name} clauses in a MERGE statement, only the last "
                f"{name} clause can omit the condition."
            )


def _evolved(snap: Snapshot, new_fields) -> tuple[Snapshot, Merge | None]:
    """The snapshot as it will be once the new columns are added (in memory:
    nothing is committed) and the schema-only Merge that adds them."""
    if not new_fields:
        return snap, None
    schema = schema_with_new_fields(snap, new_fields)
    return snap.with_schema(schema), Merge(list(snap.fragments), schema)


#: ``spark.lance_ops.merge.materializeSource``: ``auto`` (default) checkpoints
#: the source unless its plan reads the same rows each time it runs (file
#: scans, local data, ranges under projections and filters, no
#: nondeterministic expression); ``all`` always checkpoints; ``none`` never
#: (the caller vouches the source is deterministic) -- Delta's option.
MATERIALIZE_SOURCE = "spark.lance_ops.merge.materializeSource"
#: Whether merges remember the key bounds of the target fragments they read
#: whole and prune later merges by them (:mod:`lance_ops.format.fragbounds`).
FRAGMENT_BOUNDS = "spark.lance_ops.merge.fragmentBounds.enabled"
#: ``false``: always run the source statistics job, even where the source's
#: Parquet footers hold its count and key bounds (lance_ops.ops.sourcefooters).
FOOTER_STATS = "spark.lance_ops.merge.sourceFooterStats.enabled"

#: Sources up to this many rows are broadcast: the target is then streamed
#: through a hash join instead of being shuffled (Spark conf
#: ``spark.lance_ops.merge.broadcastSourceRows`` overrides; 0 disables).
DEFAULT_BROADCAST_SOURCE_ROWS = 2_000_000


def merge(spark, snapshot: Snapshot, source: DataFrame, condition, clauses: list[Clause], schema_evolution: bool,
          aliases: tuple[str, str] = ("t", "s")):
    """``prepare(snapshot) -> StagedCommit`` of a merge. Everything is checked
    before anything is written: the column mapping here, and every clause's
    SQL analyzed by Spark against the target as schema evolution will leave
    it (in memory) as each prepare begins -- while the source's statistics
    job runs (:meth:`MergePlan.requests`) -- once per table version.
    With schema evolution the new columns are committed by a schema-only
    Merge just before the merge's Update (pylance's schema-only add_columns),
    both after all data is written: a failed merge commits nothing."""
    if not clauses:
        raise InvalidArgumentError("merge needs at least one when... clause")
    if condition is None:
        raise InvalidArgumentError("merge needs a condition, e.g. 't.id = s.id'")
    check_clause_order(clauses)
    new_fields = _new_columns(snapshot, source, clauses, schema_evolution)
    #: per version: (the target columns read, the clauses' Columns, how that
    #: analysis read the plan -- reported again when a re-run reuses it)
    analyzed: dict[int, tuple] = {}
    params = delta_parameters(condition, clauses)
    if new_fields:
        params["addedColumns"] = ", ".join(f.name for f in new_fields)
    limit = int(spark.conf.get("spark.lance_ops.merge.broadcastSourceRows", str(DEFAULT_BROADCAST_SOURCE_ROWS)))

    def prepare(disk: Snapshot) -> StagedCommit:
        snap, add_columns = _evolved(disk, new_fields)
        specs = specs_for(disk)
        # (the columns read and the clauses' values: from an earlier attempt at the same version)
        narrow, assignments, analyzed_how = analyzed.get(disk.version, (None, None, ()))
        shape = analysis_key(spark, snap, source, condition, clauses, aliases, specs) if narrow is None else None
        if shape is not None:
            narrow, analyzed_how = _ANALYSES.get(shape, (None, ()))
        plan = MergePlan(spark, snap, source, condition, clauses, disk=disk, checks=specs, assignments=assignments,
                         aliases=aliases)
        try:
            for how in analyzed_how:
                record_inspection(how)
            work = plan.requests(broadcast_limit=limit, narrow=narrow)
            analyzed.setdefault(disk.version, (plan.narrow, plan.assignments, plan.analyzed_how))
            if shape is not None:
                _ANALYSES.put(shape, (plan.narrow, plan.analyzed_how))
            matched = [c for c in clauses if c.kind == MATCHED]
            only_unconditional_delete = len(matched) == 1 and matched[0].action == "delete" and matched[0].condition is None
            ctx = change_context(spark, snap, assigned=plan.assigned_any, allow_duplicate_matches=only_unconditional_delete,
                                 checks=specs)
            source_rows = work.source_rows
            changes = None
            if work.aligned is not None:
                changes = run_merge_aligned(spark, work.aligned, work.candidates, ctx, source_rows,
                                            check_plan=plan.may_regroup(), one_task=plan.scan_tasks <= 1)
            if changes is None:
                if work.aligned is not None:
                    plan.strategy = "broadcast, shuffled by fragment"
                requests, key = work.grouped()
                changes = run_grouped_changes(spark, requests, ctx, key)
            scanned = plan.scan_metrics()
        finally:
            plan.release()
        # (the source key range the target scan was restricted to, for history())
        run_params = dict(params, strategy=plan.strategy,
                          **({"targetKeyRange": plan.pruned_by} if plan.pruned_by else {}))
        op = Update(
            removed_fragment_ids=sorted(changes.removed),
            updated_fragments=changes.updated_fragments(snap),
            new_fragments=changes.new_fragments,
            fields_modified=[],
            fields_for_preserving_frag_bitmap=[f.id for f in snap.schema.fields],
            update_mode=REWRITE_ROWS,
            affected_rows=changes.affected,
            description=run_params,
        )
        inserted, updated, deleted = changes.inserted_rows(), changes.updated_rows, changes.deleted_rows
        gone = set(changes.removed)
        metrics = {
            # Delta's MERGE metrics
            "numSourceRows": source_rows,
            "numTargetRowsInserted": inserted,
            "numTargetRowsUpdated": updated,
            "numTargetRowsDeleted": deleted,
            "numTargetRowsCopied": 0,
            "numOutputRows": inserted + updated,
            "numTargetFilesAdded": sum(len(f.files) for f in op.new_fragments),
            "numTargetFilesRemoved": sum(len(f.files) for f in snap.fragments if f.id in gone),
            "numTargetDeletionVectorsAdded": len(op.updated_fragments),
            # lance_ops' names of every DML (the API contract's), and Lance's
            "numInsertedRows": inserted,
            "numUpdatedRows": updated,
            "numDeletedRows": deleted,
            "numRemovedFragments": len(changes.removed),
            "numUpdatedFragments": len(op.updated_fragments),
            "numAddedFragments": len(op.new_fragments),
            "bytesWritten": changes.deletion_bytes(snap.store)
            + sum(df.file_size_bytes for f in op.new_fragments for df in f.files),
            **scanned,
        }
        if add_columns is None:
            empty = not op.new_fragments and not op.updated_fragments and not op.removed_fragment_ids
            return guarded(StagedCommit(op, metrics, run_params, empty=empty), disk)
        metrics["numAddedColumns"] = len(new_fields)
        return guarded(StagedCommit(
            op, metrics, run_params, before=[add_columns],
            finish=lambda results: metrics.update(schemaEvolvedInVersion=results[0].version),
        ), disk)

    return prepare


class _AnalysisCache:
    """The target columns merges of one *shape* read (:meth:`MergePlan.analyze`),
    kept by this process: a CDC job merges a micro-batch of the same schema
    with the same SQL every few minutes, and analyzing its clauses -- empty
    frames, a join, a select per clause kind, their analyzed plans read back:
    JVM round trips -- is the longest step before its first Spark job
    (~40-80 ms of a ~0.5 s merge). A shape is everything that answer depends
    on (:func:`analysis_key`); only successful analyses are kept, so bad SQL
    still fails as Spark's own error before any job."""

    def __init__(self, entries: int = 256):
        import threading
        from collections import OrderedDict

        self._entries = entries
        self._lock = threading.Lock()
        self._data: OrderedDict = OrderedDict()

    def get(self, key, default):
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
            return default if hit is None else hit

    def put(self, key, value) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._entries:
                self._data.popitem(last=False)


_ANALYSES = _AnalysisCache()


def analysis_key(spark, snap: Snapshot, source: DataFrame, condition, clauses: list[Clause],
                 aliases: tuple[str, str], checks: list) -> tuple | None:
    """The shape of a merge, as far as :meth:`MergePlan.analyze` is
    concerned: the table's and the source's schemas, the aliases, the SQL
    of the condition, of every clause and of the table's CHECK constraints,
    and the session settings name resolution follows (case sensitivity,
    ANSI mode). None -- analyze every time -- when some condition or value
    is a Column: its text need not say which DataFrame a reference is bound
    to."""
    if not isinstance(condition, str):
        return None
    parts = []
    for c in clauses:
        if c.condition is not None and not isinstance(c.condition, str):
            return None
        values = () if c.all_columns else tuple(sorted((c.assignments or {}).items()))
        if any(not isinstance(v, str) for _, v in values):
            return None
        parts.append((c.kind, c.action, c.condition, c.all_columns, values))
    conf = spark.conf
    return (
        table_spark_schema(snap).json(), source.schema.json(), tuple(aliases), condition, tuple(parts),
        tuple(spec.expression for spec in checks or ()),
        str(conf.get("spark.sql.caseSensitive", "false")).lower(), str(conf.get("spark.sql.ansi.enabled")).lower(),
    )


def delta_parameters(condition, clauses: list[Clause]) -> dict[str, str]:
    """Delta's MERGE operationParameters: ``predicate`` (a JSON list), and per
    clause kind a JSON list of ``{"predicate": ..., "actionType": ...}``."""
    import json

    def kind(k: str) -> str:
        out = []
        for c in clauses:
            if c.kind != k:
                continue
            action = c.action + ("All" if c.all_columns else "")
            out.append({**({"predicate": describe(c.condition)} if c.condition is not None else {}),
                        "actionType": action})
        return json.dumps(out)

    return {
        "predicate": json.dumps([describe(condition)]),
        "matchedPredicates": kind(MATCHED),
        "notMatchedPredicates": kind(NOT_MATCHED),
        "notMatchedBySourcePredicates": kind(NOT_MATCHED_BY_SOURCE),
    }


#: Words in a condition or value that may mean a subquery (``IN (SELECT
#: ...)``, ``EXISTS``, a DataFrame subquery's ``scalarsubquery()``); a
#: higher-order ``exists(array, ...)`` is a false alarm that costs only a check.
_SUBQUERY_WORDS = re.compile(r"\b(select|exists|subquery|scalarsubquery|listquery)\b", re.IGNORECASE)

#: Prefix of the clause conditions / values evaluated in their own scope.
SCOPED = "__lance_scoped_"


@dataclass
class MergeWork:
    """How one merge runs. ``aligned`` (broadcast strategy): target-side
    requests changed in the scan's own tasks, then the insert
    ``candidates`` -- :func:`lance_ops.ops.dml.run_merge_aligned`;
    ``grouped()`` builds (requests, group key) for the shuffle by fragment
    (:func:`lance_ops.ops.dml.run_grouped_changes`): the shuffle strategy,
    or the fallback when the target's plan does not keep scan partitions."""

    source_rows: int
    grouped: Callable[[], tuple]
    aligned: DataFrame | None = None
    #: builds the insert candidates (analyzed while the target scan runs;
    #: run only when some source row was not matched, or in the scan's own
    #: task when the scan has one)
    candidates: Callable[[], DataFrame] | None = None


class MergePlan:
    """Turns the merge into change requests for one snapshot.

    Two strategies, same result:

    * ``broadcast`` (source up to ``broadcastSourceRows`` rows): the target
      streams through a broadcast hash join with the source, whole fragments
      per scan task, and each task changes the fragments it read -- no
      shuffle; the tasks report which source rows they matched and, when some
      were not, one more job inserts the rest (a source row's id is the same
      in every job: the source is replayable or materialized once). Should
      Spark plan a shuffle into the target side after all, the requests and
      the markers of matched source rows are shuffled by fragment instead;
    * ``shuffle``: one join of the right type (inner / left / full outer) with
      both sides shuffled.
    """

    def __init__(self, spark, snap: Snapshot, source: DataFrame, condition, clauses: list[Clause],
                 disk: Snapshot | None = None, checks: list | None = None, assignments: list[dict] | None = None,
                 aliases: tuple[str, str] = ("t", "s")):
        self.spark, self.snap, self.source = spark, snap, source
        #: The target's and the source's alias (``t`` and ``s`` unless the
        #: caller named them: ``t.alias("events").merge(src.alias("updates"), ...)``).
        self.ta, self.sa = aliases
        #: Table CHECK constraints, evaluated over the rows as written.
        self.checks = checks or []
        #: Columns they reference (their old values fill in for updates).
        self.checked = checked_columns(spark, snap, self.checks)
        #: The committed version ``snap`` evolves (columns it lacks read as null).
        self.disk = disk or snap
        self.condition, self.clauses = condition, clauses
        table_spark = table_spark_schema(snap)
        self.types = {f.name: f.dataType for f in table_spark.fields}
        self.table_cols = [f.name for f in table_spark.fields]
        #: Per clause: target column -> its new value (SQL text or a Column;
        #: both immutable, so a plan of the same version may pass them on).
        self.assignments: list[dict] = assignments or []
        for c in clauses if assignments is None else ():
            if c.all_columns:
                src_cols = set(source.columns)  # (schema evolution: a missing column is left alone / NULL)
                self.assignments.append({col: sql.column(col, self.sa) for col in self.table_cols if col in src_cols})
            else:
                # (SQL strings stay text: see lance_ops.spark.sqltext)
                self.assignments.append({k: v if isinstance(v, str) else as_column(v)
                                         for k, v in (c.assignments or {}).items()})
        update_idx = [i for i, c in enumerate(clauses) if c.action == "update"]
        wanted = {k for i in update_idx for k in self.assignments[i]}
        #: Columns some update clause assigns (the rest are read back by offset).
        self.assigned_any = [c for c in self.table_cols if c in wanted]
        self.need_old = {col for i in update_idx for col in self.assigned_any if col not in self.assignments[i]}
        self.kinds = {c.kind for c in clauses}
        self.strategy = "shuffle"
        self._cached: list[DataFrame] = []
        self.source_materialized = False
        #: Where the target scan reports what it read after data skipping.
        self.report = SkipReport(self.disk)
        #: Where the target scan's tasks write the key bounds of the fragments
        #: they read whole (later merges prune by them: format/fragbounds)
        self._bounds_dir: str | None = None
        #: The source key range the target was restricted to (None: not pruned).
        self.pruned_by: str | None = None
        self.reads_nothing = False
        #: how many tasks the target scan has (set by :meth:`_target`)
        self.scan_tasks = 0
        self._src_types: dict | None = None
        self._sections: dict[str, str] | None = None
        #: the target columns read (:meth:`analyze`) and how that analysis
        #: read the plan (set by :meth:`requests`)
        self.narrow: list[str] | None = None
        self.analyzed_how: frozenset = frozenset()

    # --------------------------------------------------------------- analysis
    def analyze(self) -> list[str]:
        """Target columns the merge reads. Raises Spark's own error for bad SQL
        and, as Delta does, for a clause that names a column out of its scope:
        MATCHED clauses see the target and the source, NOT MATCHED (insert)
        clauses the source only, NOT MATCHED BY SOURCE clauses the target
        only -- for strings and Columns alike, whatever the strategy."""
        t_empty = empty_frame(self.spark, table_spark_schema(self.snap, [ROW_ADDR])).alias(self.ta)
        # (a frame of its own, never the cached one: a source with the
        # target's very schema must not join a plan with itself)
        s_empty = self.spark.createDataFrame([], self.source.schema).alias(self.sa)
        joined = t_empty.join(s_empty, as_column(self.condition), "fullouter")
        scope = {MATCHED: joined, NOT_MATCHED: s_empty, NOT_MATCHED_BY_SOURCE: t_empty}
        in_scope = {MATCHED: [self.condition], NOT_MATCHED: [], NOT_MATCHED_BY_SOURCE: []}
        for i, c in enumerate(self.clauses):
            exprs = ([c.condition] if c.condition is not None else []) + list(self.assignments[i].values())
            if exprs:
                _ = sql.select(scope[c.kind], exprs).schema  # forces analysis (lazy in Connect)
                in_scope[c.kind] += exprs
        referenced: set[str] = set()
        for kind in (MATCHED, NOT_MATCHED_BY_SOURCE):  # (insert clauses read no target column)
            cols = referenced_alias_columns(scope[kind], in_scope[kind], self.ta, t_empty)
            if cols is None:
                referenced = set(self.table_cols)
                break
            referenced |= cols
        return [c for c in self.table_cols if c in referenced or c in self.need_old or c in self.checked]

    def may_regroup(self) -> bool:
        """Whether the merge's own SQL could hold a subquery -- Spark rewrites
        one into a join, which can shuffle the target's rows away from their
        scan tasks. Only then is the aligned path's physical plan checked
        (planning it costs as much as a small job); otherwise the plan is a
        scan streaming through a broadcast join, and should that ever not
        hold, the tasks and the driver refuse a fragment changed out of
        order or by two tasks (nothing is committed)."""
        texts = [describe(self.condition)] + [spec.expression for spec in self.checks]
        for c in self.clauses:
            texts += [describe(c.condition)] if c.condition is not None else []
            texts += [] if c.all_columns else [describe(v) for v in (c.assignments or {}).values()]
        return any(_SUBQUERY_WORDS.search(t) for t in texts)

    # -------------------------------------------------------------- requests
    def requests(self, broadcast_limit: int, narrow: list[str] | None = None) -> "MergeWork":
        """How to run the merge (:class:`MergeWork`); ``narrow``:
        :meth:`analyze`'s answer when already known. The source's statistics
        job (:meth:`_source_bounds`, after materializing a source that is
        not replayable) runs on a second thread while the clauses are
        analyzed: neither needs the other, and each costs a selective merge
        about as much as its target scan."""

        def source_and_bounds():
            src = self._source()  # (materialized first when not replayable)
            return src, self._source_bounds(src)

        pending = in_background(self.spark, source_and_bounds)
        try:
            if narrow is None:
                with recording_inspection() as seen:
                    narrow = self.analyze()
                self.analyzed_how = frozenset(seen)
        except BaseException:
            pending.cancel()  # (bad SQL: raised now, not after a scan of the source)
            raise
        self.narrow = narrow
        src, bounds = pending.result()
        # the group of a request in the shuffle by fragment (inserts: spread over the tasks)
        addr = sql.quoted(ROW_ADDR)
        key = f"CASE WHEN {addr} IS NULL THEN -1 - spark_partition_id() ELSE shiftright({addr}, 32) END"
        cond = as_column(self.condition)
        source_rows = bounds.rows
        broadcast = broadcast_limit > 0 and source_rows <= broadcast_limit
        target = self._target(narrow, bounds, whole_fragments=broadcast)
        if broadcast:
            self.strategy = "broadcast"
            # the source with the insert clauses' values (built once, if needed)
            scoped = functools.cache(lambda: self._scoped(src, NOT_MATCHED, self.sa))

            aligned, candidates = self._aligned_requests(target, src, scoped, cond)

            def grouped():
                requests, by_source = self._broadcast_requests(target, scoped(), cond)
                k = key
                if by_source:
                    # inserts and the markers of matched source rows meet in the
                    # group of their source row
                    groups = max(1, 2 * total_cores(self.spark))
                    k = (f"CASE WHEN {addr} IS NULL THEN -1 - pmod({sql.quoted(SOURCE_ID)}, {groups}) "
                         f"ELSE shiftright({addr}, 32) END")
                return requests, F.expr(k)

            return MergeWork(source_rows, grouped, aligned, candidates)
        src = self._scoped(src, NOT_MATCHED, self.sa).withColumn(S_PRESENT, F.lit(True))
        t, s = target.withColumn(T_PRESENT, F.lit(True)).alias(self.ta), src.alias(self.sa)
        if NOT_MATCHED_BY_SOURCE in self.kinds and NOT_MATCHED in self.kinds:
            joined = t.join(s, cond, "full_outer")
        elif NOT_MATCHED_BY_SOURCE in self.kinds:
            joined = t.join(s, cond, "left_outer")
        elif NOT_MATCHED in self.kinds:
            joined = s.join(t, cond, "left_outer")
        else:
            joined = t.join(s, cond, "inner")
        t_in, s_in = sql.column(T_PRESENT, self.ta) + " IS NOT NULL", sql.column(S_PRESENT, self.sa) + " IS NOT NULL"
        t_out, s_out = sql.column(T_PRESENT, self.ta) + " IS NULL", sql.column(S_PRESENT, self.sa) + " IS NULL"
        presence = {MATCHED: sql.and_(t_in, s_in), NOT_MATCHED: sql.and_(s_in, t_out),
                    NOT_MATCHED_BY_SOURCE: sql.and_(t_in, s_out)}
        requests = self._select(joined, presence, sql.column(ROW_ADDR, self.ta))
        return MergeWork(source_rows, lambda: (requests, F.expr(key)))

    def _source_bounds(self, src: DataFrame) -> SourceBounds:
        """The source's row count and, when the target may be pruned, the
        bounds of its join keys (one aggregate). Target pruning is off when a
        NOT MATCHED BY SOURCE clause must see every target row."""
        on_disk = set(self.disk.schema.names)
        keys = []
        if NOT_MATCHED_BY_SOURCE not in self.kinds:
            keys = [(t, s) for t, s in equi_keys(describe(self.condition), self.table_cols, src.columns, (self.ta, self.sa)) if t in on_disk]
        use_filter = str(self.spark.conf.get("spark.lance_ops.merge.keyFilter.enabled", "true")).lower() == "true"

        # (data sent with the plan, read as it is -- not a checkpoint of it)
        local = not self.source_materialized and local_relation(self._source_sections().get("Optimized Logical Plan", ""))

        def bounds(footers=None):
            return SourceBounds(src, keys, self.types, key_filter=use_filter, target_rows=self.disk.num_rows(),
                                footers=footers, local=local)

        footers = self._footers()
        if footers is None:
            return bounds()
        found = bounds(footers)
        if not found.from_footers or not found.keys or found.matches_nothing:
            return found
        from ..format.pruning import skip_plan
        from ..spark.datasource import filters_to_conjuncts
        from .sourcefooters import narrow_enough

        in_range = skip_plan(self.disk, filters_to_conjuncts(found.scan_filters())).rows()
        if narrow_enough(in_range, found.rows):
            return found
        # A key set (at most MAX_KEY_SET keys: an IN list that prunes zones)
        # needs the statistics job; more keys than that would get only the
        # bloom filter from it, which the scan's tasks build themselves.
        return found if found.key_filter is not None and found.rows > MAX_KEY_SET else bounds()

    def _footers(self) -> Callable[[dict], object] | None:
        """Where the source is a bare scan of local Parquet files on a classic
        session: its count and key bounds from their footers, in place of the
        statistics job (:mod:`lance_ops.ops.sourcefooters`)."""
        from ..spark.jvm import is_connect
        from .sourcefooters import footer_stats

        if is_connect(self.spark) or str(self.spark.conf.get(FOOTER_STATS, "true")).lower() != "true":
            return None
        if str(self.spark.conf.get("spark.sql.parquet.fieldId.read.enabled", "false")).lower() == "true":
            return None  # (Spark matches the files' columns by field id, not by name)
        if not bare_parquet_scan(self._source_sections().get("Optimized Logical Plan", "")):
            return None
        try:
            files = self.source.inputFiles()
        except Exception:
            return None
        return lambda columns: footer_stats(files, columns)

    def _source_sections(self) -> dict[str, str]:
        if self._sections is None:
            self._sections = _plan_sections(self.source)
        return self._sections

    def _target(self, narrow: list[str], bounds: SourceBounds, whole_fragments: bool = False) -> DataFrame:
        """The target rows the merge reads: columns ``narrow`` (+ row
        address), restricted to the source's key range when there is one
        (pushed to the scan: data skipping drops the zones outside it).
        ``whole_fragments``: each fragment read by one task, in order (the
        aligned path changes fragments in the tasks that read them)."""
        on_disk = set(self.disk.schema.names)
        pushed = bounds.scan_filters() if bounds.keys and not bounds.matches_nothing else []
        record = None
        if bounds.keys and str(self.spark.conf.get(FRAGMENT_BOUNDS, "true")).lower() == "true":
            import tempfile

            self._bounds_dir = self._bounds_dir or tempfile.mkdtemp(prefix="lance_ops-bounds-")
            record = ([t for t, _s in bounds.keys if t in on_disk], self._bounds_dir)
        target, self.scan_tasks = planned_scan_frame(
            self.spark, self.disk, [c for c in narrow if c in on_disk], [ROW_ADDR], pushed,
            split_fragments=not whole_fragments, skip_report=self.report.path, key_filter=bounds.key_filter,
            record_bounds=record)
        if bounds.keys:
            self.pruned_by = bounds.describe()
            if bounds.matches_nothing:
                self.reads_nothing = True
                target = target.where(F.lit(False))
        for c in narrow:
            if c not in on_disk:  # added by schema evolution: null in every existing row
                target = target.withColumn(c, F.lit(None).cast(self.types[c]))
        return self._scoped(target, NOT_MATCHED_BY_SOURCE, self.ta)

    def scan_metrics(self) -> dict:
        """What the target scan read (numFragmentsScanned/Skipped, numRowsScanned)."""
        if self.reads_nothing:
            frags = [f for f in self.disk.fragments if f.physical_rows]
            return {"numFragmentsScanned": 0, "numFragmentsSkipped": len(frags), "numRowsScanned": 0}
        return self.report.metrics()

    # ----------------------------------------------------------------- scope
    def _scoped(self, frame: DataFrame, kind: str, alias: str) -> DataFrame:
        """``frame`` plus the conditions and values of the clauses of ``kind``,
        evaluated on that side alone *before* the join: NOT MATCHED clauses on
        the source, NOT MATCHED BY SOURCE clauses on the target -- so a name
        resolves in the clause's own scope (Delta's rule; an unqualified name
        can never pick up the other side's column)."""
        cols = []
        for i, c in enumerate(self.clauses):
            if c.kind != kind:
                continue
            if c.condition is not None:
                cols.append(sql.aliased(c.condition, f"{SCOPED}c{i}"))
            for j, col in enumerate(self.table_cols):
                if col in self.assignments[i]:
                    cols.append(sql.aliased(self._typed(i, col), f"{SCOPED}v{i}_{j}"))
        return sql.select(frame.alias(alias), ["*", *cols]) if cols else frame

    def _typed(self, i: int, col: str):
        """Clause ``i``'s value for ``col`` in the column's type (no cast for
        an ``*All`` clause's source column of that very type)."""
        value = self.assignments[i][col]
        if self.clauses[i].all_columns and self._source_types().get(col) == self.types[col]:
            return value
        return sql.cast(value, self.types[col])

    def _source_types(self) -> dict:
        if self._src_types is None:
            self._src_types = {f.name: f.dataType for f in self.source.schema.fields}
        return self._src_types

    def _condition(self, i: int):
        c = self.clauses[i]
        if c.condition is None:
            return None
        return c.condition if c.kind == MATCHED else sql.column(f"{SCOPED}c{i}")

    def _value(self, i: int, col: str):
        if self.clauses[i].kind == MATCHED:
            return self._typed(i, col)
        return sql.column(f"{SCOPED}v{i}_{self.table_cols.index(col)}")

    def _source(self) -> DataFrame:
        """The source with a per-row id that is the same however often the
        merge's jobs read it: as it is when its plan replays the same rows
        (:func:`lance_ops.spark.plans.replayable`: a file scan, say --
        checkpointing it would only cost a Spark job), otherwise evaluated
        once (``localCheckpoint``)."""
        src = self.source.withColumn(SOURCE_ID, F.monotonically_increasing_id())
        mode = str(self.spark.conf.get(MATERIALIZE_SOURCE, "auto")).lower()
        if mode not in ("auto", "all", "none"):
            raise InvalidArgumentError(f"{MATERIALIZE_SOURCE} must be auto, all or none, not {mode!r}")
        if mode == "none" or (mode == "auto" and replayable(self._source_sections())):
            self.source_materialized = False
            return src
        src = src.localCheckpoint(eager=True)
        self._cached.append(src)
        self.source_materialized = True
        return src

    def _aligned_requests(self, target: DataFrame, src: DataFrame, scoped: Callable[[], DataFrame],
                          cond) -> tuple[DataFrame, Callable | None]:
        """(target-side requests, insert candidates) of the aligned path
        (:func:`lance_ops.ops.dml.run_merge_aligned`): the target streams
        through a broadcast hash join with the source -- no shuffle, so each
        scan task holds whole fragments and changes them itself. Every matched
        pair is kept (a null action where no clause applies) with its source
        row id, so the tasks can tell which source rows were matched; the
        candidates (built when called) are the source rows an insert clause
        applies to (None without NOT MATCHED clauses). The join broadcasts
        the bare source: matched clauses never read the insert clauses'
        values, which only ``scoped()`` (the candidates' source) computes."""
        joined, presence = self._broadcast_join(target, src, cond)
        requests = self._select(joined, presence, sql.column(ROW_ADDR, self.ta), keep_matched=True)
        if NOT_MATCHED not in self.kinds:
            return requests, None
        return requests, lambda: self._select(scoped().alias(self.sa), {NOT_MATCHED: None}, "CAST(NULL AS BIGINT)",
                                              source_id=True)

    def _broadcast_join(self, target: DataFrame, src: DataFrame, cond) -> tuple[DataFrame, dict]:
        """(the target streamed through a hash join with the broadcast source,
        the presence condition of each clause kind it covers)."""
        if NOT_MATCHED_BY_SOURCE not in self.kinds:
            # an inner join: every row is a matched pair (presence None: always)
            return target.alias(self.ta).join(F.broadcast(src.alias(self.sa)), cond, "inner"), {MATCHED: None}
        s = F.broadcast(src.withColumn(S_PRESENT, F.lit(True)).alias(self.sa))
        s_in = sql.column(S_PRESENT, self.sa)
        return (target.alias(self.ta).join(s, cond, "left_outer"),
                {MATCHED: f"{s_in} IS NOT NULL", NOT_MATCHED_BY_SOURCE: f"{s_in} IS NULL"})

    def _broadcast_requests(self, target: DataFrame, src: DataFrame, cond) -> tuple[DataFrame, bool]:
        """(requests, whether inserts are keyed by source row id).

        Inserts are the source rows no target row matched. Rather than
        materializing the matched rows to anti-join them (two more Spark
        jobs), every source row becomes an insert candidate and every matched
        target row also emits a *marker* carrying its source row's id; the
        change job's shuffle brings a candidate and its markers to the same
        group (keyed by the source row id), where candidates with a marker
        are dropped (:func:`lance_ops.spark.rowchanges.fragment_changes`).
        One scan of the target, one shuffle, no checkpoint."""
        joined, presence = self._broadcast_join(target, src, cond)
        if NOT_MATCHED not in self.kinds:
            return self._select(joined, presence, sql.column(ROW_ADDR, self.ta)), False
        target_side = self._select(joined, presence, sql.column(ROW_ADDR, self.ta), markers=True)
        candidates = self._select(src.alias(self.sa), {NOT_MATCHED: None}, "CAST(NULL AS BIGINT)", source_id=True)
        return target_side.unionByName(candidates), True

    def _select(self, joined: DataFrame, presence: dict, rowaddr, markers: bool = False,
                source_id: bool = False, keep_matched: bool = False) -> DataFrame:
        """Evaluate the clauses whose kind ``presence`` covers (kind -> the
        condition that the row is of that kind; None: every row is): which clause
        applies (first in order), the action and every column's new value.
        ``markers``: each matched row also yields a marker row (action
        :data:`MATCH_MARK`, no row address) -- one ``inline`` generator in
        the same projection, so no extra pass; ``keep_matched``: a matched
        pair no clause applies to is kept, with a null action; ``source_id``
        (implied by both) keeps the source row id. Built as SQL text where
        the clauses are (:mod:`lance_ops.spark.sqltext`)."""
        branches = []
        for i, c in enumerate(self.clauses):
            if c.kind in presence:
                applies = sql.and_(presence[c.kind], self._condition(i))
                branches.append(("TRUE" if applies is None else applies, str(i)))
        which = sql.case_when(branches) if branches else "CAST(NULL AS INT)"
        joined = joined.withColumn(CLAUSE, as_column(which))
        clause = sql.column(CLAUSE)
        if not (markers or keep_matched):
            joined = joined.where(f"{clause} IS NOT NULL")
        elif presence[MATCHED] is not None:  # (None: every row is a matched pair, all kept)
            joined = joined.where(sql.or_(f"{clause} IS NOT NULL", presence[MATCHED]))
        code = {"update": UPDATE, "delete": DELETE, "insert": INSERT_ACTION}
        hits = {i: f"{clause} = {i}" for i, c in enumerate(self.clauses) if c.kind in presence}
        action = sql.case_when([(hit, f"'{code[self.clauses[i].action]}'") for i, hit in hits.items()]) \
            if hits else "CAST(NULL AS STRING)"
        columns = []
        for col in self.table_cols:
            values = []
            for i, c in enumerate(self.clauses):
                if c.kind not in presence or c.action == "delete":
                    continue
                if col in self.assignments[i]:
                    values.append((hits[i], self._value(i, col)))
                elif c.action == "update" and (col in self.assigned_any or col in self.checked):
                    # keeps its old value in this clause (columns no clause
                    # assigns are read back from the fragment by the task; the
                    # old value here feeds the constraint checks)
                    values.append((hits[i], sql.column(col, self.ta)))  # (read with the table's type)
            columns.append(sql.aliased(sql.case_when(values) if values else sql.null_of(self.types[col]), col))
        extra = [sql.aliased(sql.column(SOURCE_ID, self.sa), SOURCE_ID)] if markers or source_id or keep_matched else []
        if markers:
            request = F.struct(as_column(rowaddr).cast("long").alias(ROW_ADDR), as_column(action).alias(ACTION))
            mark = F.struct(F.lit(None).cast("long").alias(ROW_ADDR), F.lit(MATCH_MARK).alias(ACTION))
            has = F.col(CLAUSE).isNotNull()
            matched = F.lit(True) if presence[MATCHED] is None else as_column(presence[MATCHED])
            pairs = (F.when(has & matched, F.array(request, mark)).when(matched, F.array(mark))
                     .otherwise(F.array(request)))
            head = [F.inline(pairs)]
        else:
            head = [sql.aliased(rowaddr, ROW_ADDR), sql.aliased(action, ACTION)]
        out = sql.select(joined, [*head, *columns, *extra])
        return with_checks(out, self.checks)

    def release(self) -> None:
        self.report.__exit__(None, None, None)
        if self._bounds_dir is not None:
            import shutil

            from ..format.fragbounds import load_records

            load_records(self._bounds_dir)
            shutil.rmtree(self._bounds_dir, ignore_errors=True)
            self._bounds_dir = None
        for df in self._cached:
            release_checkpoint(df)
        self._cached = []
