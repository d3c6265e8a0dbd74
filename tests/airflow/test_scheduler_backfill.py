"""``airflow backfill create`` of the feature-backfill DAG, run by Airflow
itself as a user runs it: an Airflow home in a temp dir with its SQLite
metadata DB, ``airflow db migrate``, ``airflow dags reserialize``, an API
server and a scheduler (LocalExecutor) started here on 127.0.0.1 and stopped
by PID, the CLI commands of airflow_dags/README.md. The tasks run lance_ops
in their own processes against a Spark Connect server (``SPARK_REMOTE``; no
JVM per task).

The table: events of hours 00 and 01 whose feature ``g`` was written NULL
(the feature service was down), its watermark past them -- so only a
backfill of those hours fills them, and runs the table's asset triggers
have nothing to do. Checked: every interval's rows are filled (read back by
pylance), row ids unchanged, the runs succeeded, the idle interval's
backfill is skipped, asset-triggered runs happened and were skipped, and a
second backfill of the same dates writes nothing. Then ``airflow dags test``
of the maintenance DAG compacts a table, from the same CLI."""
from __future__ import annotations

import datetime
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import lance
import pyarrow as pa
import pytest

from tests.airflow.conftest import DAGS
from tests.servers import free_port, stop_pid

AIRFLOW = os.path.join(os.path.dirname(sys.executable), "airflow")
UTC = datetime.timezone.utc


def _events(hour: int, ids: range, g) -> pa.Table:
    ts = [datetime.datetime(2024, 1, 1, hour, i % 60, tzinfo=UTC) for i in ids]
    return pa.table({"id": pa.array(list(ids), pa.int64()), "f0": pa.array([float(i) for i in ids]),
                     "ts": pa.array(ts, pa.timestamp("us", tz="UTC")), "g": pa.array(g, pa.float64())})


def _table(path: str) -> None:
    lance.write_dataset(_events(0, range(0, 10), [None] * 10), path, max_rows_per_file=5,
                        enable_stable_row_ids=True)
    lance.write_dataset(_events(1, range(10, 20), [None if i % 2 == 0 else 2.0 * i for i in range(10, 20)]),
                        path, mode="append", max_rows_per_file=5)
    from lance_ops import Table
    from lance_ops.txn.watermarks import data_version, watermark_key

    t = Table(path)
    t.setProperties({watermark_key("g"): str(data_version(t.snapshot))})  # a backfill ran over them (NULLs)


