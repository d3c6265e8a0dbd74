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

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..errors import InvalidArgumentError, SchemaMismatchError
from ..results import CommitInfo
from ..spark.frames import (
    as_column, describe, empty_frame, output_attributes, referenced_attributes, scan_frame,
    table_spark_schema,
)
from ..spark.rowchanges import ACTION, DELETE, INSERT_ACTION, ROW_ADDR, UPDATE
from ..txn.log import Snapshot, open_snapshot
from ..txn.operations import REWRITE_ROWS, Update
from .columns import add_null_columns
from .dml import Prepared, change_context, run_changes, run_dml

MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE = "matched", "notMatched", "notMatchedBySource"
T_PRESENT, S_PRESENT, CLAUSE = "__lance_t", "__lance_s", "__lance_clause"


@dataclass
class Clause:
    kind: str  # MATCHED / NOT_MATCHED / NOT_MATCHED_BY_SOURCE
    action: str  # "update" / "delete" / "insert"
    condition: object = None
    assignments: dict | None = None
    all_columns: bool = False

    def describe(self) -> str:
        what = self.action + ("All" if self.all_columns else "")
        cond = f" if {describe(self.condition)}" if self.condition is not None else ""
        sets = ""
        if self.assignments and not self.all_columns:
            sets = " " + ", ".join(f"{c} = {describe(v)}" for c, v in self.assignments.items())
        return f"{self.kind}: {what}{sets}{cond}"


class MergeBuilder:
    """Built by ``LanceTable.merge(source, condition)``; run by ``execute()``."""

    def __init__(self, table, source: DataFrame, condition):
        if not isinstance(source, DataFrame):
            raise InvalidArgumentError("merge source must be a Spark DataFrame")
        self._table = table
        self._source = source
        self._condition = condition
        self._clauses: list[Clause] = []
        self._schema_evolution = False

    def _add(self, clause: Clause) -> "MergeBuilder":
        if clause.assignments is not None and not clause.all_columns:
            if not isinstance(clause.assignments, dict) or not clause.assignments:
                raise InvalidArgumentError(f"{clause.kind} {clause.action} needs a non-empty dict of assignments")
        self._clauses.append(clause)
        return self

    def whenMatchedUpdate(self, condition=None, set: dict | None = None) -> "MergeBuilder":  # noqa: A002
        return self._add(Clause(MATCHED, "update", condition, set or {}))

    def whenMatchedUpdateAll(self, condition=None) -> "MergeBuilder":
        return self._add(Clause(MATCHED, "update", condition, None, True))

    def whenMatchedDelete(self, condition=None) -> "MergeBuilder":
        return self._add(Clause(MATCHED, "delete", condition))

    def whenNotMatchedInsert(self, condition=None, values: dict | None = None) -> "MergeBuilder":
        return self._add(Clause(NOT_MATCHED, "insert", condition, values or {}))

    def whenNotMatchedInsertAll(self, condition=None) -> "MergeBuilder":
        return self._add(Clause(NOT_MATCHED, "insert", condition, None, True))

    def whenNotMatchedBySourceUpdate(self, condition=None, set: dict | None = None) -> "MergeBuilder":  # noqa: A002
        return self._add(Clause(NOT_MATCHED_BY_SOURCE, "update", condition, set or {}))

    def whenNotMatchedBySourceDelete(self, condition=None) -> "MergeBuilder":
        return self._add(Clause(NOT_MATCHED_BY_SOURCE, "delete", condition))

    def withSchemaEvolution(self) -> "MergeBuilder":
        """Let updateAll / insertAll add source columns the target lacks (as
        nullable columns, committed first as a schema-only version)."""
        self._schema_evolution = True
        return self

    def execute(self) -> CommitInfo:
        t = self._table
        t._writable()
        info = merge(
            t._spark, t._store, t._snapshot, self._source, self._condition, list(self._clauses),
            self._schema_evolution, t.conflictRetries,
        )
        return t._moved(info)


# ---------------------------------------------------------------------------


