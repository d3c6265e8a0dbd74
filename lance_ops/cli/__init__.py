"""Command-line front ends. They call only the public API.

The one command is ``lance-ops COMMAND --table URI`` (``python -m
lance_ops.cli`` or ``python -m lance_ops.jobs``): see :mod:`lance_ops.jobs`.
The Spark-free commands (history, detail, tags, properties, restore, vacuum,
health) start no JVM -- for shells, cron and Airflow workers without Java.
"""
