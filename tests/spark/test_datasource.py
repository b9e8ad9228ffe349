"""The data source under a real local Spark: batch and streaming writes with exact counts."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.servicebus.replication import Deduplicator
from amqplink.spark import foreach_partition_sender
from amqplink.spark.datasource import ServiceBusDataSource
from tests.conftest import broker_thread
from tests.spark.conftest import ROOT, drain, new_queue

pytestmark = pytest.mark.spark

CONN = "Endpoint=sb://ns.example/;SharedAccessKeyName=k;SharedAccessKey=SeCrEtKeY123="


def test_batch_write_sends_every_row_once_with_position_ids(spark: Any, sb_broker: Broker) -> None:
    queue = new_queue(sb_broker)
    df = spark.range(0, 5000, numPartitions=3).selectExpr(
        "cast(id as string) as body",
        "concat('s-', cast(id % 7 as string)) as subject",
        "map('row', cast(id as string)) as application_properties",
    )
    df.write.format("servicebus").option("connectionString", sb_broker.connection_string).option("entity", queue).mode(
        "append"
    ).save()
    got = drain(sb_broker, queue)
    assert len(got) == 5000
    bodies = sorted(int(str(m)) for m in got)
    assert bodies == list(range(5000))
    ids = {m.message_id for m in got}
    assert len(ids) == 5000
    write_ids = {i.rsplit(":", 2)[0] for i in ids}
    assert len(write_ids) == 1  # <write id>:<partition>:<row>
    sample = next(m for m in got if str(m) == "12")
    assert sample.subject == "s-5"
    assert sample.application_properties == {b"row": b"12"}  # received as the SDK gives them: bytes


def _key(broker: Broker) -> str:
    return broker.connection_string.split("SharedAccessKey=")[1].split(";")[0]


def test_streaming_write_replayed_from_its_checkpoint_sends_the_same_ids(
    spark: Any, sb_broker: Broker, tmp_path: Path
) -> None:
    queue = new_queue(sb_broker)
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    spark.range(0, 600, numPartitions=2).selectExpr("cast(id as string) as body").write.parquet(str(source))

    def run() -> None:
        query = (
            spark.readStream.schema("body string")
            .parquet(str(source))
            .writeStream.format("servicebus")
            .option("connectionString", sb_broker.connection_string)
            .option("entity", queue)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None

    run()
    first = drain(sb_broker, queue)
    assert sorted(int(str(m)) for m in first) == list(range(600))
    query_ids = {m.message_id.split(":")[0] for m in first}
    batch_ids = {m.message_id.split(":")[1] for m in first}
    assert len(query_ids) == 1 and batch_ids == {"0"}  # <query id>:<batch id>:<partition>:<row>
    # The query is killed after the sink sent batch 0 and before Spark recorded its commit:
    # on restart Spark runs batch 0 again from the checkpoint's offsets.
    for name in ("0", ".0.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    run()
    second = drain(sb_broker, queue)
    assert sorted(m.message_id for m in second) == sorted(m.message_id for m in first)
    assert {m.message_id: str(m) for m in second} == {m.message_id: str(m) for m in first}
    with Deduplicator() as dedup:
        assert sum(not dedup.seen(m.message_id) for m in [*first, *second]) == 600
        assert dedup.duplicates_removed == 600


def test_a_task_failed_once_and_retried_resends_the_same_ids(spark: Any, sb_broker: Broker) -> None:
    """foreachPartition: attempt 0 of partition 0 sends half its rows (acknowledged), then fails."""
    plain, deduplicated = new_queue(sb_broker), new_queue(sb_broker, dedup=True)
    df = spark.range(0, 2000, numPartitions=2).selectExpr("cast(id as string) as body")
    for queue in (plain, deduplicated):
        sender = foreach_partition_sender({"connectionString": sb_broker.connection_string, "entity": queue})
        df.foreachPartition(_fail_once(sender))
    resent = drain(sb_broker, plain)
    ids = [m.message_id for m in resent]
    assert len(ids) == 2500 and len(set(ids)) == 2000  # the first 500 rows of partition 0 twice
    twice = {i for i in ids if ids.count(i) == 2}
    assert len(twice) == 500 and all(i.split(":")[1] == "0" for i in twice)
    bodies = {(m.message_id, str(m)) for m in resent}
    assert len(bodies) == 2000  # a repeated id carries the same row
    assert sorted(int(str(m)) for m in drain(sb_broker, deduplicated)) == list(range(2000))


def _fail_once(sender: Any) -> Any:
    def run(rows: Any) -> None:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.partitionId() == 0 and context.attemptNumber() == 0:
            sender(list(rows)[:500])
            raise RuntimeError("forced failure after 500 acknowledged rows")
        sender(rows)

    return run


def test_a_data_source_task_failed_once_and_retried_resends_the_same_ids(spark: Any, sb_broker: Broker) -> None:
    """``df.write.format("servicebus")``: the rows (1 KiB bodies) come through a UDF that, on
    attempt 0 of partition 0, raises at row 4000, after the sink took the partition's first
    Arrow batches (rows 0-2999: 3,000 rows were sent twice in the runs here; the batch the
    failure cut short is not sent); Spark retries the task, whose writer sends the whole
    partition again with the same ids."""
    from pyspark.sql.functions import col

    plain, deduplicated = new_queue(sb_broker), new_queue(sb_broker, dedup=True)
    rows = 10_000  # 2 partitions of 5000: Arrow batches of 1000 rows (the session's maxRecordsPerBatch)
    df = spark.range(0, rows, numPartitions=2).select(_fails_once_at_row_4000()(col("id")).alias("body"))
    for queue in (plain, deduplicated):
        df.write.format("servicebus").option("connectionString", sb_broker.connection_string).option(
            "entity", queue
        ).mode("append").save()
    resent = drain(sb_broker, plain)
    counts = Counter(m.message_id for m in resent)
    assert len(counts) == rows and set(counts.values()) <= {1, 2}
    twice = sorted(int(i.rsplit(":", 1)[1]) for i, n in counts.items() if n == 2 and i.split(":")[1] == "0")
    assert sum(n == 2 for n in counts.values()) == len(twice)  # only partition 0 was sent twice ...
    assert 0 < len(twice) < 4000 and twice == list(range(len(twice)))  # ... from its start: attempt 0's rows
    assert len({(m.message_id, str(m)) for m in resent}) == rows  # a repeated id carries the same row
    kept = drain(sb_broker, deduplicated)  # duplicate detection removed the repeats
    assert sorted(int(str(m).rstrip(".")) for m in kept) == list(range(rows))
    assert len({m.message_id for m in kept}) == rows


def _fails_once_at_row_4000() -> Any:
    from pyspark.sql.functions import udf

    def body(row):  # type: ignore[no-untyped-def]  # (type hints would make PySpark guess a pandas UDF, and warn)
        from pyspark import TaskContext

        context = TaskContext.get()
        if row == 4000 and context.partitionId() == 0 and context.attemptNumber() == 0:
            raise RuntimeError("forced failure at row 4000 of partition 0")
        return str(row).ljust(1024, ".")

    return udf(body, "string")


def test_an_outage_without_failover_fails_the_write_loudly_without_the_key(spark: Any, sb_broker: Broker) -> None:
    queue = new_queue(sb_broker)
    df = spark.range(0, 100, numPartitions=1).selectExpr("cast(id as string) as body")
    fault = sb_broker.faults.run(sb_broker.faults.entity_unavailable, queue, condition="amqp:internal-error")
    try:
        with pytest.raises(Exception) as failed:
            df.write.format("servicebus").option("connectionString", sb_broker.connection_string).option(
                "entity", queue
            ).option("retryTotal", "1").option("retryBackoffFactor", "0.05").mode("append").save()
    finally:
        sb_broker.faults.run(sb_broker.faults.clear, fault)
    text = str(failed.value)
    assert "SinkWriteError" in text and f"could not send to {queue}" in text
    assert _key(sb_broker) not in text


def test_an_outage_with_failover_parks_then_syphons_with_nothing_lost(spark: Any, sb_broker: Broker) -> None:
    queue = new_queue(sb_broker, dedup=True)
    df = spark.range(0, 3000, numPartitions=3).selectExpr("cast(id as string) as body")
    with broker_thread(Broker(servicebus=True, http_port=0)) as secondary:
        fault = sb_broker.faults.run(sb_broker.faults.entity_unavailable, queue, condition="amqp:internal-error")
        try:
            df.write.format("servicebus").options(
                connectionString=sb_broker.connection_string,
                entity=queue,
                retryTotal="1",
                retryBackoffFactor="0.02",
                pairedConnectionString=secondary.connection_string,
                failoverInterval="0.3",
                pingPrimaryInterval="0.2",
                backlogQueueCount="2",
                managementEndpoint=f"https://127.0.0.1:{secondary.http_port}/",
                connectionVerify=secondary.http_ca,
            ).mode("append").save()
            parked = _parked(secondary)
            assert parked == 3000  # the primary took nothing: all of it waits on the secondary
        finally:
            sb_broker.faults.run(sb_broker.faults.clear, fault)
        assert asyncio.run(_syphon(sb_broker, secondary)) == 3000
        assert _parked(secondary) == 0
    got = drain(sb_broker, queue)
    assert sorted(int(str(m)) for m in got) == list(range(3000))  # nothing lost, nothing twice
    assert len({m.message_id for m in got}) == 3000


def _parked(secondary: Broker) -> int:
    queues = secondary.namespace.queues
    return sum(len(q.store) for name, q in list(queues.items()) if "x-servicebus-transfer" in name)


async def _syphon(primary: Broker, secondary: Broker) -> int:
    """A syphon in this process, until the backlog queues are empty; how many it moved."""
    from amqplink.servicebus.aio import PairedNamespaceOptions, ServiceBusClient

    options = PairedNamespaceOptions(
        secondary.connection_string,
        backlog_queue_count=2,
        enable_syphon=True,
        management_endpoint=f"https://127.0.0.1:{secondary.http_port}/",
        connection_verify=secondary.http_ca,
        syphon_wait=0.5,
    )
    client = ServiceBusClient.from_connection_string(primary.connection_string, paired_namespace=options)
    async with client:
        deadline = asyncio.get_running_loop().time() + 60
        while _parked(secondary) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)  # polling the secondary's counts (a condition, with a deadline)
        state = client.paired_state
        assert state is not None
        return state.syphoned


def test_writers_pickle_and_show_no_secret(
    spark: Any, sb_broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyspark import cloudpickle
    from pyspark.sql.types import StringType, StructField, StructType

    key = _key(sb_broker)
    source = ServiceBusDataSource({"connectionstring": sb_broker.connection_string, "entity": "q"})
    schema = StructType([StructField("body", StringType())])
    for thing in (source, source.writer(schema, False), source.streamWriter(schema, False)):
        copy = cloudpickle.loads(cloudpickle.dumps(thing))
        assert key not in repr(thing) and key not in repr(copy)
        assert copy.config == source.config
    queue = new_queue(sb_broker)
    spark.range(0, 10).selectExpr("cast(id as string) as body").write.parquet(str(tmp_path / "in"))
    query = (
        spark.readStream.schema("body string").parquet(str(tmp_path / "in"))
        .writeStream.format("servicebus").option("connectionString", sb_broker.connection_string)
        .option("entity", queue).option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    try:
        assert query.awaitTermination(60)
        query.explain(extended=True)
    finally:
        query.stop()
    shown = capsys.readouterr().out
    assert "servicebus" in shown and key not in shown
    assert len(drain(sb_broker, queue)) == 10


BLOCKER = """
import runpy, sys
sys.modules["amqplink"] = None  # an executor whose Python has no amqplink
module = sys.argv[2]
sys.argv = [sys.argv[0], *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def test_executors_without_the_package_give_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "block.py").write_text(BLOCKER)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "block.py"} "$@"\n')
    python.chmod(0o755)
    env = {**os.environ, "PYSPARK_PYTHON": str(python), "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "demo", "--rows", "100", "--no-outage", "--json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    ours = [line for line in done.stderr.splitlines() if line.startswith("amqplink demo:")]
    assert len(ours) == 1 and "cannot import amqplink.spark.writer" in ours[0] and "set PYSPARK_PYTHON" in ours[0]
    assert "amqplink spark-package" in ours[0]  # the other way: ship it
    # stdout: at most the command's one JSON line, saying why it stopped (as every command's does)
    lines = done.stdout.splitlines()
    assert len(lines) <= 1
    assert all("cannot import amqplink.spark.writer" in json.loads(line)["stopped"] for line in lines)


def test_the_demo_without_java_says_what_to_install(tmp_path: Path) -> None:
    """It printed PySpark's traceback ending in "[JAVA_GATEWAY_EXITED] Java gateway process
    exited before sending its port number"."""
    env = {**os.environ, "PYTHONPATH": ROOT, "JAVA_HOME": str(tmp_path / "no-java")}
    done = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "demo", "--rows", "100", "--json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    ours = [line for line in done.stderr.splitlines() if line.startswith("amqplink demo:")]
    assert len(ours) == 1 and f"Spark's JVM did not start (JAVA_HOME={tmp_path / 'no-java'};" in ours[0]
    assert "Spark needs Java 17 or later, as java on PATH or in JAVA_HOME" in ours[0]


def test_the_demo_passes_end_to_end() -> None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("PYSPARK_PYTHON", None)  # the demo sets it itself
    done = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "demo", "--rows", "5000", "--outage-seconds", "3", "--json"],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"] is True and result["rows"] == 5000 and result["lost"] == 0
    assert result["outages"] == 1 and result["parked"] == result["syphoned"]
    assert result["received"] - result["duplicates_removed"] == 5000
    assert result["spark_startup_seconds"] > 0 and result["send_messages_per_second"] > 0


