"""The one place lance_ops reaches into the JVM of a classic Spark session.

A Spark Connect session (``SparkSession.builder.remote(...)``, or the
``pyspark-client`` package with no JVM at all) has no ``sparkContext``, no
RDDs and no ``_jdf`` / ``_jvm``. Every use of those lives here, behind
:func:`is_connect`, and each function has an answer for a Connect session
too (or returns ``None`` so the caller takes its general path).
``tests/spark/test_jvm_boundary.py`` fails if any other module of the package
mentions them.

What differs under Connect (all of it reported, none of it silent):

* log level: left to the server (``setLogLevel`` is a driver call);
* task slots: from the ``spark.master`` / executor confs the server reports;
* plan inspection: from ``EXPLAIN`` text (:mod:`lance_ops.spark.plans`)
  instead of the analyzed / executed plan objects;
* progress: Connect's progress handlers instead of the status tracker; job
  labels through tags (``spark.addTag``) instead of a job group.
"""
from __future__ import annotations

import contextlib
import os


def is_connect(spark) -> bool:
    """True for a Spark Connect session (the in-process remote one of
    pyspark, or ``pyspark-client``'s): decided by the session's class, so it
    holds whatever ``SPARK_CONNECT_MODE_ENABLED`` says."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_of(df):
    return df.sparkSession


def set_log_level(spark, level: str) -> bool:
    """``setLogLevel`` on a classic session; a Connect server keeps its own
    (False: not changed)."""
    if is_connect(spark):
        return False
    spark.sparkContext.setLogLevel(level)
    return True


def _conf(spark, key: str):
    try:
        return spark.conf.get(key, None)
    except Exception:
        return None


def total_cores(spark) -> int:
    """Task slots of the cluster: N of a ``local[N]`` master, otherwise
    executors x cores (falling back to the default parallelism). Classic
    sessions read the SparkContext; Connect sessions the confs the server
    reports (same values: the session conf holds the Spark conf)."""
    if is_connect(spark):
        master = _conf(spark, "spark.master") or ""
        get = lambda k, d=None: _conf(spark, k) or d  # noqa: E731
        default_parallelism = get("spark.default.parallelism") or get("spark.sql.shuffle.partitions", "2")
    else:
        sc = spark.sparkContext
        master = sc.master or ""
        conf = sc.getConf()
        get = conf.get
        default_parallelism = sc.defaultParallelism
    if master.startswith("local"):
        inner = master[len("local"):].strip("[]").split(",")[0]
        if inner in ("", "*"):
            return os.cpu_count() or 1
        try:
            return max(1, int(inner))
        except ValueError:
            pass
    try:
        return int(get("spark.executor.instances")) * int(get("spark.executor.cores", "1"))
    except (TypeError, ValueError):
        try:
            return max(1, int(default_parallelism))
        except (TypeError, ValueError):
            return 2


def column_text(col) -> str:
    """The text of a Column's expression (``(x > 5)``): the JVM's rendering
    on a classic session, the client's expression tree under Connect."""
    jc = getattr(col, "_jc", None)
    if jc is not None:
        try:
            return jc.toString()
        except Exception:
            pass
    text = str(col)
    if text.startswith("Column<'") and text.endswith("'>"):
        return text[len("Column<'"):-2]
    return text


def analyzed_references(projected) -> list[tuple[int, str]] | None:
    """(exprId, name) of the attributes the analyzed plan of ``projected`` (a
    ``select``) references; None where there is no JVM plan (Connect)."""
    jdf = getattr(projected, "_jdf", None)
    if jdf is None:
        return None
    it = jdf.queryExecution().analyzed().references().toSeq().iterator()
    out = []
    while it.hasNext():
        a = it.next()
        out.append((a.exprId().id(), a.name()))
    return out


