"""Servers the object-store tests and the commit benchmarks run on
127.0.0.1: moto (S3 + DynamoDB, counting requests), PostgreSQL, and a Spark
standalone cluster. Each is a child process started here and stopped by its
PID; a server that cannot start raises (the test using it fails)."""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from lance_ops.spark.workers import daemon_conf

HERE = os.path.dirname(os.path.abspath(__file__))
#: moto accepts any credentials; these are the tests' "secrets" (tests
#: check they never show up in logs, errors or plans).
ACCESS_KEY = "AKIALANCEOPSTEST"
SECRET_KEY = "lance-ops-test-secret-0a1b2c3d"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(cond, timeout: float, what: str, proc: subprocess.Popen | None = None, log: str | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            if cond():
                return
        except Exception:
            pass
        time.sleep(0.1)
    tail = ""
    if log and os.path.exists(log):
        with open(log, errors="replace") as f:
            tail = f.read()[-3000:]
    raise RuntimeError(f"{what} did not start within {timeout:.0f}s{' (exited)' if proc and proc.poll() is not None else ''}\n{tail}")


def stop_pid(proc: subprocess.Popen, timeout: float = 10) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class MotoServer:
    """moto's server (S3 and DynamoDB on one port) in a child process."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> "MotoServer":
        self.port = free_port()
        self.log = os.path.join(self.workdir, "moto.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "moto_server.py"), str(self.port)],
                                         stdout=log, stderr=subprocess.STDOUT)
        _wait(lambda: self.counts() is not None, 60, "moto server", self.proc, self.log)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_pid(self.proc)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def counts(self, reset: bool = False) -> dict:
        req = urllib.request.Request(self.endpoint + "/_counts", method="POST" if reset else "GET")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)

    def options(self, **extra) -> dict:
        """Storage options for lance_ops and pylance (the same dict)."""
        return {
            "aws_endpoint": self.endpoint,
            "aws_region": REGION,
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            "allow_http": "true",
            "dynamodb_endpoint": self.endpoint,
            **extra,
        }

    def client(self, service: str):
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def create_bucket(self, name: str) -> str:
        self.client("s3").create_bucket(Bucket=name)
        return name

    def create_ddb_table(self, name: str) -> str:
        from lance_ops.storage.dynamodb_store import create_table

        create_table(name, self.options())
        return name


class FaultProxy:
    """:mod:`fault_proxy` in front of a :class:`MotoServer` (a child process
    on 127.0.0.1, stopped by PID): the same buckets and tables, reached
    through a proxy that injects the faults its policy asks for."""

    def __init__(self, workdir: str, upstream: "MotoServer"):
        self.workdir = workdir
        self.upstream = upstream
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> "FaultProxy":
        self.port = free_port()
        self.log = os.path.join(self.workdir, "fault-proxy.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "fault_proxy.py"), str(self.port),
                                          str(self.upstream.port)], stdout=log, stderr=subprocess.STDOUT)
        _wait(lambda: self.faults() is not None, 60, "fault proxy", self.proc, self.log)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_pid(self.proc)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _control(self, method: str, doc: dict | None = None) -> dict:
        data = json.dumps(doc).encode() if doc is not None else None
        req = urllib.request.Request(self.endpoint + "/_faults", data=data, method=method)
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)

    def faults(self) -> dict:
        """What was injected so far ({"injected": {"kind fault": n}, "seen": ...})."""
        return self._control("GET")

    def set_faults(self, seed: int = 0, rates: dict | None = None, script: list | None = None) -> dict:
        return self._control("POST", {"seed": seed, "rates": rates or {}, "script": script or []})

    def clear(self) -> dict:
        return self._control("DELETE")

    def options(self, **extra) -> dict:
        """Storage options reaching the S3 server through the proxy. The
        clients' own retry budgets stay at their defaults, as users have them."""
        opts = self.upstream.options(**extra)
        opts["aws_endpoint"] = opts["dynamodb_endpoint"] = self.endpoint
        return opts


def postgres_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql); .ci/run installs it")
    return os.path.dirname(found[-1])


