"""The Python Data Source ``servicebus`` (alias ``amqplink``) for Spark 4: batch and streaming writes.

::

    amqplink.spark.register(spark)
    df.write.format("servicebus").option("connectionString", conn).option("entity", "orders") \\
        .mode("append").save()
    df.writeStream.format("servicebus").option("connectionString", conn).option("entity", "orders") \\
        .option("checkpointLocation", path).start()

Spark 4's Python Data Source API needs no jar. The writers are the Arrow ones
(``DataSourceArrowWriter``, ``DataSourceStreamArrowWriter``): a task receives Arrow record
batches, which cost Spark far less than rows
(docs/spark.md#measured-facts-pyspark-43-java-17-this-machine). Options are parsed and the
schema checked on the driver (an error there names the option or column, before any task
starts); the writer pickled to the executors holds the parsed :class:`SinkConfig` (connection strings hidden from its
``repr``) and connects only there. Each task returns a :class:`SinkCommitMessage` with its
counts; the driver logs one line per write or micro-batch.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from amqplink.spark.columns import IdScheme, check_struct
from amqplink.spark.options import SinkConfig, entity_path_of, parse_options
from amqplink.spark.rows import SCHEMA
from amqplink.spark.source_options import parse_source_options
from amqplink.spark.writer import PartitionStats, send_partition

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from amqplink.spark.batch_reader import ServiceBusBatchReader
    from amqplink.spark.stream_reader import ServiceBusStreamReader

__all__ = [
    "AmqplinkDataSource",
    "ServiceBusArrowWriter",
    "ServiceBusDataSource",
    "ServiceBusStreamWriter",
    "SinkCommitMessage",
    "register",
]

log = logging.getLogger("amqplink.spark")

QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"
"""The local properties Structured Streaming sets on a micro-batch's tasks."""


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """One task's counts, sent back to the driver's ``commit``."""

    partition: int
    attempt: int
    stats: PartitionStats


def _task() -> tuple[int, int, Any]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return 0, 0, None
    return context.partitionId(), context.attemptNumber(), context


COUNTS = ("rows", "bytes", "batches", "busy", "retried", "failed", "failed_over")
"""The fields of :class:`PartitionStats` that add up over tasks."""


def summary(messages: Sequence[WriterCommitMessage | None]) -> dict[str, Any]:
    """The counts of every task of a write or micro-batch, added up."""
    total = PartitionStats()
    tasks = 0
    for message in messages:
        if isinstance(message, SinkCommitMessage):
            tasks += 1
            for name in COUNTS:
                setattr(total, name, getattr(total, name) + getattr(message.stats, name))
            total.seconds = max(total.seconds, message.stats.seconds)
    return {"tasks": tasks, **{name: getattr(total, name) for name in (*COUNTS, "seconds")}}


