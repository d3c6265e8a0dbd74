"""lance_ops for Airflow 3 (``pip install lance_ops[airflow]``): operators, a
sensor and assets -- a provider in all but name.

    from lance_ops.airflow import LanceCompactionOperator, LanceTableVersionSensor, table_asset

* Operators (:mod:`.operators`): ``LanceCompactionOperator``,
  ``LanceVacuumOperator``, ``LanceAddColumnsOperator``,
  ``LanceBackfillOperator``, ``LanceValidateOperator``,
  ``LanceHealthOperator``. Each runs one jobs command on ``table`` in the
  task's process (``spark_conn_id=None``) or through spark-submit (a Spark
  connection id, which must exist); its XCom is the table's report.
* ``LanceTableVersionSensor`` (:mod:`.sensors`): metadata only, reschedule
  mode, ``soft_fail`` (idle = skipped); ``deferrable=True`` waits in the
  triggerer.
* Assets (:mod:`.assets`): writing operators declare
  ``outlets=[table_asset(table)]``; schedule a DAG on ``table_asset(uri)``
  to run it when the table changes.
* OpenLineage: every operator reports the table and its versions.
"""
from __future__ import annotations

# Loaded on first use: importing lance_ops.airflow (or its Airflow-free
# modules, such as .assets) must not import Airflow -- and so read its
# configuration -- before the caller has set AIRFLOW_HOME.
_LAZY = {
    "LanceOperator": "operators",
    "LanceCompactionOperator": "operators",
    "LanceVacuumOperator": "operators",
    "LanceAddColumnsOperator": "operators",
    "LanceBackfillOperator": "operators",
    "LanceValidateOperator": "operators",
    "LanceHealthOperator": "operators",
    "LanceTableVersionSensor": "sensors",
    "LanceTableVersionTrigger": "triggers",
    "table_asset": "assets",
    "asset_uri": "assets",
    "lineage_name": "assets",
    "interval_where": "windows",
    "run_type_of": "windows",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_LAZY)
