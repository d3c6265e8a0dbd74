"""The triggerer side of ``LanceTableVersionSensor(deferrable=True)``: the
same metadata-only check (:func:`lance_ops.airflow.status.table_status`),
run in a thread every ``poke_interval`` seconds by Airflow's triggerer, which
waits for many sensors in one process. At the sensor's deadline it reports
a timeout itself (the sensor then skips, with ``soft_fail``, or fails) --
not only when Airflow ends the deferral, which an in-process trigger run
(``dag.test()``) never does."""
from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class LanceTableVersionTrigger(BaseTrigger):
    def __init__(self, table: str, storage_options: dict | None = None, feature_column: str | None = None,
                 newer_than=None, changed_since=None, poke_interval: float = 60, deadline: float | None = None):
        super().__init__()
        self.table = table
        self.storage_options = storage_options
        self.feature_column = feature_column
        self.newer_than = newer_than
        self.changed_since = changed_since
        self.poke_interval = float(poke_interval)
        #: Epoch seconds after which the trigger reports a timeout.
        self.deadline = deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("lance_ops.airflow.triggers.LanceTableVersionTrigger", {
            "table": self.table, "storage_options": self.storage_options, "feature_column": self.feature_column,
            "newer_than": self.newer_than, "changed_since": self.changed_since, "poke_interval": self.poke_interval,
            "deadline": self.deadline,
        })

    async def run(self):
        from .status import table_status

        while True:
            status = await asyncio.to_thread(table_status, self.table, self.storage_options, self.feature_column,
                                             self.newer_than, self.changed_since)
            if status["new"]:
                yield TriggerEvent({"status": "done", "tableStatus": status})
                return
            if self.deadline is not None and time.time() + self.poke_interval > self.deadline:
                yield TriggerEvent({"status": "timeout", "tableStatus": status})
                return
            await asyncio.sleep(self.poke_interval)
