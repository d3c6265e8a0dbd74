"""Shared fixtures: one local[2] Spark session for the whole run, temp table
paths, and helpers to compare tables with pylance (the reference oracle)."""
from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    from lance_ops.spark.session import local_session

    s = local_session(
        "lance_ops-tests",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "2g",
        },
    )
    yield s
    s.stop()


@pytest.fixture
def table_path(tmp_path):
    return str(tmp_path / "t.lance")


@pytest.fixture(scope="session")
def zoo(tmp_path_factory):
    """Tables pylance 14 writes, of every layout (tests/zoo.py); copy one
    (``tests.zoo.copy_table``) before changing it."""
    from tests.zoo import build_zoo

    return build_zoo(str(tmp_path_factory.mktemp("zoo")))
