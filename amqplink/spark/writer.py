"""One partition's send loop, shared by the Arrow writer, the streaming writer and
``foreachPartition``.

The calling thread (Spark's Python worker) hands a chunk of rows to the event loop (which
the blocking facade runs on that same thread while it waits), which encodes them (a run
of rows sharing a partition key at a time, on the fast path: :mod:`.encoding`) and packs
them into batch transfers (one open batch per entity and
session/partition key, bounded by ``maxBatchBytes`` and the entity's max-message-size) and
pipelines them, at most ``maxInFlight`` batches awaiting their outcome: the next chunk
waits for room, so memory stays bounded by one chunk plus ``maxInFlight`` batches however
large the partition is. A batch refused with ``com.microsoft:server-busy`` backs off
(docs/protocol.md#retry: at least 4 s; here doubling, up to ``serverBusyTimeout``) instead of failing the
task; other errors are retried by the client's retry policy; with a paired namespace a
failing batch is also kept and sent again until the entity has failed over (the paired
client parks it on the secondary) or ``failoverInterval`` + ``sendTimeout`` passed.
:func:`send_partition` returns only once every message was acknowledged, and raises if
one was not (``failOnError``, the default), so Spark retries the task: at-least-once,
with the same message ids (:mod:`.columns`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from amqplink import AMQPLinkError
from amqplink.servicebus.exceptions import ServiceBusError, ServiceBusServerBusyError
from amqplink.servicebus.message import MAX_MESSAGE_LENGTH_BYTES, ServiceBusMessage, ServiceBusMessageBatch
from amqplink.servicebus.retry import SERVER_BUSY_MIN_BACKOFF, RetryError, RetryHooks, RetryPolicy, run_with_retry
from amqplink.spark import cache
from amqplink.spark.checks import check_arrow, entities_of, too_large
from amqplink.spark.columns import IGNORED, BadRowError, Columns, IdScheme
from amqplink.spark.encoding import Encoded, Run, encoded_rows, runs_of
from amqplink.spark.framing import FramedRun, framed_runs
from amqplink.spark.options import SinkConfig, redact
from amqplink.sync.loop import run as _run

__all__ = ["CHUNK_ROWS", "Chunk", "PartitionStats", "SinkWriteError", "send_partition"]

log = logging.getLogger(__name__)

CHUNK_ROWS = 1000
"""Rows turned into messages at a time."""
Chunk = Columns | Any
"""What :func:`send_partition` takes: rows as columns, or a ``pyarrow.RecordBatch`` (checked whole first)."""

SERVER_BUSY_MAX_BACKOFF = 30.0
"""The longest single wait after server-busy (seconds)."""


class SinkWriteError(AMQPLinkError, RuntimeError):
    """A partition's messages were not all acknowledged; Spark retries the task."""


@dataclass
class PartitionStats:
    """What one partition sent: rows acknowledged, body bytes, batch transfers, and the
    failures met on the way (``busy``: server-busy waits; ``retried``: batches sent again while
    a paired client failed over; ``failed``: rows given up on with
    ``failOnError=false``; ``failed_over``: rows parked on the paired namespace)."""

    rows: int = 0
    bytes: int = 0
    batches: int = 0
    busy: int = 0
    retried: int = 0
    failed: int = 0
    failed_over: int = 0
    seconds: float = 0.0
    bad_row: BadRowError | None = None
    """The row that stopped the partition (``send_partition(..., keep_bad_row=True)``): the rows
    before the record batch that holds it were sent, none of that batch."""