class Airflow:
    """An Airflow 3 installation in ``home``: the CLI, an API server and a
    scheduler (child processes, stopped by PID)."""

    def __init__(self, home, env: dict):
        self.home = str(home)
        self.port = free_port()
        self.env = dict(os.environ)
        for k in [k for k in self.env if k.startswith("AIRFLOW")]:
            del self.env[k]
        self.env.update(
            AIRFLOW_HOME=self.home,
            AIRFLOW__CORE__DAGS_FOLDER=DAGS,
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__EXECUTOR="LocalExecutor",
            AIRFLOW__CORE__PARALLELISM="2",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{self.port}/execution/",
            AIRFLOW__API__HOST="127.0.0.1",
            AIRFLOW__API__PORT=str(self.port),
            AIRFLOW__API__WORKERS="1",
            AIRFLOW__API_AUTH__JWT_SECRET="lance-ops-tests-jwt-secret",
            AIRFLOW__OPENLINEAGE__DISABLED="True",
            AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME="0.5",
            # SQLite allows one writer: the scheduler, the API server and the CLI wait for the lock
            # (60 s) instead of failing with "database is locked" on a busy machine
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS="lance_ops_test_db.CONNECT_ARGS",
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC="lance_ops_test_db.CONNECT_ARGS",
            PYTHONPATH=os.pathsep.join(p for p in (os.path.join(self.home, "config"), os.environ.get("PYTHONPATH"))
                                       if p),
            GX_ANALYTICS_ENABLED="false",
            **env,
        )
        os.makedirs(os.path.join(self.home, "config"), exist_ok=True)
        with open(os.path.join(self.home, "config", "lance_ops_test_db.py"), "w") as f:
            f.write("CONNECT_ARGS = {'timeout': 60}\n")
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def cli(self, *args, timeout=180) -> subprocess.CompletedProcess:
        """An Airflow CLI command. SQLite has one writer: a command whose
        read-then-write transaction meets the scheduler's write fails at once
        with "database is locked" (SQLite refuses the upgrade rather than
        deadlock; no busy timeout helps) and rolls back that transaction --
        run it again, as a user of Airflow's SQLite setup would. (Not
        ``backfill create``: it commits the backfill before its runs, so a
        lock error between them can leave a backfill with some of its runs;
        the test creates backfills while no scheduler runs -- :meth:`start`.)"""
        for attempt in range(4):
            r = subprocess.run([AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
            if r.returncode == 0:
                return r
            if "database is locked" not in r.stderr or attempt == 3 or args[:2] == ("backfill", "create"):
                break
            time.sleep(2)
        raise AssertionError(f"airflow {' '.join(args)}: {r.stdout[-2000:]}\n{r.stderr[-4000:]}")

    def use_wal(self) -> None:
        """The metadata DB in WAL mode (kept in the file): readers -- this
        test's polling among them -- never block the scheduler's writes."""
        with sqlite3.connect(os.path.join(self.home, "airflow.db")) as db:
            assert db.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"

    def start(self, component: str) -> None:
        """Start ``airflow <component>`` (its output appended to <component>.log)."""
        log = open(os.path.join(self.home, f"{component}.log"), "a")
        self.procs.append((component, subprocess.Popen([AIRFLOW, component], env=self.env, stdout=log,
                                                       stderr=subprocess.STDOUT, start_new_session=True)))

    def stop(self, component: str | None = None) -> None:
        """Stop each process we started (or those of ``component``) and its
        children (the scheduler's workers and log server): its own session's
        process group, by PID."""
        for name, p in list(self.procs):
            if component not in (None, name):
                continue
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            stop_pid(p, timeout=20)
            try:
                os.killpg(p.pid, signal.SIGKILL)  # whatever of the group outlived its leader
            except (ProcessLookupError, PermissionError):
                pass
            self.procs.remove((name, p))

    def log(self, component: str) -> str:
        with open(os.path.join(self.home, f"{component}.log"), errors="replace") as f:
            return f.read()[-6000:]

    # the metadata DB, read-only
    def query(self, sql: str, *params):
        for _ in range(50):
            try:
                with sqlite3.connect(f"file:{self.home}/airflow.db?mode=ro", uri=True, timeout=5) as db:
                    return db.execute(sql, params).fetchall()
            except sqlite3.OperationalError:
                time.sleep(0.2)
        raise AssertionError("the metadata DB stayed locked")

    def runs(self) -> list[tuple]:
        return self.query("SELECT run_id, run_type, state, backfill_id FROM dag_run WHERE dag_id = ? ORDER BY id",
                          "lance_feature_backfill")

    def task_states(self, run_id: str) -> dict:
        return dict(self.query("SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ?",
                               "lance_feature_backfill", run_id))

    def tries(self, run_id: str) -> set:
        return {r[0] for r in self.query("SELECT try_number FROM task_instance WHERE dag_id = ? AND run_id = ?",
                                         "lance_feature_backfill", run_id)}

    def wait_backfill(self, backfill_id: int, completed: bool = True, timeout: float = 600) -> list[tuple]:
        """Wait until the runs of backfill ``backfill_id`` (3) and every other
        run are finished -- and, with ``completed``, the scheduler marked the
        backfill completed (it checks every 30 s; a new backfill of the DAG
        is refused until then); the runs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            runs = self.runs()
            for _name, p in self.procs:
                assert p.poll() is None, f"an Airflow process exited:\n{self.log('scheduler')}\n{self.log('api-server')}"
            ours = [r for r in runs if r[3] == backfill_id]
            done = not completed or self.query(
                "SELECT id FROM backfill WHERE id = ? AND completed_at IS NOT NULL", backfill_id)
            if done and len(ours) == 3 and all(r[2] in ("success", "failed") for r in runs):
                return runs
            time.sleep(1)
        runs = self.runs()
        detail = {r[0]: self.task_states(r[0]) for r in runs if r[2] not in ("success", "failed")}
        backfills = self.query("SELECT id, completed_at FROM backfill")
        raise AssertionError(f"runs did not finish in {timeout:.0f}s: {runs}\nunfinished: {detail}\n"
                             f"backfills: {backfills}\n{self.log('scheduler')}")


@pytest.fixture
def airflow_servers(connect_server, processes):
    """(the run's Spark Connect server -- shared with tests/connect, which
    the scheduling puts on the same worker; ``airflow(home, env)`` making
    Airflow installations): the API servers and schedulers started from them
    are stopped by PID when the test ends."""
    made: list[Airflow] = []

    def airflow(home, env: dict) -> Airflow:
        made.append(Airflow(home, env))
        return made[-1]

    yield connect_server, airflow
    for af in made:
        af.stop()


def test_airflow_backfill_create_fills_each_interval(tmp_path, airflow_servers):
    started = time.monotonic()
    path = str(tmp_path / "events.lance")
    _table(path)
    before = lance.dataset(path).to_table(columns=["id", "g"], with_row_id=True).to_pylist()
    config = tmp_path / "features.json"
    config.write_text(json.dumps({
        "start_date": "2024-01-01T00:00:00+00:00", "end_date": "2024-01-01T02:00:00+00:00",
        "features": [{"name": "g", "table": path, "column": "g", "sql": "f0 * 2", "time_column": "ts",
                      "poke_interval": 1, "sensor_timeout": 5}],
    }))
    connect, airflow = airflow_servers
    af = airflow(tmp_path / "airflow_home", {"LANCE_OPS_FEATURES_CONFIG": str(config), "SPARK_REMOTE": connect.url})
    af.cli("db", "migrate")
    af.use_wal()
    af.cli("dags", "reserialize")
    af.cli("dags", "unpause", "lance_feature_backfill")
    # three hourly intervals: 00 and 01 hold events with g NULL, 02 has none. (Created before the
    # scheduler starts: SQLite's one writer -- see Airflow.cli.)
    af.cli("backfill", "create", "--dag-id", "lance_feature_backfill", "--from-date", "2024-01-01T00:00:00+00:00",
           "--to-date", "2024-01-01T02:00:00+00:00", "--max-active-runs", "1")
    af.start("api-server")
    af.start("scheduler")
    runs = af.wait_backfill(1)
    backfills = [r for r in runs if r[1] == "backfill"]
    assert len(backfills) == 3 and all(r[2] == "success" for r in runs), runs
    states = [af.task_states(r[0]) for r in backfills]
    assert [s["backfill_g"] for s in states] == ["success", "success", "skipped"], states  # 02: idle
    assert all(s["wait_g"] == "success" and s["validate_g"] == "success" for s in states), states
    # the writes updated the table's asset: the DAG ran on it; nothing new for its sensor
    triggered = [r for r in runs if r[1] == "asset_triggered"]
    assert triggered and all(af.task_states(r[0])["wait_g"] == "skipped" for r in triggered), runs
    ds = lance.dataset(path)
    after = ds.to_table(columns=["id", "g"], with_row_id=True).to_pylist()
    assert sorted((r["id"], r["g"]) for r in after) == [(i, 2.0 * i) for i in range(20)]
    assert {r["id"]: r["_rowid"] for r in after} == {r["id"]: r["_rowid"] for r in before}
    history = [tx.operation.__class__.__name__ for tx in ds.get_transactions(2)]
    assert history == ["Update", "Update"], history  # one commit per filled interval
    # a second backfill of the same dates (re-running the completed runs) writes nothing
    version = ds.version
    af.stop("scheduler")  # (nothing runs: the scheduler is the only other writer)
    af.cli("backfill", "create", "--dag-id", "lance_feature_backfill", "--from-date", "2024-01-01T00:00:00+00:00",
           "--to-date", "2024-01-01T02:00:00+00:00", "--max-active-runs", "1", "--reprocess-behavior", "completed")
    af.start("scheduler")
    runs = af.wait_backfill(2, completed=False)
    second = [r for r in runs if r[1] == "backfill"]
    assert [r[0] for r in second] == [r[0] for r in backfills] and all(r[3] == 2 for r in second), runs
    assert all(r[2] == "success" and af.tries(r[0]) == {2} for r in second), runs  # re-run: second tries
    assert [af.task_states(r[0])["backfill_g"] for r in second] == ["skipped"] * 3
    assert lance.dataset(path).version == version
    assert [r for r in runs if r[1] == "asset_triggered"] == triggered  # no write, no asset event

    # `airflow dags test` of the maintenance DAG, from the CLI: the small table is compacted
    small = str(tmp_path / "small.lance")
    for i in range(4):
        lance.write_dataset(_events(3, range(i * 5, i * 5 + 5), [1.0] * 5), small, mode="append" if i else "create")
    expected = sorted(lance.dataset(small).to_table().to_pylist(), key=lambda r: r["id"])
    maintenance = tmp_path / "maintenance.json"
    maintenance.write_text(json.dumps({"tables": [{"name": "small", "uri": small, "small_fragment_rows": 100}]}))
    af.env["LANCE_OPS_MAINTENANCE_CONFIG"] = str(maintenance)
    r = af.cli("dags", "test", "lance_maintenance", timeout=300)
    ds = lance.dataset(small)
    assert len(ds.get_fragments()) == 1, r.stdout[-3000:]
    assert sorted(ds.to_table().to_pylist(), key=lambda r: r["id"]) == expected
    assert ds.get_transactions(1)[0].operation.__class__.__name__ == "Rewrite"
    print(f"airflow backfill create test: {time.monotonic() - started:.1f} s")
