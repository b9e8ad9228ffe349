"""The PySpark sink: Spark rows -> Service Bus messages, batched, pipelined and idempotent.

- the Python Data Source ``servicebus`` (:mod:`.datasource`), for ``df.write`` and
  ``df.writeStream``: Spark 4 finds it by itself through the top-level module
  ``pyspark_servicebus``; :func:`register` adds it (and the alias ``amqplink``) to one session
  explicitly;
- :func:`foreach_partition_sender` for ``foreachPartition`` (Spark 3 too) (:mod:`.foreach`).

One send loop under both (:mod:`.writer`); options in :mod:`.options`, columns and message
ids in :mod:`.columns`, their encoding in :mod:`.encoding`, the per-worker connection
cache in :mod:`.cache`; :func:`check_executors` and :func:`activate` in :mod:`.session`.
Needs the ``spark`` extra (pyspark, pyarrow, pandas) only for the data source.
"""

from __future__ import annotations

from typing import Any

from amqplink.spark.foreach import ForeachPartitionSender, foreach_partition_sender
from amqplink.spark.options import SinkConfig, SinkOptionError, parse_options
from amqplink.spark.session import ExecutorImportError, activate, check_executors
from amqplink.spark.writer import SinkWriteError

__all__ = [
    "ExecutorImportError",
    "ForeachPartitionSender",
    "SinkConfig",
    "SinkOptionError",
    "SinkWriteError",
    "activate",
    "check_executors",
    "foreach_partition_sender",
    "parse_options",
    "register",
]


def register(spark: Any) -> None:
    """Register the data sources ``servicebus`` and ``amqplink`` with ``spark`` (a SparkSession)."""
    from amqplink.spark.datasource import register as register_sources

    register_sources(spark)
