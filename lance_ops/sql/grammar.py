"""Parsing SQL scripts: sqlglot's Spark dialect plus a small grammar of ours.

sqlglot (pinned exactly: this module extends its parser's private API) parses
queries, DML and most DDL into syntax trees. Delta's maintenance statements it
does not know -- or keeps as a generic ``Command`` holding the rest of the text
-- are parsed here, on sqlglot's own tokens, into :class:`Statement` nodes:

    OPTIMIZE t [ZORDER BY (a, b)] [WITH (targetRowsPerFragment = n, materializeDeletions = true, ...)]
    VACUUM t [RETAIN n HOURS] [DRY RUN]
    RESTORE [TABLE] t [TO] VERSION AS OF n | TIMESTAMP AS OF <expr>
    DESCRIBE | DESC  HISTORY t [LIMIT n] | DETAIL t | FRAGMENTS t | [TABLE] [EXTENDED] t
    SHOW TBLPROPERTIES t [('key')] | SHOW TAGS t
    REFRESH TABLE t
    ALTER TABLE t ADD COLUMN[S] (c type [COMMENT 'text'] | c = <expr>, ...)
    ALTER TABLE t ADD COLUMN[S] c1, c2 FROM <table or view> ON <key>
    ALTER TABLE t DROP COLUMN[S] [IF EXISTS] (a, b) | a, b
    ALTER TABLE t RENAME COLUMN a TO b
    ALTER TABLE t SET TBLPROPERTIES ('k' = 'v', ...) | UNSET TBLPROPERTIES [IF EXISTS] ('k', ...)
    ALTER TABLE t CREATE TAG name [AS OF VERSION n] | DROP TAG [IF EXISTS] name
    ALTER TABLE t ADD CONSTRAINT name CHECK (<expr>) | DROP CONSTRAINT [IF EXISTS] name

A table reference anywhere (also in sqlglot's own statements) may carry a
time-travel suffix written right after it: ``t@v3`` (version 3) or
``t@release`` (a tag); ``lance.`/path@v3``` works too (resolved later, see
:mod:`lance_ops.sql.refs`).

:func:`parse_script` tokenizes the whole script once, splits it at top-level
``;`` and parses every statement before anything runs; any error becomes
:class:`~lance_ops.errors.SqlParseError` with the line, column and offending
token of the whole script.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from ..errors import SqlParseError

#: Marks a ``Table``'s version as our ``@`` suffix (``exp.Version.this``).
AT_SUFFIX = "AT_SUFFIX"


@dataclass
class Statement:
    """A statement of our grammar. ``kind`` names it (``"optimize"``,
    ``"vacuum"``, ...); ``table`` is the sqlglot ``Table`` it applies to;
    ``args`` holds the rest (plain values, or sqlglot nodes / SQL text)."""

    kind: str
    table: exp.Table | None = None
    args: dict[str, Any] = field(default_factory=dict)


class LanceCommand(exp.Expression):
    """Wraps a :class:`Statement` in sqlglot's tree."""

    arg_types = {"this": True}

    @property
    def statement(self) -> Statement:
        return self.args["this"]


@dataclass
class ParsedStatement:
    """One statement of a script: its syntax tree (a sqlglot node, or a
    :class:`Statement` for our grammar) and its exact source text."""

    node: Any
    text: str
    line: int
    column: int

    @property
    def ours(self) -> Statement | None:
        return self.node if isinstance(self.node, Statement) else None


