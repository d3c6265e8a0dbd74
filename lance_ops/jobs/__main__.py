"""``python -m lance_ops.jobs COMMAND ...``, and the application file
``spark-submit`` runs (``lance-ops --print-entry-file`` prints its path).

Run as a file, Python puts this directory first on ``sys.path``; it is taken
off again so that the package's module names cannot shadow top-level ones,
and lance_ops is imported from where it is installed.
"""
import os
import sys

if __package__ in (None, ""):  # run as a file (spark-submit)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    if "lance_ops" not in sys.modules:
        try:
            import lance_ops  # noqa: F401  (installed)
        except ImportError:  # a source checkout run without installing
            sys.path.insert(0, os.path.dirname(os.path.dirname(here)))

from lance_ops.jobs.run import cli  # noqa: E402

if __name__ == "__main__":
    cli("python -m lance_ops.jobs" if __package__ else "lance_ops/jobs/__main__.py")
