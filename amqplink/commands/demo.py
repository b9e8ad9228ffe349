"""``amqplink demo``: the main job. Spark -> Service Bus through an outage, nothing lost.

With no arguments, on one machine: two embedded namespaces (:mod:`.demo_brokers`), a local
Spark job (``local[2]``) writing ``--rows`` rows through the sink (:mod:`amqplink.spark`)
with paired failover on; the primary goes down in the middle for ``--outage-seconds`` and
comes back; a syphon moves what was parked back to the primary; peek-lock receivers with
automatic lock renewal and a de-duplicating id window (:mod:`.demo_consume`) check that
every row arrived, none twice. Spark's start-up is timed apart from the transfer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import functools
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from amqplink.commands.demo_brokers import DemoNamespaces, new_data_dir
from amqplink.commands.demo_consume import Consumed, consume
from amqplink.commands.demo_spark import build_input, warm_up, write_batch, write_stream

__all__ = ["SINK_SUMMARY", "TAIL_LINES", "DemoOptions", "format_table", "run_demo", "sink_summary"]

OUTAGE_AT = 0.3
"""The primary goes down once this fraction of the rows reached the namespaces."""
SYPHON_DEADLINE = 300.0

_T = TypeVar("_T")


@dataclass(frozen=True)
class DemoOptions:
    """What ``amqplink demo`` was asked to do (see ``amqplink demo --help``)."""

    rows: int = 200_000
    size: int = 1024
    input: str | None = None
    outage_seconds: float | None = 6.0
    connection_string: str | None = None
    paired_connection_string: str | None = None
    entity: str = "demo"
    streaming: bool = False
    duration: float = 20.0
    failover_interval: float = 2.0


class _Board:
    """The progress line (stderr, a terminal only): sent, parked, syphoned, received; and
    the lines said above it (:meth:`line`), each on its own line, the progress drawn again
    under it. ``total``: the rows to send; what the namespaces took past it are copies of
    rows sent again, shown as ``sent 200,000 + 2,859 again``."""

    def __init__(self, enabled: bool | None, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.counts: dict[str, Any] = {"phase": "starting", "sent": 0, "parked": 0, "syphoned": 0, "received": 0}
        self.total: int | None = None
        self._drawn = 0.0
        self._drawing = False

    def show(self, force: bool = False, **counts: Any) -> None:
        """Update counts (``phase``, ``sent``, ...) and redraw, at most five times a second unless ``force``."""
        self.counts.update(counts)
        now = time.monotonic()
        if not self.enabled or (not force and now - self._drawn < 0.2):
            return
        self._drawn = now
        self._drawing = True
        c = self.counts
        sent, total = c["sent"], self.total
        shown = f"{sent:>9,}" if total is None or sent <= total else f"{total:,} + {sent - total:,} again"
        self.stream.write(
            f"\r\x1b[K{c['phase']:<10} sent {shown}  parked {c['parked']:>7,}  "
            f"syphoned {c['syphoned']:>7,}  received {c['received']:>9,}"
        )
        self.stream.flush()

    def line(self, text: str) -> None:
        """Say ``text`` on a line of its own above the progress line (a terminal only)."""
        if not self.enabled:
            return
        self.stream.write(f"\r\x1b[K{text}\n")
        self.stream.flush()
        if self._drawing:
            self.show(force=True)

    def done(self) -> None:
        """End the progress line (the table follows)."""
        if self.enabled:
            self.show(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self._drawing = False

    def interrupted(self) -> None:
        """End the progress line and say what the wait that follows is (a terminal only)."""
        if self.enabled:
            self.done()
            self.stream.write("interrupted: stopping Spark and the namespaces\n")
            self.stream.flush()


class _LineHandler(logging.Handler):
    """The demo's own log records (its syphon, its receivers), said through the board so
    they do not break into the progress line."""

    def __init__(self, board: _Board, formatter: logging.Formatter | None) -> None:
        super().__init__()
        self.board = board
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        self.board.line(self.format(record))


@contextlib.contextmanager
def _logging_through(board: _Board) -> Iterator[None]:
    """While the board draws, the root logger's records go through :meth:`_Board.line`."""
    root = logging.getLogger()
    if not board.enabled:
        yield
        return
    kept = root.handlers[:]
    root.handlers = [_LineHandler(board, kept[0].formatter if kept else None)]
    try:
        yield
    finally:
        root.handlers = kept


