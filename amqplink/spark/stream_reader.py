"""``spark.readStream.format("servicebus")``: micro-batches of peek-locked messages, completed
once Spark has committed them (docs/spark.md#the-source).

Spark runs a stream reader in one Python process on the driver's side for the query's
lifetime (``initialOffset``, ``latestOffset``, ``partitions`` and ``commit`` all in one process;
``read`` in the executors' workers: docs/spark.md#streaming-what-runs-where-and-why). That
process holds the receiver and the locks (:class:`.inbox.Inbox`), since a lock belongs to the
link that received the message; executors only turn rows already received into a DataFrame.

- ``latestOffset(start, limit)``: batch ``start`` is committed (Spark asks for the next batch
  only after committing the last one, and calls ``commit`` only once the batch after it has
  data), so the completion of its messages starts (in the background, as ``commit``'s);
  then up to ``limit`` new messages are received, written to the staging directory
  (:mod:`.staging`) and held. The offset is ``{"batch": n}``. The batch after it is then
  staged the same way while Spark runs this one (a batch staged ahead is returned by the
  next ``latestOffset``, or after a crash by the next reader, as one staged by a reader that
  died before Spark logged it). A trigger with no new batch waits for the completions first:
  the query may end there (Trigger.AvailableNow), and Spark stops this process without
  waiting for it. Under Trigger.AvailableNow a receive that finds nothing ends the input at
  once (its drained credit says the entity had nothing to deliver: :mod:`.inbox`).
- ``partitions(start, end)``: the rows of batches ``start+1 .. end`` as staged, so a batch
  replayed after a crash has the same rows: with ``stagedReads=file`` the partitions name row
  ranges of the staged files (path, length, sha256), which the tasks open and check; with
  ``inline`` the rows are read back here and travel in the partitions (Arrow IPC bytes), so
  executors need no access to that directory.
- ``commit(end)``: completes through ``end``, in the background (after any completion still
  going; its errors raised by the next call), so Spark's next batch is not kept waiting; a
  completion lost with the driver is the crash after Spark's commit log the model test covers.
- ``reportLatestOffset()``: the source's counters, shown as ``latestOffset`` in the query's
  progress (the Python Data Source API has no custom metrics: docs/spark.md#metrics).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from amqplink.spark.inbox import Inbox
from amqplink.spark.options import SinkOptionError
from amqplink.spark.rows import to_arrow
from amqplink.spark.source_options import SourceConfig
from amqplink.spark.staging import StagedFile, Staging, StagingError, open_staged, staging_dir
from amqplink.sync import loop

__all__ = [
    "ROWS_PER_PARTITION",
    "RowsPartition",
    "ServiceBusStreamReader",
    "StagedPartition",
    "local_master",
    "master_of",
    "rows_of",
    "spark_master",
    "split_rows",
    "split_staged",
]

log = logging.getLogger("amqplink.spark")

ROWS_PER_PARTITION = 10_000
"""Rows per input partition when ``numPartitions`` is not given."""
AVAILABLE_NOW_CAP = 100_000
"""Messages per micro-batch when Spark asks for everything available (bounded memory)."""


class RowsPartition(InputPartition):
    """Rows of a micro-batch as Arrow IPC stream bytes (they go to an executor with the task)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.data = data

    def __repr__(self) -> str:
        return f"RowsPartition({len(self.data)} bytes)"


def split_rows(table: Any, parts: int | None) -> list[RowsPartition]:
    """``table`` (a ``pyarrow.Table``) as input partitions: ``parts`` of them, or one per
    :data:`ROWS_PER_PARTITION` rows."""
    import pyarrow as pa

    rows = table.num_rows
    if rows == 0:
        return []
    count = max(1, min(rows, parts or math.ceil(rows / ROWS_PER_PARTITION)))
    size = math.ceil(rows / count)
    out = []
    for start in range(0, rows, size):
        sink = pa.BufferOutputStream()
        part = table.slice(start, size)
        with pa.ipc.new_stream(sink, part.schema) as writer:
            writer.write_table(part)
        out.append(RowsPartition(sink.getvalue().to_pybytes()))
    return out


def rows_of(partition: RowsPartition) -> Iterator[Any]:
    """The record batches of an input partition (what ``read`` yields, in an executor)."""
    import pyarrow as pa

    yield from pa.ipc.open_stream(pa.py_buffer(partition.data)).read_all().to_batches()


class StagedPartition(InputPartition):
    """Row ranges ``(file, first row, rows)`` of staged batch files, which the task opens
    (``stagedReads=file``: only the names travel with the task)."""

    def __init__(self, slices: tuple[tuple[StagedFile, int, int], ...]) -> None:
        super().__init__(slices)
        self.slices = slices

    def __repr__(self) -> str:
        return f"StagedPartition({[(Path(f.path).name, first, rows) for f, first, rows in self.slices]})"


