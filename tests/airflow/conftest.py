"""Airflow for the DAG tests: AIRFLOW_HOME in a temp dir, its SQLite metadata
DB created once per session, and the DAG modules imported from
``airflow_dags/`` with the test's configuration files."""
from __future__ import annotations

import importlib
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DAGS = os.path.join(ROOT, "airflow_dags")


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow_home")
    os.environ["AIRFLOW_HOME"] = str(home)
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = DAGS
    os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    from airflow.utils import db

    db.initdb()
    if DAGS not in sys.path:
        sys.path.insert(0, DAGS)
    return home


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
