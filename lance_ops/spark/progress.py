"""Job descriptions and progress lines for the Spark jobs lance_ops runs.

Every Spark job an operation starts runs inside :func:`spark_job`, which sets
a job group and description like ``lance_ops delete /data/t.lance @v12 (read
v11): scan`` (visible in the Spark UI and in ``statusTracker``) and logs one
progress line per finished stage -- plus a line every ``interval`` seconds for
long-running ones -- on the ``lance_ops.progress`` logger::

    [lance_ops] delete /data/t.lance v11 -> scan: stage 7 done, 40/40 tasks in 3.1s

The library only logs (the ``lance_ops`` logger has a ``NullHandler``): an
application shows the lines by configuring logging, e.g.
``logging.basicConfig(level="INFO")`` or :func:`lance_ops.log_to_stderr`,
and Airflow and notebooks capture them like any other log record.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid

log = logging.getLogger("lance_ops.progress")


@contextlib.contextmanager
def spark_job(spark, operation: str, uri: str, version: int | None, step: str = "", interval: float = 10.0):
    """Run the Spark jobs of one step of an operation under a job group whose
    description names the operation, table and version."""
    sc = spark.sparkContext
    group = f"lance_ops-{operation}-{uuid.uuid4().hex[:8]}"
    at = f" v{version}" if version is not None else ""
    desc = f"lance_ops {operation} {uri}{at}" + (f": {step}" if step else "")
    prev_group = sc.getLocalProperty("spark.jobGroup.id")
    prev_desc = sc.getLocalProperty("spark.job.description")
    prev_interrupt = sc.getLocalProperty("spark.job.interruptOnCancel")
    sc.setJobGroup(group, desc, interruptOnCancel=False)
    stop = threading.Event()
    label = f"{operation} {uri}{at}" + (f" -> {step}" if step else "")
    monitor = threading.Thread(
        target=_monitor, args=(sc, group, label, stop, interval), name="lance_ops-progress", daemon=True
    )
    monitor.start()
    started = time.monotonic()
    try:
        yield desc
    finally:
        stop.set()
        monitor.join(timeout=5)
        sc.setLocalProperty("spark.jobGroup.id", prev_group)
        sc.setLocalProperty("spark.job.description", prev_desc)
        sc.setLocalProperty("spark.job.interruptOnCancel", prev_interrupt)
        log.debug("%s finished in %.1fs", label, time.monotonic() - started)


def _monitor(sc, group: str, label: str, stop: threading.Event, interval: float) -> None:
    """Poll the status tracker; log each stage once when it completes, and a
    line for stages that run longer than ``interval``."""
    tracker = sc.statusTracker()
    reported: set[int] = set()
    first_seen: dict[int, float] = {}
    last_line: dict[int, float] = {}
    try:
        while True:
            final = stop.wait(0.25)
            now = time.monotonic()
            try:
                job_ids = tracker.getJobIdsForGroup(group)
            except Exception:
                return
            for job_id in job_ids:
                job = tracker.getJobInfo(job_id)
                if job is None:
                    continue
                for stage_id in job.stageIds:
                    if stage_id in reported:
                        continue
                    info = tracker.getStageInfo(stage_id)
                    if info is None:
                        continue
                    first_seen.setdefault(stage_id, now)
                    done = info.numCompletedTasks
                    if info.numTasks and done >= info.numTasks:
                        reported.add(stage_id)
                        log.info(
                            "%s: stage %d done, %d/%d tasks in %.1fs",
                            label, stage_id, done, info.numTasks, now - first_seen[stage_id],
                        )
                    elif (done or info.numActiveTasks) and now - last_line.get(stage_id, first_seen[stage_id]) >= interval:
                        # (stages Spark skips or has not started yet stay silent)
                        last_line[stage_id] = now
                        log.info(
                            "%s: stage %d running, %d/%d tasks done (%d active)",
                            label, stage_id, done, info.numTasks, info.numActiveTasks,
                        )
            if final:
                return
    except Exception:  # the monitor must never break the operation
        return
