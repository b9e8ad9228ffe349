"""Spark finds the ``servicebus`` data source by itself (``pyspark_servicebus``), in a
session that never called ``amqplink.spark.register``."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.spark import activate
from tests.spark.conftest import drain, new_queue

pytestmark = pytest.mark.spark


def test_a_new_session_in_another_thread_writes_without_register(spark: Any, sb_broker: Broker) -> None:
    """``spark.newSession()`` has none of the data sources ``register`` added to ``spark``:
    only Spark's own lookup of ``pyspark_*`` modules gives it ``servicebus``."""
    queue = new_queue(sb_broker)
    failures: list[BaseException] = []

    def write() -> None:
        try:
            session = spark.newSession()
            activate(session)  # Spark looks a Python data source up in the thread's active session
            session.range(0, 50, numPartitions=2).selectExpr("cast(id as string) as body").write.format(
                "servicebus"
            ).option("connectionString", sb_broker.connection_string).option("entity", queue).mode("append").save()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(300)
    assert not thread.is_alive() and not failures, failures
    assert sorted(int(str(m)) for m in drain(sb_broker, queue)) == list(range(50))


def test_the_module_spark_imports_gives_the_servicebus_source() -> None:
    from pyspark.sql.datasource import DataSource

    import pyspark_servicebus

    assert issubclass(pyspark_servicebus.DefaultSource, DataSource)
    assert pyspark_servicebus.DefaultSource.name() == "servicebus"
