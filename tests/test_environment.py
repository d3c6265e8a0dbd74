"""The environment lance_ops runs in: no package overwrote pyspark's files.

The Apache Spark provider 6.x for Airflow depends on ``pyspark-client``,
whose wheel writes its own (older) ``pyspark/`` package over pyspark's files
while ``pip check`` stays clean; local sessions then break or mix versions.
"""
from __future__ import annotations

import importlib.metadata


def test_pyspark_package_is_the_installed_distribution():
    import pyspark

    assert pyspark.__version__ == importlib.metadata.version("pyspark")


def test_no_pyspark_client_installed_beside_pyspark():
    try:
        importlib.metadata.version("pyspark-client")
    except importlib.metadata.PackageNotFoundError:
        return
    raise AssertionError("pyspark-client is installed next to pyspark: it overwrites pyspark's files")