class PostgresServer:
    """A throwaway PostgreSQL cluster (initdb + pg_ctl) on 127.0.0.1, run as
    the ``postgres`` user when we are root (the server refuses root)."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.port = 0
        self.pid: int | None = None

    def _as_server_user(self, cmd: list[str], **kw) -> subprocess.CompletedProcess:
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)

    def start(self) -> "PostgresServer":
        bindir = postgres_bin()
        # Under the system temp dir: the server user must reach it (pytest's
        # own temp dirs are private to us).
        self.dir = tempfile.mkdtemp(prefix="lance_ops-pg-")
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "sock")
        os.makedirs(self.sock)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            shutil.chown(self.sock, "postgres", "postgres")
        self.ctl = os.path.join(bindir, "pg_ctl")
        self._as_server_user([os.path.join(bindir, "initdb"), "-D", self.data, "-U", "postgres", "--auth=trust",
                              "-E", "UTF8", "--no-sync"])
        self.port = free_port()
        self.log = os.path.join(self.dir, "server.log")
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
        try:
            self._as_server_user([self.ctl, "-D", self.data, "-l", self.log, "-w", "-t", "60", "-o", opts, "start"])
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"PostgreSQL did not start: {e.stderr}") from e
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline())
        return self

    def stop(self) -> None:
        if self.pid is None:
            return
        try:
            self._as_server_user([self.ctl, "-D", self.data, "-m", "fast", "-w", "-t", "30", "stop"])
        except Exception:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.pid = None
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def uri(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


class SparkCluster:
    """A Spark standalone cluster on 127.0.0.1: a master and ``workers``
    workers, each its own JVM started from pyspark's ``spark-class`` (one
    core, 1 GB each); executors are started by the workers, so every task
    runs in a process of its own, apart from the driver."""

    def __init__(self, workdir: str, workers: int = 2):
        import pyspark

        self.workdir = workdir
        self.workers = workers
        self.spark_home = os.path.dirname(pyspark.__file__)
        self.procs: list[subprocess.Popen] = []

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        env = dict(os.environ, SPARK_HOME=self.spark_home, SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_LOG_DIR=self.workdir, PYSPARK_PYTHON=sys.executable)
        log = open(os.path.join(self.workdir, f"{name}.log"), "w")
        proc = subprocess.Popen([os.path.join(self.spark_home, "bin", "spark-class"), *args],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def start(self) -> "SparkCluster":
        self.port, self.ui_port = free_port(), free_port()
        master = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                             "--port", str(self.port), "--webui-port", str(self.ui_port))
        _wait(lambda: self.status() is not None, 120, "Spark master", master,
              os.path.join(self.workdir, "master.log"))
        for i in range(self.workers):
            work = os.path.join(self.workdir, f"worker{i}")
            os.makedirs(work)
            self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                        "--work-dir", work, self.url)
        _wait(lambda: self.status()["aliveworkers"] >= self.workers, 120, f"{self.workers} Spark workers",
              None, os.path.join(self.workdir, "worker0.log"))
        return self

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def status(self) -> dict | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.load(r)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_pid(proc, 20)


class ConnectServer:
    """A Spark Connect server on 127.0.0.1 (``local[2]``), started with
    pyspark's own ``sbin/start-connect-server.sh`` and stopped by the PID its
    daemon script records. Its Python workers run ``python`` (the project's
    interpreter by default: lance_ops "installed on the workers"). ``conf``
    overrides / adds Spark confs (the benchmarks give it their driver memory),
    ``env`` adds environment variables for the server and its workers.
    Shared by tests/connect and benchmarks/bench_connect.py."""

    def __init__(self, workdir: str, python: str | None = None, master: str = "local[2]",
                 conf: dict | None = None, env: dict | None = None):
        import pyspark

        self.workdir = workdir
        self.python = python or sys.executable
        self.master = master
        self.conf = dict(conf or {})
        self.extra_env = dict(env or {})
        self.spark_home = os.path.dirname(pyspark.__file__)
        self.pid: int | None = None

    def _env(self) -> dict:
        return dict(os.environ, SPARK_HOME=self.spark_home, SPARK_LOCAL_IP="127.0.0.1",
                    SPARK_LOG_DIR=self.workdir, SPARK_PID_DIR=self.workdir, SPARK_IDENT_STRING="lance_ops-tests",
                    PYSPARK_PYTHON=self.python, PYSPARK_DRIVER_PYTHON=self.python, **self.extra_env)

    def start(self) -> "ConnectServer":
        self.port = free_port()
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
            "spark.sql.python.filterPushdown.enabled": "true", "spark.sql.session.timeZone": "UTC",
            "spark.driver.memory": "1g", "spark.python.worker.reuse": "true",
            "spark.python.unix.domain.socket.enabled": "true",
            **daemon_conf(self.master, {"spark.pyspark.python": self.python}),  # (this interpreter's workers)
            **self.conf,
        }
        args = ["bash", os.path.join(self.spark_home, "sbin", "start-connect-server.sh"), "--master", self.master]
        for k, v in conf.items():
            args += ["--conf", f"{k}={v}"]
        subprocess.run(args, env=self._env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                       timeout=60)
        pid_files = glob.glob(os.path.join(self.workdir, "spark-*.pid"))
        if not pid_files:
            raise RuntimeError(f"start-connect-server.sh wrote no PID file in {self.workdir}")
        with open(pid_files[0]) as f:
            self.pid = int(f.read().strip())
        logs = glob.glob(os.path.join(self.workdir, "*.out"))

        def ready() -> bool:
            os.kill(self.pid, 0)  # (raises once the server died: the wait ends)
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True

        try:
            _wait(ready, 180, "Spark Connect server", None, logs[0] if logs else None)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            self.pid = None
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(self.pid, signal.SIGKILL)
        self.pid = None
