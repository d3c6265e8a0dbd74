"""Table and namespace identifiers of the Lance Namespace spec.

An identifier is a list of parts: ``["db", "events"]`` is table ``events`` of
namespace ``db``; ``[]`` is the root namespace. The spec's string form joins
the parts with ``$`` (``db$events``: the directory namespace's ``object_id``,
the REST path parameter). Users write them Spark's way: ``db.events``, with
backquotes around a part that holds a dot (`` `my.db`.events ``).
"""
from __future__ import annotations

from ..errors import InvalidArgumentError

DELIMITER = "$"


def parse_name(text: str) -> list[str]:
    """``db.events`` / `` `a.b`.c `` -> its parts (InvalidArgumentError for
    an empty part or an unclosed backquote)."""
    if not isinstance(text, str):
        raise TypeError(f"a table name is a string, got {type(text).__name__}")
    parts: list[str] = []
    cur: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "`":
                if i + 1 < len(text) and text[i + 1] == "`":  # an escaped backquote
                    cur.append("`")
                    i += 1
                else:
                    quoted = False
            else:
                cur.append(ch)
        elif ch == "`":
            quoted = True
        elif ch == ".":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    if quoted:
        raise InvalidArgumentError(f"unclosed backquote in the name {text!r}")
    parts.append("".join(cur))
    if not text.strip() or any(not p for p in parts):
        raise InvalidArgumentError(f"{text!r} is not a table name (write db.table, or `a.b`.table)")
    for p in parts:
        check_part(p)
    return parts


def check_part(part: str) -> None:
    if not part or DELIMITER in part or "/" in part:
        raise InvalidArgumentError(
            f"{part!r} cannot be part of a Lance Namespace identifier (empty, or holding '{DELIMITER}' or '/')"
        )


def object_id(parts: list[str]) -> str:
    """The spec's string form of an identifier (``db$events``)."""
    return DELIMITER.join(parts)


def split_object_id(text: str) -> list[str]:
    return text.split(DELIMITER) if text else []


def quoted(parts: list[str]) -> str:
    """An identifier written back the way users write it."""
    return ".".join(p if p.replace("_", "").isalnum() else "`" + p.replace("`", "``") + "`" for p in parts)


__all__ = ["DELIMITER", "parse_name", "check_part", "object_id", "split_object_id", "quoted"]
