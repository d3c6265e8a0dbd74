"""lance_ops' Python worker daemon (lance_ops.spark.daemon): which sessions
use it, that their workers really fork from it with the executor imports done
and frozen, and that it degrades to the stock daemon when those imports fail."""
from __future__ import annotations

import os
import struct
import subprocess
import sys

import pyarrow as pa

from lance_ops.spark.workers import DAEMON_MODULE, DAEMON_MODULE_CONF, daemon_conf


def test_daemon_chosen_for_local_sessions_running_this_interpreter(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert daemon_conf("local[2]") == {DAEMON_MODULE_CONF: DAEMON_MODULE}
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert daemon_conf("local[*]") == {DAEMON_MODULE_CONF: DAEMON_MODULE}
    assert daemon_conf("local[2]", {"spark.pyspark.python": sys.executable}) == {DAEMON_MODULE_CONF: DAEMON_MODULE}


def test_daemon_not_chosen_where_lance_ops_may_not_be_importable(monkeypatch, tmp_path):
    other = tmp_path / "python3"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    # workers on a cluster (lance_ops may reach them as a shipped zip), or Spark's own default
    assert daemon_conf("spark://127.0.0.1:7077") == {}
    assert daemon_conf(None) == {}
    assert daemon_conf("yarn") == {}
    # another interpreter for the workers
    assert daemon_conf("local[2]", {"spark.pyspark.python": str(other)}) == {}
    monkeypatch.setenv("PYSPARK_PYTHON", str(other))
    assert daemon_conf("local[2]") == {}
    monkeypatch.setenv("PYSPARK_PYTHON", "no-such-python-here")
    assert daemon_conf("local[2]") == {}
    # the caller's own choice wins
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert daemon_conf("local[2]", {DAEMON_MODULE_CONF: "pyspark.daemon"}) == {}


def test_session_workers_fork_from_the_daemon_with_imports_frozen(spark):
    def probe(batches):
        import gc
        import sys as worker_sys
        import warnings

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({
            "frozen": [gc.get_freeze_count()],
            "preloaded": ["lance_ops.spark.rowchanges" in worker_sys.modules and "lance.file" in worker_sys.modules],
            # the daemon's filter of pylance's fork warning is not inherited
            "filtered": [any(f[1] is not None and "fork-safe" in f[1].pattern for f in warnings.filters)],
        })

    rows = spark.range(4, numPartitions=2).mapInArrow(probe, "frozen long, preloaded boolean, filtered boolean").collect()
    assert len(rows) == 2
    for row in rows:
        assert row.preloaded and not row.filtered, rows
        assert row.frozen > 10_000, rows  # the daemon's imports, out of every worker's gc.collect()


def test_daemon_falls_back_to_the_stock_one_when_its_imports_fail(processes):
    # Spark runs the daemon with stdin open and reads the port it listens on
    # from stdout; closing stdin tells it to exit. With pylance's file codec
    # unimportable it must still serve and end as pyspark.daemon does, not die.
    def run(code):
        r = subprocess.run([sys.executable, "-c", code], input=b"", capture_output=True, timeout=120,
                           env=dict(os.environ, PYTHON_WORKER_FACTORY_SECRET="s"))
        assert len(r.stdout) == 4 and 0 < struct.unpack("!i", r.stdout)[0] < 65536, (r.stdout, r.stderr[-2000:])
        return r.returncode, r.stderr

    stock = run("import runpy; runpy.run_module('pyspark.daemon', run_name='__main__')")
    ours = run("import sys, runpy; sys.modules['lance.file'] = None; "
               f"runpy.run_module({DAEMON_MODULE!r}, run_name='__main__')")
    assert ours == stock


def test_daemon_forks_workers_without_pylances_fork_warning(processes):
    # A worker forked from the daemon (a client connects and authenticates,
    # as Spark does) must not make the daemon print pylance's "not fork-safe"
    # warning: the daemon only imported pylance, never ran it.
    import socket

    proc = subprocess.Popen([sys.executable, "-m", DAEMON_MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, PYTHON_WORKER_FACTORY_SECRET="s"))
    (port,) = struct.unpack("!i", proc.stdout.read(4))
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        f = sock.makefile("rwb")
        (pid,) = struct.unpack("!i", f.read(4))  # the forked worker's pid
        f.write(struct.pack("!i", 1) + b"s")
        f.flush()
        length = struct.unpack("!i", f.read(4))[0]
        assert f.read(length) == b"ok" and pid > 0
    proc.stdin.close()
    proc.wait(timeout=60)
    err = proc.stderr.read().decode()
    assert "fork-safe" not in err, err
    # the control: any other process that imported pylance warns when it forks
    code = "import os, lance.file\nif os.fork() == 0: os._exit(0)\nos.wait()"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "lance is not fork-safe" in r.stderr, r.stderr
