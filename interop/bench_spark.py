"""Benchmark (not a test): the PySpark sink against the pattern Spark users write today.

One run of ``--rounds`` rounds (each: the sink, then the SDK; the medians are compared,
so that a burst of load from elsewhere on the machine does not decide it), one embedded
broker (``amqplink broker`` in a subprocess), local SparkSessions (``local[2]``), the
same DataFrame (``--rows`` rows of ``--size``-byte binary bodies in 4
partitions) written to a fresh queue by each side:

- **amqplink sink**: ``df.write.format("servicebus")`` (Arrow writer, batched, pipelined);
- **SDK foreachPartition**: ``df.foreachPartition(f)`` where ``f`` opens the official
  ``azure-servicebus`` client, fills ``create_message_batch()`` until ``add_message``
  raises, and ``send_messages(batch)`` each batch (the pattern of the SDK's samples and of
  most Spark jobs that send to Service Bus today).

Each side's rows are counted in the queue afterwards (both must deliver every row).
Each side runs in a SparkSession of its own (its Python workers are its own), after a
small warm-up write (workers started and modules imported, as in any job past its first
task; Spark's defaults otherwise, so workers are reused). Reports rows/s (the timed
write's wall time; Spark's start-up is not in it), the ratio (goal >= 5x), the rows/s of
the same path sending nothing (an Arrow data source that only reads its rows, and a
``foreachPartition`` that only iterates them: Spark's own cost, the ceiling), and the
peak memory of the Python workers: the largest ``VmHWM`` (peak resident set) of any
``pyspark`` worker process, sampled from ``/proc``.

    python3 interop/bench_spark.py [--rows 100000] [--size 1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from interop.bench_sbclient import Clock, broker_process, process_cpu  # noqa: E402

GOAL = 5.0
PARTITIONS = 4
WARM_UP_ROWS = 2000


def sdk_sender(conn_str: str, queue: str) -> Callable[[Any], None]:
    """The ``foreachPartition`` function users write with the official SDK."""

    def send(rows: Any) -> None:
        from azure.servicebus import ServiceBusClient, ServiceBusMessage

        with (
            ServiceBusClient.from_connection_string(conn_str) as client,
            client.get_queue_sender(queue) as sender,
        ):
            batch = sender.create_message_batch()
            for row in rows:
                message = ServiceBusMessage(bytes(row.body))
                try:
                    batch.add_message(message)
                except ValueError:  # MessageSizeExceededError: the batch is full
                    sender.send_messages(batch)
                    batch = sender.create_message_batch()
                    batch.add_message(message)
            if len(batch):
                sender.send_messages(batch)

    return send


def floor_source() -> type:
    """A data source whose Arrow writer only turns its rows into Python objects: Spark's own
    cost of handing rows to a Python sink (what no sink can go below)."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class FloorWriter(DataSourceArrowWriter):
        def write(self, iterator: Any) -> WriterCommitMessage:
            for batch in iterator:
                batch.column(0).to_pylist()
            return WriterCommitMessage()

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_floor"

        def writer(self, schema: Any, overwrite: bool) -> FloorWriter:
            return FloorWriter()

    return FloorSource


class WorkerMemory:
    """The largest VmHWM (kB) of any pyspark worker process seen while sampling, and the
    CPU seconds those processes used meanwhile (:attr:`cpu`)."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self.seen: set[int] = set()
        self._cpu: dict[int, tuple[float, float]] = {}  # pid -> (first seen, last seen)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self._sample()

    def _sample(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"pyspark.daemon" not in cmdline and b"pyspark.worker" not in cmdline:
                    continue
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if "PPid:\t1\n" in status:
                continue
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    self.peak_kb = max(self.peak_kb, int(line.split()[1]))
                    self.seen.add(int(pid))
            try:
                cpu = process_cpu(int(pid))
            except OSError:
                continue
            first, _ = self._cpu.get(int(pid), (cpu, cpu))
            self._cpu[int(pid)] = (first, cpu)

    @property
    def cpu(self) -> float:
        """CPU seconds of the worker processes between their first and last sample."""
        return sum(last - first for first, last in self._cpu.values())


def stored(conn_str: str, queue: str) -> int:
    """Messages in ``queue`` (peek, counted; nothing removed)."""
    from amqplink.servicebus import ServiceBusClient

    count = 0
    with ServiceBusClient.from_connection_string(conn_str) as client, client.get_queue_receiver(queue) as receiver:
        sequence = 0
        while True:
            page = receiver.peek_messages(max_message_count=1000, sequence_number=sequence + 1)
            if not page:
                return count
            count += len(page)
            sequence = max(int(m.sequence_number or 0) for m in page)


BROKER_CPU: dict[str, float] = {}
"""Side -> the broker process's CPU seconds during its timed write."""
WORKER_CPU: dict[str, float] = {}
"""Side -> the Python workers' CPU seconds during its timed write."""


