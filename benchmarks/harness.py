"""What every suite works with: timing, results, byte and memory measurements.

A suite's ``run(ctx)`` gets a :class:`Context` and returns a :class:`Section`
of :class:`Result` rows, each comparing one lance_ops measurement with its
peer measured in the same process.
"""
from __future__ import annotations

import os
import resource
import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Callable

MiB = 1 << 20
#: Spark conf of the run's classic session -- and of the Connect server the
#: ``connect`` suite starts, so the two sides get the same driver.
SPARK_CONF = {"spark.driver.memory": "8g"}


@dataclass
class Timing:
    """Wall-clock seconds of the timed runs of one callable, and what its last
    run returned (so a suite can check that compared paths agree)."""

    runs: list[float] = field(default_factory=list)
    value: Any = None

    @property
    def best(self) -> float:
        return min(self.runs)

    def __str__(self) -> str:
        runs = ", ".join(f"{s:.2f}" for s in self.runs)
        return f"{self.best:.2f}" if len(self.runs) == 1 else f"{self.best:.2f} ({runs})"


def interleave(
    fns: dict[str, Callable[[], Any]],
    repeat: int,
    *,
    warmup: bool = False,
    setup: Callable[[str], Any] | None = None,
) -> dict[str, Timing]:
    """Time several callables round-robin, reversing the order every round, so
    that load drifting on a shared machine hits each of them alike.

    ``warmup`` first runs each callable once untimed (for reads: JIT, OS file
    cache, Python workers). ``setup(name)`` runs untimed before every run of
    ``fns[name]`` (for writes: remove the previous run's output)."""
    if warmup:
        for name, fn in fns.items():
            if setup:
                setup(name)
            fn()
    timings = {name: Timing() for name in fns}
    order = list(fns)
    for _ in range(repeat):
        for name in order:
            if setup:
                setup(name)
            start = time.perf_counter()
            value = fns[name]()
            timings[name].runs.append(time.perf_counter() - start)
            timings[name].value = value
        order.reverse()
    return timings


def interleave_with_bytes(
    fns: dict[str, Callable[[], Any]],
    paths: dict[str, str],
    repeat: int,
    setup: Callable[[str], Any],
) -> tuple[dict[str, Timing], dict[str, int]]:
    """:func:`interleave` over writes to tables: also returns how many bytes
    each callable's last run added under ``paths[name]``."""
    written: dict[str, int] = {}

    def measure(key: str):
        before = dir_bytes(paths[key])
        out = fns[key]()
        written[key] = dir_bytes(paths[key]) - before
        return out

    timings = interleave({k: (lambda k=k: measure(k)) for k in fns}, repeat, setup=setup)
    return timings, written


def timeit(fn: Callable[[], Any], repeat: int, *, warmup: bool = False, setup: Callable[[], Any] | None = None) -> Timing:
    """Best and all of ``repeat`` timed runs of ``fn`` (see :func:`interleave`)."""
    return interleave({"fn": fn}, repeat, warmup=warmup, setup=setup and (lambda _: setup()))["fn"]


@dataclass
class Result:
    """One lance_ops measurement against its peer.

    ``kind="rate"``: ratio = peer seconds / our seconds, our throughput as a
    fraction of the peer's; the goal is a lower bound. ``kind="time"``: ratio =
    our seconds / peer seconds, how many times longer we take; the goal is an
    upper bound. A row without a peer only reports its timing."""

    name: str
    timing: Timing
    peer: str | None = None
    peer_timing: Timing | None = None
    kind: str = "rate"
    goal: float | None = None
    notes: str = ""
    #: Seconds allowed on top of ``goal`` (``kind="time"`` only): the goal is
    #: then ours ≤ peer × goal + slack (e.g. Connect ≤ classic × 1.1 + 0.3 s).
    slack: float = 0.0

    def __post_init__(self):
        if self.kind not in ("rate", "time"):
            raise ValueError(f"kind must be 'rate' or 'time', got {self.kind!r}")
        if self.slack and self.kind != "time":
            raise ValueError("slack applies to kind='time' goals only")

    @property
    def ratio(self) -> float | None:
        if self.peer_timing is None:
            return None
        ours, peer = self.timing.best, self.peer_timing.best
        return peer / ours if self.kind == "rate" else ours / peer

    @property
    def passed(self) -> bool | None:
        if self.goal is None or self.ratio is None:
            return None
        if self.kind == "rate":
            return self.ratio >= self.goal
        return self.timing.best <= self.peer_timing.best * self.goal + self.slack

    @property
    def ratio_text(self) -> str:
        return "" if self.ratio is None else f"{self.ratio:.2f}× {self.kind}"

    @property
    def goal_text(self) -> str:
        if self.goal is None:
            return ""
        text = f"{self.kind} {'≥' if self.kind == 'rate' else '≤'} {self.goal:g}×"
        return text + (f" + {self.slack:g} s" if self.slack else "")

    @property
    def status(self) -> str:
        return {True: "PASS", False: "FAIL", None: ""}[self.passed]

    def line(self) -> str:
        """One line for the console."""
        text = f"{self.name}: {self.timing} s"
        if self.peer_timing is not None:
            text += f" vs {self.peer} {self.peer_timing} s -> {self.ratio_text}"
        if self.goal is not None:
            text += f" (goal {self.goal_text}: {self.status})"
        return text + (f"; {self.notes}" if self.notes else "")