def test_bad_options_and_columns_fail_before_any_task_naming_them(spark: Any, sb_broker: Broker) -> None:
    df = spark.range(0, 10).selectExpr("cast(id as string) as body", "'red' as colour")
    for frame, options, named in (
        (df.select("body"), {"maxInFlight": "0"}, "option maxInFlight: must be at least 1"),
        (df, {}, "column 'colour' is not a message property"),
        (df.select("body"), {"entity": None}, "no queue or topic to send to"),
    ):
        writer = frame.write.format("servicebus").option("connectionString", sb_broker.connection_string)
        for key, value in {"entity": "q", **options}.items():
            if value is not None:
                writer = writer.option(key, value)
        with pytest.raises(Exception) as failed:
            writer.mode("append").save()
        assert named in str(failed.value)
        assert _key(sb_broker) not in str(failed.value)


def test_nothing_connects_on_the_driver() -> None:
    """Nothing listens on port 1: making the writers would fail if they connected."""
    from pyspark.sql.types import StringType, StructField, StructType

    unreachable = "Endpoint=sb://127.0.0.1:1/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0"
    source = ServiceBusDataSource({"connectionString": unreachable, "entity": "q"})
    schema = StructType([StructField("body", StringType())])
    assert source.writer(schema, False).config.entity == "q"
    assert source.streamWriter(schema, False).config.entity == "q"
    assert foreach_partition_sender({"connectionString": unreachable, "entity": "q"}).config.entity == "q"


