"""A streaming query in a driver process of its own, for ``test_source_faults.py`` to kill.

``python -m tests.spark.source_driver CONN SOURCE TARGET CHECKPOINT BLOCK_AT MARKER``: reads
SOURCE (100 messages a micro-batch) into TARGET through the sink (the rows keep their
``message_id``, so TARGET's duplicate detection makes the sink idempotent). With BLOCK_AT >= 0,
once micro-batch BLOCK_AT is written it writes MARKER and waits to be killed; otherwise it runs
until SOURCE is empty (every message and every redelivered copy completed), then exits 0.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path


def _stored(conn: str, entity: str) -> int:
    from amqplink.servicebus import ServiceBusClient

    with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_receiver(entity) as receiver:
        return len(receiver.peek_messages(max_message_count=5000, sequence_number=1))


def main(conn: str, source: str, target: str, checkpoint: str, block_at: int, marker: str) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")

    def write(df: object, batch_id: int) -> None:
        df.write.format("servicebus").option("connectionString", conn).option("entity", target).mode(  # type: ignore[attr-defined]
            "append"
        ).save()
        if batch_id == block_at:
            Path(marker).write_text(str(batch_id))
            threading.Event().wait()  # the test kills this process here, mid-batch: Spark has not committed it

    query = (
        spark.readStream.format("servicebus").option("connectionString", conn).option("entity", source)
        .option("checkpointLocation", checkpoint).option("maxMessagesPerTrigger", 100).option("receiveWait", 0.5)
        .load().writeStream.foreachBatch(write).option("checkpointLocation", f"{checkpoint}/query")
        .trigger(processingTime="500 milliseconds").start()
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while _stored(conn, source) and time.monotonic() < deadline and query.isActive:
        time.sleep(0.5)  # polling the source's count (a condition, with a deadline)
    query.stop()
    return 0 if not _stored(conn, source) else 1


if __name__ == "__main__":
    conn, source, target, checkpoint, block_at, marker = sys.argv[1:7]
    sys.exit(main(conn, source, target, checkpoint, int(block_at), marker))