class _Pipeline:
    """Batches and in-flight transfers of one partition (lives on the event loop)."""

    def __init__(self, config: SinkConfig, lease: cache.Lease, stats: PartitionStats, partition: int = 0) -> None:
        self.config = config
        self.partition = partition
        self.lease = lease
        self.stats = stats
        self.open: dict[tuple[str, str | None], tuple[ServiceBusMessageBatch, int]] = {}
        self.room = asyncio.Semaphore(config.max_in_flight)
        self.tasks: set[asyncio.Task[None]] = set()
        self.error: BaseException | None = None
        self.limits: dict[str, int] = {}
        self.started = time.monotonic()
        self.rows_fed = 0
        """Rows added to batches so far: the next row's position in the partition, what a rate paces."""

    def _entity(self, entity: str | None) -> str:
        name = self.config.entity or entity  # the option wins over the column, as Kafka's topic option does
        if name is None:
            raise ValueError("a row has no entity: give the 'entity' option or a non-null 'entity' column")
        return name

    async def _limit(self, entity: str) -> int:
        limit = self.limits.get(entity)
        if limit is None:
            sender = self.lease.sender(entity)
            try:
                await sender.create_message_batch()  # attaches: learns the entity's max-message-size
                limit = min(self.config.max_batch_bytes, sender.max_message_size)
            except (ServiceBusError, OSError, TimeoutError):
                if not self.config.paired:
                    raise
                # The primary is down: the batches go to the paired client, which parks them.
                limit = min(self.config.max_batch_bytes, MAX_MESSAGE_LENGTH_BYTES)
            self.limits[entity] = limit
        return limit

    async def feed(self, chunk: list[Encoded]) -> None:
        """Add messages to their batches; send full ones (waiting only for room in flight)."""
        rate = self.config.messages_per_second
        for entity, key, encoded, size, message in chunk:
            self._raise_if_failed()
            if rate is not None:
                await self._throttle(rate)
            name = self._entity(entity)
            group = (name, key)
            opened = self.open.get(group)
            if opened is None:
                opened = (ServiceBusMessageBatch(await self._limit(name)), 0)
            batch, body_bytes = opened
            if not batch.add_encoded(encoded, message):
                if len(batch):
                    await self._launch(name, batch, body_bytes)
                    batch, body_bytes = ServiceBusMessageBatch(self.limits[name]), 0
                if not batch.add_encoded(encoded, message):
                    made = message if isinstance(message, ServiceBusMessage) else message()
                    raise self._too_large(name, encoded, made.message_id, batch)
            self.open[group] = (batch, body_bytes + size)
            self.rows_fed += 1
            if len(self.open) > self.config.max_in_flight:  # many session keys: do not hold them all
                await self.flush()

    async def feed_run(self, run: Run) -> None:
        """:meth:`feed` of a run's rows (to the entity option, one key), added to their batch
        as many at a time as fit."""
        name = self._entity(None)
        group = (name, run.key)
        encoded, bodies = run.encoded, run.bodies
        start = 0
        while start < len(encoded):
            self._raise_if_failed()
            opened = self.open.get(group)
            if opened is None:
                opened = (ServiceBusMessageBatch(await self._limit(name)), 0)
            batch, body_bytes = opened
            added = batch.add_run(encoded, start, run.message)
            if added:
                body_bytes += sum(map(len, bodies[start : start + added]))
                start += added
                self.rows_fed += added
                self.open[group] = (batch, body_bytes)
            elif not len(batch):
                raise self._too_large(name, encoded[start], run.ids[start], batch)
            if start < len(encoded):  # the next row does not fit: this batch is full
                await self._launch(name, batch, body_bytes)
                self.open[group] = (ServiceBusMessageBatch(self.limits[name]), 0)
        if len(self.open) > self.config.max_in_flight:
            await self.flush()

    def _too_large(
        self, name: str, encoded: bytes, message_id: str | None, batch: ServiceBusMessageBatch
    ) -> BadRowError:
        """The row being fed (the partition's ``rows_fed``-th, counting from 0) does not fit an empty batch."""
        return too_large(self.partition, self.rows_fed, message_id, len(encoded), name, batch.max_size_in_bytes)

    async def limits_of(self, entities: list[str]) -> dict[str, int]:
        """The largest batch transfer each of ``entities`` takes (attaching a sender to learn it)."""
        return {entity: await self._limit(entity) for entity in entities}

    async def feed_framed(self, run: FramedRun) -> None:
        """:meth:`feed_run` of a run already framed (:mod:`.framing`): each batch takes one slice."""
        name = self._entity(None)
        group = (name, run.key)
        offsets, body_offsets = run.offsets, run.body_offsets
        start, end = 0, len(run)
        while start < end:
            self._raise_if_failed()
            opened = self.open.get(group)
            if opened is None:
                opened = (ServiceBusMessageBatch(await self._limit(name)), 0)
            batch, body_bytes = opened
            added = batch.add_framed(run.data, offsets, start, run.message)
            if added:
                body_bytes += body_offsets[start + added] - body_offsets[start]
                start += added
                self.rows_fed += added
                self.open[group] = (batch, body_bytes)
            elif not len(batch):
                size = offsets[start + 1] - offsets[start]
                raise too_large(self.partition, self.rows_fed, run.message(start).message_id, size, name,
                                batch.max_size_in_bytes)  # fmt: skip
            if start < end:  # the next row does not fit: this batch is full
                await self._launch(name, batch, body_bytes)
                self.open[group] = (ServiceBusMessageBatch(self.limits[name]), 0)
        if len(self.open) > self.config.max_in_flight:
            await self.flush()

    async def _throttle(self, rate: float) -> None:
        ahead = self.started + self.rows_fed / rate - time.monotonic()
        if ahead > 0.01:
            await asyncio.sleep(ahead)

    async def flush(self) -> None:
        """Send every open batch."""
        opened, self.open = self.open, {}
        for (entity, _key), (batch, body_bytes) in opened.items():
            await self._launch(entity, batch, body_bytes)

    async def _launch(self, entity: str, batch: ServiceBusMessageBatch, body_bytes: int) -> None:
        await self.room.acquire()
        self._raise_if_failed(release=True)
        task = asyncio.get_running_loop().create_task(self._send(entity, batch, body_bytes))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _raise_if_failed(self, *, release: bool = False) -> None:
        if self.error is not None and self.config.fail_on_error:
            if release:
                self.room.release()
            raise self.error

    async def _send(self, entity: str, batch: ServiceBusMessageBatch, body_bytes: int) -> None:
        sender = self.lease.sender(entity)

        async def attempt(_remaining: float) -> None:
            await sender.send_messages(batch, timeout=self.config.send_timeout)

        try:
            await run_with_retry(attempt, _UNBOUNDED, entity=entity, hooks=_SinkRetry(self, entity))
            self.stats.rows += len(batch)
            self.stats.bytes += body_bytes
            self.stats.batches += 1
        except (ServiceBusError, OSError, TimeoutError, ValueError) as exc:
            self.stats.failed += len(batch)
            if self.error is None:
                self.error = exc
        finally:
            self.room.release()

    def _failover_budget(self) -> float:
        return self.config.failover_interval + self.config.send_timeout

    async def finish(self) -> None:
        """Send what is open and wait for every outcome."""
        if self.error is None or not self.config.fail_on_error:
            await self.flush()
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def abandon(self) -> None:
        """After a failure: wait for the batches already handed over (nothing is left behind)."""
        self.open = {}
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


