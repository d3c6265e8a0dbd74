"""Servers for the object-store tests, started once per session on
127.0.0.1 and stopped by PID: moto (S3 + DynamoDB) and PostgreSQL. A server
that cannot start fails the tests that use it."""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from tests.servers import MotoServer, PostgresServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_names = itertools.count()


@pytest.fixture(scope="session")
def moto(tmp_path_factory):
    server = MotoServer(str(tmp_path_factory.mktemp("moto"))).start()
    server.create_bucket("lance-ops")
    server.create_bucket("nocond-lance-ops")
    server.create_ddb_table("lance_commits")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    server = PostgresServer(str(tmp_path_factory.mktemp("pg"))).start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgres", "dynamodb"])
def store_kind(request):
    return request.param


def store_location(kind: str, moto, postgres, tmp_path, name: str) -> tuple[str, dict]:
    """(table URI, storage options) of a fresh S3 table committed through
    ``kind``: "conditional" (If-None-Match), "sqlite", "postgres",
    "dynamodb" (an s3+ddb:// URI)."""
    uri = f"s3://lance-ops/{name}-{kind}-{next(_names)}.lance"
    if kind == "conditional":
        return uri, moto.options()
    if kind == "sqlite":
        return uri, moto.options(commit_store=f"sqlite:///{tmp_path}/commits.db")
    if kind == "postgres":
        return uri, moto.options(commit_store=postgres.uri)
    if kind == "dynamodb":
        return uri.replace("s3://", "s3+ddb://") + "?ddbTableName=lance_commits", moto.options()
    raise ValueError(kind)


def run_writers(uri: str, options: dict, specs: list[tuple[int, int, list[str]]], timeout: float = 240) -> dict:
    """Start one writer process per (writer id, commits, extra args) at once;
    wait for all. Returns writer id -> (return code, records)."""
    env = dict(os.environ, LANCE_OPS_TEST_STORAGE=json.dumps(options), PYTHONPATH=ROOT)
    procs = {
        w: subprocess.Popen([sys.executable, "-m", "tests.objectstores.writer", uri, str(w), str(n), *extra],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w, n, extra in specs
    }
    out = {}
    for w, p in procs.items():
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        out[w] = (p.returncode, [json.loads(line) for line in stdout.splitlines() if line.startswith("{")], stderr)
    return out


@pytest.fixture(scope="session")
def faulty(moto, tmp_path_factory):
    """The moto server behind the fault-injecting proxy (no faults until a
    test sets a policy; every test clears it)."""
    from tests.servers import FaultProxy

    proxy = FaultProxy(str(tmp_path_factory.mktemp("fault-proxy")), moto).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def faults(faulty):
    faulty.clear()
    yield faulty
    faulty.clear()
