"""The streaming source when things die: a Python worker, the driver, the broker. Counted:
rows lost and rows delivered twice into an idempotent sink (both must be 0)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import EntityProperties, QueueConfig
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from tests.spark.conftest import ROOT, drain, new_queue, stored

pytestmark = pytest.mark.spark


def _send(conn: str, queue: str, count: int) -> None:
    with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender(queue) as sender:
        for first in range(0, count, 500):
            sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"id-{i}")
                                  for i in range(first, min(count, first + 500))])  # fmt: skip


def _queue(broker: Broker, **properties: Any) -> str:
    name = f"q-{uuid.uuid4().hex[:10]}"
    broker.faults.run(broker.namespace.add_queue, QueueConfig(name, EntityProperties(**properties)))
    return name


def _kill_my_worker_on_attempt_0(marker: Path) -> Any:
    from pyspark.sql.functions import udf

    def passthrough(seq):  # type: ignore[no-untyped-def]
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.attemptNumber() == 0 and context.partitionId() == 0 and seq % 7 == 3:
            marker.write_text(str(seq))
            os.kill(os.getpid(), signal.SIGKILL)  # the Python worker dies mid-task
        return seq

    return udf(passthrough, "bigint")


def test_a_python_worker_killed_mid_batch_loses_and_repeats_nothing(
    spark: Any, sb_broker: Broker, tmp_path: Path
) -> None:
    from pyspark.sql.functions import col

    killer = _kill_my_worker_on_attempt_0(tmp_path / "killed")
    queue = new_queue(sb_broker)
    _send(sb_broker.connection_string, queue, 600)
    rows: dict[int, list[int]] = {}
    frame = (
        spark.readStream.format("servicebus").option("connectionString", sb_broker.connection_string)
        .option("entity", queue).option("checkpointLocation", str(tmp_path)).option("maxMessagesPerTrigger", 200)
        .option("numPartitions", 2).load().select(killer(col("sequence_number")).alias("s"))
    )  # fmt: skip
    query = (
        frame.writeStream.foreachBatch(lambda df, b: rows.__setitem__(b, [r.s for r in df.collect()]))
        .option("checkpointLocation", str(tmp_path / "query")).trigger(availableNow=True).start()
    )  # fmt: skip
    assert query.awaitTermination(300) and query.exception() is None
    assert (tmp_path / "killed").exists()  # a worker did die, and its task was run again
    emitted = Counter(s for seqs in rows.values() for s in seqs)
    assert len(emitted) == 600 and set(emitted.values()) == {1}  # lost 0, twice 0
    assert drain(sb_broker, queue, idle=1.0) == []


def test_the_driver_killed_mid_batch_loses_and_repeats_nothing(sb_broker: Broker, tmp_path: Path) -> None:
    """Killed (SIGKILL, the JVM and every Python worker with it) after its sink wrote
    micro-batch 2 and before Spark committed it; restarted from the same checkpoint, the
    query replays batch 2 (the sink's duplicate detection drops its repeats: the rows keep
    their ids) and recognises the redelivered copies of what the dead driver held."""
    conn = sb_broker.connection_string
    source, target = _queue(sb_broker, lock_duration=3.0), new_queue(sb_broker, dedup=True)
    _send(conn, source, 1000)
    marker = tmp_path / "blocked"
    env = {**os.environ, "PYTHONPATH": ROOT}

    def driver(block_at: int) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "tests.spark.source_driver", conn, source, target, str(tmp_path), str(block_at),
                str(marker)]  # fmt: skip
        return subprocess.Popen(args, env=env, cwd=ROOT, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip

    first = driver(2)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # polling for the marker file (a condition, with a deadline)
        assert marker.exists(), (first.stderr.read() if first.stderr else b"")[-3000:]
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    assert stored(conn, source) > 0  # the rest is still there, batch 2's locked by the dead driver
    second = driver(-1)
    _, err = second.communicate(timeout=400)
    assert second.returncode == 0, err[-3000:]
    got = Counter(m.message_id for m in drain(sb_broker, target))
    assert set(got) == {f"id-{i}" for i in range(1000)}  # lost: 0
    assert set(got.values()) == {1}  # delivered twice: 0
    assert stored(conn, source) == 0


def test_the_broker_killed_and_restarted_mid_stream_loses_and_repeats_nothing(spark: Any, tmp_path: Path) -> None:
    """A durable broker stops (every connection drops, locks with them) while micro-batches
    flow, and starts again on the same port from its data directory."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(30)

    data = tmp_path / "data"
    broker = call(Broker(servicebus=True, data_dir=data).start())
    port, conn = broker.port, broker.connection_string
    queue = _queue(broker, lock_duration=3.0)
    _send(conn, queue, 1500)
    rows: dict[int, list[int]] = {}
    query = (
        spark.readStream.format("servicebus").option("connectionString", conn).option("entity", queue)
        .option("checkpointLocation", str(tmp_path / "source")).option("maxMessagesPerTrigger", 100)
        .option("retryTotal", 1).option("retryBackoffFactor", 0.2).load()
        .writeStream.foreachBatch(lambda df, b: rows.__setitem__(b, [r.sequence_number for r in df.collect()]))
        .option("checkpointLocation", str(tmp_path / "query")).trigger(processingTime="200 milliseconds").start()
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while sum(map(len, rows.values())) < 500 and time.monotonic() < deadline:
            time.sleep(0.2)  # polling the rows seen (a condition, with a deadline)
        call(broker.stop())
        time.sleep(2)  # the outage
        broker = call(Broker(servicebus=True, data_dir=data).start(port=port))
        while (stored(conn, queue) or sum(map(len, rows.values())) < 1500) and time.monotonic() < deadline:
            assert query.isActive, query.exception()
            time.sleep(0.5)
    finally:
        query.stop()
        call(broker.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    emitted = Counter(s for seqs in rows.values() for s in seqs)
    assert len(emitted) == 1500  # lost: 0
    assert set(emitted.values()) == {1}  # emitted twice: 0