def test_commit_logs_one_summary_line_with_the_counts_and_no_key(caplog: pytest.LogCaptureFixture) -> None:
    from amqplink.spark.datasource import ServiceBusArrowWriter, ServiceBusStreamWriter, SinkCommitMessage
    from amqplink.spark.writer import PartitionStats

    config = ServiceBusDataSource({"connectionString": CONN, "entity": "orders"}).config
    messages: list[Any] = [
        SinkCommitMessage(0, 0, PartitionStats(rows=600, bytes=6000, batches=3, failed_over=100)),
        SinkCommitMessage(1, 1, PartitionStats(rows=400, bytes=4000, batches=2, busy=1, retried=2)),
        None,  # a task that returned nothing
    ]
    with caplog.at_level(logging.INFO, logger="amqplink.spark"):
        ServiceBusArrowWriter(config, "w1").commit(messages)
        ServiceBusStreamWriter(config).commit(messages, 7)
    lines = [r.getMessage() for r in caplog.records if r.name == "amqplink.spark"]
    assert len(lines) == 2
    assert "write w1 to orders on ns.example: 1000 rows, 10000 bytes in 5 batches from 2 tasks" in lines[0]
    assert "100 failed over, 2 batches sent again, 1 server-busy waits, 0 failed" in lines[0]
    assert lines[1].startswith("servicebus sink: micro-batch 7 to orders")
    assert "SeCrEtKeY123" not in caplog.text