def analyzed_output(frame) -> dict[int, str] | None:
    """exprId -> name of a frame's output attributes (None: no JVM plan)."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:
        return None
    it = jdf.queryExecution().analyzed().output().iterator()
    out = {}
    while it.hasNext():
        a = it.next()
        out[a.exprId().id()] = a.name()
    return out


def analyzed_json(df) -> str | None:
    """Catalyst's analyzed projection of ``df`` (a ``select`` of the
    expressions to evaluate) as one JSON document for
    :mod:`lance_ops.arrow_eval.catalyst`: ``exprs`` (each projected
    expression as ``toJSON``'s flattened pre-order node list), ``modes`` (per
    node, pre-order, its class and ``evalMode`` -- ANSI / LEGACY / TRY --
    which the JSON serializes as null; for LIKE / ILIKE its escape character;
    for arithmetic a third element, Spark's result type), ``timeZone`` (the session zone the
    timestamp literals print in) and ``ansi``. A ``where(condition)`` over a
    relation (a Filter) gives the condition as the one expression. None under
    Spark Connect (no analyzed plan object: the caller evaluates with Spark)
    or when the plan is neither a Project nor a Filter."""
    import json

    jdf = getattr(df, "_jdf", None)
    if jdf is None or is_connect(df.sparkSession):
        return None
    plan = jdf.queryExecution().analyzed()
    nodes = json.loads(plan.toJSON())
    top = nodes[0].get("class", "") if nodes else ""
    if top.endswith(".Project"):
        exprs = nodes[0]["projectList"]
        jlist = plan.projectList()
        jexprs = [jlist.apply(k) for k in range(jlist.size())]
    elif top.endswith(".Filter"):  # (``where(condition)``: the condition alone)
        exprs = [nodes[0]["condition"]]
        jexprs = [plan.condition()]
    else:
        return None
    modes = []

    # The JSON already names every node, in the pre-order the walk follows:
    # the JVM is asked only what the JSON leaves out -- the evaluation mode
    # (and, as an order check, the class) of the nodes that have one -- and
    # for the children of nodes that have any. (Each question is a py4j
    # round trip; this walk runs once per Arrow-evaluated operation.)
    def walk(x, flat, out):
        if len(out) >= len(flat):  # (the JVM tree has more nodes than the JSON:
            out.append(("?", None))  # the decoder sees the lengths differ)
            return
        node = flat[len(out)]
        name = node.get("class", "").rsplit(".", 1)[-1]
        mode = None
        if name in _MODED:
            name = x.getClass().getSimpleName()
            try:
                mode = x.evalMode().toString()
            except Exception:
                mode = "UNKNOWN"
        elif name in ("Like", "ILike"):  # (the JSON drops the escape character too)
            mode = str(x.escapeChar())
        if name in _TYPED:  # (and the result type of arithmetic)
            out.append((name, mode, x.dataType().simpleString()))
        else:
            out.append((name, mode))
        if int(node.get("num-children", 0)):
            kids = x.children()
            for k in range(kids.size()):
                walk(kids.apply(k), flat, out)

    for k, jexpr in enumerate(jexprs):
        out: list = []
        walk(jexpr, exprs[k], out)
        modes.append(out)
    conf = df.sparkSession.conf
    return json.dumps({
        "exprs": exprs,
        "modes": modes,
        "timeZone": conf.get("spark.sql.session.timeZone", None),
        "ansi": str(conf.get("spark.sql.ansi.enabled", "false")).lower() == "true",
        "allowPrecisionLoss": str(conf.get("spark.sql.decimalOperations.allowPrecisionLoss", "true")).lower() == "true",
    })


#: Expression classes whose evaluation mode the JSON leaves out.
_MODED = {"Cast", "Add", "Subtract", "Multiply", "Divide", "IntegralDivide", "Remainder", "Pmod", "Abs"}
#: Expression classes whose result type the JSON leaves out (a third element).
_TYPED = {"Add", "Subtract", "Multiply", "Divide", "IntegralDivide", "Remainder", "UnaryMinus"}


def executed_plan(df) -> str | None:
    """The executed (physical) plan's text; None where there is no JVM plan."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    return jdf.queryExecution().executedPlan().toString()


# ------------------------------------------------------------------ jobs


