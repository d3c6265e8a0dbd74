"""``python -m jobs COMMAND --table URI [options]`` -- or, on a cluster,
``spark-submit --py-files features.py jobs/__main__.py COMMAND ...``.

The implementation is the package's (:mod:`lance_ops.cli.jobs`); see
``python -m jobs --help``.
"""
import os
import sys

if __package__ in (None, ""):  # run as a file by spark-submit: make the repo importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lance_ops.cli.jobs import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