def test_abort_says_which_tasks_finished_not_that_no_row_was_sent(caplog: pytest.LogCaptureFixture) -> None:
    """Ctrl-C of the demo midway: its tasks were cancelled after sending 12,307 rows, and the
    line said "aborted after 0 rows were sent" (only finished tasks report their rows)."""
    from amqplink.spark.datasource import ServiceBusArrowWriter, ServiceBusStreamWriter, SinkCommitMessage
    from amqplink.spark.writer import PartitionStats

    config = ServiceBusDataSource({"connectionString": CONN, "entity": "orders"}).config
    finished = SinkCommitMessage(2, 0, PartitionStats(rows=250, bytes=2500, batches=1))
    with caplog.at_level(logging.INFO, logger="amqplink.spark"):
        ServiceBusArrowWriter(config, "w1").abort([None, None, None, None])
        ServiceBusStreamWriter(config).abort([None, finished], 7)
    lines = [r.getMessage() for r in caplog.records if r.name == "amqplink.spark"]
    assert lines == [
        "servicebus sink: write w1 aborted; 0 of its 4 tasks finished, sending 0 rows "
        "(an unfinished task may have sent rows too)",
        "servicebus sink: micro-batch 7 aborted; 1 of its 2 tasks finished, sending 250 rows "
        "(an unfinished task may have sent rows too)",
    ]


def test_a_bad_row_fails_the_write_once_naming_it_before_its_batch_is_sent(
    spark: Any, sb_broker: Broker, tmp_path: Path
) -> None:
    """A null body at row 2500 of one partition (Arrow batches of 1,000 rows): the first two
    batches are sent once (the task is not run again: a retry would send them again under the
    same ids), nothing of the third; the error names the row and its id, on the driver."""
    for streaming in (False, True):
        queue = new_queue(sb_broker)
        df = spark.range(0, 3000, numPartitions=1).selectExpr(
            "case when id = 2500 then null else cast(id as string) end as body"
        )
        with pytest.raises(Exception) as failed:
            if streaming:
                source = tmp_path / f"in-{streaming}"
                df.write.parquet(str(source))
                query = (
                    spark.readStream.schema("body string").option("maxFilesPerTrigger", 1000).parquet(str(source))
                    .coalesce(1).writeStream.format("servicebus")
                    .option("connectionString", sb_broker.connection_string).option("entity", queue)
                    .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
                )  # fmt: skip
                query.awaitTermination(120)
            else:
                df.write.format("servicebus").option("connectionString", sb_broker.connection_string).option(
                    "entity", queue
                ).mode("append").save()
        text = str(failed.value)
        assert "row 2500 of partition 0" in text and "column 'body' is null" in text, text[-2000:]
        assert "retrying will not help" in text and "so that Spark retries it" not in text
        got = drain(sb_broker, queue, idle=1.0)
        ids = [m.message_id for m in got]
        assert len(ids) == len(set(ids)) == 2000  # each once: the task ran once
        assert sorted(int(str(m)) for m in got) == list(range(2000))


def _reversed_then_failing_on_attempt_0() -> Any:
    """A ``mapInArrow`` function: attempt 0 of the task yields its rows in reverse order, 1,000
    at a time, and fails after 2,000; the retry yields them in order (input that a retried
    task does not see in the same order, as after a shuffle)."""

    def run(batches):  # type: ignore[no-untyped-def]
        import pyarrow as pa
        from pyspark import TaskContext

        rows = [row for batch in batches for row in batch.column(0).to_pylist()]
        first = TaskContext.get().attemptNumber() == 0
        if first:
            rows.reverse()
        for start in range(0, len(rows), 1000):
            if first and start == 2000:
                raise RuntimeError("forced failure after 2,000 rows (attempt 0)")
            yield pa.RecordBatch.from_pydict({"body": rows[start : start + 1000]})

    return run


def test_content_ids_survive_a_retry_that_sees_rows_in_another_order(spark: Any, sb_broker: Broker) -> None:
    """Position ids name a row by where it came: the retry gives the first rows the ids attempt
    0 gave the last ones, so duplicate detection drops them (lost) and keeps the others twice.
    Content ids name a row by what it holds: every row once. (1 KiB bodies: attempt 0's full
    batch transfers go out before it fails.)"""
    df = spark.range(0, 4000, numPartitions=1).selectExpr("rpad(cast(id as string), 1024, '.') as body")
    df = df.mapInArrow(_reversed_then_failing_on_attempt_0(), "body string")
    got = {}
    for mode in ("position", "content"):
        queue = new_queue(sb_broker, dedup=True)
        df.write.format("servicebus").option("connectionString", sb_broker.connection_string).option(
            "entity", queue
        ).option("messageIdMode", mode).mode("append").save()
        got[mode] = Counter(int(str(m).rstrip(".")) for m in drain(sb_broker, queue))
    assert sorted(got["content"]) == list(range(4000)) and set(got["content"].values()) == {1}
    position = got["position"]
    sent_by_attempt_0 = sum(n == 2 for n in position.values())
    assert 0 < sent_by_attempt_0 <= 2000  # rows 3,999 down to 2,000 went out under ids 0-1,999 ...
    assert set(position.values()) == {1, 2} and sorted(position)[0] == sent_by_attempt_0  # ... so rows 0-N were lost
    assert len(position) == 4000 - sent_by_attempt_0
