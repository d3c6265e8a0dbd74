"""Queries over Lance tables, each table read with only the columns it needs.

Spark 4.3's Python Data Source API has no column pruning: a DataFrame over
the ``lance`` source reads every column Spark was told about. So before Spark
sees a statement, :func:`bind` analyzes it with sqlglot:

1. every table reference is classified: a Lance table (``lance.`uri```, a
   bound or registered name; ``table_changes(...)``), a CTE, or Spark's;
2. in a copy of the tree, each reference becomes a placeholder table with its
   schema (Lance tables from their manifest, Spark's tables from
   ``spark.table(name).schema`` -- an unknown name raises Spark's own
   AnalysisException here), and sqlglot's ``qualify`` resolves every column
   to its source (stars expanded, correlated subqueries followed);
3. each Lance reference is read with just the columns attributed to it (and
   the metadata columns ``_rowid`` / ``_rowaddr`` / lineage if the query
   names them) at the version resolved now (one version per reference for the
   whole statement), through ``LanceTable.toDF(columns=...)``; the pushable
   filters of the query are then pushed into that scan by Spark itself;
4. the statement is regenerated with each reference replaced by a
   ``{placeholder}`` and run by ``spark.sql(text, placeholder=frame, ...)``
   (PySpark's DataFrame parameters, which Spark Connect supports too), so
   Spark analyzes and runs the query with its own semantics and errors.

Anything the analysis cannot attribute (a column sqlglot cannot place) makes
the Lance tables of that scope read whole: slower, never wrong. A statement
without Lance tables goes to ``spark.sql`` untouched.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from ..errors import InvalidArgumentError
from ..spark.sessionnames import registered_uri
from .grammar import LanceSpark, sql_of
from .refs import LanceRef, Resolver, normalize_uri

log = logging.getLogger("lance_ops.sql")

PLACEHOLDER = "__lance_ops_{}__"
METADATA = ("_rowid", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version")


@dataclass
class Source:
    """One table reference of a statement."""

    node: exp.Table
    ref: LanceRef | None = None  # a Lance table
    changes: tuple | None = None  # table_changes(uri, start, end)
    spark_name: str | None = None  # Spark's table
    handle: object = None
    frame: object = None
    columns: list[str] = field(default_factory=list)  # the table's columns (Lance)
    needed: set[str] = field(default_factory=set)
    metadata: set[str] = field(default_factory=set)
    everything: bool = False

    @property
    def is_lance(self) -> bool:
        return self.ref is not None or self.changes is not None


def _is_table_changes(node: exp.Table) -> bool:
    fn = node.this
    return isinstance(fn, exp.Func) and (
        (isinstance(fn, exp.Anonymous) and str(fn.this).upper() == "TABLE_CHANGES")
        or type(fn).__name__.upper() == "TABLECHANGES"
    )


def _literal(node: exp.Expr, what: str):
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else int(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return -int(node.this.this)
    raise InvalidArgumentError(f"table_changes: {what} must be a literal, got {sql_of(node)}")


def _changes_args(node: exp.Table) -> tuple:
    fn = node.this
    args = list(fn.expressions) if isinstance(fn, exp.Anonymous) else [fn.this, *fn.expressions]
    if len(args) not in (2, 3):
        raise InvalidArgumentError("table_changes takes ('<uri or name>', startVersion [, endVersion])")
    target = _literal(args[0], "the table")
    start = _literal(args[1], "startVersion")
    end = _literal(args[2], "endVersion") if len(args) == 3 else None
    if not isinstance(target, str):
        raise InvalidArgumentError("table_changes: the table must be a string: a URI or a registered name")
    return target, start, end


def _cte_names(tree: exp.Expr) -> set[str]:
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


def collect_sources(tree: exp.Expr, resolver: Resolver) -> list[Source]:
    """Every table reference of ``tree`` (in walk order), classified."""
    ctes = _cte_names(tree)
    out = []
    for node in tree.find_all(exp.Table):
        if _is_table_changes(node):
            out.append(Source(node, changes=_changes_args(node)))
            continue
        if not isinstance(node.this, exp.Identifier):
            continue
        if node.args.get("db") is None and node.name.lower() in ctes:
            continue
        ref = resolver.lance(node)
        if ref is not None:
            out.append(Source(node, ref=ref))
        else:
            out.append(Source(node, spark_name=_spark_name(node)))
    return out


def _spark_name(node: exp.Table) -> str:
    parts = [p for p in (node.args.get("catalog"), node.args.get("db"), node.this) if p is not None]
    return ".".join(sql_of(p) for p in parts)


def open_sources(sources: list[Source], resolver: Resolver) -> None:
    """Open every Lance reference at its version (TableNotFoundError if it
    has none) and learn its columns."""
    spark = resolver.spark
    for s in sources:
        if s.ref is not None:
            s.handle = resolver.handle(s.ref)
            s.columns = list(s.handle.schema.fieldNames())
        elif s.changes is not None:
            target, start, end = s.changes
            uri = resolver.bindings.get(target.lower()) or registered_uri(spark, target) or normalize_uri(target)
            handle = uri if isinstance(uri, resolver.table_class) else resolver.table_class(spark, uri)
            s.handle = handle
            # Delta's table_changes: the start version is included
            s.frame = handle.changes(start - 1 if isinstance(start, int) and start > 0 else start, end)
            s.columns = list(s.frame.columns)


def _default_alias(node: exp.Table) -> exp.TableAlias:
    return exp.TableAlias(this=exp.to_identifier(node.name))


def _schema_of(s: Source, spark) -> dict[str, str]:
    if s.is_lance:
        cols = list(s.columns)
    else:
        cols = list(spark.table(s.spark_name).schema.fieldNames())
    return {c: "STRING" for c in cols}


def analyze(tree: exp.Expr, sources: list[Source], spark) -> None:
    """Attribute the columns the statement uses to its Lance sources
    (``needed`` / ``metadata`` / ``everything``)."""
    lance = [s for s in sources if s.is_lance]
    if not lance:
        return
    originals = list(tree.find_all(exp.Table))
    copy = tree.copy()
    copies = list(copy.find_all(exp.Table))
    by_node = {id(s.node): i for i, s in enumerate(sources)}
    schema: dict[str, dict[str, str]] = {}
    for orig, node in zip(originals, copies):
        i = by_node.get(id(orig))
        if i is None:
            continue
        s = sources[i]
        name = PLACEHOLDER.format(i)
        schema[name] = _schema_of(s, spark)  # Spark's AnalysisException for an unknown table
        new = exp.Table(this=exp.to_identifier(name))
        new.set("alias", node.args.get("alias") or _default_alias(orig))
        node.replace(new)
    try:
        qualified = qualify(
            copy, dialect=LanceSpark, schema=schema, validate_qualify_columns=False,
            quote_identifiers=False, identify=False,
        )
        scopes = list(traverse_scope(qualified))
    except Exception as e:  # sqlglot cannot analyze it: read everything (slower, never wrong)
        log.debug("column analysis failed (%s): reading every column", e)
        for s in lance:
            s.everything = True
        return
    for scope in scopes:
        _attribute(scope, sources)


def _source_index(table: exp.Expr) -> int | None:
    if isinstance(table, exp.Table):
        name = table.name
        if name.startswith("__lance_ops_") and name.endswith("__"):
            try:
                return int(name[len("__lance_ops_"):-2])
            except ValueError:
                return None
    return None


def _lookup(scope, qualifier: str):
    while scope is not None:
        if qualifier in scope.sources:
            return scope.sources[qualifier]
        scope = scope.parent
    return None


def _attribute(scope, sources: list[Source]) -> None:
    here = [i for i in (_source_index(v) for v in scope.sources.values()) if i is not None]
    lance_here = [i for i in here if sources[i].is_lance]
    for col in scope.columns:
        name = col.name
        if isinstance(col.this, exp.Star):
            target = _lookup(scope, col.table) if col.table else None
            idx = _source_index(target) if target is not None else None
            for i in ([idx] if idx is not None else lance_here):
                sources[i].everything = True
            continue
        if col.table:
            target = _lookup(scope, col.table)
            if target is None:
                # ``s.field`` of a struct column ``s`` reads as table ``s``
                owners = [i for i in lance_here if any(c.lower() == col.table.lower() for c in sources[i].columns)]
                for i in owners or lance_here:
                    if owners:
                        _need(sources[i], col.table)
                    else:
                        sources[i].everything = True
                continue
            idx = _source_index(target)
            if idx is not None and sources[idx].is_lance:
                _need(sources[idx], name)
            continue
        # unqualified: a metadata column, or something sqlglot could not place
        for i in lance_here:
            if name.lower() in METADATA:
                sources[i].metadata.add(name.lower())
            elif not any(name.lower() == c.lower() for s in (sources[j] for j in here) for c in s.columns):
                continue  # an alias or a lambda variable: not a table column
            else:
                sources[i].everything = True
    selects = getattr(scope.expression, "selects", None) or []
    if any(isinstance(e, exp.Star) for e in selects):
        for i in lance_here:
            sources[i].everything = True


def _need(s: Source, name: str) -> None:
    if name.lower() in METADATA and not any(c.lower() == name.lower() for c in s.columns):
        s.metadata.add(name.lower())
    else:
        s.needed.add(name.lower())


def scan_filters(tree: exp.Expr, sources: list[Source]) -> dict[int, list[str]]:
    """Source index -> the WHERE conjuncts (Spark SQL text, unqualified) that
    apply right above that Lance scan: only for a plain ``SELECT ... FROM
    <one Lance table> WHERE ...`` (no join, no lateral view), and only
    conjuncts without subqueries, aggregates, windows or parameters. The
    scan's tasks drop the rows they rule out (:mod:`lance_ops.spark.rowfilter`);
    Spark still evaluates the whole WHERE."""
    if not isinstance(tree, exp.Select) or tree.args.get("joins") or tree.args.get("laterals"):
        return {}
    where, source = tree.args.get("where"), tree.args.get("from_") or tree.args.get("from")
    if where is None or source is None or not isinstance(source.this, exp.Table):
        return {}
    hits = [i for i, s in enumerate(sources) if s.node is source.this]
    if len(hits) != 1 or not sources[hits[0]].is_lance or sources[hits[0]].changes is not None:
        return {}
    s = sources[hits[0]]
    alias = s.node.alias_or_name.lower()
    names = {alias, s.node.name.lower()}
    out = []
    for conj in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        if conj.find(exp.Select, exp.Subquery, exp.AggFunc, exp.Window, exp.Placeholder, exp.Parameter):
            continue
        conj = conj.copy()
        ok = True
        for col in conj.find_all(exp.Column):
            if col.table:
                if col.table.lower() not in names or col.args.get("db") or col.args.get("catalog"):
                    ok = False
                    break
                col.set("table", None)
        if ok:
            out.append(sql_of(conj))
    return {hits[0]: out} if out else {}


def frames(sources: list[Source], trace_columns=None, filters: dict | None = None) -> dict[str, object]:
    """A DataFrame per Lance source, reading only what it needs (and, with
    ``filters`` from :func:`scan_filters`, sending only the rows they may
    keep)."""
    out = {}
    for i, s in enumerate(sources):
        if not s.is_lance:
            continue
        if s.changes is not None:
            out[PLACEHOLDER.format(i).strip("_")] = s.frame
            continue
        cols = None if s.everything else [c for c in s.columns if c.lower() in s.needed]
        meta = s.metadata
        if cols is not None and not cols and not meta:
            meta = {"_rowaddr"}  # nothing needed (count(*)): read a computed column, no data
        df = s.handle.toDF(
            columns=cols,
            withRowId="_rowid" in meta,
            withRowAddr="_rowaddr" in meta,
            withLineage=bool(meta & {"_row_created_at_version", "_row_last_updated_at_version"}),
            # (the statement keeps its WHERE: Spark folds the repeat)
            filter=(filters or {}).get(i) or None,
        )
        out[PLACEHOLDER.format(i).strip("_")] = df
    return out


def substitute(tree: exp.Expr, sources: list[Source]) -> str:
    """The statement's Spark SQL with each Lance reference replaced by a
    ``{placeholder}`` for ``spark.sql(text, **frames)``."""
    for i, s in enumerate(sources):
        if not s.is_lance:
            continue
        new = exp.Table(this=exp.to_identifier(PLACEHOLDER.format(i)))
        new.set("alias", s.node.args.get("alias") or _default_alias(s.node))
        s.node.replace(new)
        s.node = new
    text = sql_of(tree).replace("{", "{{").replace("}", "}}")
    for i, s in enumerate(sources):
        if s.is_lance:
            text = text.replace(PLACEHOLDER.format(i), "{" + PLACEHOLDER.format(i).strip("_") + "}")
    return text


def bind(spark, resolver: Resolver, tree: exp.Expr, everything: bool = False) -> tuple[str, dict] | None:
    """(SQL text with placeholders, frames) for a statement that reads Lance
    tables; None if it reads none. ``everything``: read every column of
    every Lance source (no pruning)."""
    sources = collect_sources(tree, resolver)
    if not any(s.is_lance for s in sources):
        return None
    open_sources(sources, resolver)
    analyze(tree, sources, spark)
    if everything:
        for s in sources:
            s.everything = s.is_lance
    dfs = frames(sources, filters=scan_filters(tree, sources))
    return substitute(tree, sources), dfs


def run(spark, resolver: Resolver, tree: exp.Expr, text: str):
    """Run a statement through ``spark.sql``, Lance tables read pruned. When
    Spark's analysis fails, it is asked again with every column of the Lance
    tables in view, so that its error ("did you mean ...") speaks of the
    tables' columns, not of the pruned reads."""
    from .diagnostics import is_analysis_error

    try:
        bound = bind(spark, resolver, tree.copy())
        if bound is None:
            return spark.sql(text)
        return _analyzed(spark.sql(bound[0], **bound[1]))
    except Exception as e:
        if not is_analysis_error(e):
            raise
        first = e
    try:
        sql_text, dfs = bind(spark, resolver, tree.copy(), everything=True)
        return _analyzed(spark.sql(sql_text, **dfs))
    except Exception as e:
        if is_analysis_error(e):
            raise e from None
        raise first from None


def _analyzed(df):
    """``df``, analyzed now (also under Spark Connect, whose analysis is lazy)."""
    _ = df.schema
    return df


__all__ = ["bind", "run", "collect_sources", "Source"]
