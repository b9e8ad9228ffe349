"""The README's PySpark sink and source snippets, run as written (issue 34 items 3 and 4): its
``foreachPartition`` line passed a raw DataFrame (an ``order_id`` column) and failed in every
task under about 400 lines of traces, and its streaming checkpoint was ``/chk/orders``, which
only root can make."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.spark import foreach_partition_sender
from amqplink.spark.columns import SinkSchemaError
from tests.docs_text import code_blocks
from tests.spark.conftest import drain

pytestmark = pytest.mark.spark

ORDERS = 300


def _orders(spark: Any) -> Any:
    rows = [(f"o-{i}", i * 1.5, "widget") for i in range(ORDERS)]
    return spark.createDataFrame(rows, "order_id string, amount double, item string")


def test_the_readmes_snippet_runs_as_written(
    spark: Any, sb_broker: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the snippet's checkpoint goes under it
    stream = spark.readStream.format("rate").option("rowsPerSecond", 20).load()
    names = {
        "spark": spark,
        "df": _orders(spark),
        "stream": stream.selectExpr("cast(value as string) as body"),
        "conn_str": sb_broker.connection_string,
    }
    (snippet,) = code_blocks("PySpark sink", "python")
    started = set(q.id for q in spark.streams.active)
    try:
        exec(compile(snippet, "README.md#pyspark-sink", "exec"), names)
    finally:
        queries = [q for q in spark.streams.active if q.id not in started]
        for query in queries:
            query.stop()
    assert len(queries) == 1 and (tmp_path / "checkpoints" / "orders" / "metadata").is_file()
    got = [m for m in drain(sb_broker, "orders") if str(m.message_id).startswith("o-")]
    # messages.write and messages.foreachPartition each sent every order once, the same message
    assert Counter(m.message_id for m in got) == {f"o-{i}": 2 for i in range(ORDERS)}
    assert {m.subject for m in got} == {"orders"}
    assert all(json.loads(str(m))["order_id"] == m.message_id for m in got)


def test_the_readmes_source_snippet_runs_as_written(
    spark: Any, sb_broker: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream drains ``orders`` into Parquet files (every message once, each completed),
    and the batch read after it peeks an empty queue."""
    from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
    from tests.spark.conftest import stored

    drain(sb_broker, "orders", idle=0.5)  # (what another test left)
    conn_str = sb_broker.connection_string
    with ServiceBusClient.from_connection_string(conn_str) as client, client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage(f"order {i}", message_id=f"in-{i}") for i in range(ORDERS)])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    names = {"spark": spark, "conn_str": sb_broker.connection_string}
    (snippet,) = code_blocks("PySpark source", "python")
    exec(compile(snippet, "README.md#pyspark-source", "exec"), names)
    written = spark.read.parquet(str(tmp_path / "orders")).collect()
    assert sorted(r.message_id for r in written) == sorted(f"in-{i}" for i in range(ORDERS))
    assert {bytes(r.body).decode() for r in written} == {f"order {i}" for i in range(ORDERS)}
    assert stored(sb_broker.connection_string, "orders") == 0  # each completed once Spark committed it
    assert names["snapshot"].count() == 0


def test_foreach_checks_the_schema_on_the_driver(spark: Any, sb_broker: Broker) -> None:
    """The raw DataFrame: one error naming the column, before any task (no Spark job runs)."""
    df = _orders(spark)
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(SinkSchemaError, match="column 'order_id' is not a message property"):
        df.foreachPartition(
            foreach_partition_sender({"connectionString": sb_broker.connection_string, "entity": "q"}, schema=df.schema)
        )
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs
