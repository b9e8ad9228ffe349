"""Spark tier plumbing: one local SparkSession for the whole run (start-up costs 5-30 s),
one embedded Service Bus broker, fresh queue names per test, and a receiver that drains
a queue into a list of message ids."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import EntityProperties, QueueConfig
from amqplink.servicebus import ServiceBusClient, ServiceBusReceiveMode
from tests.conftest import broker_thread

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """``local[2,3]``: two threads, and a failed task is tried up to 3 times (as on a cluster)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if ROOT not in paths:  # executors import this checkout's amqplink
        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])
    from pyspark.sql import SparkSession

    from amqplink.spark import register

    session = (
        SparkSession.builder.master("local[2,3]")
        .appName("amqplink-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def sb_broker() -> Iterator[Broker]:
    """A Service Bus namespace for every Spark test (each uses queues of its own)."""
    with broker_thread(Broker(servicebus=True)) as broker:
        yield broker


def new_queue(broker: Broker, *, dedup: bool = False, partitioned: bool = False) -> str:
    """A new queue's name; ``dedup``: with duplicate detection (10 minutes)."""
    name = f"q-{uuid.uuid4().hex[:10]}"
    properties = EntityProperties(requires_duplicate_detection=dedup, enable_partitioning=partitioned)
    broker.faults.run(broker.namespace.add_queue, QueueConfig(name, properties))
    return name


def stored(conn_str: str, queue: str) -> int:
    """Messages in ``queue``, locked or not (a peek sees both)."""
    with ServiceBusClient.from_connection_string(conn_str) as client, client.get_queue_receiver(queue) as receiver:
        return len(receiver.peek_messages(max_message_count=5000, sequence_number=1))


def drain(broker: Broker, queue: str, *, idle: float = 2.0) -> list[Any]:
    """Every message in ``queue`` (receive-and-delete), until none came for ``idle`` seconds."""
    got: list[Any] = []
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        receiver = client.get_queue_receiver(
            queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=idle, prefetch_count=1000
        )
        with receiver:
            got.extend(receiver)
    return got
