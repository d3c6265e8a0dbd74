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
import re
import threading
import time
import uuid

from . import jvm

log = logging.getLogger("lance_ops.progress")


#: Tag on every Spark job lance_ops starts: ``spark.interruptTag(TAG)`` cancels
#: all of this session's lance_ops jobs (classic and Connect alike).
TAG = "lance_ops"


def _tag_part(text: str) -> str:
    # Spark tags may not contain commas (nor be empty).
    return re.sub(r"[,\s]+", "_", text) or "_"


#: The tag of the innermost step running on this thread (see :func:`current_step_tag`).
_current = threading.local()


def current_step_tag() -> str | None:
    """The tag every Spark job of the innermost :func:`spark_job` step running
    on this thread carries (None outside one): cancelling it stops that
    step's jobs only."""
    return getattr(_current, "tag", None)


def operation_tag(operation: str) -> str:
    """The tag of every job of one kind of operation (``lance_ops-delete``)."""
    return f"{TAG}-{_tag_part(operation)}"


@contextlib.contextmanager
def spark_job(spark, operation: str, uri: str, version: int | None, step: str = "", interval: float = 10.0):
    """Run the Spark jobs of one step of an operation labelled with the
    operation, table and version: a job group and description on a classic
    session, and on both kinds of session the tags ``lance_ops``,
    ``lance_ops-<operation>`` and the step's own tag (yielded as ``.tag``),
    which ``spark.interruptTag`` cancels. Under Spark Connect the description
    is also the tag (Connect has no job groups) and progress comes from the
    client's progress handlers instead of the status tracker."""
    group = f"lance_ops-{operation}-{uuid.uuid4().hex[:8]}"
    at = f" v{version}" if version is not None else ""
    desc = f"lance_ops {operation} {uri}{at}" + (f": {step}" if step else "")
    label = f"{operation} {uri}{at}" + (f" -> {step}" if step else "")
    step_tag = _tag_part(f"{group} {uri}{at}" + (f" {step}" if step else ""))
    tags = [TAG, operation_tag(operation), step_tag]
    added = _add_tags(spark, tags)
    stop = threading.Event()
    started = time.monotonic()
    handler = None
    monitor = None
    try:
        with jvm.job_group(spark, group, desc, tags), _cancellation(operation, uri, version):
            tracker = jvm.status_tracker(spark)
            if tracker is not None:
                monitor = threading.Thread(
                    target=_monitor, args=(tracker, group, label, stop, interval), name="lance_ops-progress", daemon=True
                )
                monitor.start()
            else:
                handler = _connect_progress(spark, label, interval)
            outer = current_step_tag()
            _current.tag = step_tag
            try:
                yield JobLabel(desc, step_tag)
            finally:
                _current.tag = outer
                stop.set()
                if monitor is not None:
                    monitor.join(timeout=5)
                if handler is not None:
                    with contextlib.suppress(Exception):
                        spark.removeProgressHandler(handler)
    finally:
        for t in added:
            with contextlib.suppress(Exception):
                spark.removeTag(t)
        log.debug("%s finished in %.1fs", label, time.monotonic() - started)


def cancel(spark, operation: str | None = None) -> None:
    """Cancel the running Spark jobs of lance_ops operations on this session
    -- all of them, or one kind (``cancel(spark, "addColumns")``) -- from any
    thread. The operation then raises :class:`~lance_ops.errors.OperationCancelledError`
    and commits nothing (files it already wrote stay unreferenced until
    ``vacuum``). Under Spark Connect this is ``spark.interruptTag(tag)``; a
    classic session's ``interruptTag`` only sees tags its own thread added, so
    there the SparkContext's ``cancelJobsWithTag`` does it."""
    jvm.cancel_tag(spark, operation_tag(operation) if operation else TAG)


#: Words Spark uses for a job or operation stopped by a cancellation: the
#: error classes of classic sessions (SPARK_JOB_CANCELLED) and Connect
#: (OPERATION_CANCELED), and the older free text.
_CANCELLED = re.compile(r"SPARK_JOB_CANCELLED|OPERATION_CANCELED|JOB_CANCELLED|cancelled (?:job|part of)|"
                        r"Job \d+ cancelled", re.IGNORECASE)


@contextlib.contextmanager
def _cancellation(operation: str, uri: str, version: int | None):
    """Turn Spark's error for a cancelled job into OperationCancelledError
    (lance_ops' own errors pass through unchanged)."""
    from ..errors import LanceOpsError, OperationCancelledError

    try:
        yield
    except LanceOpsError:
        raise
    except Exception as e:
        if not _CANCELLED.search(f"{type(e).__name__}: {e}"):
            raise
        at = f" at v{version}" if version is not None else ""
        # (Spark's own error, whose class differs between session kinds, stays the __cause__)
        raise OperationCancelledError(f"{operation} of {uri}{at} was cancelled: its Spark job was cancelled; "
                                      "nothing was committed", operation=operation) from e


class JobLabel(str):
    """The job description (a str, as before), with the step's tag."""

    def __new__(cls, desc: str, tag: str):
        obj = super().__new__(cls, desc)
        obj.tag = tag
        return obj


def _add_tags(spark, tags) -> list[str]:
    try:
        present = set(spark.getTags())
    except Exception:
        present = set()
    added = []
    for t in tags:
        if t in present:
            continue  # (a nested step: the outer one removes it)
        try:
            spark.addTag(t)
            added.append(t)
        except Exception:  # labels must never break the operation
            pass
    return added


def _connect_progress(spark, label: str, interval: float):
    """A Connect progress handler logging each stage once when it completes
    (and a line every ``interval`` seconds for long ones), as the classic
    monitor does. None where the session has no progress handlers."""
    reported: set[int] = set()
    first_seen: dict[int, float] = {}
    last_line: dict[int, float] = {}

    def handler(stages, inflight_tasks, operation_id, done):
        try:
            now = time.monotonic()
            for st in stages or ():
                if st.stage_id in reported:
                    continue
                first_seen.setdefault(st.stage_id, now)
                if st.num_tasks and (st.done or st.num_completed_tasks >= st.num_tasks):
                    reported.add(st.stage_id)
                    log.info("%s: stage %d done, %d/%d tasks in %.1fs", label, st.stage_id,
                             st.num_completed_tasks, st.num_tasks, now - first_seen[st.stage_id])
                elif now - last_line.get(st.stage_id, first_seen[st.stage_id]) >= interval:
                    last_line[st.stage_id] = now
                    log.info("%s: stage %d running, %d/%d tasks done", label, st.stage_id,
                             st.num_completed_tasks, st.num_tasks)
        except Exception:
            pass

    try:
        spark.registerProgressHandler(handler)
    except Exception:
        return None
    return handler


def _monitor(tracker, group: str, label: str, stop: threading.Event, interval: float) -> None:
    """Poll the status tracker; log each stage once when it completes, and a
    line for stages that run longer than ``interval``."""
    reported: set[int] = set()
    first_seen: dict[int, float] = {}
    last_line: dict[int, float] = {}
    #: job id -> its stage ids (fixed when the job is submitted; each status
    #: tracker call is JVM round trips, and the last poll delays the operation)
    stages_of: dict[int, list[int]] = {}
    try:
        while True:
            final = stop.wait(0.5)
            now = time.monotonic()
            try:
                job_ids = tracker.getJobIdsForGroup(group)
            except Exception:
                return
            for job_id in job_ids:
                if job_id not in stages_of:
                    job = tracker.getJobInfo(job_id)
                    if job is None:
                        continue
                    stages_of[job_id] = list(job.stageIds)
                for stage_id in stages_of[job_id]:
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
