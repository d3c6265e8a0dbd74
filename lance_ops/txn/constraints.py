"""Table CHECK constraints as stored in the table config (no Spark).

A constraint is a named Spark SQL boolean expression kept in the table config
under ``lance_ops.constraint.<name>`` (the value is the SQL), so it travels
with the table: every lance_ops writer reads it from the version it writes on,
pylance shows it in ``ds.config()``, and ``setProperties`` / ``UpdateConfig``
transactions carry it. Delta keeps its constraints the same way
(``delta.constraints.<name>`` table properties).

Evaluation needs Spark (``lance_ops.spark.constraints``); this module only
names, validates and lists them.
"""
from __future__ import annotations

import re

from ..errors import CommitConflictError, InvalidArgumentError

#: Table config key prefix of a CHECK constraint.
CONSTRAINT_PREFIX = "lance_ops.constraint."
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidArgumentError(
            f"constraint name {name!r} must be a SQL identifier (letters, digits, underscores)"
        )
    return name.lower()  # Delta's constraint names are case-insensitive


def constraints_of(config) -> dict[str, str]:
    """name -> SQL of the CHECK constraints in a table config (a manifest's
    ``config`` map or a dict), sorted by name."""
    out = {k[len(CONSTRAINT_PREFIX):]: v for k, v in dict(config).items() if k.startswith(CONSTRAINT_PREFIX)}
    return dict(sorted(out.items()))


def constraint_key(name: str) -> str:
    return CONSTRAINT_PREFIX + check_name(name)


def unchanged_constraints(enforced: dict[str, str]):
    """A pre-commit check for writes that enforced ``enforced`` in their
    tasks: if the version they would commit on has other constraints (one was
    added or dropped concurrently), the write must be prepared again on it --
    a retryable conflict that is never committed "as is"."""

    def check(ctx) -> None:
        now = constraints_of(ctx.staged.manifest.config)
        if now != enforced:
            raise CommitConflictError(
                f"the table's CHECK constraints changed concurrently (enforced {sorted(enforced)}, now "
                f"{sorted(now)}); the write is prepared again on the latest version",
                retryable=True,
                prepare_again=True,
            )

    return check
