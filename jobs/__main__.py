"""``python -m jobs COMMAND ...`` from a source checkout: a shim for
``python -m lance_ops.jobs`` (installed: ``lance-ops COMMAND ...``; for
``spark-submit`` use the installed entry file, ``lance-ops --print-entry-file``).
"""
import os
import sys

if __package__ in (None, ""):  # run as a file: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lance_ops.jobs.run import cli  # noqa: E402

if __name__ == "__main__":
    cli("python -m jobs")
