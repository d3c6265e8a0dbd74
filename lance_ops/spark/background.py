"""Run one Spark action on a second driver thread while the first plans on.

A selective operation is mostly fixed costs paid one after another: Spark
analyzing the operation's expressions (JVM round trips), then a small job,
then planning the next one. When the small job does not depend on that
analysis -- a merge's source statistics do not depend on its clauses -- both
can run at once: :func:`in_background` starts the job on a
``pyspark.InheritableThread``, which carries the caller's job group,
description and tags into the new thread on classic sessions and its tags on
Spark Connect, so the job is labelled, monitored and cancellable like the
operation's others.
"""
from __future__ import annotations

import threading
from typing import Callable, Generic, TypeVar

from . import jvm
from .progress import current_step_tag

T = TypeVar("T")


class Pending(Generic[T]):
    """A value being computed on another thread: :meth:`result` waits for it
    (and raises what the thread raised); :meth:`cancel` stops its Spark jobs
    when the caller no longer needs it."""

    def __init__(self, spark, fn: Callable[[], T]):
        from pyspark import InheritableThread

        self._spark = spark
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        #: the step's tag (every job of the step carries it): cancel() uses it
        self._tag = current_step_tag()

        def run():
            try:
                self._value = fn()
            except BaseException as e:  # handed to the waiting thread
                self._error = e
            finally:
                self._done.set()

        self._thread = InheritableThread(run, session=spark, name="lance_ops-background", daemon=True)
        self._thread.start()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def cancel(self) -> None:
        """Cancel the step's jobs -- call it only while the calling thread
        runs no job of its own -- until the thread ends (its outcome is
        dropped). Repeated: a job the thread submits after a cancellation
        is not cancelled by it."""
        while not self._done.wait(0.1 if self._tag is not None else None):
            try:
                jvm.cancel_tag(self._spark, self._tag)
            except Exception:  # best effort: the thread is awaited either way
                pass
        self._thread.join()


def in_background(spark, fn: Callable[[], T]) -> Pending[T]:
    """``fn()`` (which runs Spark jobs) on a thread of its own, labelled as the
    calling step's jobs are."""
    return Pending(spark, fn)
