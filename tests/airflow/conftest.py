"""Airflow for the DAG tests: AIRFLOW_HOME in a temp dir, its SQLite metadata
DB created once per session, OpenLineage events written to a file (the
provider's listener, as a lineage backend would receive them), and the DAG
modules imported from ``airflow_dags/`` with the test's configuration
files."""
from __future__ import annotations

import importlib
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DAGS = os.path.join(ROOT, "airflow_dags")
#: DAGs of the tests themselves (operator edge cases), a second DAG bundle.
TEST_DAGS = os.path.join(ROOT, "tests", "airflow", "dags")
LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow_home")
    os.environ["AIRFLOW_HOME"] = str(home)
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = DAGS
    os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
    os.environ["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps([
        {"name": "dags-folder", "classpath": LOCAL_BUNDLE, "kwargs": {"path": DAGS}},
        {"name": "lance-ops-tests", "classpath": LOCAL_BUNDLE, "kwargs": {"path": TEST_DAGS}},
    ])
    os.environ["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "lance_ops_tests"
    os.environ["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
        {"type": "file", "log_file_path": str(home / "openlineage.jsonl"), "append": True})
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    from airflow.utils import db

    db.initdb()
    for d in (DAGS, TEST_DAGS):
        if d not in sys.path:
            sys.path.insert(0, d)
    return home


def lineage_events(home) -> list[dict]:
    path = os.path.join(str(home), "openlineage.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_dag(module: str, env: dict):
    """(Re)import a DAG module with ``env`` set; returns its ``dag``."""
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    mod = importlib.import_module(module)
    mod = importlib.reload(mod)
    return mod.dag
