"""Argument checks of the Delta-style builders, run when the method is called
(as Delta's Python API does) -- not later at ``execute()``: a condition is a
Spark SQL string or a Column, a column mapping a dict of column name -> SQL
string or Column."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame

from ..errors import ArgumentTypeError, InvalidArgumentError


def _type(value) -> str:
    return type(value).__name__


def condition(value, argname: str = "'condition'", required: bool = False):
    """``value`` if it is None (unless ``required``), a str or a Column;
    otherwise ArgumentTypeError (a TypeError)."""
    if value is None:
        if required:
            raise InvalidArgumentError(f"{argname} cannot be None")
        return None
    if isinstance(value, (str, Column)):
        return value
    raise ArgumentTypeError(
        f"{argname} must be a Spark SQL Column or a string (expression in SQL syntax), found {value!r} of type "
        f"{_type(value)}"
    )


def column_mapping(value, argname: str) -> dict:
    """A dict of column name -> SQL string or Column (Delta's ``set`` /
    ``values``): None raises InvalidArgumentError (a ValueError), anything
    else of the wrong type ArgumentTypeError (a TypeError)."""
    if value is None:
        raise InvalidArgumentError(f"{argname} cannot be None")
    if not isinstance(value, dict):
        raise ArgumentTypeError(f"{argname} must be a dict, found {_type(value)}")
    for k, v in value.items():
        if not isinstance(k, str):
            raise ArgumentTypeError(
                f"Keys of dict in {argname} must contain only strings with column names, found {k!r} of type "
                f"{_type(k)}"
            )
        if not isinstance(v, (str, Column)):
            raise ArgumentTypeError(
                f"Values of dict in {argname} must contain only Spark SQL Columns or strings (expressions in SQL "
                f"syntax), found {v!r} of type {_type(v)} for {k!r}"
            )
    return value


def dataframe(value, argname: str):
    if value is None:
        raise InvalidArgumentError(f"{argname} cannot be None")
    if not isinstance(value, DataFrame):
        raise ArgumentTypeError(f"Type of {argname} must be DataFrame, found {_type(value)}")
    return value


def string(value, argname: str, required: bool = True):
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{argname} must be str, found {value!r} of type {_type(value)}")
    return value
