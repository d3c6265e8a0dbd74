"""The EXPLAIN-text decoder (Spark Connect's input to the Arrow evaluator)
on plan texts whose literals the text alone cannot tell apart: it must
decode exactly what Spark analyzed or refuse (Unsupported: the operation
evaluates with Spark) -- never guess. Plan texts here are what Spark 4
prints for the SQL beside them (the differential against the analyzed plan's
JSON is tests/spark/test_arrow_eval.py::test_plan_text_decodes_like_json)."""
import pytest

from lance_ops.arrow_eval.catalyst import Unsupported, X
from lance_ops.arrow_eval.plantext import decode_text
from lance_ops.arrow_eval.sqllits import Candidate, literals

SCHEMA = {"x": "long", "i": "integer", "s": "string", "b": "boolean", "d": "date"}
LEAF = "+- LocalRelation <empty>, [x#0L, i#1, s#2, b#3, d#4]"
HEADER = "x: bigint, i: int, s: string, b: boolean, d: date"


def where(sql: str, condition_text: str, ansi: bool = True):
    """The trees of ``where(sql)`` given the plan text Spark printed for it."""
    plan = "\n".join([HEADER, f"Filter {condition_text}", LEAF])
    return decode_text(plan, SCHEMA, literals([sql]), ansi=ansi, tz="UTC")


def select(sqls: list[str], items: list[str], types: list[str]):
    header = ", ".join(f"e{k}: {t}" for k, t in enumerate(types))
    body = ", ".join(f"{text} AS e{k}#{10 + k}" for k, text in enumerate(items))
    plan = "\n".join([header, f"Project [{body}]", LEAF])
    return decode_text(plan, SCHEMA, literals(sqls), ansi=True, tz="UTC")


def attr(name, t):
    return X("attr", t, value=name)


def lit(v, t):
    return X("lit", t, value=v)


def test_string_literals_with_spaces_and_keywords_decode():
    [t] = where("s = 'a AND b' OR s IN ('x y', '')", "((s#2 = a AND b) OR s#2 IN (x y,))")
    assert t == X("or", "boolean", (
        X("cmp", "boolean", (attr("s", "string"), lit("a AND b", "string")), "="),
        X("in", "boolean", (attr("s", "string"), lit("x y", "string"), lit("", "string")))))


def test_a_literal_printed_like_a_column_is_refused_by_the_lexer():
    # s = 's#2' prints as (s#2 = s#2): the lexer refuses strings holding '#'
    with pytest.raises(Unsupported):
        literals(["s = 's#2'"])
    for sql in ["s = 'a)'", "s = 'a,b'", "s = 'it''s'", "s = 'a\\'b'", "s = 'line\nbreak'", "s = X'00'",
                "s = 'a' 'b'", "s = r'a'"]:
        with pytest.raises(Unsupported):
            literals([sql])


def test_types_of_printed_literals_come_from_the_sql_and_their_context():
    [t] = where("s = '5' AND i = 5", "((s#2 = 5) AND (i#1 = 5))")
    assert t.args[0].args[1] == lit("5", "string")
    assert t.args[1].args[1] == lit(5, "integer")
    [t] = where("s = 'null'", "(s#2 = null)")
    assert t.args[1] == lit("null", "string")  # the string, not a NULL
    [t] = where("s <=> NULL", "(s#2 <=> null)")
    assert t.args[1] == lit(None, "string")


@pytest.mark.parametrize("sql,text", [
    # 'null' the string and NULL the literal print alike where a string goes
    ("s = 'null' OR s <=> NULL", "((s#2 = null) OR (s#2 <=> null))"),
    # a string '5' and an int 5 under the same cast
    ("x > '5' OR x > 5", "((x#0L > cast(5 as bigint)) OR (x#0L > cast(5 as bigint)))"),
    # NOT (b IN (true)) and (NOT b) IN (true) print alike
    ("NOT b IN (true)", "NOT b#3 IN (true)"),
    # a string the SQL does not hold
    ("s = 'a'", "(s#2 = b)"),
    # BETWEEN prints its arguments before coercion: the casts are not in the text
    ("i BETWEEN 1 AND 2.5", "between(i#1, 1, 2.5)"),
])
def test_what_the_text_cannot_tell_is_refused(sql, text):
    with pytest.raises(Unsupported):
        where(sql, text)


def test_numbers_read_as_spark_reads_them():
    [t] = where("i >= -2147483648", "(i#1 >= -2147483648)")
    assert t.args[1] == lit(-2147483648, "integer")
    [t] = where("x > 5L", "(x#0L > 5)")
    assert t.args[1] == lit(5, "long")
    # x - 2147483648 subtracts a long (binary minus): not the int literal
    assert {c.type for c in literals(["x -2147483648"])} == {"long"}
    assert {c.type for c in literals(["(-2147483648)"])} == {"integer"}
    assert literals(["1.50 + 1e3 + 2D + 7BD + 3S + 4Y"]) == [
        Candidate("decimal(3,2)", __import__("decimal").Decimal("1.50")), Candidate("double", 1000.0),
        Candidate("double", 2.0), Candidate("decimal(1,0)", __import__("decimal").Decimal("7")),
        Candidate("short", 3), Candidate("byte", 4)]


def test_projection_items_and_the_header_types():
    trees = select(["x + 1", "upper(s)", "CASE WHEN b THEN 'y' END"],
                   ["(x#0L + cast(1 as bigint))", "upper(s#2)", "CASE WHEN b#3 THEN y END"],
                   ["bigint", "string", "string"])
    assert [t.type for t in trees] == ["long", "string", "string"]
    with pytest.raises(Unsupported):  # the header disagrees with the decoded type
        select(["upper(s)"], ["upper(s#2)"], ["int"])


def test_other_plan_shapes_are_refused():
    with pytest.raises(Unsupported):  # a join, a subquery ... anything but Project/Filter over the relation
        decode_text("\n".join([HEADER, "Filter (x#0L > 1)", "+- Project [x#0L]", LEAF]), SCHEMA, [],
                    ansi=True, tz="UTC")
    with pytest.raises(Unsupported):  # a relation with other columns
        decode_text("\n".join([HEADER, "Filter (x#0L > 1)", "+- LocalRelation <empty>, [x#0L, y#1]"]),
                    SCHEMA, literals(["x > 1"]), ansi=True, tz="UTC")


def test_long_in_lists_and_deep_nesting():
    n = 3000
    [t] = where("i IN (" + ", ".join(str(k) for k in range(n)) + ")",
                "i#1 IN (" + ",".join(str(k) for k in range(n)) + ")")
    assert t.kind == "in" and len(t.args) == n + 1 and t.args[-1] == lit(n - 1, "integer")
    text = "(i#1 = 0)"
    for k in range(1, 800):
        text = f"({text} AND (i#1 = {k}))"
    with pytest.raises(Unsupported):  # (never a RecursionError: Spark evaluates it)
        where(" AND ".join(f"i = {k}" for k in range(800)), text)


def test_identifiers_of_any_script_are_not_literals():
    assert literals(["`straße` = 'x' AND größe > 5 AND ÿ IS NULL"]) == [
        Candidate("string", "x"), Candidate("integer", 5), Candidate("void", None)]


def test_a_null_between_literals_takes_their_type():
    [t] = where("NULL = 'z'", "(null = z)")
    assert t.args == (lit(None, "string"), lit("z", "string"))
