"""The stream reader driven as Spark drives it, with crashes at every point of a micro-batch,
against a model of Spark's offset and commit logs (no JVM: the reader's methods are called
the way ``python_streaming_source_runner.py`` calls them, against the embedded broker).

Invariant: into an idempotent sink (a micro-batch's rows replace what an earlier attempt of
that batch wrote) every message arrives exactly once, a replayed batch has the rows its
first attempt had, and once the entity is drained nothing is left in it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.broker.config import EntityProperties, QueueConfig
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from amqplink.spark.source_options import parse_source_options
from amqplink.spark.stream_reader import RowsPartition, ServiceBusStreamReader, StagedPartition
from tests import profiles
from tests.conftest import broker_thread
from tests.spark.conftest import stored

pytestmark = pytest.mark.spark

CRASHES = ("none", "after-stage", "during-batch", "after-commit-log")
"""Where the driver dies in a micro-batch: not at all; after the reader staged the batch and
before Spark logged its offset; after Spark logged it, while the sink writes; after Spark
logged the commit, before the reader settled it."""


@pytest.fixture(scope="module")
def sb() -> Iterator[Broker]:
    with broker_thread(Broker(servicebus=True)) as broker:
        yield broker


class Spark:
    """Spark's side: the offset and commit logs (they survive a driver crash) and the sink."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.offsets: list[dict[str, Any]] = []  # batch id -> end offset
        self.committed = -1
        self.sink: dict[int, list[str]] = {}
        self.attempts: dict[int, list[list[str]]] = {}
        self.reader = self._start()

    def _start(self) -> ServiceBusStreamReader:
        reader = ServiceBusStreamReader(parse_source_options(self.options))
        self.initial = reader.initialOffset()
        return reader

    def crash(self) -> None:
        """The driver dies: its connection (and every lock the reader held) goes with it."""
        self.reader.stop()
        self.reader = self._start()
        if len(self.offsets) - 1 > self.committed:  # logged, not committed: replayed first
            self._run(len(self.offsets) - 1, crash="none")

    def _start_of(self, batch: int) -> dict[str, Any]:
        return self.initial if batch == 0 else self.offsets[batch - 1]

    def _run(self, batch: int, crash: str) -> None:
        rows = []
        kind = StagedPartition if self.options["stagedReads"] == "file" else RowsPartition
        for partition in self.reader.partitions(self._start_of(batch), self.offsets[batch]):
            assert isinstance(partition, kind)
            for record in self.reader.read(partition):
                rows += record.column("message_id").to_pylist()
        self.attempts.setdefault(batch, []).append(rows)
        self.sink[batch] = rows  # idempotent: a batch's rows replace its earlier attempt's
        if crash == "during-batch":
            raise _Crash
        self.committed = batch
        if crash == "after-commit-log":
            raise _Crash
        self.reader.commit(self.offsets[batch])

    def micro_batch(self, limit: int, crash: str) -> bool:
        """One trigger; False when there was no new data."""
        from pyspark.sql.streaming.datasource import ReadMaxRows

        start = self.offsets[self.committed] if self.committed >= 0 else self.initial
        end = self.reader.latestOffset(start, ReadMaxRows(limit))
        if json.dumps(end) == json.dumps(start):
            return False
        if crash == "after-stage":
            raise _Crash
        self.offsets.append(end)
        self._run(len(self.offsets) - 1, crash)
        return True


class _Crash(Exception):
    pass


@pytest.mark.parametrize("staged_reads", ["file", "inline"])
@settings(profiles.HEAVY, deadline=None)
@given(
    st.integers(1, 120),
    st.lists(st.tuples(st.integers(1, 50), st.sampled_from(CRASHES)), min_size=1, max_size=8),
)
def test_every_message_once_into_an_idempotent_sink_whatever_crashes(
    sb: Broker, tmp_path_factory: pytest.TempPathFactory, staged_reads: str, count: int, steps: list[tuple[int, str]]
) -> None:
    """Both ways of handing a staged batch to the tasks: its file (the executors open it) and its
    rows in the partitions."""
    queue = f"q-{uuid.uuid4().hex[:10]}"  # 1 s locks: what a crashed reader held comes back soon
    sb.faults.run(sb.namespace.add_queue, QueueConfig(queue, EntityProperties(lock_duration=1.0)))
    with ServiceBusClient.from_connection_string(sb.connection_string) as client, client.get_queue_sender(queue) as s:
        s.send_messages([ServiceBusMessage(f"m{i}", message_id=f"id-{i}") for i in range(count)])
    checkpoint: Path = tmp_path_factory.mktemp("checkpoint")
    spark = Spark({"connectionString": sb.connection_string, "entity": queue, "checkpointLocation": str(checkpoint),
                   "receiveWait": "0.3", "stagedReads": staged_reads})  # fmt: skip
    try:
        for limit, crash in steps:
            try:
                spark.micro_batch(limit, crash)
            except _Crash:
                spark.crash()
        deadline = time.monotonic() + 60
        while stored(sb.connection_string, queue) and time.monotonic() < deadline:  # every copy back and completed
            spark.micro_batch(50, "none")
    finally:
        spark.reader.stop()
    emitted = [row for rows in spark.sink.values() for row in rows]
    assert sorted(emitted) == sorted(f"id-{i}" for i in range(count))  # each once
    assert all(len({json.dumps(a) for a in tries}) == 1 for tries in spark.attempts.values())  # replays: same rows
    assert stored(sb.connection_string, queue) == 0


def test_a_copy_of_a_message_of_a_batch_in_flight_is_held_for_it_not_emitted_again(
    sb: Broker, tmp_path: Path
) -> None:
    """Spark 4.3 asks for a batch only after committing the one before, so a batch is settled
    before the next is taken; should a copy come back while its batch is still in flight (its
    lock lost: here the receiver's link is closed and the 1 s lock runs out), the next take
    holds it for that batch rather than emitting it again, and the batch's settling completes it."""
    from amqplink.spark.credentials import make_async_client
    from amqplink.spark.inbox import Inbox
    from amqplink.spark.staging import Staging
    from amqplink.sync import loop

    queue = f"q-{uuid.uuid4().hex[:10]}"
    sb.faults.run(sb.namespace.add_queue, QueueConfig(queue, EntityProperties(lock_duration=1.0)))
    with ServiceBusClient.from_connection_string(sb.connection_string) as client, client.get_queue_sender(queue) as s:
        s.send_messages([ServiceBusMessage(f"m{i}", message_id=f"id-{i}") for i in range(20)])
    config = parse_source_options({"connectionString": sb.connection_string, "entity": queue,
                                   "checkpointLocation": str(tmp_path), "receiveWait": "0.5"})  # fmt: skip
    inbox = Inbox(config, Staging(tmp_path / "s"), make_async_client(config))

    async def scenario() -> tuple[int, int, int]:
        first = await inbox.take(0, 20)
        inbox.record(0, first)
        assert inbox._receiver is not None
        await inbox._receiver.close()  # the link goes: its locks are lost, the copies come back in 1 s
        inbox._receiver = None
        inbox.held.clear()
        again: list[Any] = []
        deadline = time.monotonic() + 30
        while inbox.counters.redelivered < 20 and time.monotonic() < deadline:
            again += await inbox.take(1, 20)
        await inbox.settle(0)
        return len(first), len(again), inbox.counters.completed

    try:
        taken, emitted_again, completed = loop.run(scenario())
    finally:
        loop.run(inbox.close())
    assert (taken, emitted_again, completed) == (20, 0, 20)
    assert stored(sb.connection_string, queue) == 0