def _resolve_columns(snapshot: Snapshot, source: DataFrame, clauses: list[Clause], evolve: bool) -> Snapshot:
    """Check column mapping; with schema evolution add missing target columns."""
    table_cols = snapshot.schema.names
    src_cols = source.columns
    if any(c.all_columns for c in clauses):
        missing = [c for c in table_cols if c not in src_cols]
        if missing:
            raise SchemaMismatchError(f"updateAll/insertAll: the source has no column(s) {missing} of the target")
        extra = [c for c in src_cols if c not in table_cols]
        if extra and not evolve:
            raise SchemaMismatchError(
                f"updateAll/insertAll: source column(s) {extra} are not in the target; "
                "use withSchemaEvolution() to add them"
            )
        if extra:
            fields = [source.schema[c] for c in extra]
            snapshot = add_null_columns(snapshot, fields, {"lance_ops.param.reason": "merge schema evolution"}).snapshot
    names = set(snapshot.schema.names)
    for c in clauses:
        for col in (c.assignments or {}):
            if col not in names:
                raise SchemaMismatchError(f"{c.kind} {c.action}: unknown target column {col!r}")
    return snapshot


def merge(spark, store, snapshot: Snapshot, source: DataFrame, condition, clauses: list[Clause],
          schema_evolution: bool, conflict_retries: int) -> CommitInfo:
    if not clauses:
        raise InvalidArgumentError("merge needs at least one when... clause")
    if condition is None:
        raise InvalidArgumentError("merge needs a condition, e.g. 't.id = s.id'")
    evolved = _resolve_columns(snapshot, source, clauses, schema_evolution)
    evolved_version = evolved.version if evolved.version != snapshot.version else None
    params = {"condition": describe(condition), "clauses": " | ".join(c.describe() for c in clauses)}
    if evolved_version is not None:
        params["schemaEvolvedInVersion"] = str(evolved_version)
    _plan(spark, evolved, source, condition, clauses)  # analysis errors surface before any work

    def prepare(snap: Snapshot) -> Prepared:
        # Counted in its own job: Spark's observe() metrics go missing when
        # adaptive execution prunes the observed branch (e.g. an empty join side).
        source_rows = source.count()
        requests, key, assigned = _plan(spark, snap, source, condition, clauses)
        only_unconditional_delete = [
            (c.action, c.condition) for c in clauses if c.kind == MATCHED
        ] == [("delete", None)]
        ctx = change_context(spark, snap, assigned=assigned, allow_duplicate_matches=only_unconditional_delete)
        changes = run_changes(requests, ctx, key=key, writes_rows=True)
        op = Update(
            removed_fragment_ids=sorted(changes.removed),
            updated_fragments=changes.updated_fragments(snap),
            new_fragments=changes.new_fragments,
            fields_modified=[],
            fields_for_preserving_frag_bitmap=[f.id for f in snap.schema.fields],
            update_mode=REWRITE_ROWS,
            affected_rows=changes.affected,
            description=params,
        )
        metrics = {
            "numSourceRows": source_rows,
            "numInsertedRows": changes.inserted_rows(),
            "numUpdatedRows": changes.updated_rows,
            "numDeletedRows": changes.deleted_rows,
            "numRemovedFragments": len(changes.removed),
            "numUpdatedFragments": len(op.updated_fragments),
            "numAddedFragments": len(op.new_fragments),
            "bytesWritten": changes.deletion_bytes(store)
            + sum(df.file_size_bytes for f in op.new_fragments for df in f.files),
        }
        return Prepared(op, metrics, params)

    base = open_snapshot(store, evolved.version) if evolved_version is not None else snapshot
    info = run_dml(spark, store, base, "merge", prepare, conflict_retries)
    if evolved_version is not None:
        info.metrics["schemaEvolvedInVersion"] = evolved_version
    return info


