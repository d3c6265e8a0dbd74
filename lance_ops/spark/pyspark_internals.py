"""The one place lance_ops reads pyspark internals (not public API).

:func:`planner_pushdown` walks the call stack of the Python worker that asks
the ``lance`` data source for a reader, to learn whether Spark pushes filters
into that read: ``spark.sql.python.filterPushdown.enabled`` is a runtime SQL
conf the session may switch at any time after the data source was
registered; Spark refuses a reader with ``pushFilters`` once it is off, and a
reader without it never gets filters while it is on. The planner worker knows
the conf of the query being planned; the registration only the conf of its
time. Public API gives no other way to know.

What it relies on -- the names of pyspark's two planner worker modules, and
the ``enable_pushdown`` local of the read planner -- is checked by
:func:`check_internals`, which a test runs against the installed pyspark, so
an upgrade that moves them fails loudly in the test suite instead of quietly
turning filter pushdown off.

:func:`connect_literals` reads a Spark Connect DataFrame's unresolved plan
(``df._plan``: a ``Project``'s ``_columns`` or a ``Filter``'s ``filter``,
each Column's ``_expr`` tree of ``SQLExpression._expr`` /
``LiteralExpression._value, _dataType`` ...) for the literals of the SQL it
was built from: the EXPLAIN-text decoder needs them
(:mod:`lance_ops.arrow_eval.plantext`), and Connect offers no public view of
its plan. Where any of it is missing, the operation evaluates with Spark;
:func:`check_internals` fails the test suite first.
"""
from __future__ import annotations

import sys

#: The worker that pushes filters into a reader (runs only when pushdown is on).
PUSHDOWN_PLANNER = "pyspark.sql.worker.data_source_pushdown_filters"
#: The worker that plans a read (refuses a reader implementing ``pushFilters``
#: when pushdown is off: DATA_SOURCE_PUSHDOWN_DISABLED).
READ_PLANNER = "pyspark.sql.worker.plan_data_source_read"
#: The read planner's local holding the session's pushdown conf.
PUSHDOWN_FLAG = "enable_pushdown"


def planner_pushdown() -> bool | None:
    """Whether the Spark planner worker asking for a reader (this call's
    caller chain) pushes filters into it: True in the pushdown planner, the
    ``enable_pushdown`` flag Spark sent the read planner there, None when
    called from neither (Spark's own check decides then)."""
    f = sys._getframe(1)
    while f is not None:
        mod = f.f_globals.get("__name__")
        if mod == PUSHDOWN_PLANNER:
            return True
        if mod == READ_PLANNER and PUSHDOWN_FLAG in f.f_locals:
            return bool(f.f_locals[PUSHDOWN_FLAG])
        f = f.f_back
    return None


def check_internals() -> list[str]:
    """What :func:`planner_pushdown` relies on that the installed pyspark
    lacks ([] when everything is there)."""
    import importlib.util
    import inspect

    problems = []
    for name in (PUSHDOWN_PLANNER, READ_PLANNER):
        if importlib.util.find_spec(name) is None:
            problems.append(f"pyspark has no module {name}")
    if not problems:
        import importlib

        source = inspect.getsource(importlib.import_module(READ_PLANNER))
        if f"{PUSHDOWN_FLAG} =" not in source:
            problems.append(f"{READ_PLANNER} no longer assigns {PUSHDOWN_FLAG}")
    problems += _check_connect_plan()
    return problems


def _check_connect_plan() -> list[str]:
    """What :func:`connect_literals` reads of pyspark's Connect client."""
    import importlib
    import inspect

    try:
        plan = importlib.import_module("pyspark.sql.connect.plan")
        exprs = importlib.import_module("pyspark.sql.connect.expressions")
    except Exception as e:  # (Connect's client needs grpc: installed with pyspark[connect])
        return [f"pyspark.sql.connect does not import: {e}"]
    wanted = [(plan.Project, "self._columns ="), (plan.Filter, "self.filter ="),
              (exprs.SQLExpression, "self._expr"), (exprs.LiteralExpression, "self._value ="),
              (exprs.LiteralExpression, "self._dataType =")]
    problems = [f"{cls.__name__} no longer has {attr}" for cls, attr in wanted
                if attr not in inspect.getsource(cls)]
    for name in _CONNECT_EXPRESSIONS:
        if not isinstance(getattr(exprs, name, None), type):
            problems.append(f"pyspark.sql.connect.expressions has no {name}")
    return problems


