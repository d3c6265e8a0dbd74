"""Arrow evaluation of simple Spark SQL predicates inside tasks.

:mod:`.expr` holds a small expression tree (column vs literal comparisons,
AND/OR/NOT, IS [NOT] NULL, IN, BETWEEN, prefix/suffix/substring matches) and
its translation into ``pyarrow.compute`` expressions with Spark SQL's
semantics. No Spark import: tasks evaluate without the JVM.
"""
from .expr import (
           And,
           Between,
           Cmp,
           Col,
           In,
           IsNull,
           Lit,
           Not,
           Or,
           StrMatch,
           compile_expr,
           from_filter,
           from_filters,
)

__all__ = ["And", "Between", "Cmp", "Col", "In", "IsNull", "Lit", "Not", "Or", "StrMatch", "compile_expr",
           "from_filter", "from_filters"]