def _plan(spark, snap: Snapshot, source: DataFrame, condition, clauses: list[Clause]):
    """The change-request DataFrame for one snapshot: (requests, group key,
    assigned columns)."""
    table_spark = table_spark_schema(snap)
    types = {f.name: f.dataType for f in table_spark.fields}
    table_cols = [f.name for f in table_spark.fields]

    # Assignments of every clause, by column (updateAll / insertAll map by name).
    assignments: list[dict] = []
    for c in clauses:
        if c.all_columns:
            assignments.append({col: F.col(f"s.`{col}`") for col in table_cols})
        else:
            assignments.append({k: as_column(v) for k, v in (c.assignments or {}).items()})
    update_idx = [i for i, c in enumerate(clauses) if c.action == "update"]
    assigned_any: list[str] = []
    for i in update_idx:
        assigned_any += [k for k in assignments[i] if k not in assigned_any]
    assigned_any = [c for c in table_cols if c in assigned_any]
    need_old = {col for i in update_idx for col in assigned_any if col not in assignments[i]}

    # Which target columns the expressions reference (analysis over empty frames).
    t_empty = empty_frame(spark, table_spark_schema(snap, [ROW_ADDR])).alias("t")
    s_empty = empty_frame(spark, source.schema).alias("s")
    joined_empty = t_empty.join(s_empty, as_column(condition), "fullouter")
    exprs = [condition] + [c.condition for c in clauses if c.condition is not None]
    exprs += [v for a in assignments for v in a.values()]
    attrs = referenced_attributes(joined_empty, exprs)
    if attrs is None:
        referenced = set(table_cols)
    else:
        t_attrs = output_attributes(t_empty)
        referenced = {t_attrs[i] for i in attrs if i in t_attrs}
    narrow = [c for c in table_cols if c in referenced or c in need_old]

    target = scan_frame(spark, snap, narrow, [ROW_ADDR]).withColumn(T_PRESENT, F.lit(True)).alias("t")
    src = source.withColumn(S_PRESENT, F.lit(True)).alias("s")

    kinds = {c.kind for c in clauses}
    cond = as_column(condition)
    if NOT_MATCHED_BY_SOURCE in kinds and NOT_MATCHED in kinds:
        joined = target.join(src, cond, "full_outer")
    elif NOT_MATCHED_BY_SOURCE in kinds:
        joined = target.join(src, cond, "left_outer")
    elif NOT_MATCHED in kinds:
        joined = src.join(target, cond, "left_outer")
    else:
        joined = target.join(src, cond, "inner")

    t_in = F.col(f"t.{T_PRESENT}").isNotNull()
    s_in = F.col(f"s.{S_PRESENT}").isNotNull()
    base = {MATCHED: t_in & s_in, NOT_MATCHED: s_in & ~t_in, NOT_MATCHED_BY_SOURCE: t_in & ~s_in}
    which = None
    for i, c in enumerate(clauses):
        applies = base[c.kind] if c.condition is None else base[c.kind] & as_column(c.condition)
        which = F.when(applies, F.lit(i)) if which is None else which.when(applies, F.lit(i))
    joined = joined.withColumn(CLAUSE, which).where(F.col(CLAUSE).isNotNull())

    code = {"update": UPDATE, "delete": DELETE, "insert": INSERT_ACTION}
    action = None
    for i, c in enumerate(clauses):
        action = F.when(F.col(CLAUSE) == i, F.lit(code[c.action])) if action is None else action.when(F.col(CLAUSE) == i, F.lit(code[c.action]))
    columns = []
    for col in table_cols:
        expr = None
        for i, c in enumerate(clauses):
            if c.action == "delete":
                continue
            if col in assignments[i]:
                value = assignments[i][col]
            elif c.action == "update" and col in assigned_any:
                value = F.col(f"t.`{col}`")  # keeps its old value in this clause
            else:
                continue
            value = value.cast(types[col])
            expr = F.when(F.col(CLAUSE) == i, value) if expr is None else expr.when(F.col(CLAUSE) == i, value)
        columns.append((expr if expr is not None else F.lit(None).cast(types[col])).alias(col))
    rowaddr = F.col(f"t.{ROW_ADDR}")
    requests = joined.select(rowaddr.alias(ROW_ADDR), action.alias(ACTION), *columns)
    # Inserts have no row address: spread them over negative group keys.
    key = F.when(F.col(ROW_ADDR).isNull(), F.lit(-1) - F.spark_partition_id()).otherwise(F.shiftright(F.col(ROW_ADDR), 32))
    return requests, key, assigned_any
