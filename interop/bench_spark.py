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
task; Spark's defaults otherwise, so workers are reused) and an untimed pass of the whole
frame through the nothing-sent path (the JVM's JIT compiled the frame's code: otherwise the
first timed write pays for it, 5-10 µs of JVM CPU per row here). Reports rows/s (the timed
write's wall time; Spark's start-up is not in it), the ratio (goal >= 5x), the rows/s of
the same path sending nothing (an Arrow data source that only reads its rows, and a
``foreachPartition`` that only iterates them: Spark's own cost, the ceiling), and the
peak memory of the Python workers: the largest ``VmHWM`` (peak resident set) of any
``pyspark`` worker process, sampled from ``/proc``.

    python3 interop/bench_spark.py [--rows 100000] [--size 1024] [--rounds 3]
    python3 interop/bench_spark.py --opcodes [--rows 50000]   (the send loop alone, no Spark)
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
FLOOR_GOAL = 0.8
"""The sink's rows/s against Spark's own path with nothing sent (issue 33)."""
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
    """The largest VmHWM (kB) of any pyspark worker process (or any process whose command line
    holds one of ``markers``) seen while sampling, and the CPU seconds those processes used
    meanwhile (:attr:`cpu`)."""

    def __init__(self, markers: tuple[bytes, ...] = (b"pyspark.daemon", b"pyspark.worker")) -> None:
        self.markers = markers
        """What a sampled process's command line holds (any one of them)."""
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
                if not any(marker in cmdline for marker in self.markers):
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
JVM_CPU: dict[str, float] = {}
"""Side (and side + " floor") -> the driver JVM's CPU seconds (local mode: the executors too)."""
FLOOR_CPU: dict[str, float] = {}
"""Side -> the JVM's and the Python workers' CPU seconds of the same path sending nothing."""


def jvm_pid() -> int:
    """The pid of this process's Spark JVM (launched by PySpark's gateway)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    return int(proc.pid) if proc is not None else 0


def timed(label: str, write: Callable[[], None], conn_str: str, queue: str, rows: int) -> tuple[float, int]:
    """(rows/s, peak worker kB) of ``write``; checks every row reached ``queue``."""
    with WorkerMemory() as memory:
        broker, jvm = process_cpu(Clock.broker_pid), process_cpu(jvm_pid())
        started = time.perf_counter()
        write()
        seconds = time.perf_counter() - started
        BROKER_CPU[label] = process_cpu(Clock.broker_pid) - broker
        JVM_CPU[label] = process_cpu(jvm_pid()) - jvm
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
        df = frame(rows)
        if name == "ours":
            spark.dataSource.register(floor_source())

        def nothing_sent() -> None:  # Spark's own cost on the same path: rows to Python objects and dropped
            if name == "ours":
                df.write.format("bench_floor").mode("append").save()
            else:
                df.foreachPartition(lambda rows: sum(1 for _ in rows) and None)

        nothing_sent()  # the JVM's JIT warmed on the full frame (it was not, for the first timed write)
        queue = f"{name}-{uuid.uuid4().hex[:8]}"
        rate, peak = timed(name, lambda: write(df, queue), conn_str, queue, rows)
        with WorkerMemory() as memory:
            jvm = process_cpu(jvm_pid())
            floor = time.perf_counter()
            nothing_sent()
            floor_rate = rows / (time.perf_counter() - floor)
            JVM_CPU[f"{name} floor"] = process_cpu(jvm_pid()) - jvm
        FLOOR_CPU[name] = JVM_CPU[f"{name} floor"] + memory.cpu
        return rate, peak, startup, floor_rate
    finally:
        spark.stop()


def run_opcodes(rows: int, size: int) -> None:
    """The sink's send loop alone (``send_partition``, no Spark) on Arrow record batches of
    10,000 body-only rows: Python opcodes per row on the calling thread (which runs the event
    loop while it waits; what the keeper thread runs is not counted), deterministic enough to
    compare two versions of the code on a shared machine."""
    import pyarrow as pa

    from amqplink.spark.columns import IdScheme
    from amqplink.spark.options import parse_options
    from amqplink.spark.writer import send_partition
    from interop.bench_ingest import OpcodeCounter

    bodies = [str(i).ljust(size, ".").encode() for i in range(rows)]
    batches = [pa.RecordBatch.from_pydict({"body": pa.array(bodies[s : s + 10_000], pa.binary())})
               for s in range(0, rows, 10_000)]  # fmt: skip
    with broker_process() as conn_str:
        send_partition(parse_options({"connectionString": conn_str, "entity": "warm"}), batches[:1],
                       IdScheme("position", "w", 0))  # fmt: skip
        config = parse_options({"connectionString": conn_str, "entity": f"opcodes-{uuid.uuid4().hex[:8]}"})
        counter = OpcodeCounter()
        counter.enable()
        try:
            stats = send_partition(config, batches, IdScheme("position", uuid.uuid4().hex, 0))
        finally:
            counter.disable()
    print(f"send_partition, {stats.rows:,} rows of {size} B in Arrow batches: "
          f"{counter.opcodes / rows:.1f} Python opcodes per row (calling thread)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (sink, SDK), each side in turn")
    parser.add_argument("--opcodes", action="store_true", help="the send loop's Python opcodes per row (no Spark)")
    args = parser.parse_args()
    if args.opcodes:
        run_opcodes(args.rows, args.size)
        return
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    runs: dict[str, list[tuple[float, ...]]] = {"ours": [], "sdk": []}
    with broker_process() as conn_str:
        for _ in range(args.rounds):
            for side in ("ours", "sdk"):
                rate, kb, startup, floor = run_side(side, conn_str, args.rows, args.size)
                runs[side].append((rate, kb, startup, floor, WORKER_CPU[side], BROKER_CPU[side], JVM_CPU[side],
                                   FLOOR_CPU[side], JVM_CPU[f"{side} floor"]))  # fmt: skip
    print(f"bench_spark: {args.rows:,} rows of {args.size} B, local[2], {PARTITIONS} partitions, {args.rounds} "
          f"rounds of (sink, SDK); each side in a SparkSession of its own after a {WARM_UP_ROWS:,}-row warm-up "
          "write (Spark's start-up not counted)")  # fmt: skip
    print(f"{'round':<6} {'amqplink sink rows/s':>21} {'SDK rows/s':>11} {'ratio':>6}")
    for i, (ours, sdk) in enumerate(zip(runs["ours"], runs["sdk"], strict=True), 1):
        print(f"{i:<6} {ours[0]:>21,.0f} {sdk[0]:>11,.0f} {ours[0] / sdk[0]:>5.1f}x")
    print(f"{'side':<24} {'median rows/s':>14} {'peak worker RSS':>16} {'same path, nothing sent':>24} "
          f"{'CPU/row workers':>16} {'CPU/row broker':>15} {'CPU/row JVM':>12} "
          f"{'nothing sent, CPU/row (JVM)':>28}")  # fmt: skip
    medians, floors = {}, {}
    for label, side in (("amqplink sink", "ours"), ("SDK foreachPartition", "sdk")):
        got = runs[side]
        medians[side] = statistics.median(r[0] for r in got)
        peak = max(r[1] for r in got) / 1024
        floors[side] = statistics.median(r[3] for r in got)
        worker_us, broker_us, jvm_us, floor_us, floor_jvm_us = (
            statistics.median(r[i] for r in got) * 1e6 / args.rows for i in (4, 5, 6, 7, 8))
        print(f"{label:<24} {medians[side]:>14,.0f} {peak:>13.0f} MB {floors[side]:>17,.0f} rows/s "
              f"{worker_us:>13.1f} us {broker_us:>12.1f} us {jvm_us:>9.1f} us {floor_us:>12.1f} us "
              f"({floor_jvm_us:.1f} us)")  # fmt: skip
    ratio = medians["ours"] / medians["sdk"]
    print(f"ratio of the medians {ratio:.1f}x (goal >= {GOAL:.0f}x): {'met' if ratio >= GOAL else 'NOT met'}")
    ours = runs["ours"]
    to_floor = statistics.median(r[0] / r[3] for r in ours)
    cpu_total = statistics.median((r[4] + r[5] + r[6]) / r[7] for r in ours)
    print(f"sink / same path sending nothing: {to_floor:.2f}x rows/s (goal >= {FLOOR_GOAL}x: "
          f"{'met' if to_floor >= FLOOR_GOAL else 'NOT met'}); CPU per row, all processes (JVM, workers, broker), "
          f"{cpu_total:.2f}x the nothing-sent path's (JVM, workers), so {1 / cpu_total:.2f}x on a machine the "
          "processes have to themselves")


if __name__ == "__main__":
    main()