_UNBOUNDED = RetryPolicy(timeout=math.inf)
"""The sink's batches have no overall deadline: :class:`_SinkRetry`'s budgets end the retries."""


class _SinkRetry(RetryHooks):
    """How the sink retries a batch (its send has the sender's own retries already): a busy
    entity is waited for (4 s doubling to :data:`SERVER_BUSY_MAX_BACKOFF`) for up to
    ``serverBusyTimeout``; with a paired client, any other failure is retried (0.1 s or
    ``retryBackoffFactor``, doubling to 2 s) for the failover interval and one send timeout
    more: sends fail until failover is engaged, then they are parked on the secondary, and
    the batch keeps its ids meanwhile. Anything else ends the batch."""

    __slots__ = ("busy_delay", "entity", "pipeline", "retry_delay", "started")

    def __init__(self, pipeline: _Pipeline, entity: str) -> None:
        self.pipeline, self.entity = pipeline, entity
        self.started = time.monotonic()
        self.busy_delay = SERVER_BUSY_MIN_BACKOFF
        self.retry_delay = pipeline.config.retry_backoff_factor or 0.1

    def delay(
        self, policy: RetryPolicy, retried_times: int, error: RetryError, *, now: float, deadline: float
    ) -> float | None:
        pipeline = self.pipeline
        config = pipeline.config
        if isinstance(error, ServiceBusServerBusyError):
            delay = self.busy_delay
            if now + delay > self.started + config.server_busy_timeout:
                return None
            pipeline.stats.busy += 1
            self.busy_delay = min(delay * 2, SERVER_BUSY_MAX_BACKOFF)
            return delay
        delay = self.retry_delay
        if not config.paired or now + delay > self.started + pipeline._failover_budget():
            return None
        pipeline.stats.retried += 1
        self.retry_delay = min(delay * 2, 2.0)
        return delay

    def retrying(
        self, entity: str | None, error: RetryError, retried_times: int, policy: RetryPolicy, delay: float
    ) -> None:
        if isinstance(error, ServiceBusServerBusyError):
            log.info("servicebus sink: %s is busy; sending again in %.0f s", self.entity, delay)
        else:
            log.info("servicebus sink: %s: %s; sending again in %.1f s", self.entity, error, delay)


