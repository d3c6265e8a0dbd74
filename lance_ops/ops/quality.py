"""Data-quality gates: a great_expectations suite run on the rows a write is
about to commit.

``expectations=`` (a GX Core 1.x ``ExpectationSuite``, a list of
expectations, or a suite as a JSON dict / file path) on append, merge, update,
addColumns and backfill adds a pre-commit check to the write
(:class:`lance_ops.txn.commit.Check`): after the change's files are written
and before its manifest is, the suite validates the staged rows -- only the
fragments the change writes, read through a staged manifest published under
``_staging/`` (:func:`lance_ops.spark.frames.staged_frame`) -- as a Spark
DataFrame. A failed suite raises :class:`~lance_ops.errors.DataQualityError`
carrying GX's result: nothing is committed and the pipeline removes the files.
A passing suite's summary goes into the commit's transaction properties
(``lance_ops.param.dataQuality``, JSON), so ``history()`` shows it under
``operationParameters``. Like every check it runs again after a rebase.

great_expectations is an optional dependency (the ``pipelines`` extra); it is
imported only when a suite is given.
"""
from __future__ import annotations

import json
import logging
import os
import threading

from ..errors import DataQualityError, InvalidArgumentError
from ..txn.pipeline import PARAM_PREFIX

log = logging.getLogger("lance_ops")
#: Transaction property holding a passing suite's summary.
SUMMARY_KEY = PARAM_PREFIX + "dataQuality"

_lock = threading.Lock()
_context = None


def _gx():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    try:
        import great_expectations as gx
    except ImportError as e:  # pragma: no cover - the extra is installed by make setup
        raise InvalidArgumentError(
            "expectations= needs great_expectations (pip install 'lance_ops[pipelines]')"
        ) from e
    return gx


def _ctx():
    """One ephemeral GX context per process (creating one costs a second)."""
    global _context
    with _lock:
        if _context is None:
            gx = _gx()
            _context = gx.get_context(mode="ephemeral")
            try:
                from great_expectations.data_context.types.base import ProgressBarsConfig

                _context.variables.progress_bars = ProgressBarsConfig(globally=False)
            except Exception:
                pass
        return _context


def as_suite(expectations):
    """An ``ExpectationSuite`` from a suite, a list of expectations, a suite
    dict (GX's JSON form) or the path of a JSON file holding one."""
    gx = _gx()
    _ctx()  # GX 1.x needs an active context to build suites
    if isinstance(expectations, gx.ExpectationSuite):
        return expectations
    if isinstance(expectations, str):
        with open(expectations) as f:
            expectations = json.load(f)
    if isinstance(expectations, dict):
        suite = gx.ExpectationSuite(name=expectations.get("name", "lance_ops"))
        for e in expectations.get("expectations", []):
            suite.add_expectation_configuration(_configuration(e))
        return suite
    if isinstance(expectations, (list, tuple)):
        suite = gx.ExpectationSuite(name="lance_ops")
        for e in expectations:
            if isinstance(e, dict):
                suite.add_expectation_configuration(_configuration(e))
            else:
                suite.add_expectation(e)
        return suite
    raise InvalidArgumentError(
        "expectations must be a great_expectations ExpectationSuite, a list of expectations, "
        "a suite dict or a JSON file path"
    )


def _configuration(e: dict):
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    kind = e.get("type") or e.get("expectation_type")
    if not kind:
        raise InvalidArgumentError(f"an expectation needs a 'type': {e}")
    return ExpectationConfiguration(type=kind, kwargs=dict(e.get("kwargs", {})), meta=e.get("meta"))


def validate_frame(df, expectations):
    """Run the suite on a Spark DataFrame; GX's validation result."""
    suite = as_suite(expectations)
    ctx = _ctx()
    with _lock:
        name = "lance_ops_staged"
        try:
            source = ctx.data_sources.get(name)
        except Exception:
            source = ctx.data_sources.add_spark(name=name)
        try:
            asset = source.get_asset("rows")
        except Exception:
            asset = source.add_dataframe_asset(name="rows")
        try:
            batch_def = asset.get_batch_definition("all")
        except Exception:
            batch_def = asset.add_batch_definition_whole_dataframe("all")
    batch = batch_def.get_batch(batch_parameters={"dataframe": df})
    return batch.validate(suite)


def summary(result) -> dict:
    """The small, JSON-able part of a validation result kept in history."""
    stats = dict(result.statistics or {})
    failed = [
        r.expectation_config.type + (f"({r.expectation_config.kwargs.get('column')})"
                                     if r.expectation_config.kwargs.get("column") else "")
        for r in result.results if not r.success
    ]
    return {
        "suite": getattr(result, "suite_name", None) or "",
        "success": bool(result.success),
        "evaluated": int(stats.get("evaluated_expectations", 0)),
        "successful": int(stats.get("successful_expectations", 0)),
        "unsuccessful": int(stats.get("unsuccessful_expectations", 0)),
        "failed": failed,
    }


def expectations_check(spark, expectations):
    """A pre-commit check running the suite on the staged rows of the change."""
    suite = as_suite(expectations)  # a bad suite fails before any work

    def check(ctx) -> None:
        from ..spark.frames import staged_frame

        if not ctx.new_fragment_ids():
            return  # the change writes no rows (e.g. a delete-only merge)
        result = validate_frame(staged_frame(spark, ctx), suite)
        s = summary(result)
        if not result.success:
            raise DataQualityError(
                f"data-quality gate failed: {s['unsuccessful']} of {s['evaluated']} expectation(s) of suite "
                f"{s['suite']!r} failed ({', '.join(s['failed'])}); nothing was committed",
                result=result,
            )
        log.info("data-quality gate passed: %d expectation(s) of suite %r", s["evaluated"], s["suite"])
        ctx.properties[SUMMARY_KEY] = json.dumps(s, sort_keys=True)

    return check