class _Spark:
    """The demo's SparkSession and its blocking calls, one at a time in a thread.

    Interrupted (Ctrl-C cancels the demo's task), a call is not left running behind the
    demo's back: :meth:`stop` cancels Spark's jobs, waits for the call (its failure is
    the cancellation's: Spark's logging is turned off first, as is the error), then stops
    the session. Stopping it under a running write instead failed the write with a
    ``NullPointerException`` no one retrieved.
    """

    def __init__(self) -> None:
        self.session: Any = None
        self._running: asyncio.Future[Any] | None = None

    def begin(self, func: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
        """Start ``func(*args)`` in a thread; its future (cancelling it leaves the thread running)."""
        running = asyncio.ensure_future(asyncio.to_thread(func, *args))
        self._running = running
        return running

    async def call(self, func: Callable[..., _T], *args: Any) -> _T:
        """``func(*args)`` in a thread; cancelled, the thread goes on until :meth:`stop`."""
        return await asyncio.shield(self.begin(func, *args))

    async def start(self, **settings: Any) -> float:
        """Start the local session (``settings``: those of
        :func:`~amqplink.spark.session.local_session`); the seconds it took."""
        from amqplink.spark.session import local_session

        def start() -> float:
            self.session, startup = local_session("local[2]", **settings)
            return startup

        return await self.call(start)

    async def stop(self) -> None:
        """Stop the session (if any) once no call runs; again, nothing."""
        running, self._running = self._running, None
        if running is not None and not running.done():
            if self.session is not None:
                self.session.sparkContext.setLogLevel("OFF")
                await asyncio.to_thread(self.session.sparkContext.cancelAllJobs)
            with contextlib.suppress(Exception):
                await running
        session, self.session = self.session, None
        if session is not None:
            await asyncio.to_thread(session.stop)


def _sink_options(options: DemoOptions, names: DemoNamespaces | None) -> dict[str, str]:
    sink = {
        "connectionString": names.primary_connection_string if names else str(options.connection_string),
        "entity": options.entity,
        "retryTotal": "1",
        "retryBackoffFactor": "0.2",
        "sendTimeout": "10",
    }
    paired = names.secondary_connection_string if names else options.paired_connection_string
    if paired:
        sink.update(
            pairedConnectionString=paired,
            failoverInterval=str(options.failover_interval),
            pingPrimaryInterval="1",
            backlogQueueCount="3",
        )
        if names is not None:
            sink.update(managementEndpoint=names.management_endpoint, connectionVerify=names.management_ca)
    return sink


def _held(names: DemoNamespaces) -> int:
    """Every copy the namespaces acknowledged: stored on the primary, parked on the
    secondary, or dropped as a duplicate by the primary."""
    return names.stored() + names.parked() + names.dropped()


async def _watch(
    names: DemoNamespaces | None, options: DemoOptions, board: _Board, writing: asyncio.Future[Any], total: int
) -> None:
    """Draw progress while the write runs; take the primary down once, in the middle, and
    say so (the sink's own lines are in Spark's log: one per Python worker, and they would
    blame the user for an outage the demo makes on purpose)."""
    outage: asyncio.Task[None] | None = None
    parking = False
    board.total = total
    try:
        while not writing.done():
            if names is not None:
                parked = names.parked()
                board.show(sent=_held(names), parked=max(parked, board.counts["parked"]))
                if parked and not parking:
                    parking = True
                    board.line("failover: the sink's senders park rows in the secondary namespace's backlog queues")
                due = options.outage_seconds is not None and outage is None
                if due and names.stored() + parked >= total * OUTAGE_AT:
                    board.line(
                        f"outage: the demo stops the primary namespace for {options.outage_seconds:g} s on purpose"
                        f" (the senders fail over after {options.failover_interval:g} s without a successful send)"
                    )
                    board.show(force=True, phase="outage")
                    outage = asyncio.create_task(names.outage(options.outage_seconds or 0.0))
                    outage.add_done_callback(functools.partial(_back, board))
            await asyncio.wait({writing}, timeout=0.25)
    except asyncio.CancelledError:
        if outage is not None:
            outage.cancel()  # Ctrl-C: the primary stays down (the demo stops everything), no waiting for it
        raise
    if outage is not None:
        await outage  # the primary is back before anything else happens


def _back(board: _Board, outage: asyncio.Task[None]) -> None:
    if not outage.cancelled() and outage.exception() is None:
        board.line("the primary namespace is back (restarted from its data): the senders return at their next ping")
        board.show(force=True, phase="writing")


async def _syphon(names: DemoNamespaces, options: DemoOptions, board: _Board) -> int:
    """Run a syphon until the backlog queues are empty; how many messages it moved."""
    from amqplink.servicebus.aio import PairedNamespaceOptions, ServiceBusClient

    paired = PairedNamespaceOptions(
        names.secondary_connection_string,
        backlog_queue_count=3,
        failover_interval=dt.timedelta(seconds=options.failover_interval),
        ping_primary_interval=dt.timedelta(seconds=1),
        enable_syphon=True,
        management_endpoint=names.management_endpoint,
        connection_verify=names.management_ca,
        syphon_wait=dt.timedelta(seconds=1),
    )
    client = ServiceBusClient.from_connection_string(names.primary_connection_string, paired_namespace=paired)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SYPHON_DEADLINE
    async with client:
        while names.parked() and loop.time() < deadline:
            state = client.paired_state
            board.show(syphoned=0 if state is None else state.syphoned, parked=board.counts["parked"])
            await asyncio.sleep(0.25)  # polling the broker's counts for the progress line
        state = client.paired_state
        return 0 if state is None else state.syphoned


async def run_demo(
    options: DemoOptions, *, progress: bool | None = None, summary: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Run the demo; the result (also kept up to date in ``summary`` while it runs).

    Spark's output (its JVM's and its Python workers') goes to a log file in the demo's
    temporary directory, not the terminal: the demo says what happens in lines of its own
    above the progress line, and prints the log's last lines if it fails."""
    _check_extras(embedded=options.connection_string is None)
    result = summary if summary is not None else {}
    embedded = options.connection_string is None
    result.update(
        command="demo",
        namespaces="embedded (primary + paired secondary)" if embedded else "given by --connection-string",
        streaming=options.streaming,
        ok=False,
    )
    board = _Board(progress)
    base = tempfile.mkdtemp(prefix="amqplink-demo-")
    spark_log = os.path.join(base, "spark.log")
    names: DemoNamespaces | None = None
    spark = _Spark()
    held: Any = None  # the SIGINT handler to put back once an interrupted demo has stopped
    try:
        with _logging_through(board):
            if embedded:
                names = await DemoNamespaces(options.entity, new_data_dir(base)).start()
            return await _run(options, names, spark, board, base, spark_log, result)
    except asyncio.CancelledError:
        board.interrupted()
        held = _hold_off_interrupts()
        raise
    except Exception:
        _show_tail(spark_log)
        raise
    finally:
        try:
            await spark.stop()
            if names is not None:
                await names.stop()
        finally:
            shutil.rmtree(base, ignore_errors=True)
            if held is not None:
                signal.signal(signal.SIGINT, held)


async def _run(
    options: DemoOptions,
    names: DemoNamespaces | None,
    spark: _Spark,
    board: _Board,
    base: str,
    spark_log: str,
    result: dict[str, Any],
) -> dict[str, Any]:
    """The demo's steps: Spark's start, the write (through the outage), the syphon, the receive."""
    board.show(force=True, phase="spark")
    board.line("starting Spark (local[2]: its JVM, the Python workers, a write of no row); its log is kept apart")
    conf = {"spark.sql.shuffle.partitions": "2"}
    startup = await spark.start(app_name="amqplink-demo", conf=conf, log=spark_log)
    df, expected = await spark.call(build_input, spark.session, options.rows, options.size, options.input)
    sink = _sink_options(options, names)
    if not options.streaming:
        warming = time.monotonic()
        await spark.call(warm_up, df, sink)
        startup += time.monotonic() - warming
    result["spark_startup_seconds"] = round(startup, 2)
    board.show(force=True, phase="writing")
    started = time.monotonic()
    job: asyncio.Future[int | None]
    if options.streaming:
        checkpoint = os.path.join(base, "checkpoint")
        job = spark.begin(write_stream, spark.session, sink, options.rows, options.duration, checkpoint)
    else:
        job = spark.begin(write_batch, df, sink)
    await _watch(names, options, board, job, options.rows if options.streaming else len(expected))
    written = await asyncio.shield(job)
    if written is not None:
        expected = set(range(written))
    send_seconds = time.monotonic() - started
    await spark.stop()
    said = sink_summary(spark_log)
    if said is not None:
        board.line(f"sink: {said}")
    sent = _held(names) if names else None
    parked = names.parked() if names else 0
    board.show(force=True, phase="syphon", parked=parked, **({} if sent is None else {"sent": sent}))
    syphoned = await _syphon(names, options, board) if names is not None and parked else 0
    board.show(force=True, phase="receiving", syphoned=syphoned)
    primary = names.primary_connection_string if names else str(options.connection_string)
    seen: Consumed = await consume(
        primary, options.entity, len(expected), on_progress=lambda c: board.show(received=len(c.rows))
    )
    board.done()
    lost = len(expected - seen.rows)
    result.update(
        rows=len(expected),
        send_messages_per_second=round(len(expected) / send_seconds) if send_seconds else 0,
        send_seconds=round(send_seconds, 2),
        receive_messages_per_second=round(seen.received / seen.seconds) if seen.seconds else 0,
        outages=names.outages if names else 0,
        **({} if sent is None or names is None else {"sent": sent, "duplicates_dropped": names.dropped()}),
        parked=parked,
        syphoned=syphoned,
        received=seen.received,
        duplicates_removed=seen.duplicates,
        delivered_twice=seen.twice,
        lost=lost,
        ok=lost == 0 and seen.twice == 0,
    )
    return result


SINK_SUMMARY = "servicebus sink: "
"""What opens the sink's summary line of a write (logged where Spark runs the write's commit)."""


def sink_summary(log: str) -> str | None:
    """The last summary line the sink wrote to Spark's log ``log`` (the timed write's, after
    the warm-up's), without its prefix; None if there is none."""
    try:
        with open(log, errors="replace") as lines:
            found = [line.split(SINK_SUMMARY, 1)[1].strip() for line in lines if SINK_SUMMARY + "write " in line]
    except OSError:
        return None
    return found[-1] if found else None


TAIL_LINES = 20
"""Lines of Spark's log shown when the demo fails."""


def _show_tail(log: str) -> None:
    """The end of Spark's log, on stderr: what Spark said before the demo failed."""
    try:
        with open(log, errors="replace") as lines:
            tail = collections.deque(lines, TAIL_LINES)
    except OSError:
        return
    if tail:
        print(f"Spark's log (last {len(tail)} lines):", file=sys.stderr)
        print("".join(tail).rstrip(), file=sys.stderr, flush=True)


def _hold_off_interrupts() -> Any:
    """Once interrupted, the next Ctrl-C only says the demo is stopping (seconds); the one
    after quits at once (exit status 130, its temporary files left). A second Ctrl-C used
    to cut the stop short, leave the data directory and the secondary's TLS key behind, and
    wait for Spark's write to finish (the interpreter joins the thread that runs it). The
    SIGINT handler it replaced (None off the main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def again(signum: int, frame: object) -> None:
        print("still stopping (seconds); Ctrl-C once more quits at once", file=sys.stderr, flush=True)
        signal.signal(signal.SIGINT, lambda signum, frame: os._exit(130))

    return signal.signal(signal.SIGINT, again)


def _check_extras(*, embedded: bool) -> None:
    """ValueError naming what is missing: pyspark/pyarrow/pandas (spark extra), aiohttp/cryptography (broker)."""
    import importlib.util

    needed = {"pyspark": "spark", "pyarrow": "spark", "pandas": "spark"}
    if embedded:
        needed.update(aiohttp="broker", cryptography="broker")

    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError):
            return True

    missing = [name for name in needed if absent(name)]
    if missing:
        extras = ",".join(sorted({needed[name] for name in missing}))
        raise ValueError(
            f"the demo needs {', '.join(missing)}: python3 -m pip install 'amqplink[{extras}]' "
            "(from a checkout: python3 -m pip install -e '.[spark,broker]')"
        )


_ROWS = (
    ("rows", "rows", "{:,}"),
    ("send_messages_per_second", "send msg/s (Spark job, start-up excluded)", "{:,}"),
    ("receive_messages_per_second", "receive msg/s (peek-lock, renewal)", "{:,}"),
    ("spark_startup_seconds", "Spark start-up (s)", "{}"),
    ("outages", "primary outages", "{}"),
    ("sent", "messages the namespaces took", "{:,}"),
    ("parked", "parked on the secondary", "{:,}"),
    ("syphoned", "syphoned back", "{:,}"),
    ("duplicates_dropped", "copies dropped by the primary", "{:,}"),
    ("duplicates_removed", "duplicates removed by the receiver", "{:,}"),
    ("delivered_twice", "rows delivered twice", "{:,}"),
    ("lost", "lost", "{:,}"),
)


def format_table(result: dict[str, Any]) -> str:
    """The demo's result as a two-column table."""
    width = max(len(label) for _, label, _ in _ROWS)
    lines = [f"{label:<{width}}  {fmt.format(result[key])}" for key, label, fmt in _ROWS if key in result]
    lines.append(f"{'result':<{width}}  {'OK: every row arrived once' if result.get('ok') else 'FAILED'}")
    again = result.get("sent", 0) - result.get("rows", 0)
    if again > 0:
        lines.append(
            f"({again:,} messages more than rows: batches the sink sent again after the outage cut their"
            " acknowledgements; the primary's duplicate detection dropped the copies)"
        )
    return "\n".join(lines)