async def _encode_and_feed(pipeline: _Pipeline, chunk: Columns, scheme: IdScheme, first_row: int) -> int:
    """Encode and batch a chunk on the event loop (one thread doing the CPU work: the
    blocking facade runs the loop on the calling thread while it waits, or another thread
    runs it and the caller waits, so no two trade the GIL row by row); the rows it held.
    Runs of rows (:func:`.encoding.runs_of`) go in as runs, unless a rate paces each row."""
    runs = None if pipeline.config.messages_per_second is not None else runs_of(chunk, scheme, first_row)
    if runs is not None:
        for run in runs:
            await pipeline.feed_run(run)
        return sum(len(run.encoded) for run in runs)
    encoded = list(encoded_rows(chunk, scheme, first_row))
    if encoded:
        await pipeline.feed(encoded)
    return len(encoded)


async def _feed_arrow(pipeline: _Pipeline, batch: Any, scheme: IdScheme, first_row: int) -> int:
    """Check a whole Arrow record batch (:func:`.checks.check_arrow`), then feed it
    :data:`CHUNK_ROWS` rows at a time (an Arrow batch holds up to 10,000: its rows as Python
    objects and as encoded messages would be two more copies of it)."""
    entity = pipeline.config.entity
    limits = await pipeline.limits_of(entities_of(batch, entity))
    check_arrow(batch, scheme, first_row, entity, limits)
    runs = _framed(pipeline, batch, scheme, first_row)
    if runs is not None:
        for run in runs:
            await pipeline.feed_framed(run)
        return int(batch.num_rows)
    rows = 0
    skip = (*IGNORED, "entity") if entity is not None else IGNORED  # the option wins over the column
    taken = [(i, name) for i, name in enumerate(batch.schema.names) if name not in skip]
    for start in range(0, batch.num_rows, CHUNK_ROWS):
        part = batch.slice(start, CHUNK_ROWS)
        columns = {name: part.column(i).to_pylist() for i, name in taken}
        rows += await _encode_and_feed(pipeline, columns, scheme, first_row + rows)
    return rows


def _framed(pipeline: _Pipeline, batch: Any, scheme: IdScheme, first_row: int) -> list[FramedRun] | None:
    """The batch as framed runs (:mod:`.framing`) when it takes that path: only a ``body``
    column (besides the ones the sink ignores), position ids, no rate to pace each row."""
    skip = (*IGNORED, "entity") if pipeline.config.entity is not None else IGNORED
    names = [name for name in batch.schema.names if name not in skip]
    if names != ["body"] or scheme.mode != "position" or pipeline.config.messages_per_second is not None:
        return None
    return framed_runs(batch.column(batch.schema.names.index("body")), scheme, first_row)


