"""Kept for imports of the former Spark-free CLI: ``lance-ops`` is now the
jobs command (:mod:`lance_ops.jobs`), whose Spark-free commands (history,
detail, tags, properties, restore, vacuum, health) need no pyspark."""
from __future__ import annotations

from ..jobs import main
from ..jobs.args import storage_options
from ..jobs.output import to_json as _json

__all__ = ["main", "storage_options", "_json"]
