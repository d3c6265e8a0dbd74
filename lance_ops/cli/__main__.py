"""``python -m lance_ops.cli``: the same command as ``lance-ops``."""
from ..jobs.run import cli

cli("python -m lance_ops.cli")
