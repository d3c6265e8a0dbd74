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


#: ``LANCE_OPS_TEST_CONNECT=1``: the ``spark`` fixture is a Spark Connect
#: session to a server (local[2]) this run starts on 127.0.0.1 and stops by
#: PID -- for running a suite through Connect in a pytest process of its own
#: (a Connect session switches the whole process to Connect mode). ``make
#: test`` runs the Makefile's CONNECT_SUITES this way after the classic run;
#: see the Spark Connect section of the README.
CONNECT_MODE = os.environ.get("LANCE_OPS_TEST_CONNECT", "") not in ("", "0")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    if CONNECT_MODE:
        yield from _connect_spark(tmp_path_factory)
        return
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


def _connect_spark(tmp_path_factory):
    from lance_ops.spark.session import remote_session
    from tests.servers import ConnectServer

    server = ConnectServer(str(tmp_path_factory.mktemp("connect-fixture"))).start()
    try:
        s = remote_session(server.url, "lance_ops-tests", conf={"spark.sql.shuffle.partitions": "2"})
        yield s
        s.stop()
    finally:
        server.stop()


@pytest.fixture
def table_path(tmp_path):
    return str(tmp_path / "t.lance")


@pytest.fixture(scope="session")
def zoo(tmp_path_factory):
    """Tables pylance 14 writes, of every layout (tests/zoo.py); copy one
    (``tests.zoo.copy_table``) before changing it."""
    from tests.zoo import build_zoo

    return build_zoo(str(tmp_path_factory.mktemp("zoo")))
