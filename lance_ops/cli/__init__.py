"""Command-line front ends. They call only the public API.

``python -m lance_ops.cli`` (or ``lance-ops``): look at and maintain a table
without Spark (history, detail, tags, properties, restore, vacuum) -- for
shells, cron and Airflow sensors on machines without Java.
"""
