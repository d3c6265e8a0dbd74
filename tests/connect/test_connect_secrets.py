"""Storage credentials through Spark Connect: the client uploads them as a
session artifact and sends only their handle; the server's Python workers
(the data source's planner and the tasks) resolve it. With the client logging
every plan at DEBUG, neither the client's log nor the server's shows the
secret, and every operation reached S3 with it (rows as pylance reads them)."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import lance

from tests.objectstores.conftest import moto  # noqa: F401 (the session's S3 server)
from tests.objectstores.test_spark_s3 import _leaks
from tests.servers import SECRET_KEY

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def test_secrets_through_connect_travel_as_a_handle(connect_server, moto, tmp_path, processes):  # noqa: F811
    uri = f"s3://lance-ops/connect-secret-{tmp_path.name}.lance"
    opts = moto.options(commit_store=f"sqlite:///{tmp_path}/c.db")
    log = tmp_path / "client.log"
    env = dict(os.environ, LANCE_OPS_TEST_STORAGE=json.dumps(opts), PYTHONPATH=ROOT, SPARK_CONNECT_LOG_LEVEL="debug")
    done = subprocess.run([sys.executable, os.path.join(HERE, "secrets_client.py"), connect_server.url, uri, str(log)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    client_log = log.read_text(errors="replace")
    server_log = "".join(open(p, errors="replace").read() for p in glob.glob(os.path.join(connect_server.workdir, "*.out")))
    assert "Executing plan" in done.stderr  # the Connect client's DEBUG log: every plan it sent
    assert "lance_ops-credentials-" in done.stderr  # the handle is what the plans carry
    assert _leaks(client_log + server_log + done.stdout + done.stderr, SECRET_KEY) == []
    got = json.loads(done.stdout.strip().splitlines()[-1])
    expected = sorted(lance.dataset(uri, storage_options=opts).to_table().to_pylist(), key=lambda r: r["id"])
    assert got == expected and len(got) == 23
