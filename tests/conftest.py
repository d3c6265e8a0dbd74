"""Shared fixtures: one local[2] Spark session for the whole run (per xdist
worker), temp table paths, and helpers to compare tables with pylance (the
reference oracle) -- and the test tiers.

Tiers are markers applied here from the fixtures a test uses (its whole
fixture closure), never by hand:

* ``spark``   -- needs a JVM: the ``spark`` session, a Spark Connect server
  or a standalone Spark cluster;
* ``connect`` -- runs against a Spark Connect server (``connect_server``, or
  the ``spark`` fixture of a ``LANCE_OPS_TEST_CONNECT=1`` run);
* ``servers`` -- needs a server the run starts on 127.0.0.1 and stops by PID:
  moto (S3 + DynamoDB), PostgreSQL, the fault proxy, a Spark Connect server,
  a Spark standalone cluster, Airflow's API server and scheduler;
* ``system``  -- starts processes of its own (the ``processes`` fixture):
  CLIs, fresh interpreters, concurrent writers, spark-submit, wheel builds,
  papermill.

A test with none of them is a unit test (``make test-unit``): no JVM, no
server, no subprocess -- enforced: starting a process there fails the test.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
#: Every JVM the tests start (the local session, Connect servers, spark-submit,
#: a standalone cluster's daemons) compiles with C1 only: the suite's JVMs run
#: small plans over tiny tables, where C2's compile threads cost more CPU than
#: they win back -- on 2 cores, measured on tests/spark/test_dml.py: 112 s of
#: CPU -> 75 s, 66 s -> 52 s wall. No effect on what is computed.
_JIT = "-XX:TieredStopAtLevel=1"
for _var in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    if _JIT not in os.environ.get(_var, ""):
        os.environ[_var] = f"{os.environ.get(_var, '')} {_JIT}".strip()


#: ``LANCE_OPS_TEST_CONNECT=1``: the ``spark`` fixture is a Spark Connect
#: session to a server (local[2]) this run starts on 127.0.0.1 and stops by
#: PID -- for running a suite through Connect in a pytest process of its own
#: (a Connect session switches the whole process to Connect mode). ``make
#: test`` runs the Makefile's CONNECT_SUITES this way after the classic run;
#: see docs/guide/spark-connect.md.
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
            # (a session of its own per xdist worker: nothing in the checkout)
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("spark-warehouse")),
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


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A Spark Connect server (local[2]) on 127.0.0.1 for the whole run (of an
    xdist worker: the files using it run on one -- :data:`SHARED_SERVER_FILES`),
    started with pyspark's sbin/start-connect-server.sh, stopped by PID."""
    from tests.servers import ConnectServer

    server = ConnectServer(str(tmp_path_factory.mktemp("connect-server"))).start()
    yield server
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


# ------------------------------------------------------------------ tiers
#: Fixture -> the tier markers of every test whose fixture closure holds it.
TIER_FIXTURES = {
    "spark": {"spark", "connect", "servers"} if CONNECT_MODE else {"spark"},
    "connect_server": {"spark", "connect", "servers"},
    "bare_server": {"spark", "connect", "servers"},  # tests/connect/test_artifacts.py: on a standalone cluster
    "spark_cluster": {"spark", "servers"},
    "moto": {"servers"},
    "postgres": {"servers"},
    "faulty": {"servers"},
    "airflow_servers": {"servers", "system"},
    "processes": {"system"},
}
TIERS = ("spark", "connect", "servers", "system")


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture, marks in TIER_FIXTURES.items():
            if fixture in names:
                for m in marks:
                    item.add_marker(m)
    items[:] = _heaviest_files_first(items)
    _check_shared_server_files(items)


def _heaviest_files_first(items: list) -> list:
    """The files in order of their heaviest tier (system, servers, spark,
    unit), then by size; each file's tests keep their order. pytest-xdist's
    ``--dist loadfile`` hands out files in this order, so the long system
    tests start first and the two workers end together on small unit files,
    rather than one idling while the other runs a 2-minute Airflow test."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def weight(tests: list) -> tuple:
        rank = min((i for i, t in enumerate(TIERS[::-1]) if any(x.get_closest_marker(t) for x in tests)),
                   default=len(TIERS))
        return rank, -len(tests)

    order = sorted(files.values(), key=weight)  # (stable: collection order among equals)
    return [item for tests in order for item in tests]


#: The test files using the session's Spark Connect server
#: (``connect_server``). ``make test`` schedules them as one unit, so they run
#: on one xdist worker and start one server (a Connect JVM costs ~25 CPU-s to
#: start on this machine). Kept in step with the fixture's users by
#: :func:`_check_shared_server_files`.
SHARED_SERVER_FILES = (
    "tests/connect/test_connect.py",
    "tests/connect/test_connect_dag.py",
    "tests/connect/test_connect_secrets.py",
    "tests/airflow/test_scheduler_backfill.py",
)


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with :data:`SHARED_SERVER_FILES` as one unit.
    (pytest-xdist's ``loadgroup`` would do it with marks, but cannot under
    pytest 9: it renames items through ``Item._nodeid``, which pytest 9 no
    longer reads.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedServerFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return SHARED_SERVER_FILES[0] if file in SHARED_SERVER_FILES else file

    return SharedServerFiles(config, log)


def _check_shared_server_files(items: list) -> None:
    """A test file using ``connect_server`` must be in
    :data:`SHARED_SERVER_FILES` (else its worker may start a second server)."""
    users = {i.nodeid.split("::", 1)[0] for i in items if "connect_server" in getattr(i, "fixturenames", ())}
    missing = users - set(SHARED_SERVER_FILES)
    if missing:
        raise pytest.UsageError(f"add {sorted(missing)} to tests/conftest.py SHARED_SERVER_FILES")


def _is_unit(item) -> bool:
    return not any(item.get_closest_marker(t) for t in TIERS)


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request, monkeypatch):
    """A unit test (no tier marker) that starts a process fails, naming the
    fixture it should use: the unit tier stays free of subprocesses."""
    if not _is_unit(request.node):
        return

    def refuse(self, args, *a, **kw):
        raise AssertionError(
            f"a unit test started a process ({args!r}): use the `processes` fixture (tier `system`), or the "
            "fixture of the server or Spark session it needs"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


class Processes:
    """The processes one test starts (``subprocess.Popen`` instances made
    while it runs); those still running at its end are killed by PID."""

    def __init__(self):
        self.started: list[subprocess.Popen] = []

    def stop_all(self) -> None:
        for p in self.started:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass


@pytest.fixture
def processes(monkeypatch):
    """Declares that the test starts processes of its own (tier ``system``)
    and stops, by PID, any it leaves running."""
    tracked = Processes()
    original = subprocess.Popen.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        tracked.started.append(self)

    monkeypatch.setattr(subprocess.Popen, "__init__", init)
    yield tracked
    monkeypatch.undo()
    tracked.stop_all()