@dataclass
class Section:
    """A suite's part of the report: what it ran and what it measured."""

    title: str
    description: str
    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def add(self, result: Result) -> Result:
        """Record ``result`` and print it at once (a full run takes minutes)."""
        self.results.append(result)
        print(f"  {result.line()}", flush=True)
        return result

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)


def dir_bytes(path: str) -> int:
    """Sum of the sizes of the files under ``path`` (0 if it does not exist):
    compare before and after a write to get the bytes it wrote."""
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def fmt_bytes(n: int) -> str:
    return f"{n / MiB:,.1f} MiB"


def remove(path: str) -> None:
    """Delete a file or directory tree if present."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def jvm_peak_rss(spark) -> int | None:
    """Peak RSS (bytes) of the Spark JVM -- in local mode the driver and the
    executors -- from /proc (None where /proc is missing, or under Spark
    Connect, where the JVM is the server's)."""
    from lance_ops.spark import jvm

    pid = jvm.driver_pid(spark)
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def python_peak_rss() -> int:
    """Peak RSS (bytes) of this Python driver process: where pylance runs, and
    where lance_ops collects fragment metadata and commits."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class Context:
    """What a suite gets: the run's one Spark session and its settings."""

    spark: Any
    rows: int
    repeat: int
    data_dir: str

    @property
    def scratch_dir(self) -> str:
        """Outputs of timed writes; the runner deletes it at the end."""
        return os.path.join(self.data_dir, "scratch")

    def scratch(self, name: str) -> str:
        """A path under :attr:`scratch_dir`, removed if it exists."""
        path = os.path.join(self.scratch_dir, name)
        remove(path)
        os.makedirs(self.scratch_dir, exist_ok=True)
        return path

    def timeit(self, fn, *, warmup: bool = False, setup=None) -> Timing:
        return timeit(fn, self.repeat, warmup=warmup, setup=setup)

    def interleave(self, fns, *, warmup: bool = False, setup=None) -> dict[str, Timing]:
        return interleave(fns, self.repeat, warmup=warmup, setup=setup)

    def interleave_with_bytes(self, fns, paths, *, setup) -> tuple[dict[str, Timing], dict[str, int]]:
        return interleave_with_bytes(fns, paths, self.repeat, setup)

    def memory_note(self) -> str:
        """Peak RSS so far of the Python driver and the Spark JVM (high-water
        marks over the whole run up to now; Python workers not included)."""
        jvm = jvm_peak_rss(self.spark)
        jvm_text = "n/a" if jvm is None else fmt_bytes(jvm)
        return f"peak RSS so far: Python driver {fmt_bytes(python_peak_rss())}, Spark JVM {jvm_text}"


def empty_job(spark, tasks: int) -> None:
    """A Spark job of ``tasks`` Python tasks that do nothing: the fixed cost
    of scheduling a job like ours (issues 13/14 compare "net of one empty
    Spark job of the same task count")."""
    spark.range(0, tasks, 1, tasks).mapInArrow(lambda it: it, "id long").collect()


class StageCounter:
    """Counts the Spark jobs' stages and tasks an operation ran, from its
    progress lines (``lance_ops.progress``: "stage N done, k/k tasks"), so a
    suite can time an empty job of the same task count. Works alike on
    classic and Connect sessions. Use as a context manager around one run."""

    def __init__(self):
        import logging
        import re

        self.stages: dict[int, int] = {}
        self._re = re.compile(r"stage (\d+) done, \d+/(\d+) tasks")
        self._logger = logging.getLogger("lance_ops.progress")
        counter = self

        class _Handler(logging.Handler):
            def emit(self, record):
                m = counter._re.search(record.getMessage())
                if m:
                    counter.stages[int(m.group(1))] = int(m.group(2))

        self._handler = _Handler()

    def __enter__(self):
        self.stages.clear()
        self._level = self._logger.level
        if not self._logger.isEnabledFor(20):
            self._logger.setLevel(20)
        self._logger.addHandler(self._handler)
        return self

    def __exit__(self, *exc):
        self._logger.removeHandler(self._handler)
        self._logger.setLevel(self._level)

    @property
    def max_tasks(self) -> int:
        """Tasks of the operation's widest stage (1 if it ran none)."""
        return max(self.stages.values(), default=1)

    def describe(self) -> str:
        return f"{len(self.stages)} stage(s), {sum(self.stages.values())} task(s) in all, widest {self.max_tasks}"
