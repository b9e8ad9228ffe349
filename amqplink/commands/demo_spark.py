"""The demo's Spark side: the input rows and the write through the sink (blocking calls,
run in a thread by :mod:`.demo`).

Every message carries its row number (what the consumer checks): the body is
``<row>:`` padded to ``--size`` bytes, or, with ``--input``, the input row as JSON with
the row number in the application property ``row``.
"""

from __future__ import annotations

import os
from typing import Any

from amqplink.spark.session import activate

__all__ = ["PARTITIONS", "build_input", "warm_up", "write_batch", "write_stream"]

PARTITIONS = 4
"""Partitions of the generated rows (two tasks at a time on ``local[2]``)."""


def build_input(spark: Any, rows: int, size: int, path: str | None) -> tuple[Any, set[int]]:
    """``(DataFrame of body + application_properties, the row numbers it holds)``."""
    from pyspark.sql import functions as F

    if path is None:
        df = spark.range(0, rows, numPartitions=PARTITIONS).withColumnRenamed("id", "row")
        text = F.concat(F.col("row").cast("string"), F.lit(":"))
        body = F.rpad(text, max(size, 24), ".")
        expected = set(range(rows))
    else:
        source = _read(spark, path)
        df = source.withColumn("row", F.monotonically_increasing_id())
        body = F.to_json(F.struct(*[F.col(f"`{name}`") for name in source.columns]))
        expected = {r[0] for r in df.select("row").collect()}
    if path is None:  # the row number opens the body: body only, the sink's fast path
        return df.select(body.cast("binary").alias("body")), expected
    out = df.select(
        body.cast("binary").alias("body"),
        F.create_map(F.lit("row"), F.col("row").cast("string")).alias("application_properties"),
    )
    return out, expected


def _read(spark: Any, path: str) -> Any:
    if not os.path.exists(path):
        raise FileNotFoundError(f"--input {path}: no such file or directory")
    lowered = path.lower().rstrip("/")
    if lowered.endswith(".csv"):
        return spark.read.option("header", "true").csv(path)
    if lowered.endswith(".parquet") or os.path.isdir(path):
        return spark.read.parquet(path)
    raise ValueError(f"--input {path}: give a .csv file (with a header line) or a .parquet file or directory")


def warm_up(df: Any, sink: dict[str, str]) -> None:
    """Write no row through the sink: Spark starts what a Python data source write needs
    (its planning processes, the workers' imports) before the timed write."""
    write_batch(df.limit(0), sink)


def write_batch(df: Any, sink: dict[str, str]) -> int | None:
    """``df.write.format("servicebus")`` with ``sink`` options; None (the rows are known)."""
    activate(df.sparkSession)
    df.write.format("servicebus").options(**sink).mode("append").save()
    return None


def write_stream(spark: Any, sink: dict[str, str], rows: int, duration: float, checkpoint: str) -> int:
    """Structured Streaming from the rate source (``rows / duration`` rows a second) for
    ``duration`` seconds; how many rows the committed micro-batches held (rows 0..n-1)."""
    from pyspark.sql import functions as F

    rate = max(1, int(rows / duration))
    stream = spark.readStream.format("rate").option("rowsPerSecond", rate).option("numPartitions", 2).load()
    out = stream.select(
        F.rpad(F.concat(F.col("value").cast("string"), F.lit(":")), 64, ".").cast("binary").alias("body")
    )
    query = (
        out.writeStream.format("servicebus")
        .options(**sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    query.awaitTermination(duration)
    query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    return sum(int(p["numInputRows"]) for p in query.recentProgress)
