"""Benchmark (not a test): the PySpark Service Bus source against what Spark users write today.

One run of ``--rounds`` rounds, one embedded broker (``amqplink broker`` in a subprocess),
local SparkSessions (``local[2]``). Each side drains a queue filled with the same
``--rows`` messages of ``--size``-byte bodies, completing every message (peek-lock, then
complete: nothing is lost if the job dies midway), into Spark's ``noop`` sink:

- **amqplink source**: ``spark.readStream.format("servicebus")`` with
  ``Trigger.AvailableNow`` (micro-batches of ``maxMessagesPerTrigger``, completed once
  Spark committed each);
- **SDK receive loop**: what users write without a source: ``spark.range(P)`` turned into
  rows by ``mapPartitions``, each task opening the official ``azure-servicebus`` client and
  calling ``receive_messages(max_message_count=100)`` then ``complete_message`` for each,
  until a receive comes back empty (the pattern of the SDK's samples inside a UDF /
  ``foreachBatch`` loop). Completed before Spark has the rows: a failed task loses them,
  which the source does not; the benchmark measures its speed only.

- **Spark's own path, nothing received** (the floor): a Python stream source with the same
  schema, ``maxMessagesPerTrigger`` and trigger whose tasks hand Spark record batches made once
  per worker (no broker, no receive, no staging): what Spark's micro-batches cost by
  themselves, the ceiling no Python source can pass on this machine.

Each side is checked afterwards: it produced every row and left the queue empty. Reports
rows/s (wall time of the drain; Spark's start-up and a warm-up drain not counted), the
ratio (goal >= 5x), and the peak memory (``VmHWM``) of the Python process that did the
receiving: for the source, the one Spark runs its stream reader in
(``python_streaming_source_runner``, beside the driver), for the SDK loop the largest
``pyspark`` worker.

    python3 interop/bench_spark_source.py [--rows 50000] [--size 1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from interop.bench_sbclient import broker_process  # noqa: E402
from interop.bench_spark import WorkerMemory, stored  # noqa: E402

GOAL = 5.0
TASKS = 2
"""The SDK loop's receiving tasks (one per core of ``local[2]``)."""
WARM_UP_ROWS = 1000
PER_TRIGGER = 10_000
"""The source's ``maxMessagesPerTrigger`` (and the floor's rows per micro-batch)."""
DURATIONS: list[dict[str, int]] = []
FLOOR: list[float] = []
"""Rows/s of the floor (Spark's own path, nothing received), one per round."""
SPARK_MS: list[dict[str, int]] = []
"""Spark's ``durationMs`` of each source drain, summed over its micro-batches (the last one kept)."""


def fill(conn_str: str, queue: str, rows: int, size: int) -> None:
    """``rows`` messages of ``size``-byte bodies into ``queue`` (amqplink's client, in batches)."""
    from amqplink.servicebus import ServiceBusClient, ServiceBusMessage

    with ServiceBusClient.from_connection_string(conn_str) as client, client.get_queue_sender(queue) as sender:
        batch = sender.create_message_batch()
        for i in range(rows):
            message = ServiceBusMessage(str(i).ljust(size, ".").encode(), message_id=str(i))
            try:
                batch.add_message(message)
            except ValueError:
                sender.send_messages(batch)
                batch = sender.create_message_batch()
                batch.add_message(message)
        if len(batch):
            sender.send_messages(batch)


def sdk_receiver(conn_str: str, queue: str) -> Any:
    """The ``mapPartitions`` function users write with the official SDK: receive, complete, yield."""

    def receive(_: Iterator[Any]) -> Iterator[tuple[bytes, str]]:
        from azure.servicebus import ServiceBusClient

        with (
            ServiceBusClient.from_connection_string(conn_str) as client,
            client.get_queue_receiver(queue, prefetch_count=100) as receiver,
        ):
            while True:
                got = receiver.receive_messages(max_message_count=100, max_wait_time=2)
                if not got:
                    return
                for message in got:
                    receiver.complete_message(message)
                    yield b"".join(message.body), str(message.message_id)

    return receive