async def _feed(pipeline: _Pipeline, chunk: Chunk, scheme: IdScheme, first_row: int) -> int:
    if isinstance(chunk, Mapping):
        return await _encode_and_feed(pipeline, chunk, scheme, first_row)
    return await _feed_arrow(pipeline, chunk, scheme, first_row)


async def _start(config: SinkConfig, partition: int) -> tuple[_Pipeline, PartitionStats, dict[str, int]]:
    lease = cache.acquire(config)
    stats = PartitionStats()
    return _Pipeline(config, lease, stats, partition), stats, lease.paired_counters()


async def _end(pipeline: _Pipeline, before: dict[str, int], failed: bool) -> None:
    lease = pipeline.lease
    if failed:
        await pipeline.abandon()
    else:
        await pipeline.finish()
    after = lease.paired_counters()
    pipeline.stats.failed_over = after.get("parked", 0) - before.get("parked", 0)
    pipeline.stats.seconds = time.monotonic() - pipeline.started
    if failed or pipeline.error is not None:
        await cache.discard(lease)  # the next task opens a fresh connection
    else:
        cache.release(lease)


def send_partition(
    config: SinkConfig, chunks: Iterable[Chunk], scheme: IdScheme, *, keep_bad_row: bool = False
) -> PartitionStats:
    """Send every row of ``chunks`` (column chunks or Arrow record batches of one partition)
    and wait for every outcome.

    Raises :class:`SinkWriteError` (naming the entity and the Service Bus error, never a
    secret) when a message was not acknowledged and ``failOnError`` is true; otherwise
    returns the counts, ``failed`` included. A row that cannot be sent at all
    (:class:`.columns.BadRowError`) ends the partition: the rows handed before it are sent
    and waited for, then the error is raised, or, with ``keep_bad_row``, returned in the
    counts (``bad_row``) for the driver to raise (so that Spark does not run the task again).
    """
    pipeline, stats, before = _run(_start(config, scheme.partition))
    row = 0
    try:
        for chunk in chunks:
            row += _run(_feed(pipeline, chunk, scheme, row))
    except BadRowError as bad:
        _run(_end(pipeline, before, failed=False))
        if pipeline.error is None:
            log.warning("%s (%d rows of the partition before it were sent)", bad, stats.rows)
            if not keep_bad_row:
                raise
            stats.bad_row = bad
            return stats
    except BaseException as exc:
        _run(_end(pipeline, before, failed=True))
        if pipeline.error is None and isinstance(exc, ServiceBusError | OSError | TimeoutError):
            pipeline.error = exc
        if pipeline.error is not None:
            raise _failure(config, scheme, pipeline) from pipeline.error
        raise
    else:
        _run(_end(pipeline, before, failed=False))
    if pipeline.error is not None:
        if config.fail_on_error:
            raise _failure(config, scheme, pipeline) from pipeline.error
        log.warning(
            "servicebus sink: partition %d gave up on %d of %d rows (failOnError=false): %s",
            scheme.partition,
            stats.failed,
            row,
            redact(str(pipeline.error)),
        )
    return stats


def _failure(config: SinkConfig, scheme: IdScheme, pipeline: _Pipeline) -> SinkWriteError:
    error = pipeline.error
    where = config.entity or "the entities of the 'entity' column"
    return SinkWriteError(
        f"servicebus sink: partition {scheme.partition} could not send to {where} on {config.namespace}: "
        f"{type(error).__name__}: {redact(str(error))} ({pipeline.stats.rows} rows acknowledged, "
        f"{pipeline.stats.failed} not); the task fails so that Spark retries it (the retried rows carry the "
        "same message ids, so duplicate detection removes what was sent twice)"
    )
