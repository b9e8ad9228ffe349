"""``foreachPartition`` sending, for Spark 3 and for code that already has a ``foreachPartition``.

::

    messages = df.selectExpr("to_json(struct(*)) as body", "order_id as message_id")
    messages.foreachPartition(amqplink.spark.foreach_partition_sender(
        {"connectionString": conn, "entity": "orders"}, schema=messages.schema))

``schema`` (the DataFrame's) is checked when the sender is made, on the driver, as the data
source checks its own: an unknown column or a wrong type fails there, naming it, before any
task runs (not in every worker, under Spark's stack traces).

The same send loop as the data source (:func:`amqplink.spark.writer.send_partition`); rows
are taken in chunks of :data:`CHUNK_ROWS`. Message ids without a ``message_id`` column are
``<sender id>:<partition>:<row>`` (``messageIdMode=position``, the sender id made once
when the sender is made, so a retried task makes the same ids) or by content.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from amqplink.spark.columns import Columns, IdScheme, check_struct, columns_of_rows
from amqplink.spark.options import SinkConfig, entity_path_of, parse_options
from amqplink.spark.writer import CHUNK_ROWS, PartitionStats, send_partition

__all__ = ["CHUNK_ROWS", "ForeachPartitionSender", "foreach_partition_sender"]

log = logging.getLogger("amqplink.spark")

class ForeachPartitionSender:
    """A picklable ``foreachPartition`` function: sends the partition's rows, raises unless all were acknowledged."""

    def __init__(self, config: SinkConfig, sender_id: str | None = None) -> None:
        self.config = config
        self.sender_id = sender_id or uuid.uuid4().hex

    def __repr__(self) -> str:
        return f"ForeachPartitionSender({self.config!r}, sender_id={self.sender_id!r})"

    def __call__(self, rows: Iterable[Any]) -> PartitionStats:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        scheme = IdScheme(self.config.message_id_mode, self.sender_id, partition, self.config.auto_partition_key)
        stats = send_partition(self.config, _chunks(iter(rows)), scheme)
        log.info(
            "servicebus sink: partition %d sent %d rows (%d failed over, %d failed)",
            partition,
            stats.rows,
            stats.failed_over,
            stats.failed,
        )
        return stats


def _chunks(rows: Iterator[Any]) -> Iterator[Columns]:
    while chunk := list(itertools.islice(rows, CHUNK_ROWS)):
        yield columns_of_rows(chunk)


def foreach_partition_sender(options: Mapping[str, Any], *, schema: Any = None) -> ForeachPartitionSender:
    """A ``foreachPartition`` function sending rows with the data source's ``options`` (same names).

    ``schema``: the schema of the DataFrame it will send (``df.schema``, a ``StructType``),
    checked here as the data source checks its own (:class:`~amqplink.spark.columns.SinkSchemaError`
    naming the first unknown column or wrong type); without it the columns are checked in the
    tasks, by the first rows of each."""
    config = parse_options(options)
    if config.entity is None:
        from dataclasses import replace

        config = replace(config, entity=entity_path_of(config))
    if schema is not None:
        check_struct(schema, entity_option=config.entity is not None)
    return ForeachPartitionSender(config)
