"""The SQL grammar without Spark: what parses into which statement, parse
errors with line / column / token, and that ``import lance_ops`` loads
neither pyspark nor sqlglot."""
import subprocess
import sys

import pytest

from lance_ops.errors import SqlParseError
from lance_ops.sql.grammar import Statement, parse_script


def kinds(text):
    return [s.node.kind if isinstance(s.node, Statement) else type(s.node).__name__ for s in parse_script(text)]


def test_import_lance_ops_loads_neither_pyspark_nor_sqlglot(processes):
    code = (
        "import sys, lance_ops\n"
        "assert 'pyspark' not in sys.modules and 'sqlglot' not in sys.modules, sorted(sys.modules)\n"
        "import lance_ops.sql.magic\n"  # the magic module loads without IPython and Spark
        "assert 'IPython' not in sys.modules and 'pyspark' not in sys.modules\n"
        "assert callable(lance_ops.sql)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_statement_kinds_of_a_script():
    script = """
        SELECT * FROM t@v3 x;  SELECT a FROM lance.`/p/t.lance` VERSION AS OF 2 AS y;
        DELETE FROM t WHERE a > 1; UPDATE t SET a = 1; INSERT INTO t VALUES (1);
        MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE;
        OPTIMIZE t WITH (targetRowsPerFragment = 10); VACUUM t RETAIN 1 HOURS DRY RUN;
        RESTORE TABLE t TO VERSION AS OF 1; RESTORE t TIMESTAMP AS OF '2024-01-01';
        DESCRIBE HISTORY t LIMIT 1; DESC DETAIL t; DESCRIBE FRAGMENTS t; DESCRIBE t; DESCRIBE TABLE EXTENDED t;
        SHOW TBLPROPERTIES t; SHOW TAGS t; SHOW TABLES; REFRESH TABLE t;
        ALTER TABLE t ADD COLUMNS (c INT COMMENT 'x', d = a * 2); ALTER TABLE t ADD COLUMN e STRING;
        ALTER TABLE t ADD COLUMNS c1, c2 FROM v ON _rowid; ALTER TABLE t DROP COLUMNS (a, b);
        ALTER TABLE t DROP COLUMN IF EXISTS a; ALTER TABLE t RENAME COLUMN a TO b;
        ALTER TABLE t SET TBLPROPERTIES ('k' = 'v'); ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('k');
        ALTER TABLE t CREATE TAG rel AS OF VERSION 2; ALTER TABLE t DROP TAG IF EXISTS rel;
        CREATE TABLE n USING lance LOCATION '/p' AS SELECT 1 AS a; SELECT * FROM table_changes('/p', 1, 2)
    """
    assert kinds(script) == [
        "Select", "Select", "Delete", "Update", "Insert", "Merge", "optimize", "vacuum", "restore", "restore",
        "history", "detail", "fragments", "describe", "describe", "show_tblproperties", "show_tags", "spark",
        "refresh", "add_columns", "add_columns", "add_columns_from", "drop_columns", "drop_columns",
        "rename_column", "set_tblproperties", "unset_tblproperties", "create_tag", "drop_tag", "Create", "Select",
    ]


def test_statement_arguments():
    (opt, vac, add, add1, frm, tag, props, hist) = [s.node for s in parse_script(
        "OPTIMIZE lance.`/d/t` WITH (targetRowsPerFragment = 10, materializeDeletions = false,"
        " materializeDeletionsThreshold = 0.5);"
        "VACUUM t RETAIN 0.5 HOURS DRY RUN;"
        "ALTER TABLE t ADD COLUMNS (c DECIMAL(10, 2) COMMENT 'money', d = upper(s) || '!', e ARRAY<STRUCT<a: INT>>);"
        "ALTER TABLE t ADD COLUMN f STRING;"
        "ALTER TABLE t ADD COLUMNS c1, c2 FROM (SELECT * FROM v) ON id;"
        "ALTER TABLE t@v3 CREATE TAG rel AS OF VERSION 2;"
        "ALTER TABLE t SET TBLPROPERTIES ('a.b' = 'x', c = 1, d = true);"
        "DESCRIBE HISTORY t LIMIT 7"
    )]
    assert opt.table.name == "/d/t" and opt.args["options"] == {
        "targetRowsPerFragment": 10, "materializeDeletions": False, "materializeDeletionsThreshold": 0.5}
    assert vac.args == {"retain_hours": 0.5, "dry_run": True}
    assert add.args["columns"] == [
        {"name": "c", "type": "DECIMAL(10, 2)", "comment": "money"},
        {"name": "d", "expr": "upper(s) || '!'"},
        {"name": "e", "type": "ARRAY<STRUCT<a: INT>>", "comment": None},
    ]
    assert add1.args["columns"] == [{"name": "f", "type": "STRING", "comment": None}]
    assert frm.args["columns"] == ["c1", "c2"] and frm.args["key"] == "id"
    assert tag.args == {"name": "rel", "version": 2}
    assert tag.table.meta["AT_SUFFIX"] == "v3"
    assert props.args["properties"] == {"a.b": "x", "c": "1", "d": "true"}
    assert hist.args["limit"] == 7


def test_constraint_statements():
    add, drop = [s.node for s in parse_script(
        "ALTER TABLE t ADD CONSTRAINT pos CHECK (x > 0 AND s LIKE 'a%');"
        "ALTER TABLE t DROP CONSTRAINT IF EXISTS pos"
    )]
    assert (add.kind, add.args) == ("add_constraint", {"name": "pos", "expression": "x > 0 AND s LIKE 'a%'"})
    assert (drop.kind, drop.args) == ("drop_constraint", {"name": "pos", "if_exists": True})


@pytest.mark.parametrize(
    "text, line, column, token",
    [
        ("SELECT 1;\nSELEC 2", 2, 7, "2"),
        ("OPTIMIZE t WITH (targetRowsPerFragment 10)", 1, 41, "10"),
        ("VACUUM t RETAIN ten HOURS", 1, 19, "ten"),
        ("VACUUM t RETAIN 10 DAYS", 1, 23, "DAYS"),
        ("SELECT 1;\n  DESCRIBE HISTORY t LIMIT x", 2, 28, "x"),
        ("RESTORE TABLE t TO 3", 1, 20, "3"),
        ("ALTER TABLE t ADD COLUMNS (c)", 1, 29, ")"),
        ("ALTER TABLE t CREATE TAG", 1, 24, "TAG"),
        ("hello world", 1, 1, "hello"),
        ("SELECT * FROM t WHERE", 1, 21, "WHERE"),
        ("SELECT 1;\nSELECT 'unterminated", 2, 8, "'unterminated"),
    ],
)
def test_parse_errors_have_position_and_token(text, line, column, token):
    with pytest.raises(SqlParseError) as e:
        parse_script(text)
    assert (e.value.line, e.value.column) == (line, column), str(e.value)
    assert e.value.token.startswith(token), str(e.value)
    assert f"line {line}, column {column}" in str(e.value)


def test_statement_text_and_position():
    stmts = parse_script("SELECT 1;\n  SELECT 2 -- two\n;\n\nOPTIMIZE t")
    assert [(s.line, s.column) for s in stmts] == [(1, 1), (2, 3), (5, 1)]
    assert stmts[2].text == "OPTIMIZE t"
