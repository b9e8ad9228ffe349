"""A local SparkSession whose executors can import amqplink, and the check that they can.

Spark's Python workers do not use the driver's virtual environment unless
``PYSPARK_PYTHON`` names its interpreter (or it is first on ``PATH``): without it, every
task fails with ``ModuleNotFoundError`` deep in a Java stack trace. :func:`local_session`
sets ``PYSPARK_PYTHON`` to the driver's interpreter when it is unset, and
:func:`check_executors` runs one tiny task that imports :mod:`amqplink.spark`, turning
that failure into one :class:`ExecutorImportError` that says what to do.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from amqplink import AMQPLinkError

__all__ = ["ExecutorImportError", "JavaStartError", "activate", "check_executors", "local_session"]


class ExecutorImportError(AMQPLinkError, RuntimeError):
    """Spark's Python workers cannot import amqplink."""


class JavaStartError(AMQPLinkError, RuntimeError):
    """Spark's JVM did not start (no ``java``, or one too old): PySpark says only
    ``[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number``."""


def activate(spark: Any) -> None:
    """Make ``spark`` the JVM's active session in the calling thread.

    Spark looks a Python data source up in the *thread's* active session, which a thread
    other than the one that made the session does not have, so ``df.write.format("servicebus")``
    from a worker thread fails with ``DATA_SOURCE_NOT_FOUND``
    (docs/spark.md#measured-facts-pyspark-43-java-17-this-machine). Call this first in such a thread.
    """
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def _probe(arrow: bool) -> Callable[[Any], str]:
    def probe(_: Any) -> str:
        """The modules this Python worker cannot import, comma-separated ('' when it has them all)."""
        missing = []
        for name in ("amqplink.spark.writer", *(("pyarrow", "pandas") if arrow else ())):
            try:
                importlib.import_module(name)
            except ImportError as exc:
                missing.append(f"{name} ({type(exc).__name__}: {exc})")
        return "; ".join(missing)

    return probe


SHIP = (
    "ship amqplink with `amqplink spark-package` and spark-submit --py-files amqplink-<version>-spark.zip "
    "(or spark.submit.pyFiles), and pyarrow and pandas<3 with --archives a packed virtual environment "
    "(docs/spark.md#shipping)"
)
"""What to do when a cluster's executors lack amqplink or pyarrow."""


def check_executors(spark: Any, *, arrow: bool = True) -> None:
    """Run a task per core that imports ``amqplink.spark`` (the Python workers start and
    import it now, and pyarrow and pandas with ``arrow``, for the data source); raise
    :class:`ExecutorImportError` naming what they lack and how to give it to them: on a local
    master the interpreter to use, on a cluster what to ship."""
    context = spark.sparkContext
    python = os.environ.get("PYSPARK_PYTHON") or context.pythonExec
    tasks = max(1, int(context.defaultParallelism))
    try:
        missing = sorted({m for m in context.parallelize(range(tasks), tasks).map(_probe(arrow)).collect() if m})
    except Exception as exc:  # the worker could not even start the probe (its Python lacks pyspark...)
        text = str(exc)
        if "ModuleNotFoundError" not in text and "ImportError" not in text:
            raise
        missing = ["amqplink (the Python worker failed to start the check: ModuleNotFoundError)"]
    if not missing:
        return
    what = "; ".join(missing)
    if str(context.master).startswith("local"):
        raise ExecutorImportError(
            f"Spark's Python workers ({python}) cannot import {what}: set PYSPARK_PYTHON to the interpreter that "
            f"has amqplink installed (this one is {sys.executable}), install it there with pip install "
            f"'amqplink[spark]', or {SHIP}"
        )
    raise ExecutorImportError(f"the executors' Python ({python}) cannot import {what}: {SHIP}")


def _launch_jvm_apart(settings: Mapping[str, str], log: str | None = None) -> None:
    """Start Spark's JVM in a session of its own, unless this process has one already.

    Ctrl-C on a terminal signals its whole foreground process group. PySpark starts the
    JVM ignoring SIGINT, but its daemon gives each Python worker the default SIGINT
    handler back, so the workers of the running tasks died mid-write and Spark printed
    their stack traces (about 190 lines for one Ctrl-C of ``amqplink demo``). Apart, only
    this process is interrupted and cancels Spark's jobs itself; the JVM still ends
    with it (it exits when its standard input, a pipe from this process, closes).

    ``log``: a file that takes the JVM's standard output and error, and so its Python
    workers' (Spark's own lines, the workers' log lines), instead of this process's
    terminal, where they would break into a progress line.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if os.name != "posix" or SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    popen: dict[str, Any] = {"start_new_session": True}
    with contextlib.ExitStack() as files:
        if log is not None:
            popen["stdout"] = popen["stderr"] = files.enter_context(open(log, "ab"))  # the JVM keeps its own copy
        try:
            gateway = launch_gateway(conf, popen_kwargs=popen)  # type: ignore[no-untyped-call]  # py4j has no annotations
        except RuntimeError as exc:
            if "JAVA_GATEWAY_EXITED" not in str(exc):
                raise
            where = f"JAVA_HOME={os.environ['JAVA_HOME']}" if os.environ.get("JAVA_HOME") else "java on PATH"
            said = "Spark's own lines above" if log is None else f"Spark's own lines in {log}"
            raise JavaStartError(
                f"Spark's JVM did not start ({where}; {said} say why): Spark needs Java 17 or "
                "later, as java on PATH or in JAVA_HOME (Debian: apt-get install -y default-jre-headless)"
            ) from None
    SparkContext._ensure_initialized(gateway=gateway)


def local_session(
    master: str = "local[2]",
    *,
    app_name: str = "amqplink",
    arrow: bool = True,
    conf: Mapping[str, str] | None = None,
    log: str | None = None,
) -> tuple[Any, float]:
    """``(SparkSession, seconds its start-up took)`` on ``master``, UI off, warnings only.

    Sets ``PYSPARK_PYTHON`` to this interpreter when unset, starts the JVM apart from the
    terminal's Ctrl-C (:func:`_launch_jvm_apart`; ``log``: the file its output goes to),
    then :func:`check_executors` (its Python workers' start counts in the start-up).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from amqplink.spark.datasource import register

    started = time.monotonic()
    settings = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # the caller shows its own progress
        **(conf or {}),
    }
    _launch_jvm_apart(settings, log)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        check_executors(spark, arrow=arrow)
        register(spark)
    except BaseException:
        spark.stop()
        raise
    return spark, time.monotonic() - started
