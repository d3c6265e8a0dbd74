"""Running parsed statements: each maps to the public API (``LanceTable`` and
the Spark-free ``Table`` core) and returns Delta's result shape.

A statement whose target is not a Lance table goes to ``spark.sql`` as
written (with any Lance tables it reads bound as pruned DataFrames), so the
front end is a superset of Spark SQL. Every write statement resolves and
checks its target first: a time-travel target raises ReadOnlyVersionError,
and the API call it maps to analyzes all its SQL before any data is written,
so a failed statement leaves no new version.
"""
from __future__ import annotations

import logging
import os

from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from ..errors import (
    InvalidArgumentError,
    ReadOnlyVersionError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from ..spark.sessionnames import refresh_registered, register_name, registered_uri, unregister_name
from .diagnostics import check_tables_exist, cleaned
from .grammar import ParsedStatement, Statement, sql_of
from .names import catalog_table, drop_table, namespace_statement, rename_table
from .names import exists as catalog_exists
from .names import show as show_tables
from .query import collect_sources
from .query import run as run_query
from .refs import LanceRef, Resolver, normalize_uri
from .results import AFFECTED, DESCRIBED, EMPTY, INSERTED, PROPERTIES, TAGS, VACUUMED, frame

log = logging.getLogger("lance_ops.sql")

#: ``OPTIMIZE ... WITH (...)`` option -> executeCompaction argument
OPTIMIZE_OPTIONS = {
    "targetrowsperfragment": "targetRowsPerFragment",
    "materializedeletions": "materializeDeletions",
    "materializedeletionsthreshold": "materializeDeletionsThreshold",
    "maxrowsperfragment": "maxRowsPerFragment",
    "maxsourcefragments": "maxSourceFragments",
}
#: TBLPROPERTIES of CREATE TABLE that are creation options, not table config
CREATE_OPTIONS = {"stablerowids": "stableRowIds", "maxrowsperfragment": "maxRowsPerFragment"}


def _truthy(value) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


class Executor:
    """Runs the statements of one ``lance_ops.sql`` call on handles of
    ``table_class`` (``LanceTable``, given by the caller)."""

    def __init__(self, spark, table_class, tables: dict | None = None, commitProperties: dict | None = None):
        self.spark = spark
        self.table_class = table_class
        self.resolver = Resolver(spark, table_class, tables)
        self.commit_properties = commitProperties

    # ------------------------------------------------------------ dispatch
    def run(self, stmt: ParsedStatement):
        """Run one statement; Spark's analysis errors come out with messages
        that name what the statement wrote (:mod:`.diagnostics`)."""
        try:
            return self._run(stmt)
        except Exception as e:
            cleaned(e, stmt.text)  # (the same exception, its message cleaned)
            raise

    def _run(self, stmt: ParsedStatement):
        node = stmt.node
        if isinstance(node, Statement):
            if node.kind == "spark":
                shown = show_tables(self.spark, node.args.get("text", ""))  # SHOW TABLES of a Lance catalog
                if shown is not None:
                    return shown
            ref = self.resolver.lance(node.table) if node.table is not None else None
            if ref is None:
                if node.table is not None:
                    check_tables_exist(self.spark, self.resolver, None, node.table)
                return self._spark_sql(stmt)  # e.g. DESCRIBE HISTORY of a Delta table
            return getattr(self, f"_{node.kind}")(ref, node.args)
        if isinstance(node, (exp.Query, exp.DML, exp.Create, exp.Alter, exp.Describe)):
            check_tables_exist(self.spark, self.resolver, node)
        handler = {
            exp.Delete: self._delete, exp.Update: self._update, exp.Merge: self._merge,
            exp.Insert: self._insert, exp.Create: self._create, exp.Drop: self._drop,
            exp.Alter: self._alter,
        }.get(type(node))
        if handler is not None:
            out = handler(stmt, node)
            if out is not None:
                return out
        return self._spark_sql(stmt)

    def _spark_sql(self, stmt: ParsedStatement):
        if isinstance(stmt.node, Statement):
            return self.spark.sql(stmt.text)
        return run_query(self.spark, self.resolver, stmt.node, stmt.text)

    # ------------------------------------------------------------- helpers
    def _target(self, table: exp.Expr) -> tuple[LanceRef | None, object]:
        """(ref, writable latest handle) of a write target, or (None, None)."""
        if isinstance(table, exp.Schema):
            table = table.this
        ref = self.resolver.lance(table) if isinstance(table, exp.Table) else None
        if ref is None:
            return None, None
        if ref.time_travel:
            raise ReadOnlyVersionError(
                f"{sql_of(table)} is a time-travel reference (read-only); write to the table without a version"
            )
        return ref, self.resolver.handle(ref)

    def _read(self, ref: LanceRef):
        return self.resolver.handle(ref)

    def _frame_of(self, node: exp.Expr):
        """A DataFrame of a query (or of ``SELECT * FROM <table>``)."""
        if isinstance(node, exp.Subquery):
            node = node.this
        elif isinstance(node, exp.Table):
            table = node.copy()
            table.set("alias", None)
            node = exp.select("*").from_(table)
        return run_query(self.spark, self.resolver, node, sql_of(node))

    def _write_done(self, t) -> None:
        """Re-point the session names registered for ``t``'s table at its new
        version (Spark 4.3 pins a view over a Python data source to the
        version it planned)."""
        refresh_registered(self.spark, t.uri)

    @staticmethod
    def _names(table: exp.Table) -> set[str]:
        names = {table.name.lower()}
        alias = table.args.get("alias")
        if alias is not None and alias.name:
            names = {alias.name.lower()}
        return names

    @staticmethod
    def _requalify(node: exp.Expr | None, mapping: dict[str, str | None]) -> str | None:
        """SQL of ``node`` with column qualifiers renamed (None: removed)."""
        if node is None:
            return None
        node = node.copy()
        for col in list(node.find_all(exp.Column)):
            q = col.table
            if q and q.lower() in mapping:
                new = mapping[q.lower()]
                col.set("db", None)
                col.set("catalog", None)
                col.set("table", exp.to_identifier(new) if new else None)
        return sql_of(node)

    @staticmethod
    def _column_name(col: exp.Expr) -> str:
        if isinstance(col, exp.Column):
            return col.name
        if isinstance(col, exp.Identifier):
            return col.name
        return sql_of(col)

    # ----------------------------------------------------------------- DML
    def _delete(self, stmt, node: exp.Delete):
        ref, t = self._target(node.this)
        if ref is None:
            return None
        where = node.args.get("where")
        cond = self._requalify(where.this, dict.fromkeys(self._names(node.this))) if where else None
        info = t.delete(cond, commitProperties=self.commit_properties)
        self._write_done(t)
        return frame(self.spark, AFFECTED, [(int(info.metrics.get("numDeletedRows", 0)),)])

    def _update(self, stmt, node: exp.Update):
        ref, t = self._target(node.this)
        if ref is None:
            return None
        names = dict.fromkeys(self._names(node.this))
        sets = {}
        for eq in node.expressions:
            if not isinstance(eq, exp.EQ):
                raise InvalidArgumentError(f"UPDATE ... SET needs column = value, got {sql_of(eq)}")
            sets[self._column_name(eq.this)] = self._requalify(eq.expression, names)
        where = node.args.get("where")
        cond = self._requalify(where.this, names) if where else None
        info = t.update(cond, sets, commitProperties=self.commit_properties)
        self._write_done(t)
        return frame(self.spark, AFFECTED, [(int(info.metrics.get("numUpdatedRows", 0)),)])

    def _merge(self, stmt, node: exp.Merge):
        ref, t = self._target(node.this)
        if ref is None:
            return None
        using = node.args["using"]
        mapping: dict[str, str | None] = dict.fromkeys(self._names(node.this), "t")
        src_alias = using.args.get("alias")
        src_names = {src_alias.name.lower()} if src_alias is not None and src_alias.name else (
            {using.name.lower()} if isinstance(using, exp.Table) else set()
        )
        mapping.update(dict.fromkeys(src_names, "s"))
        source = self._frame_of(using)
        builder = t.merge(source, self._requalify(node.args["on"], mapping))
        for when in node.args["whens"].expressions:
            cond = self._requalify(when.args.get("condition"), mapping)
            then = when.args["then"]
            matched, by_source = bool(when.args.get("matched")), bool(when.args.get("source"))
            if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
                if matched:
                    builder.whenMatchedDelete(cond)
                elif by_source:
                    builder.whenNotMatchedBySourceDelete(cond)
                else:
                    raise InvalidArgumentError("WHEN NOT MATCHED [BY TARGET] cannot DELETE")
            elif isinstance(then, exp.Update):
                if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
                    if not matched:
                        raise InvalidArgumentError("UPDATE SET * is only valid in WHEN MATCHED")
                    builder.whenMatchedUpdateAll(cond)
                    continue
                sets = {}
                for eq in then.expressions:
                    sets[self._column_name(eq.this)] = self._requalify(eq.expression, mapping)
                if matched:
                    builder.whenMatchedUpdate(cond, sets)
                elif by_source:
                    builder.whenNotMatchedBySourceUpdate(cond, sets)
                else:
                    raise InvalidArgumentError("WHEN NOT MATCHED [BY TARGET] cannot UPDATE")
            elif isinstance(then, exp.Insert):
                if matched or by_source:
                    raise InvalidArgumentError("INSERT is only valid in WHEN NOT MATCHED [BY TARGET]")
                if isinstance(then.this, exp.Star):
                    builder.whenNotMatchedInsertAll(cond)
                    continue
                cols = [self._column_name(c) for c in then.this.expressions]
                vals = [self._requalify(v, mapping) for v in then.expression.expressions]
                if len(cols) != len(vals):
                    raise InvalidArgumentError(f"INSERT lists {len(cols)} columns and {len(vals)} values")
                builder.whenNotMatchedInsert(cond, dict(zip(cols, vals)))
            else:
                raise InvalidArgumentError(f"unsupported MERGE action {sql_of(then)}")
        result = builder.execute(commitProperties=self.commit_properties)
        self._write_done(t)
        return result

    def _aligned(self, df, table_schema: T.StructType, columns: list[str] | None, by_name: bool):
        """The query's rows as the table's columns (Spark's INSERT rules: by
        position, by the listed columns, or BY NAME; missing listed columns
        are null), cast to the table's types."""
        table_cols = table_schema.fieldNames()
        lower = {c.lower(): c for c in table_cols}
        if by_name:
            got = {c.lower(): c for c in df.columns}
            unknown = [c for c in df.columns if c.lower() not in lower]
            if unknown:
                raise SchemaMismatchError(f"INSERT BY NAME: the table has no column(s) {unknown}")
            mapped = {lower[k]: F.col(f"`{v}`") for k, v in got.items()}
        else:
            targets = columns if columns is not None else table_cols
            if len(df.columns) != len(targets):
                raise SchemaMismatchError(
                    f"INSERT: the query has {len(df.columns)} column(s), the {'list' if columns else 'table'} "
                    f"has {len(targets)}"
                )
            unknown = [c for c in targets if c.lower() not in lower]
            if unknown:
                raise SchemaMismatchError(f"INSERT: the table has no column(s) {unknown}")
            mapped = {lower[c.lower()]: F.col(f"`{src}`") for c, src in zip(targets, df.columns)}
        out = []
        for f in table_schema.fields:
            value = mapped.get(f.name)
            out.append((value if value is not None else F.lit(None)).cast(f.dataType).alias(f.name))
        return df.select(*out)

    def _insert(self, stmt, node: exp.Insert):
        target = node.this
        ref, t = self._target(target)
        if ref is None:
            return None
        columns = None
        if isinstance(target, exp.Schema):
            columns = [self._column_name(c) for c in target.expressions]
        source = node.expression
        df = self._frame_of(source)
        df = self._aligned(df, t.schema, columns, bool(node.args.get("by_name")))
        if node.args.get("overwrite"):
            info = t.overwrite(df, commitProperties=self.commit_properties)
        else:
            info = t.append(df, commitProperties=self.commit_properties)
        self._write_done(t)
        n = int(info.metrics.get("numInsertedRows", 0))
        return frame(self.spark, INSERTED, [(n, n)])

    # ----------------------------------------------------------------- DDL
    def _create(self, stmt, node: exp.Create):
        kind = (node.args.get("kind") or "").upper()
        if kind == "VIEW":
            return self._create_view(stmt, node)
        if kind in ("SCHEMA", "NAMESPACE", "DATABASE"):
            return namespace_statement(self.spark, node)
        if kind != "TABLE":
            return None
        target = node.this
        table = target.this if isinstance(target, exp.Schema) else target
        props = node.args.get("properties")
        provider, location, tblprops, other = None, None, {}, []
        for p in (props.expressions if props is not None else []):
            if isinstance(p, exp.FileFormatProperty):
                provider = p.name.lower()
            elif isinstance(p, exp.LocationProperty):
                location = p.this.name
            elif isinstance(p, exp.Property):
                key = p.this.name if isinstance(p.this, exp.Literal) else sql_of(p.this)
                value = p.args.get("value")
                tblprops[key] = value.name if isinstance(value, exp.Literal) else sql_of(value)
            elif isinstance(p, exp.TemporaryProperty):
                other.append("TEMPORARY")
            else:
                other.append(sql_of(p))
        ref = self.resolver.lance(table)
        if provider != "lance" and ref is None:
            return None  # Spark's own table
        if provider is not None and provider != "lance":
            raise InvalidArgumentError(f"{sql_of(table)} is a Lance table: USING {provider} does not apply")
        if other:
            raise UnsupportedFeatureError(f"CREATE TABLE ... USING lance does not support {', '.join(other)}")
        cataloged = catalog_table(self.spark, table)
        if cataloged is not None and (len(cataloged) > 1 or location is None):
            return self._create_in_catalog(node, target, cataloged, location, tblprops)
        name = None
        if table.args.get("db") is not None and table.args["db"].name.lower() == "lance":
            uri = ref.uri
            if location and os.path.abspath(location) != os.path.abspath(uri):
                raise InvalidArgumentError(f"LOCATION {location!r} differs from the table's path {uri!r}")
            if ref.time_travel:
                raise ReadOnlyVersionError(f"{sql_of(table)} is a time-travel reference (read-only)")
        else:
            if table.args.get("db") is not None:
                raise UnsupportedFeatureError(
                    f"{sql_of(table)}: Lance tables are registered as session names (temporary views), without a database"
                )
            name = table.name
            uri = normalize_uri(location or self._default_location(name))
        options, config = _create_options(tblprops)
        exists = self.table_class.isLanceTable(self.spark, uri)
        replace = bool(node.args.get("replace"))
        if_not_exists = bool(node.args.get("exists"))
        query_node = node.args.get("expression")
        result = frame(self.spark, EMPTY, [])
        if query_node is not None or isinstance(target, exp.Schema):
            if exists and if_not_exists and not replace:
                pass  # nothing to do (Delta's IF NOT EXISTS)
            elif exists and not replace:
                raise TableExistsError(f"a Lance table already exists at {uri}")
            else:
                if query_node is not None:
                    if isinstance(target, exp.Schema):
                        raise UnsupportedFeatureError("CREATE TABLE with both a column list and AS SELECT")
                    df = self._frame_of(query_node)
                else:
                    ddl = ", ".join(sql_of(c) for c in target.expressions)
                    df = self.spark.createDataFrame([], ddl)
                t = self.table_class.create(
                    self.spark, uri, df, mode="overwrite" if replace else "create",
                    commitProperties=self.commit_properties, properties=config or None, **options,
                )
                if query_node is not None:
                    n = int(t.lastCommit().metrics.get("numInsertedRows", 0))
                    result = frame(self.spark, INSERTED, [(n, n)])
        elif not exists:
            raise TableNotFoundError(
                f"no Lance table at {uri}: CREATE TABLE {name or uri} USING lance needs AS SELECT or a column list "
                "to create one"
            )
        elif tblprops:
            raise InvalidArgumentError("TBLPROPERTIES only apply when the table is created; use ALTER TABLE ... SET TBLPROPERTIES")
        if name is not None:
            if not replace and not if_not_exists and registered_uri(self.spark, name):
                raise TableExistsError(f"the name {name!r} is already registered; DROP TABLE {name} first")
            register_name(self.spark, name, uri)
        else:
            refresh_registered(self.spark, self.table_class(self.spark, uri).uri)
        return result

    def _create_in_catalog(self, node: exp.Create, target, parts: list[str], location, tblprops: dict):
        """CREATE TABLE of a name of the Lance Namespace catalog: placed by the
        namespace (or at LOCATION, registered there), created by the same
        write as any CREATE TABLE, then registered -- or nothing is left."""
        from ..spark import catalogs

        options, config = _create_options(tblprops)
        replace = bool(node.args.get("replace"))
        query_node = node.args.get("expression")
        shown = ".".join(parts)
        if query_node is not None and isinstance(target, exp.Schema):
            raise UnsupportedFeatureError("CREATE TABLE with both a column list and AS SELECT")
        empty = frame(self.spark, EMPTY, [])
        if catalog_exists(self.spark, parts):
            if node.args.get("exists") and not replace:
                return empty  # (Delta's IF NOT EXISTS)
            if not replace:
                raise TableExistsError(f"table {shown} already exists")
            if query_node is None and not isinstance(target, exp.Schema):
                raise TableNotFoundError(f"REPLACE TABLE {shown} needs AS SELECT or a column list")
            uri, storage = catalogs.describe(self.spark, parts)
            df = self._frame_of(query_node) if query_node is not None else self.spark.createDataFrame(
                [], ", ".join(sql_of(c) for c in target.expressions))
            t = self.table_class.create(self.spark, uri, df, mode="overwrite", storage_options=storage or None,
                                        commitProperties=self.commit_properties, properties=config or None,
                                        **options)
            refresh_registered(self.spark, t.uri)
            return self._created(t, query_node)
        if query_node is None and not isinstance(target, exp.Schema):
            if location is None:
                raise TableNotFoundError(
                    f"CREATE TABLE {shown} USING lance needs AS SELECT, a column list or the LOCATION of a table")
            if tblprops:
                raise InvalidArgumentError("TBLPROPERTIES only apply when the table is created")
            uri = normalize_uri(location)
            if not self.table_class.isLanceTable(self.spark, uri):
                raise TableNotFoundError(f"no Lance table at {uri} to register as {shown}")
            catalogs.register(self.spark, parts, uri)
            return empty
        df = self._frame_of(query_node) if query_node is not None else self.spark.createDataFrame(
            [], ", ".join(sql_of(c) for c in target.expressions))
        made = {}

        def write(uri: str, storage: dict) -> None:
            made["t"] = self.table_class.create(self.spark, uri, df, mode="create",
                                                storage_options=storage or None,
                                                commitProperties=self.commit_properties,
                                                properties=config or None, **options)

        if location is not None:
            uri = normalize_uri(location)
            catalogs.check_location(self.spark, parts, uri)  # (refused before anything is written)
            write(uri, {})
            catalogs.register(self.spark, parts, uri)
        else:
            catalogs.create_by_name(self.spark, parts, write)
        return self._created(made["t"], query_node)

    def _created(self, t, query_node):
        if query_node is None:
            return frame(self.spark, EMPTY, [])
        info = t.lastCommit() if callable(t.lastCommit) else t.lastCommit
        n = int(info.metrics.get("numInsertedRows", 0))
        return frame(self.spark, INSERTED, [(n, n)])

    def _alter(self, stmt, node: exp.Alter):
        """ALTER TABLE ... RENAME TO of a Lance Namespace catalog's table."""
        return rename_table(self.spark, node)

    def _default_location(self, name: str) -> str:
        warehouse = self.spark.conf.get("spark.sql.warehouse.dir", "spark-warehouse")
        if warehouse.startswith("file:"):
            warehouse = warehouse[len("file:"):]
            while warehouse.startswith("//"):
                warehouse = warehouse[1:]
        return os.path.join(warehouse, f"{name}.lance")

    def _create_view(self, stmt, node: exp.Create):
        body = node.args.get("expression")
        if body is None:
            return None
        sources = collect_sources(body, self.resolver)
        if not any(s.is_lance for s in sources):
            return None
        props = node.args.get("properties")
        temporary = any(isinstance(p, exp.TemporaryProperty) for p in (props.expressions if props is not None else []))
        if not temporary:
            raise UnsupportedFeatureError("a view over Lance tables must be TEMPORARY (CREATE TEMP VIEW ...)")
        name = node.this.name
        replace = bool(node.args.get("replace"))
        only = sources[0] if len(sources) == 1 else None
        simple = (
            only is not None and only.ref is not None and not only.ref.time_travel and isinstance(body, exp.Select)
            and len(body.expressions) == 1 and isinstance(body.expressions[0], exp.Star)
            and not any(body.args.get(k) for k in ("where", "joins", "group", "having", "order", "limit", "distinct"))
        )
        if not replace and self.spark.catalog.tableExists(name):
            if node.args.get("exists"):
                return frame(self.spark, EMPTY, [])
            self.spark.sql(stmt.text)  # Spark's own "already exists" error
        if simple:
            register_name(self.spark, name, only.ref.uri, only.ref.storage_options)
        else:
            unregister_name(self.spark, name)
            self._frame_of(body).createOrReplaceTempView(name)
        return frame(self.spark, EMPTY, [])

    def _drop(self, stmt, node: exp.Drop):
        kind = (node.args.get("kind") or "").upper()
        if kind in ("SCHEMA", "NAMESPACE", "DATABASE"):
            return namespace_statement(self.spark, node)
        if kind not in ("TABLE", "VIEW"):
            return None
        tables = node.args.get("tables") or [node.this]
        if kind == "TABLE" and len(tables) == 1 and not (
                isinstance(tables[0], exp.Table) and tables[0].args.get("db") is None
                and (tables[0].name.lower() in self.resolver.bindings or registered_uri(self.spark, tables[0].name))):
            dropped = drop_table(self.spark, node)  # a Lance Namespace catalog's table
            if dropped is not None:
                return dropped
        if len(tables) != 1 or not isinstance(tables[0], exp.Table) or tables[0].args.get("db") is not None:
            return None
        name = tables[0].name
        if name.lower() in self.resolver.bindings or not registered_uri(self.spark, name):
            return None
        unregister_name(self.spark, name)
        self.spark.catalog.dropTempView(name)  # the data stays (as Delta's external tables)
        return frame(self.spark, EMPTY, [])

    # ----------------------------------------------------- our statements
    def _writable(self, ref: LanceRef):
        if ref.time_travel:
            raise ReadOnlyVersionError(
                f"{ref.name} is a time-travel reference (read-only); name the table without a version"
            )
        return self.resolver.handle(ref)

    def _optimize(self, ref, args):
        if args.get("zorder"):
            return self._zorder(ref, args)
        t = self._writable(ref)
        kwargs = {}
        for k, v in args["options"].items():
            name = OPTIMIZE_OPTIONS.get(k.lower())
            if name is None:
                raise InvalidArgumentError(f"unknown OPTIMIZE option {k!r}; known: {sorted(OPTIMIZE_OPTIONS.values())}")
            kwargs[name] = v
        result = t.optimize().executeCompaction(commitProperties=self.commit_properties, **kwargs)
        self._write_done(t)
        return result

    def _zorder(self, ref, args):
        """OPTIMIZE t ZORDER BY (...) [WITH (targetRowsPerFragment = n)]:
        ``executeZOrderBy``'s result (Delta's ``path``, ``metrics``)."""
        t = self._writable(ref)
        kwargs = {}
        for k, v in args["options"].items():
            if k.lower() != "targetrowsperfragment":
                raise InvalidArgumentError(f"OPTIMIZE ... ZORDER BY takes the option targetRowsPerFragment, not {k!r}")
            kwargs["targetRowsPerFragment"] = v
        result = t.optimize().executeZOrderBy(*args["zorder"], commitProperties=self.commit_properties, **kwargs)
        self._write_done(t)
        return result

    def _vacuum(self, ref, args):
        t = self._writable(ref)
        hours = args["retain_hours"]
        removed = t.vacuumFiles(retentionHours=168 if hours is None else hours, dryRun=args["dry_run"])
        if args["dry_run"]:
            root = t.uri.rstrip("/")
            return frame(self.spark, VACUUMED, [(f"{root}/{p}",) for p in removed])
        log.info("VACUUM %s removed %d file(s)", t.uri, len(removed))
        return frame(self.spark, VACUUMED, [(t.uri,)])

    def _restore(self, ref, args):
        t = self._writable(ref)
        to = args["to"]
        if to.this == "TIMESTAMP":
            version = self.resolver.version_at(ref, to.expression)
        else:
            value = to.expression
            if not isinstance(value, exp.Literal):
                raise InvalidArgumentError(f"RESTORE ... VERSION AS OF needs a number or a tag, got {sql_of(value)}")
            version = value.this if value.is_string else int(value.this)
        result = t.restoreToVersion(version, commitProperties=self.commit_properties)
        self._write_done(t)
        log.info("RESTORE %s to version %s committed version %s", t.uri, version, t.lastCommit().version)
        return result

    def _history(self, ref, args):
        return self._read(ref).history(args.get("limit"))

    def _detail(self, ref, args):
        t = self._read(ref)
        t._name = ref.name
        return t.detail()

    def _fragments(self, ref, args):
        return self._read(ref).fragments()

    def _describe(self, ref, args):
        t = self._read(ref)
        rows = [(f.name, f.dataType.simpleString(), (f.metadata or {}).get("comment")) for f in t.schema.fields]
        if args.get("extended"):
            props = ", ".join(f"{k}={v}" for k, v in sorted(t.properties().items()))
            rows += [
                ("", "", ""), ("# Detailed Table Information", "", ""), ("Name", ref.name, ""),
                ("Location", t.uri, ""), ("Provider", "lance", ""), ("Version", str(t.version), ""),
                ("Table Properties", f"[{props}]", ""),
            ]
        return frame(self.spark, DESCRIBED, rows)

    def _show_tblproperties(self, ref, args):
        props = self._read(ref).properties()
        key = args.get("key")
        if key is not None:
            value = props.get(key, f"Table {ref.name} does not have property: {key}")
            return frame(self.spark, PROPERTIES, [(key, value)])
        return frame(self.spark, PROPERTIES, sorted(props.items()))

    def _show_tags(self, ref, args):
        tags = self._read(ref).listTags(details=True)
        rows = [
            (name, int(d.get("version")), _str(d.get("createdAt")), _str(d.get("updatedAt")))
            for name, d in sorted(tags.items())
        ]
        return frame(self.spark, TAGS, rows)

    def _create_tag(self, ref, args):
        t = self._read(ref)  # tags commit no version: a time-travel reference tags its version
        t.createTag(args["name"], args["version"])
        return frame(self.spark, EMPTY, [])

    def _drop_tag(self, ref, args):
        t = self._read(ref)
        try:
            t.deleteTag(args["name"])
        except TableNotFoundError:
            if not args["if_exists"]:
                raise
        return frame(self.spark, EMPTY, [])

    def _refresh(self, ref, args):
        if registered_uri(self.spark, ref.name):
            register_name(self.spark, ref.name, ref.uri, ref.storage_options)
        return frame(self.spark, EMPTY, [])

    def _add_columns(self, ref, args):
        t = self._writable(ref)
        values = {}
        for c in args["columns"]:
            if "expr" in c:
                values[c["name"]] = c["expr"]
            else:
                dtype = self._spark_type(c["type"])
                md = {"comment": c["comment"]} if c.get("comment") is not None else {}
                values[c["name"]] = F.lit(None).cast(dtype).alias(c["name"], metadata=md)
        t.addColumns(values, commitProperties=self.commit_properties)
        self._write_done(t)
        return frame(self.spark, EMPTY, [])

    def _spark_type(self, type_sql: str) -> T.DataType:
        return self.spark.createDataFrame([], f"`__c` {type_sql}").schema.fields[0].dataType

    def _add_columns_from(self, ref, args):
        t = self._writable(ref)
        key = args["key"]
        source = args["source"]
        if isinstance(source, exp.Subquery):
            inner = source.this.subquery("__src") if not source.alias else source
        else:
            inner = source
        select = exp.select(*[exp.column(c) for c in [key, *args["columns"]]]).from_(inner)
        df = run_query(self.spark, self.resolver, select, sql_of(select))
        t.addColumns(df, on=key, commitProperties=self.commit_properties)
        self._write_done(t)
        return frame(self.spark, EMPTY, [])

    def _drop_columns(self, ref, args):
        t = self._writable(ref)
        cols = args["columns"]
        if args["if_exists"]:
            names = {f.name.lower() for f in t.schema.fields}
            cols = [c for c in cols if c.split(".")[0].lower() in names]
            if not cols:
                return frame(self.spark, EMPTY, [])
        t.dropColumns(cols, commitProperties=self.commit_properties)
        self._write_done(t)
        return frame(self.spark, EMPTY, [])

    def _rename_column(self, ref, args):
        t = self._writable(ref)
        t.renameColumn(args["old"], args["new"], commitProperties=self.commit_properties)
        self._write_done(t)
        return frame(self.spark, EMPTY, [])

    def _set_tblproperties(self, ref, args):
        t = self._writable(ref)
        t.setProperties(args["properties"], commitProperties=self.commit_properties)
        self._write_done(t)
        return frame(self.spark, EMPTY, [])

    def _add_constraint(self, ref, args):
        t = self._writable(ref)
        t.addConstraint(args["name"], args["expression"], commitProperties=self.commit_properties)
        self._write_done(t)
        return frame(self.spark, EMPTY, [])

    def _drop_constraint(self, ref, args):
        t = self._writable(ref)
        t.dropConstraint(args["name"], ifExists=args["if_exists"], commitProperties=self.commit_properties)
        self._write_done(t)
        return frame(self.spark, EMPTY, [])

    def _unset_tblproperties(self, ref, args):
        t = self._writable(ref)
        t.unsetProperties(args["keys"], commitProperties=self.commit_properties, ifExists=args["if_exists"])
        self._write_done(t)
        return frame(self.spark, EMPTY, [])


def _str(v) -> str | None:
    return None if v is None else str(v)


__all__ = ["Executor"]


def _create_options(tblprops: dict) -> tuple[dict, dict]:
    """A CREATE TABLE's TBLPROPERTIES split into write options
    (``CREATE_OPTIONS``: stable row ids, fragment size) and table config."""
    options, config = {}, {}
    for k, v in tblprops.items():
        opt = CREATE_OPTIONS.get(k.lower())
        if opt == "stableRowIds":
            options[opt] = _truthy(v)
        elif opt == "maxRowsPerFragment":
            options[opt] = int(v)
        else:
            config[k] = v
    return options, config