class LanceParser(Spark.Parser):
    """Spark's parser with our statements and the ``@`` time-travel suffix."""

    # ----------------------------------------------------------- table refs
    def _at_suffix(self, table):
        """``t@v3`` / ``t@tag``: sqlglot reads ``@`` as a parameter marker; when
        it is glued to the table name (no space), it is a version suffix."""
        if (
            isinstance(table, exp.Table)
            and self._curr.token_type == TokenType.PARAMETER
            and self._curr.text == "@"
            and self._prev.end + 1 == self._curr.start
            and self._next is not None
            and self._next.start == self._curr.end + 1
            and self._next.token_type in (TokenType.VAR, TokenType.NUMBER, TokenType.IDENTIFIER)
        ):
            self._advance(2)
            # (kept in meta: sqlglot's _parse_table overwrites the "version" arg)
            table.meta[AT_SUFFIX] = self._prev.text
        return table

    def _parse_table_parts_fast(self):
        return self._at_suffix(super()._parse_table_parts_fast())

    def _parse_table_parts(self, schema=False, is_db_reference=False, wildcard=False, fast=False):
        table = super()._parse_table_parts(schema=schema, is_db_reference=is_db_reference, wildcard=wildcard, fast=fast)
        return table if fast else self._at_suffix(table)

    def _table_ref(self) -> exp.Table:
        """A table name with its optional ``VERSION AS OF`` / ``TIMESTAMP AS
        OF`` / ``@`` suffix (no alias: the words after it are ours)."""
        table = self._parse_table_parts(schema=True)  # (schema: `t (...)` is not a function call)
        if not table.args.get("version"):
            version = self._parse_version()
            if version is not None:
                table.set("version", version)
        return table

    # ------------------------------------------------------------ statements
    def _parse_statement(self):
        if self._curr:
            start = self._index
            stmt = self._parse_ours()
            if stmt is not None:
                return LanceCommand(this=stmt)
            self._retreat(start)
        return super()._parse_statement()

    def _span(self, first: Token) -> str:
        return self.sql[first.start : self._prev.end + 1]

    def _expect_text(self, *words: str) -> None:
        if not self._match_text_seq(*words):
            self.raise_error(f"Expected {' '.join(words)}")

    def _int(self, what: str) -> int:
        if not self._match(TokenType.NUMBER):
            self.raise_error(f"Expected {what} (a number)")
        try:
            return int(self._prev.text)
        except ValueError:
            self.raise_error(f"Expected {what} (an integer)")
        return 0

    def _number(self, what: str) -> float:
        if not self._match(TokenType.NUMBER):
            self.raise_error(f"Expected {what} (a number)")
        return float(self._prev.text)

    def _name(self, what: str) -> str:
        ident = self._parse_id_var(any_token=False) or self._parse_string_as_identifier()
        if ident is None:
            self.raise_error(f"Expected {what}")
        return ident.name

    def _string(self, what: str) -> str:
        if not self._match(TokenType.STRING):
            self.raise_error(f"Expected {what} (a quoted string)")
        return self._prev.text

    def _parse_ours(self) -> Statement | None:
        word = self._curr.text.upper() if self._curr.token_type != TokenType.STRING else ""
        if word == "OPTIMIZE":
            self._advance()
            return self._optimize()
        if word == "VACUUM":
            self._advance()
            return self._vacuum()
        if word == "RESTORE":
            self._advance()
            return self._restore()
        if word in ("DESCRIBE", "DESC"):
            self._advance()
            return self._describe()
        if word == "SHOW":
            self._advance()
            if self._curr.text.upper() in ("TBLPROPERTIES", "TAGS"):
                return self._show()
            return self._rest_as_command(word)
        if word == "REFRESH" and self._next and self._next.text.upper() == "TABLE":
            self._advance(2)
            return Statement("refresh", self._table_ref())
        if word == "ALTER" and self._next and self._next.text.upper() == "TABLE":
            self._advance(2)
            return self._alter()
        return None

    def _rest_as_command(self, word: str) -> Statement:
        """Any other SHOW ...: Spark's own, passed through as written."""
        first = self._prev
        while self._curr:
            self._advance()
        return Statement("spark", None, {"text": self._span(first), "word": word})

    def _end(self) -> None:
        if self._curr:
            self.raise_error("Unexpected token")

    def _optimize(self) -> Statement:
        table = self._table_ref()
        options: dict[str, Any] = {}
        zorder: list[str] = []
        if self._match_text_seq("ZORDER", "BY"):  # Delta's OPTIMIZE t ZORDER BY (a, b)
            paren = self._match(TokenType.L_PAREN)
            while True:
                zorder.append(self._name("a column name"))
                if not self._match(TokenType.COMMA):
                    break
            if paren and not self._match(TokenType.R_PAREN):
                self.raise_error("Expected )")
        if self._match(TokenType.WITH):
            if not self._match(TokenType.L_PAREN):
                self.raise_error("Expected ( after WITH")
            while True:
                key = self._name("an option name")
                if not self._match(TokenType.EQ):
                    self.raise_error("Expected =")
                options[key] = self._option_value()
                if not self._match(TokenType.COMMA):
                    break
            if not self._match(TokenType.R_PAREN):
                self.raise_error("Expected )")
        self._end()
        return Statement("optimize", table, {"options": options, "zorder": zorder})

    def _option_value(self):
        if self._match(TokenType.NUMBER):
            text = self._prev.text
            return float(text) if any(c in text for c in ".eE") else int(text)
        if self._match(TokenType.STRING):
            return self._prev.text
        if self._match_texts(("TRUE", "FALSE")):
            return self._prev.text.upper() == "TRUE"
        self.raise_error("Expected a number, a string, true or false")
        return None

    def _vacuum(self) -> Statement:
        table = self._table_ref()
        retain = None
        dry = False
        if self._match_text_seq("RETAIN"):
            retain = self._number("the retention")
            if not self._match_texts(("HOURS", "HOUR")):
                self.raise_error("Expected HOURS")
        if self._match_text_seq("DRY", "RUN"):
            dry = True
        self._end()
        return Statement("vacuum", table, {"retain_hours": retain, "dry_run": dry})

    def _restore(self) -> Statement:
        self._match(TokenType.TABLE)
        table = self._parse_table_parts(schema=True)  # [TO] VERSION AS OF ... is the target, not time travel
        self._match_text_seq("TO")
        version = self._parse_version()
        if version is None or version.this not in ("VERSION", "TIMESTAMP"):
            self.raise_error("Expected VERSION AS OF <n> or TIMESTAMP AS OF <timestamp>")
        self._end()
        return Statement("restore", table, {"to": version})

    def _describe(self) -> Statement | None:
        word = self._curr.text.upper()
        if word in ("HISTORY", "DETAIL", "FRAGMENTS") and self._next and self._next.token_type != TokenType.DOT:
            self._advance()
            table = self._table_ref()
            limit = None
            if word == "HISTORY" and self._match(TokenType.LIMIT):
                limit = self._int("a limit")
            self._end()
            return Statement(word.lower(), table, {"limit": limit})
        self._match(TokenType.TABLE)
        extended = bool(self._match_texts(("EXTENDED", "FORMATTED")))
        if self._curr.token_type in (TokenType.L_PAREN, TokenType.SELECT, TokenType.WITH) or self._curr.text.upper() in (
            "QUERY", "FUNCTION", "DATABASE", "SCHEMA", "CATALOG", "NAMESPACE",
        ):
            return None  # DESCRIBE QUERY / FUNCTION / ...: Spark's own
        table = self._table_ref()
        if self._curr:  # DESCRIBE t col / PARTITION ...: Spark's own
            return None
        return Statement("describe", table, {"extended": extended})

    def _show(self) -> Statement:
        word = self._curr.text.upper()
        self._advance()
        if word == "TAGS":
            self._match_texts(("IN", "FROM"))
            table = self._table_ref()
            self._end()
            return Statement("show_tags", table)
        table = self._table_ref()
        key = None
        if self._match(TokenType.L_PAREN):
            key = self._string("a property key") if self._curr.token_type == TokenType.STRING else self._dotted_name()
            if not self._match(TokenType.R_PAREN):
                self.raise_error("Expected )")
        self._end()
        return Statement("show_tblproperties", table, {"key": key})

    def _dotted_name(self) -> str:
        parts = [self._name("a name")]
        while self._match(TokenType.DOT):
            parts.append(self._name("a name"))
        return ".".join(parts)

    # ----------------------------------------------------------------- ALTER
    def _alter(self) -> Statement | None:
        table = self._table_ref()
        if self._match_text_seq("ADD", "COLUMNS") or self._match_text_seq("ADD", "COLUMN"):
            return self._add_columns(table)
        if self._match_text_seq("DROP", "COLUMNS") or self._match_text_seq("DROP", "COLUMN"):
            if_exists = self._match_text_seq("IF", "EXISTS")
            names = self._name_list()
            self._end()
            return Statement("drop_columns", table, {"columns": names, "if_exists": if_exists})
        if self._match_text_seq("RENAME", "COLUMN"):
            old = self._dotted_name()
            self._expect_text("TO")
            new = self._name("the new column name")
            self._end()
            return Statement("rename_column", table, {"old": old, "new": new})
        if self._match_text_seq("SET", "TBLPROPERTIES") or self._match_text_seq("SET", "PROPERTIES"):
            props = self._properties(with_values=True)
            self._end()
            return Statement("set_tblproperties", table, {"properties": props})
        if self._match_text_seq("UNSET", "TBLPROPERTIES") or self._match_text_seq("UNSET", "PROPERTIES"):
            if_exists = self._match_text_seq("IF", "EXISTS")
            keys = self._properties(with_values=False)
            self._end()
            return Statement("unset_tblproperties", table, {"keys": keys, "if_exists": if_exists})
        if self._match_text_seq("ADD", "CONSTRAINT"):
            name = self._name("a constraint name")
            self._expect_text("CHECK")
            if not self._match(TokenType.L_PAREN):
                self.raise_error("Expected ( after CHECK")
            first = self._curr
            if self._parse_disjunction() is None:
                self.raise_error("Expected a boolean expression")
            expression = self._span(first)
            if not self._match(TokenType.R_PAREN):
                self.raise_error("Expected )")
            self._end()
            return Statement("add_constraint", table, {"name": name, "expression": expression})
        if self._match_text_seq("DROP", "CONSTRAINT"):
            if_exists = self._match_text_seq("IF", "EXISTS")
            name = self._name("a constraint name")
            self._end()
            return Statement("drop_constraint", table, {"name": name, "if_exists": if_exists})
        if self._match_text_seq("CREATE", "TAG"):
            name = self._name("a tag name")
            version = None
            if self._match_text_seq("AS", "OF", "VERSION"):
                version = self._int("a version")
            self._end()
            return Statement("create_tag", table, {"name": name, "version": version})
        if self._match_text_seq("DROP", "TAG"):
            if_exists = self._match_text_seq("IF", "EXISTS")
            name = self._name("a tag name")
            self._end()
            return Statement("drop_tag", table, {"name": name, "if_exists": if_exists})
        return None  # any other ALTER TABLE: sqlglot's / Spark's own

    def _name_list(self) -> list[str]:
        wrapped = self._match(TokenType.L_PAREN)
        names = [self._dotted_name()]
        while self._match(TokenType.COMMA):
            names.append(self._dotted_name())
        if wrapped and not self._match(TokenType.R_PAREN):
            self.raise_error("Expected )")
        return names

    def _properties(self, with_values: bool) -> dict[str, str] | list[str]:
        if not self._match(TokenType.L_PAREN):
            self.raise_error("Expected (")
        out: dict[str, str] = {}
        keys: list[str] = []
        while True:
            key = self._string("a property key") if self._curr.token_type == TokenType.STRING else self._dotted_name()
            if with_values:
                self._match(TokenType.EQ)
                value = self._option_value()
                out[key] = str(value).lower() if isinstance(value, bool) else str(value)
            else:
                keys.append(key)
            if not self._match(TokenType.COMMA):
                break
        if not self._match(TokenType.R_PAREN):
            self.raise_error("Expected )")
        return out if with_values else keys

    def _add_columns(self, table: exp.Table) -> Statement:
        """``(c type [COMMENT 'x'] | c = <expr>, ...)`` or ``c1, c2 FROM src ON key``."""
        wrapped = self._match(TokenType.L_PAREN)
        if not wrapped:
            start = self._index
            names = self._name_list()
            if self._match(TokenType.FROM):
                source = self._parse_table(alias_tokens=None)  # a table/view name or (subquery)
                self._expect_text("ON")
                key = self._name("the key column")
                self._end()
                return Statement("add_columns_from", table, {"columns": names, "source": source, "key": key})
            self._retreat(start)  # ADD COLUMN c type, ...
        columns = []
        while True:
            name = self._name("a column name")
            if self._match(TokenType.EQ):
                first = self._curr
                expr = self._parse_disjunction()
                if expr is None:
                    self.raise_error("Expected an expression")
                columns.append({"name": name, "expr": self._span(first)})
            else:
                first = self._curr
                dtype = self._parse_types(check_func=False, schema=True)
                if dtype is None:
                    self.raise_error("Expected a column type or = <expression>")
                type_sql = self._span(first)
                comment = None
                if self._match(TokenType.COMMENT):
                    comment = self._string("the comment")
                columns.append({"name": name, "type": type_sql, "comment": comment})
            if not self._match(TokenType.COMMA):
                break
        if wrapped and not self._match(TokenType.R_PAREN):
            self.raise_error("Expected , or )")
        self._end()
        return Statement("add_columns", table, {"columns": columns})


