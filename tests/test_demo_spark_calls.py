"""``amqplink demo`` interrupted (Ctrl-C cancels its task) while a Spark call runs: the call
is not left running behind its back (fast tier: a stand-in for the SparkSession, no Spark).

The real run (a terminal's Ctrl-C midway through the demo's write) is
tests/spark/test_demo_interrupt.py.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import pytest

from amqplink.commands.demo import _Spark


class _Context:
    """What the demo calls on ``spark.sparkContext``: a job runs until ``cancelAllJobs``."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.cancelled = threading.Event()

    def setLogLevel(self, level: str) -> None:  # PySpark's name
        self.log.append(f"level {level}")

    def cancelAllJobs(self) -> None:  # PySpark's name
        self.log.append("cancel jobs")
        self.cancelled.set()


class _Session:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.sparkContext = _Context(log)
        self.started = threading.Event()

    def job(self) -> None:
        """A blocking write: fails as Spark's does once its job is cancelled."""
        self.log.append("job started")
        self.started.set()
        if not self.sparkContext.cancelled.wait(30):
            raise AssertionError("the job was never cancelled")
        self.log.append("job ended")
        raise RuntimeError("Job 3 cancelled as part of cancellation of all jobs")

    def stop(self) -> None:
        self.log.append("stopped")


async def _interrupt(spark: _Spark) -> None:
    """Cancel a task awaiting ``spark.session.job`` once the job runs, as Ctrl-C cancels the demo's."""
    waiting = asyncio.create_task(spark.call(spark.session.job))
    await asyncio.to_thread(spark.session.started.wait, 30)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


def test_stop_after_an_interruption_cancels_the_job_waits_for_it_then_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    spark = _Spark()
    spark.session = _Session(log)

    async def main() -> None:
        await _interrupt(spark)
        assert "stopped" not in log  # the interruption alone stops nothing
        await spark.stop()
        await spark.stop()  # again: nothing (the demo's finally calls it after the write's own)

    asyncio.run(main())
    gc.collect()  # a future whose exception no one retrieved is reported when collected
    assert log == ["job started", "level OFF", "cancel jobs", "job ended", "stopped"]
    assert spark.session is None
    assert "never retrieved" not in caplog.text


def test_stop_when_nothing_runs_only_stops_the_session() -> None:
    log: list[str] = []
    spark = _Spark()
    spark.session = _Session(log)

    async def main() -> Any:
        result = await spark.call(lambda: 42)
        await spark.stop()
        return result

    assert asyncio.run(main()) == 42
    assert log == ["stopped"]


def test_an_interrupted_start_is_waited_for_and_its_session_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the session starts (5-40 s): it is stopped once started, not left to the JVM."""
    log: list[str] = []
    started, release = threading.Event(), threading.Event()

    def local_session(master: str, **settings: Any) -> tuple[_Session, float]:
        started.set()
        release.wait(30)
        log.append(f"started {master} {settings}")
        return _Session(log), 1.5

    monkeypatch.setattr("amqplink.spark.session.local_session", local_session)
    spark = _Spark()

    async def main() -> None:
        starting = asyncio.create_task(spark.start(app_name="t"))
        await asyncio.to_thread(started.wait, 30)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        release.set()
        await spark.stop()

    asyncio.run(main())
    assert log == ["started local[2] {'app_name': 't'}", "stopped"]