def _driver_log() -> logging.Logger:
    """The summary's logger: ``commit`` runs in a Python worker Spark starts on the driver's
    side, where nothing configured logging; there it writes to stderr (which Spark passes on
    to the driver's), once per line."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def _log_summary(what: str, config: SinkConfig, messages: Sequence[WriterCommitMessage | None]) -> None:
    counts = summary(messages)
    log = _driver_log()
    log.info(
        "servicebus sink: %s to %s on %s: %d rows, %d bytes in %d batches from %d tasks; "
        "%d failed over, %d batches sent again, %d server-busy waits, %d failed",
        what,
        config.entity or "the 'entity' column's entities",
        config.namespace,
        counts["rows"],
        counts["bytes"],
        counts["batches"],
        counts["tasks"],
        counts["failed_over"],
        counts["retried"],
        counts["busy"],
        counts["failed"],
    )


def _raise_bad_rows(messages: Sequence[WriterCommitMessage | None]) -> None:
    """Fail the write on the driver's side with the first bad row a task met (the task itself
    succeeded, so that Spark did not run it again: that would meet the same row)."""
    bad = [m.stats.bad_row for m in messages if isinstance(m, SinkCommitMessage) and m.stats.bad_row is not None]
    if not bad:
        return
    first = min(bad, key=lambda e: (e.partition, e.row))
    if len(bad) > 1:
        log.warning("servicebus sink: %d partitions stopped at a bad row; the first: %s", len(bad), first)
    raise first


def _log_abort(what: str, messages: list[WriterCommitMessage | None]) -> None:
    """One WARNING line for an aborted write: only the tasks that finished report their
    rows (a task failed or cancelled midway may have sent some too: they are not lost, and
    a retry sends them again with the same ids)."""
    counts = summary(messages)
    log.warning(
        "servicebus sink: %s aborted; %d of its %d tasks finished, sending %d rows (an unfinished task may "
        "have sent rows too)",
        what,
        counts["tasks"],
        len(messages),
        counts["rows"],
    )


class ServiceBusArrowWriter(DataSourceArrowWriter):
    """Batch writer: ids ``<write id>:<partition>:<row>`` (or by content, see :mod:`.columns`)."""

    def __init__(self, config: SinkConfig, write_id: str) -> None:
        self.config = config
        self.write_id = write_id

    def __repr__(self) -> str:
        return f"ServiceBusArrowWriter({self.config!r}, write_id={self.write_id!r})"

    def write(self, iterator: Iterator[pyarrow.RecordBatch]) -> SinkCommitMessage:
        partition, attempt, _context = _task()
        scheme = IdScheme(self.config.message_id_mode, self.write_id, partition, self.config.auto_partition_key)
        stats = send_partition(self.config, iterator, scheme, keep_bad_row=True)
        return SinkCommitMessage(partition, attempt, stats)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_summary(f"write {self.write_id}", self.config, messages)
        _raise_bad_rows(messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_abort(f"write {self.write_id}", messages)


class ServiceBusStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writer: ids ``<query id>:<batch id>:<partition>:<row>``, so a micro-batch
    replayed from the checkpoint sends the same ids (or by content, see :mod:`.columns`)."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    def __repr__(self) -> str:
        return f"ServiceBusStreamWriter({self.config!r})"

    def write(self, iterator: Iterator[pyarrow.RecordBatch]) -> SinkCommitMessage:
        partition, attempt, context = _task()
        query = context.getLocalProperty(QUERY_ID) if context is not None else None
        batch = context.getLocalProperty(BATCH_ID) if context is not None else None
        scheme = IdScheme(self.config.message_id_mode, f"{query}:{batch}", partition, self.config.auto_partition_key)
        stats = send_partition(self.config, iterator, scheme, keep_bad_row=True)
        return SinkCommitMessage(partition, attempt, stats)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_summary(f"micro-batch {batchId}", self.config, messages)
        _raise_bad_rows(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_abort(f"micro-batch {batchId}", messages)


class ServiceBusDataSource(DataSource):
    """``format("servicebus")``: writes rows as messages to a Service Bus queue or topic, and
    reads a queue or subscription (or either's dead-letter queue) as rows.

    The options are parsed when Spark asks for a writer (as the sink's, :mod:`.options`) or a
    reader (as the source's, :mod:`.source_options`), on the driver's side, so a bad one is an
    error naming it before any task starts."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self._sink: SinkConfig | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"

    @property
    def config(self) -> SinkConfig:
        """The options as the sink's (parsed once)."""
        if self._sink is None:
            self._sink = parse_options(self.options)
        return self._sink

    @classmethod
    def name(cls) -> str:
        return "servicebus"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> ServiceBusBatchReader:
        from amqplink.spark.batch_reader import ServiceBusBatchReader

        return ServiceBusBatchReader(parse_source_options(self.options))

    def streamReader(self, schema: StructType) -> ServiceBusStreamReader:
        from amqplink.spark.stream_reader import ServiceBusStreamReader

        return ServiceBusStreamReader(parse_source_options(self.options))

    def _check(self, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise ValueError("the servicebus sink only appends (a queue cannot be overwritten): use mode('append')")
        entity = self.config.entity or entity_path_of(self.config)
        check_struct(schema, entity_option=entity is not None)

    def writer(self, schema: StructType, overwrite: bool) -> ServiceBusArrowWriter:
        self._check(schema, overwrite)
        return ServiceBusArrowWriter(self._with_entity(), uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> ServiceBusStreamWriter:
        self._check(schema, overwrite)
        return ServiceBusStreamWriter(self._with_entity())

    def _with_entity(self) -> SinkConfig:
        if self.config.entity is not None:
            return self.config
        from dataclasses import replace

        return replace(self.config, entity=entity_path_of(self.config))


class AmqplinkDataSource(ServiceBusDataSource):
    """``format("amqplink")``: the same sink under the project's name."""

    @classmethod
    def name(cls) -> str:
        return "amqplink"


def register(spark: SparkSession) -> None:
    """Register ``servicebus`` and ``amqplink`` with ``spark`` (once per session)."""
    spark.dataSource.register(ServiceBusDataSource)
    spark.dataSource.register(AmqplinkDataSource)
