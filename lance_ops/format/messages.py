"""Copies of protobuf messages (one helper for the whole code base).

Manifests, fragments and index metadata are mutable protobuf messages shared
between snapshots; anything that changes one works on a copy.
"""
from __future__ import annotations

from typing import Iterable, TypeVar

M = TypeVar("M")


def copy_message(msg: M) -> M:
    """A deep copy of one message."""
    out = type(msg)()
    out.CopyFrom(msg)
    return out


def copy_messages(msgs: Iterable[M], cls: type | None = None) -> list[M]:
    """Deep copies of messages (``cls``: the type to copy into, for
    repeated fields of a compatible message type)."""
    out = []
    for m in msgs:
        c = (cls or type(m))()
        c.CopyFrom(m)
        out.append(c)
    return out