class LanceTokenizer(Spark.Tokenizer):
    """Spark's tokenizer, except that OPTIMIZE, VACUUM and SHOW are plain
    words: Spark's turns everything after them into one string (a generic
    ``Command``), which would hide their table and options from our grammar."""

    KEYWORDS = {k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k not in ("OPTIMIZE", "VACUUM", "SHOW")}
    COMMANDS = Spark.Tokenizer.COMMANDS - {TokenType.SHOW}


class LanceSpark(Spark):
    """The Spark dialect with :class:`LanceTokenizer` and :class:`LanceParser`."""

    Tokenizer = LanceTokenizer
    Parser = LanceParser


_DIALECT = LanceSpark()


def _position(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def _token_error(text: str, e: TokenError) -> SqlParseError:
    # sqlglot's message names the offset of the bad token ("Missing ' from 2:17")
    m = re.search(r"from \d+:(\d+)", str(e.__cause__ or e))
    start = getattr(e, "start", None)
    offset = int(m.group(1)) if m else (start if isinstance(start, int) else 0)
    line, col = _position(text, offset)
    token = text[offset : offset + 20].split("\n")[0]
    reason = str(e.__cause__ or e).split("\n")[0]
    return SqlParseError(line, col, token, reason.split(" from ")[0] if m else reason)


def _split(tokens: list[Token]) -> list[list[Token]]:
    chunks: list[list[Token]] = [[]]
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            chunks.append([])
        else:
            chunks[-1].append(tok)
    return [c for c in chunks if c]


#: sqlglot nodes that are statements (a bare expression such as ``SELEC 1``
#: parses as a column with an alias: not a statement).
_STATEMENT_TYPES = (
    exp.Query, exp.DML, exp.Create, exp.Drop, exp.Alter, exp.Command, exp.Describe, exp.Set, exp.Use,
    exp.Cache, exp.Uncache, exp.Refresh, exp.Show, exp.Pragma, exp.Declare, exp.Grant, exp.Analyze,
    exp.TruncateTable, exp.Copy, exp.Transaction, exp.Commit, exp.Rollback, exp.Execute,
)


def _check_assignments(text: str, chunk: list[Token], node) -> None:
    """``UPDATE t SET WHERE ...`` parses (sqlglot leaves the assignments
    empty) but is malformed: a SqlParseError at the token after ``SET`` (or
    the statement's end), not an API error about an empty dict later."""
    if not isinstance(node, exp.Expr):
        return
    for update in node.find_all(exp.Update):
        if update.expressions:
            continue
        after = None
        for i, tok in enumerate(chunk):
            if tok.token_type == TokenType.SET:
                after = chunk[i + 1] if i + 1 < len(chunk) else None
                break
        if after is None:
            line, col = _position(text, chunk[-1].end + 1)
            raise SqlParseError(line, col, "", "UPDATE needs SET column = value[, ...]: the statement ended")
        line, col = _position(text, after.start)
        raise SqlParseError(line, col, after.text, "UPDATE ... SET needs column = value[, ...]")


def parse_script(text: str) -> list[ParsedStatement]:
    """Every statement of ``text``, parsed (raises SqlParseError)."""
    if not isinstance(text, str):
        raise TypeError(f"SQL text must be a string, got {type(text).__name__}")
    try:
        tokens = _DIALECT.tokenize(text)
    except TokenError as e:
        raise _token_error(text, e) from None
    out = []
    sqlglot_log = logging.getLogger("sqlglot")
    for chunk in _split(tokens):
        parser = _DIALECT.parser()
        level = sqlglot_log.level
        sqlglot_log.setLevel(logging.ERROR)  # "falling back to parsing as a Command" is not news
        try:
            nodes = parser.parse(chunk, text)
        except ParseError as e:
            err = dict(e.errors[0]) if e.errors else {}
            if "SENTINEL" in (err.get("description") or ""):
                err["description"] = err["description"].split(" but got")[0] + ": the statement ended"
            raise SqlParseError(
                err.get("line") or chunk[0].line, err.get("col") or chunk[0].col,
                err.get("highlight") or "", err.get("description") or str(e),
            ) from None
        finally:
            sqlglot_log.setLevel(level)
        node = nodes[0] if nodes else None
        stmt_text = text[chunk[0].start : chunk[-1].end + 1]
        line, col = _position(text, chunk[0].start)
        _check_assignments(text, chunk, node)
        if isinstance(node, LanceCommand):
            node = node.statement
        elif not isinstance(node, _STATEMENT_TYPES):
            raise SqlParseError(line, col, chunk[0].text, "not a SQL statement")
        out.append(ParsedStatement(node, stmt_text, line, col))
    return out


def sql_of(node: exp.Expr) -> str:
    """Spark SQL text of a sqlglot node."""
    return node.sql(dialect=_DIALECT)


def parse_expression(text: str) -> exp.Expr:
    import sqlglot

    return sqlglot.parse_one(text, dialect=_DIALECT)


__all__ = ["Statement", "ParsedStatement", "parse_script", "sql_of", "LanceSpark", "AT_SUFFIX"]