def split_staged(files: Sequence[StagedFile], parts: int | None) -> list[StagedPartition]:
    """The rows of ``files`` (in order) as ``parts`` input partitions whose rows differ by one at
    most, or one per :data:`ROWS_PER_PARTITION` rows."""
    total = sum(f.rows for f in files)
    if total == 0:
        return []
    count = max(1, min(total, parts or math.ceil(total / ROWS_PER_PARTITION)))
    bounds = [total * i // count for i in range(count + 1)]
    out: list[StagedPartition] = []
    for low, high in itertools.pairwise(bounds):
        slices, base = [], 0
        for staged in files:  # the files' rows numbered one after the other: [base, base + rows)
            first, last = max(low, base), min(high, base + staged.rows)
            if first < last:
                slices.append((staged, first - base, last - first))
            base += staged.rows
        out.append(StagedPartition(tuple(slices)))
    return out


def staged_rows(partition: StagedPartition) -> Iterator[Any]:
    """The record batches of a :class:`StagedPartition` (in an executor: each file memory-mapped,
    its length and sha256 checked first)."""
    for staged, first, rows in partition.slices:
        yield from open_staged(staged).slice(first, rows).to_batches()


def spark_master() -> str | None:
    """``spark.master`` as the driver's JVM was started with (Spark runs the stream reader as its
    child process), else ``$MASTER``; None if unknown."""
    try:
        args = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        args = []
    return master_of(args) or os.environ.get("MASTER")


def master_of(args: Sequence[str]) -> str | None:
    """The master in a ``SparkSubmit`` command line (``--master X``, ``--master=X``,
    ``--conf spark.master=X``), or None."""
    if "org.apache.spark.deploy.SparkSubmit" not in args:
        return None
    for i, arg in enumerate(args):
        if arg == "--master" and i + 1 < len(args):
            return args[i + 1]
        for prefix in ("--master=", "spark.master="):
            if arg.startswith(prefix):
                return arg[len(prefix) :]
    return None


def local_master(master: str | None) -> bool:
    """Whether ``master`` runs the executors on the driver's machine (``local``, ``local[...]``,
    ``local-cluster[...]``), so they open the files it stages."""
    return master is not None and (master == "local" or master.startswith(("local[", "local-cluster[")))


def _batch(offset: dict[str, Any]) -> int:
    return int(offset.get("batch", -1))


class ServiceBusStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source's reader (see the module); pickles with the config only."""

    def __init__(self, config: SourceConfig) -> None:
        if config.checkpoint_location is None:
            raise SinkOptionError(
                "option checkpointLocation is required for spark.readStream.format('servicebus'): a directory "
                "(the query's own checkpointLocation will do) where each micro-batch's messages are written "
                "before Spark gets them, so that a batch replayed after a crash returns the same rows; it must "
                "outlive the driver (local disk on one machine, a shared file system on a cluster)"
            )
        self.config = config
        self._inbox: Inbox | None = None
        self._ahead: asyncio.Task[bool] | None = None
        """Staging the next batch while Spark runs this one (:meth:`_stage_ahead`)."""
        self._settling: asyncio.Task[None] | None = None
        """Completing batches Spark committed, in the background (:meth:`_settle_later`)."""
        self._file_reads: bool | None = None

    def __repr__(self) -> str:
        return f"ServiceBusStreamReader({self.config!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "_inbox": None, "_ahead": None, "_settling": None, "_file_reads": None}

    def _open(self) -> Inbox:
        if self._inbox is None:
            from amqplink.spark.credentials import make_async_client

            path = self.config.path.path
            assert self.config.checkpoint_location is not None
            staging = Staging(staging_dir(self.config.checkpoint_location, self.config.namespace, path))
            self._inbox = Inbox(self.config, staging, make_async_client(self.config))
            self._inbox.load()
        return self._inbox

    def initialOffset(self) -> dict[str, Any]:
        return {"batch": -1}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.config.max_messages_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self._open().until = dt.datetime.now(dt.UTC)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        inbox = self._open()
        last = _batch(start)
        if last < inbox.state.settled:
            raise StagingError(
                f"servicebus source: Spark's checkpoint is at micro-batch {last}, but the source's directory "
                f"{inbox.staging.root} has settled batch {inbox.state.settled}: it belongs to another run of the "
                "query (was the query's checkpoint deleted?); give the source a new checkpointLocation"
            )
        loop.run(self._settled())  # (a completion started before: its error is the query's)
        loop.run(self._settle_later(inbox, last))  # Spark committed `last` before asking for the batch after it
        wanted = self._wanted(limit)
        found_none = loop.run(self._staged_ahead())
        staged = inbox.staged_after(last)
        if staged is not None:  # staged ahead, or by a reader that died before Spark logged it
            loop.run(self._stage_ahead(inbox, staged + 1, wanted))
            return {"batch": staged}
        if found_none or not loop.run(_stage(inbox, last + 1, wanted, self.config.path.path)):
            # No new batch (the receive ahead found nothing, or this one did): the query may end
            # here (Trigger.AvailableNow), and Spark stops the reader's process without waiting
            # for it, so the committed batches are completed before Spark hears of it.
            loop.run(self._settled())
            return start
        loop.run(self._stage_ahead(inbox, last + 2, wanted))
        return {"batch": last + 1}

    def _wanted(self, limit: ReadLimit) -> int:
        if isinstance(limit, ReadMaxRows):
            return max(1, int(limit.max_rows))
        if isinstance(limit, ReadAllAvailable):
            return AVAILABLE_NOW_CAP
        return self.config.max_messages_per_trigger

    async def _stage_ahead(self, inbox: Inbox, batch: int, wanted: int) -> None:
        """Start staging batch ``batch`` while Spark runs the one before it: receiving and
        converting its messages overlap Spark's work instead of following it. Staged ahead,
        it is what a reader that died before Spark logged it leaves (the next
        ``latestOffset`` returns it; after a crash the next reader does): messages received
        ahead are held from the moment they are staged, as any batch's are."""
        if any(b >= batch for b in inbox.batches):  # (staged already, by a reader before this one)
            return
        task = asyncio.get_running_loop().create_task(_stage(inbox, batch, wanted, self.config.path.path))
        self._ahead = task

    async def _settle_later(self, inbox: Inbox, through: int) -> None:
        """Complete through ``through`` (Spark committed it) in a task, after the one before: the
        completions overlap Spark's next batch instead of holding up its planning."""
        before = self._settling

        async def settle() -> None:
            if before is not None:
                await before
            await inbox.settle(through)

        self._settling = asyncio.get_running_loop().create_task(settle())

    async def _settled(self) -> None:
        """Wait for the completions in flight; their error, if any, is raised here."""
        settling, self._settling = self._settling, None
        if settling is not None:
            await settling

    async def _staged_ahead(self) -> bool:
        """Wait for the batch being staged ahead (its errors are the query's); True if one was
        being staged and no message came for it."""
        ahead, self._ahead = self._ahead, None
        return ahead is not None and not await ahead

    def reportLatestOffset(self) -> dict[str, Any] | None:
        inbox = self._inbox
        if inbox is None:
            return None
        return {"batch": max([inbox.state.settled, *inbox.batches]), "held": len(inbox.held),
                **inbox.counters.as_dict()}  # fmt: skip

    def files_for_executors(self) -> bool:
        """Whether tasks open the staged files (``stagedReads``; ``auto``: on a local master)."""
        if self._file_reads is None:
            mode = self.config.staged_reads
            master = spark_master() if mode == "auto" else None
            self._file_reads = mode == "file" or (mode == "auto" and local_master(master))
            log.info("servicebus source: executors read the staged batches %s (stagedReads=%s, spark.master %s)",
                     "from their files" if self._file_reads else "from the input partitions", mode, master)  # fmt: skip
        return self._file_reads

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        import pyarrow as pa

        inbox = self._open()
        batches = range(_batch(start) + 1, _batch(end) + 1)
        if self.files_for_executors():
            return split_staged([inbox.staging.describe(b) for b in batches], self.config.num_partitions)
        tables = [inbox.staging.read(b) for b in batches]
        if not tables:
            return []
        return split_rows(pa.concat_tables(tables), self.config.num_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, StagedPartition):
            return staged_rows(partition)
        assert isinstance(partition, RowsPartition)
        return rows_of(partition)

    def commit(self, end: dict[str, Any]) -> None:
        loop.run(self._settle_later(self._open(), _batch(end)))

    def stop(self) -> None:
        if self._inbox is not None:
            inbox, self._inbox = self._inbox, None
            loop.run(self._close(inbox))

    async def _close(self, inbox: Inbox) -> None:
        try:
            await self._settled()  # what Spark committed is completed before the receivers close
        except Exception as exc:  # the next reader completes their next copies instead (they are pending)
            log.warning("servicebus source: completing committed batches failed at stop: %s: %s",
                        type(exc).__name__, exc)  # fmt: skip
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            # What it staged stays staged (the next reader returns it first); messages it had
            # received and not staged yet come back once their locks expire, as after a crash.
            ahead.cancel()
            await asyncio.gather(ahead, return_exceptions=True)
        await inbox.close()


async def _stage(inbox: Inbox, batch: int, wanted: int, entity: str) -> bool:
    """Take up to ``wanted`` new messages, write them to the staging directory as batch
    ``batch`` and hold them; False when none came."""
    taken = await inbox.take(batch, wanted)
    if not taken:
        return False
    inbox.staging.write(batch, to_arrow([h.message for h in taken], entity))
    for held in taken:  # staged: a held message is kept for its lock alone, not its body
        held.message.amqplink_message.body = b""
    inbox.record(batch, taken)  # on the loop: the renewal task starts there
    return True