# ------------------------------------------------ Spark Connect: the SQL sent
#: Connect expression classes whose content :func:`connect_literals` reads.
_CONNECT_EXPRESSIONS = ("SQLExpression", "LiteralExpression", "ColumnReference", "UnresolvedFunction",
                        "CastExpression", "ColumnAlias", "CaseWhen")


def connect_literals(df) -> list:
    """The literals (:class:`lance_ops.arrow_eval.sqllits.Candidate`) of the
    expressions a Spark Connect DataFrame's top ``select`` / ``where`` holds,
    read from the client's unresolved plan (``df._plan``: its ``Project``
    columns or ``Filter`` condition, each Column's ``_expr`` tree) -- SQL
    strings lexed, ``lit()`` values taken with their types. The plan-text
    decoder (:mod:`lance_ops.arrow_eval.plantext`) needs them: Catalyst prints
    literals raw. Raises Unsupported for anything else (the caller then
    evaluates with Spark)."""
    from ..arrow_eval.catalyst import Unsupported

    plan = getattr(df, "_plan", None)
    columns = getattr(plan, "_columns", None)
    if columns is None and hasattr(plan, "filter"):
        columns = [plan.filter]
    if not columns:
        raise Unsupported("not a select or where of a Connect DataFrame")
    out: list = []
    try:
        for c in columns:
            expr = getattr(c, "_expr", None)
            if expr is None:
                raise Unsupported(f"a column of {type(c).__name__}")
            _walk(expr, out)
    except (AttributeError, TypeError) as e:  # (another pyspark's internals: check_internals says which)
        raise Unsupported(f"the Connect plan: {e}") from e
    return out


def _walk(expr, out: list) -> None:
    from ..arrow_eval.catalyst import Unsupported
    from ..arrow_eval.sqllits import literals

    name = type(expr).__name__
    if name not in _CONNECT_EXPRESSIONS:
        raise Unsupported(f"Connect expression {name}")
    if name == "SQLExpression":
        out.extend(literals([expr._expr]))
    elif name == "LiteralExpression":
        out.append(_literal_candidate(expr._value, expr._dataType))
    for child in expr.children:
        _walk(child, out)


def _literal_candidate(value, dtype):
    """A ``lit()``'s candidate: Catalyst prints it as the lexer's would."""
    import datetime
    import decimal

    from pyspark.sql import types as T

    from ..arrow_eval.catalyst import Unsupported
    from ..arrow_eval.sqllits import Candidate, f32, safe_string

    if value is None or isinstance(dtype, T.NullType):
        return Candidate("void", None)
    if isinstance(dtype, T.StringType) and isinstance(value, str):
        if not safe_string(value):
            raise Unsupported("a string literal with characters the plan text cannot delimit")
        return Candidate("string", value)
    if isinstance(dtype, T.BooleanType):
        return Candidate("boolean", bool(value))
    ints = {T.ByteType: "byte", T.ShortType: "short", T.IntegerType: "integer", T.LongType: "long"}
    for cls, t in ints.items():
        if isinstance(dtype, cls):
            return Candidate(t, abs(int(value)))
    if isinstance(dtype, T.DoubleType):
        return Candidate("double", abs(float(value)))
    if isinstance(dtype, T.FloatType):
        return Candidate("float", abs(f32(float(value))))
    if isinstance(dtype, T.DecimalType) and isinstance(value, decimal.Decimal):
        return Candidate(f"decimal({dtype.precision},{dtype.scale})", value.copy_abs())
    if isinstance(dtype, T.DateType) and isinstance(value, datetime.date):
        return Candidate("date", value)
    raise Unsupported(f"a literal of {dtype.simpleString()}")
