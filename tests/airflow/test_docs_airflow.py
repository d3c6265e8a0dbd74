"""docs/operations/airflow.md's code blocks, with the Airflow home of the
DAG tests (its metadata DB, configuration and DAG folders)."""
from __future__ import annotations

from tests.docs.pages import ROOT, fenced_blocks, run_page

PAGE = ROOT / "docs/operations/airflow.md"


def test_airflow_page_runs(spark, airflow_home, tmp_path):
    ran = run_page(PAGE, spark, tmp_path)
    assert ran == sum(1 for b in fenced_blocks(PAGE) if b[2] is None) >= 1