SOURCE_OPTIONS: dict[str, str] = {}
"""``--source-option`` values: more options for the source (``numPartitions=2``, ``stagedReads=inline``)."""


def drain_ours(spark: Any, conn_str: str, queue: str) -> int:
    """The source, Trigger.AvailableNow, into the noop sink: the rows Spark read."""
    checkpoint = tempfile.mkdtemp(prefix="bench-source-")
    query = (
        spark.readStream.format("servicebus")
        .options(**SOURCE_OPTIONS)
        .option("connectionString", conn_str)
        .option("entity", queue)
        .option("maxMessagesPerTrigger", PER_TRIGGER)
        .option("checkpointLocation", os.path.join(checkpoint, "source"))
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    summed: dict[str, int] = {}
    for progress in query.recentProgress:
        for key, ms in progress["durationMs"].items():
            summed[key] = summed.get(key, 0) + int(ms)
    DURATIONS.append(summed)
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def floor_source() -> type:
    """A stream source of ``rows`` ready-made rows (the source's schema, ``--size``-byte bodies)
    in micro-batches of ``per`` (options ``rows``, ``per``, ``size``)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

    class FloorReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        """As the source's reader plans micro-batches: admission control with ``per`` rows
        (``ReadMaxRows``) as the default read limit, one batch per trigger."""

        def __init__(self, rows: int, per: int, size: int) -> None:
            self.rows, self.per, self.size = rows, per, size

        def initialOffset(self) -> dict[str, int]:
            return {"batch": -1}

        def getDefaultReadLimit(self) -> ReadLimit:
            return ReadMaxRows(self.per)

        def prepareForTriggerAvailableNow(self) -> None:
            pass

        def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
            last = -(-self.rows // self.per) - 1
            return {"batch": min(start["batch"] + 1, last)}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(b) for b in range(start["batch"] + 1, end["batch"] + 1)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import pyarrow as pa

            from amqplink.spark.rows import arrow_schema

            first = partition.value * self.per
            count = min(self.per, self.rows - first)
            schema = arrow_schema()
            columns: dict[str, Any] = {name: [None] * count for name in schema.names}
            columns["body"] = [b"x" * self.size] * count
            columns["message_id"] = [str(first + i) for i in range(count)]
            columns["sequence_number"] = list(range(first + 1, first + count + 1))
            columns["delivery_count"] = [0] * count
            columns["entity"] = ["floor"] * count
            yield pa.RecordBatch.from_pydict(columns, schema=schema)

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_source_floor"

        def schema(self) -> str:
            from amqplink.spark.rows import SCHEMA

            return SCHEMA

        def streamReader(self, schema: Any) -> FloorReader:
            return FloorReader(int(self.options["rows"]), int(self.options["per"]), int(self.options["size"]))

    return FloorSource


def drain_floor(spark: Any, rows: int, size: int) -> int:
    """The floor source, as :func:`drain_ours` runs the source: the rows Spark read."""
    checkpoint = tempfile.mkdtemp(prefix="bench-source-floor-")
    query = (
        spark.readStream.format("bench_source_floor").option("rows", rows).option("per", PER_TRIGGER)
        .option("size", size).load().writeStream.format("noop").option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def drain_sdk(spark: Any, conn_str: str, queue: str) -> int:
    """The SDK loop in ``TASKS`` tasks, into the noop sink: the rows it made."""
    rdd = spark.sparkContext.parallelize(range(TASKS), TASKS).mapPartitions(sdk_receiver(conn_str, queue))
    df = spark.createDataFrame(rdd, "body binary, message_id string")
    counted = spark.sparkContext.accumulator(0)

    def count(rows: Iterator[Any]) -> None:
        counted.add(sum(1 for _ in rows))

    df.foreachPartition(count)
    return int(counted.value)


def run_side(name: str, conn_str: str, rows: int, size: int) -> tuple[float, int]:
    """(rows/s, peak kB of the receiving Python processes) of one side, in a SparkSession of its own."""
    from amqplink.spark.session import local_session

    spark, _ = local_session("local[2]", app_name=f"amqplink-bench-source-{name}", arrow=name == "ours")
    drain = drain_ours if name == "ours" else drain_sdk
    try:
        warm = f"warm-{uuid.uuid4().hex[:8]}"
        fill(conn_str, warm, WARM_UP_ROWS, size)
        drain(spark, conn_str, warm)  # workers started, modules imported, the JIT warmed
        queue = f"{name}-{uuid.uuid4().hex[:8]}"
        fill(conn_str, queue, rows, size)
        runner = (b"python_streaming_source_runner",)  # where Spark runs a Python stream reader
        with WorkerMemory(runner if name == "ours" else WorkerMemory().markers) as memory:
            started = time.perf_counter()
            got = drain(spark, conn_str, queue)
            seconds = time.perf_counter() - started
        if name == "ours":
            SPARK_MS.append(DURATIONS[-1])
        left = stored(conn_str, queue)
        if got != rows or left:
            raise SystemExit(f"{name}: {got} of {rows} rows read, {left} left in the queue")
        if name == "ours":  # the floor in the same session, after a warm-up of its own
            spark.dataSource.register(floor_source())
            drain_floor(spark, WARM_UP_ROWS, size)
            started = time.perf_counter()
            floor_rows = drain_floor(spark, rows, size)
            FLOOR.append(rows / (time.perf_counter() - started))
            if floor_rows != rows:
                raise SystemExit(f"floor: {floor_rows} of {rows} rows read")
        return rows / seconds, memory.peak_kb
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (source, SDK), each side in turn")
    parser.add_argument("--source-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a further option for the source (repeatable)")  # fmt: skip
    args = parser.parse_args()
    SOURCE_OPTIONS.update(option.split("=", 1) for option in args.source_option)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    runs: dict[str, list[tuple[float, int]]] = {"ours": [], "sdk": []}
    with broker_process() as conn_str:
        for _ in range(args.rounds):
            for side in ("ours", "sdk"):
                runs[side].append(run_side(side, conn_str, args.rows, args.size))
    print(f"bench_spark_source: {args.rows:,} messages of {args.size} B drained (peek-lock, completed), "
          f"source options {SOURCE_OPTIONS or 'default'}, "
          f"local[2], {args.rounds} rounds of (source, SDK loop in {TASKS} tasks); Spark's start-up and a "
          f"{WARM_UP_ROWS:,}-message warm-up drain not counted")  # fmt: skip
    print(f"{'round':<6} {'amqplink source rows/s':>23} {'SDK loop rows/s':>16} {'ratio':>6}")
    for i, (ours, sdk) in enumerate(zip(runs["ours"], runs["sdk"], strict=True), 1):
        print(f"{i:<6} {ours[0]:>23,.0f} {sdk[0]:>16,.0f} {ours[0] / sdk[0]:>5.1f}x")
    medians = {side: statistics.median(r[0] for r in got) for side, got in runs.items()}
    for label, side, where in (("amqplink source", "ours", "stream reader"), ("SDK receive loop", "sdk", "worker")):
        peak = max(r[1] for r in runs[side]) / 1024
        print(f"{label:<18} median {medians[side]:>9,.0f} rows/s, peak {where} RSS {peak:.0f} MB")
    for i, summed in enumerate(SPARK_MS, 1):
        parts = ", ".join(f"{k} {v / 1000:.1f}" for k, v in sorted(summed.items(), key=lambda kv: -kv[1]))
        print(f"round {i}: the source's durationMs summed over its micro-batches, s: {parts}")
    floor = statistics.median(FLOOR)
    print(f"Spark's own path, nothing received (rounds {', '.join(f'{f:,.0f}' for f in FLOOR)}): median {floor:,.0f}"
          f" rows/s; the source {medians['ours'] / floor:.2f}x of it")  # fmt: skip
    ratio = medians["ours"] / medians["sdk"]
    print(f"ratio of the medians {ratio:.1f}x (goal >= {GOAL:.0f}x): {'met' if ratio >= GOAL else 'NOT met'}; "
          f"{GOAL:.0f}x the SDK loop is {GOAL * medians['sdk']:,.0f} rows/s, {GOAL * medians['sdk'] / floor:.2f}x"
          " the floor")  # fmt: skip


if __name__ == "__main__":
    main()
