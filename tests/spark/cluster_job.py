"""A job ``spark-submit`` runs on the standalone cluster of ``test_cluster.py``.

``check``: :func:`amqplink.spark.check_executors`; prints its error and exits 2 if the
executors cannot import amqplink. ``write-read CONN A B CHECKPOINT MARKER``: writes 3,000
rows to queue A with ``format("servicebus")`` (no ``register``: Spark finds it through the
shipped ``pyspark_servicebus``), then streams A into queue B (the rows keep their message
ids; B has duplicate detection), one task of batch 1 waiting on attempt 0 after writing MARKER
(the test kills that task's executor there); ends when A is empty.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession


def _stored(conn: str, entity: str) -> int:
    from amqplink.servicebus import ServiceBusClient

    with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_receiver(entity) as receiver:
        return len(receiver.peek_messages(max_message_count=5000, sequence_number=1))


def _hold_attempt_0(marker: str):  # type: ignore[no-untyped-def]
    from pyspark.sql.functions import udf

    def hold(seq):  # type: ignore[no-untyped-def]
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.attemptNumber() == 0 and seq % 97 == 5 and not Path(marker).exists():  # once
            Path(marker).write_text(str(seq))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # this executor is killed here
                time.sleep(0.1)
        return seq

    return udf(hold, "bigint")


def main(argv: list[str]) -> int:
    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if argv[0] == "check":
        from amqplink.spark import ExecutorImportError, check_executors

        try:
            check_executors(spark)
        except ExecutorImportError as exc:
            print(f"ExecutorImportError: {exc}", file=sys.stderr, flush=True)
            return 2
        return 0
    conn, first, second, checkpoint, marker = argv[1:6]
    from pyspark.sql.functions import col

    spark.range(0, 3000, numPartitions=4).selectExpr("cast(id as string) as body").write.format("servicebus").option(
        "connectionString", conn
    ).option("entity", first).mode("append").save()
    hold = _hold_attempt_0(marker)

    def write(df, batch_id):  # type: ignore[no-untyped-def]
        if batch_id == 1:
            df = df.withColumn("sequence_number", hold(col("sequence_number")))
        df.write.format("servicebus").option("connectionString", conn).option("entity", second).mode("append").save()

    query = (
        spark.readStream.format("servicebus").option("connectionString", conn).option("entity", first)
        .option("checkpointLocation", checkpoint).option("maxMessagesPerTrigger", 1000).option("numPartitions", 4)
        .load().writeStream.foreachBatch(write).option("checkpointLocation", f"{checkpoint}/query")
        .trigger(processingTime="500 milliseconds").start()
    )  # fmt: skip
    deadline = time.monotonic() + 400
    while _stored(conn, first) and time.monotonic() < deadline and query.isActive:
        time.sleep(0.5)  # polling the source's count (a condition, with a deadline)
    failed = query.exception()
    query.stop()
    if failed is not None:
        print(f"query failed: {failed}", file=sys.stderr)
        return 1
    return 0 if not _stored(conn, first) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
