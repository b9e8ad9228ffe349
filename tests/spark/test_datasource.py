"""The data source under a real local Spark: batch and streaming writes with exact counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.servicebus.replication import Deduplicator
from amqplink.spark import foreach_partition_sender
from tests.spark.conftest import drain, new_queue

pytestmark = pytest.mark.spark


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