@contextlib.contextmanager
def job_group(spark, group: str, desc: str, tags=()):
    """Classic sessions: a job group with this description for the block
    (restoring the previous one after), and ``tags`` as SparkContext job tags
    -- a classic session's own tags (``spark.addTag``) are private to the
    thread that added them, so ``spark.interruptTag`` from another thread
    finds nothing; the SparkContext's tags are what :func:`cancel_tag`
    cancels from any thread. Connect sessions have no job groups: the caller
    tags the operation instead (a no-op here)."""
    if is_connect(spark):
        yield
        return
    sc = spark.sparkContext
    prev = [sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")]
    sc.setJobGroup(group, desc, interruptOnCancel=False)
    present = _tag_set(sc._jsc.getJobTags())
    added = [t for t in tags if t not in present]
    for t in added:
        sc.addJobTag(t)
    try:
        yield
    finally:
        for t in added:
            with contextlib.suppress(Exception):
                sc.removeJobTag(t)
        for k, v in zip(("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"), prev):
            sc.setLocalProperty(k, v)


def _tag_set(jset) -> set[str]:
    """A Java set of job tags in one py4j round trip: iterating the proxy
    costs two per element (a classic session's thread carries a dozen tags:
    ~25 round trips per operation). Its ``toString`` is ``[a, b]`` and Spark
    forbids commas in tags."""
    inner = str(jset.toString())[1:-1]
    return set(inner.split(", ")) if inner else set()


def session_confs(spark) -> dict[str, str]:
    """Every conf the session holds. Classic sessions: one JSON document
    from the JVM (pyspark's ``conf.getAll`` turns the Java map into a dict
    one py4j round trip per key and value: ~130 of them); Connect sessions
    and any failure: ``conf.getAll``."""
    import json

    if not is_connect(spark):
        try:
            jconf = spark._jsparkSession.conf()
            mapper = spark.sparkContext._jvm.com.fasterxml.jackson.databind.ObjectMapper()
            return {str(k): str(v) for k, v in json.loads(mapper.writeValueAsString(jconf.getAllAsJava())).items()}
        except Exception:
            pass
    return dict(spark.conf.getAll)


def cancel_tag(spark, tag: str) -> None:
    """Cancel the running jobs carrying ``tag``, from any thread: the
    SparkContext's ``cancelJobsWithTag`` on a classic session (see
    :func:`job_group`), ``interruptTag`` under Connect (the server matches
    the tag on every operation of the session, whichever thread started it)."""
    if is_connect(spark):
        spark.interruptTag(tag)
    else:
        spark.sparkContext.cancelJobsWithTag(tag)


def status_tracker(spark):
    """The SparkContext's status tracker (None under Connect)."""
    if is_connect(spark):
        return None
    return spark.sparkContext.statusTracker()


def java_runtime(spark) -> str | None:
    """The version and VM name of the JVM the driver runs on (not whatever
    ``java`` is on PATH); None under Connect (the server's JVM is not
    reachable from the client)."""
    if is_connect(spark):
        return None
    system = spark.sparkContext._jvm.java.lang.System
    return f"{system.getProperty('java.runtime.version')} ({system.getProperty('java.vm.name')})"


def driver_pid(spark) -> int | None:
    """PID of the driver JVM (in local mode the executors too); None under
    Connect."""
    if is_connect(spark):
        return None
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def add_py_file(spark, path: str) -> None:
    """``addPyFile`` on a classic session's SparkContext (Connect sessions
    use ``spark.addArtifacts(path, pyfile=True)``)."""
    spark.sparkContext.addPyFile(path)


def master(spark) -> str:
    if is_connect(spark):
        return _conf(spark, "spark.master") or "connect"
    return spark.sparkContext.master


#: Seconds a Connect client waits for the server to drop a checkpoint.
RELEASE_TIMEOUT = 10.0


def release_checkpoint(df) -> None:
    """Free what ``df.localCheckpoint()`` holds, now. Classic sessions:
    ``unpersist`` (the checkpoint's blocks). Connect sessions: the server
    keeps the checkpointed relation until the client's plan object
    (``CachedRemoteRelation``) is finalized, and pyspark's finalizer makes a
    blocking gRPC call with no deadline -- run by the garbage collector at
    whatever allocation triggers it, and seen here to block the client for
    good (once from a collection inside another call, once called directly:
    no request reached the server). See SPARK-58846 (a deadline, upstream)
    and lakehq/sail#1704. So the finalizer is disarmed and the release is
    made here, with a deadline; a release that fails or times out is logged
    and left to the server (it drops a session's cached relations when the
    session ends). ``df`` and DataFrames derived from it must not run
    afterwards."""
    if not is_connect(df.sparkSession):
        with contextlib.suppress(Exception):
            df.unpersist()
        return
    plan = getattr(df, "_plan", None)
    rid = getattr(plan, "_relation_id", None)
    if type(plan).__name__ != "CachedRemoteRelation" or rid is None:
        return
    plan._relation_id = None  # (the finalizer: nothing left to do)
    try:
        _remove_cached_relation(df.sparkSession, plan, rid)
    except Exception as e:  # best effort, as pyspark's own finalizer
        import logging

        logging.getLogger("lance_ops").warning("could not release checkpoint %s: %s", rid, e)


def _remove_cached_relation(spark, plan, rid: str) -> None:
    """pyspark's ``CachedRemoteRelation.__del__`` request, with a deadline."""
    from pyspark.sql.connect.plan import RemoveRemoteCachedRelation
    from pyspark.sql.connect.proto import base_pb2

    client = spark.client
    plan._relation_id = rid
    try:
        command = RemoveRemoteCachedRelation(plan).command(session=client)
    finally:
        plan._relation_id = None
    req = client._execute_plan_request_with_metadata()
    if client._user_id:
        req.user_context.user_id = client._user_id
    req.plan.command.CopyFrom(command)
    call = client._channel.unary_unary(
        "/spark.connect.SparkConnectService/ExecutePlan",
        request_serializer=base_pb2.ExecutePlanRequest.SerializeToString,
        response_deserializer=base_pb2.ExecutePlanResponse.FromString,
    )
    call(req, metadata=client._builder.metadata(), timeout=RELEASE_TIMEOUT)
