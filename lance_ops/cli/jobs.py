"""Kept for imports of the former module: the jobs live in
:mod:`lance_ops.jobs` (``lance-ops COMMAND``, ``python -m lance_ops.jobs``)."""
from __future__ import annotations

from ..jobs import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from ..jobs.args import load_function, load_tables, parser

__all__ = ["main", "load_function", "load_tables", "parser", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"]