def timed(label: str, write: Callable[[], None], conn_str: str, queue: str, rows: int) -> tuple[float, int]:
    """(rows/s, peak worker kB) of ``write``; checks every row reached ``queue``."""
    with WorkerMemory() as memory:
        broker = process_cpu(Clock.broker_pid)
        started = time.perf_counter()
        write()
        seconds = time.perf_counter() - started
        BROKER_CPU[label] = process_cpu(Clock.broker_pid) - broker
    WORKER_CPU[label] = memory.cpu
    count = stored(conn_str, queue)
    if count != rows:
        raise SystemExit(f"{label}: {count} of {rows} rows in the queue")
    return rows / seconds, memory.peak_kb


def run_side(name: str, conn_str: str, rows: int, size: int) -> tuple[float, int, float, float]:
    """(rows/s, peak worker kB, Spark start-up s, rows/s of the same path sending nothing)
    of one side, in a SparkSession of its own."""
    from amqplink.spark.session import local_session

    # the SDK side's workers do not import pyarrow and pandas (its path does not need them)
    spark, startup = local_session("local[2]", app_name=f"amqplink-bench-{name}", arrow=name == "ours")
    try:

        def frame(count: int) -> Any:
            return spark.range(0, count, numPartitions=PARTITIONS).selectExpr(
                f"cast(rpad(cast(id as string), {size}, '.') as binary) as body"
            )

        def write(df: Any, queue: str) -> None:
            if name == "ours":
                df.write.format("servicebus").option("connectionString", conn_str).option("entity", queue).mode(
                    "append"
                ).save()
            else:
                df.foreachPartition(sdk_sender(conn_str, queue))

        write(frame(WARM_UP_ROWS), f"warm-{uuid.uuid4().hex[:8]}")  # workers started, modules imported
        queue = f"{name}-{uuid.uuid4().hex[:8]}"
        df = frame(rows)
        rate, peak = timed(name, lambda: write(df, queue), conn_str, queue, rows)
        # Spark's own cost on the same path, nothing sent: rows to Python objects and dropped.
        if name == "ours":
            spark.dataSource.register(floor_source())
            floor = time.perf_counter()
            df.write.format("bench_floor").mode("append").save()
        else:
            floor = time.perf_counter()
            df.foreachPartition(lambda rows: sum(1 for _ in rows) and None)
        floor_rate = rows / (time.perf_counter() - floor)
        return rate, peak, startup, floor_rate
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (sink, SDK), each side in turn")
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    runs: dict[str, list[tuple[float, int, float, float, float, float]]] = {"ours": [], "sdk": []}
    with broker_process() as conn_str:
        for _ in range(args.rounds):
            for side in ("ours", "sdk"):
                rate, kb, startup, floor = run_side(side, conn_str, args.rows, args.size)
                runs[side].append((rate, kb, startup, floor, WORKER_CPU[side], BROKER_CPU[side]))
    print(f"bench_spark: {args.rows:,} rows of {args.size} B, local[2], {PARTITIONS} partitions, {args.rounds} "
          f"rounds of (sink, SDK); each side in a SparkSession of its own after a {WARM_UP_ROWS:,}-row warm-up "
          "write (Spark's start-up not counted)")  # fmt: skip
    print(f"{'round':<6} {'amqplink sink rows/s':>21} {'SDK rows/s':>11} {'ratio':>6}")
    for i, (ours, sdk) in enumerate(zip(runs["ours"], runs["sdk"], strict=True), 1):
        print(f"{i:<6} {ours[0]:>21,.0f} {sdk[0]:>11,.0f} {ours[0] / sdk[0]:>5.1f}x")
    print(f"{'side':<24} {'median rows/s':>14} {'peak worker RSS':>16} {'same path, nothing sent':>24} "
          f"{'CPU/row workers':>16} {'CPU/row broker':>15}")  # fmt: skip
    medians = {}
    for label, side in (("amqplink sink", "ours"), ("SDK foreachPartition", "sdk")):
        got = runs[side]
        medians[side] = statistics.median(r[0] for r in got)
        peak = max(r[1] for r in got) / 1024
        floor = statistics.median(r[3] for r in got)
        worker_us = statistics.median(r[4] for r in got) * 1e6 / args.rows
        broker_us = statistics.median(r[5] for r in got) * 1e6 / args.rows
        print(f"{label:<24} {medians[side]:>14,.0f} {peak:>13.0f} MB {floor:>17,.0f} rows/s "
              f"{worker_us:>13.0f} us {broker_us:>12.0f} us")  # fmt: skip
    ratio = medians["ours"] / medians["sdk"]
    print(f"ratio of the medians {ratio:.1f}x (goal >= {GOAL:.0f}x): {'met' if ratio >= GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
