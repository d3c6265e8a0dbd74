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
    return problems
