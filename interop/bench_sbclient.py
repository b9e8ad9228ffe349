"""Benchmark (not a test): amqplink's Service Bus client against the official SDK's, asyncio and blocking.

One run, one embedded broker (``amqplink broker`` in a subprocess, so it never shares
the GIL with the client under test), each scenario on a fresh queue. The scenario code
is the same for both clients, written as a user of ``azure.servicebus.aio`` writes it;
only the import differs (``amqplink.servicebus.aio``); then the same scenarios with the
blocking clients (``azure.servicebus`` against ``amqplink.servicebus``):

a. single sends awaited one by one: ``await sender.send_messages(msg)`` in a loop
   (latency-bound: one round trip through the broker per message for both; goal 4x the
   SDK with at most 60 µs of client CPU per message, issue 24 D);
b. single sends from 100 concurrent tasks (``asyncio.gather`` of 100 tasks, each
   awaiting ``send_messages(msg)`` in a loop) on one sender. The SDK's README ("Thread
   safety") says its ``ServiceBusSender`` is not coroutine-safe and shows an
   ``asyncio.Lock()`` around ``send_messages`` for concurrent sending in asyncio: the SDK
   row does exactly that (without it, 7.15 reuses delivery-ids and the broker closes the
   connection). amqplink's sender is coroutine-safe: its tasks share it without a lock,
   each send awaiting only its own outcome while the transfers are pipelined;
c. batch sends: ``create_message_batch()`` filled until ``add_message`` raises
   ``ValueError``, then ``send_messages(batch)``; amqplink also ``send_messages(list)``
   of every message at once (split by the link's max-message-size, pipelined);
d. receive + complete: peek-lock, ``prefetch_count=1000``,
   ``receive_messages(max_message_count=100, max_wait_time=5)``, each message's body and
   sequence number read (as a user processing it would), then either each
   message completed in turn (``for m in messages: await receiver.complete_message(m)``,
   the README's pattern; latency-bound, goals as a's) or all at once with
   ``await asyncio.gather(*(receiver.complete_message(m) for m in messages))`` as the
   SDK 7.15 changelog says to (its settlements now wait for the broker's confirmation,
   and so do amqplink's); the queue is filled first, untimed. The SDK itself is slower
   gathered than in turn, so compare the gathered amqplink row with both SDK rows.

Blocking: a, c and d-in-turn as above without ``await``; b from ``THREADS`` threads sharing
one sender (the SDK's behind a ``threading.Lock``, as its README's "Thread safety" shows
for its senders, which are not thread-safe; amqplink's blocking sender is, and takes none).

Prints msg/s per client, the ratio, the goal, and CPU time per message of the client
process (``time.process_time``) and of the broker process (``/proc``); for the
round-trip-bound rows (a and d in turn) also ``bound``, the ratio a client costing no CPU
at all would reach against this broker (:func:`round_trip_bound`). With rows a or d it then
prints the floor: a round trip with no protocol at all (:func:`floor`), what any Python client
and server pay per sequential message before doing any work on it. amqplink runs
``--scale`` times the messages, so that its short runs are not all start-up and noise.
``--profile DIR`` writes a cProfile of every amqplink scenario's timed part there (the calling
thread's and the blocking client's keeper thread's calls); ``--calls`` prints the
client's function calls per message (cProfile's count: deterministic, unlike CPU time on a
shared machine; the worker threads of the blocking b row are not counted).

    python3 interop/bench_sbclient.py [--count 10000] [--single-count 5000] [--size 1024] [--only amqplink]
        [--rows bd] [--api aio|sync] [--calls] [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import cProfile
import inspect
import os
import pstats
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TASKS = 100
"""Concurrent sending tasks in scenario b (asyncio)."""
THREADS = 16
"""Concurrent sending threads in scenario b (blocking)."""
PREFETCH, RECEIVE_BATCH = 1000, 100
"""Scenario d's prefetch_count and max_message_count."""


@dataclass
class Client:
    name: str
    aio: ModuleType  # azure.servicebus.aio or amqplink.servicebus.aio
    sync: ModuleType  # azure.servicebus or amqplink.servicebus (the blocking client)
    message: type  # ServiceBusMessage
    needs_lock: bool  # the sender is not coroutine- or thread-safe: concurrent callers take a lock


def sdk() -> Client:
    import azure.servicebus
    import azure.servicebus.aio

    return Client("azure-servicebus", azure.servicebus.aio, azure.servicebus, azure.servicebus.ServiceBusMessage, True)


def own() -> Client:
    import amqplink.servicebus
    import amqplink.servicebus.aio

    return Client(
        "amqplink", amqplink.servicebus.aio, amqplink.servicebus, amqplink.servicebus.ServiceBusMessage, False
    )


# -- the scenarios (the same code for both clients) ------------------------------------------
async def send_one_by_one(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    async with client.aio.ServiceBusClient.from_connection_string(conn_str) as sb, sb.get_queue_sender(queue) as sender:
        await sender.send_messages(client.message(body))  # attach before the clock starts
        clock = start_clock()
        for _ in range(count - 1):
            await sender.send_messages(client.message(body))
        clock.stop()


async def send_concurrent(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    async with client.aio.ServiceBusClient.from_connection_string(conn_str) as sb, sb.get_queue_sender(queue) as sender:
        lock = asyncio.Lock() if client.needs_lock else contextlib.nullcontext()

        async def task(n: int) -> None:
            for _ in range(n):
                async with lock:
                    await sender.send_messages(client.message(body))

        share, extra = divmod(count, TASKS)
        clock = start_clock()
        await asyncio.gather(*(task(share + (i < extra)) for i in range(TASKS)))
        clock.stop()


async def send_batches(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    async with client.aio.ServiceBusClient.from_connection_string(conn_str) as sb, sb.get_queue_sender(queue) as sender:
        clock = start_clock()
        left = count
        while left:
            batch = await sender.create_message_batch()
            left -= add_until_full(client, batch, body, left)
            await sender.send_messages(batch)
        clock.stop()


def add_until_full(client: Client, batch: Any, body: bytes, left: int) -> int:
    """Add messages of ``body`` to ``batch`` until ``add_message`` raises ``ValueError`` (full)
    or ``left`` are in; how many went in."""
    added = 0
    while added < left:
        try:
            batch.add_message(client.message(body))
        except ValueError:  # the batch is full
            break
        added += 1
    return added


async def send_list(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    async with client.aio.ServiceBusClient.from_connection_string(conn_str) as sb, sb.get_queue_sender(queue) as sender:
        clock = start_clock()
        await sender.send_messages([client.message(body) for _ in range(count)])
        clock.stop()


async def receive_complete(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    async def settle(receiver: Any, messages: list[Any]) -> None:
        await asyncio.gather(*(receiver.complete_message(m) for m in messages))

    await receive_and_settle(client, conn_str, queue, count, body, settle)


async def receive_complete_each(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    async def settle(receiver: Any, messages: list[Any]) -> None:
        for message in messages:
            await receiver.complete_message(message)

    await receive_and_settle(client, conn_str, queue, count, body, settle)


async def receive_and_settle(
    client: Client,
    conn_str: str,
    queue: str,
    count: int,
    body: bytes,
    settle: Callable[[Any, list[Any]], Coroutine[Any, Any, None]],
) -> None:
    """Fill ``queue`` (untimed), then receive batches in peek-lock and ``settle`` each batch."""
    await fill(conn_str, queue, count, body)
    async with (
        client.aio.ServiceBusClient.from_connection_string(conn_str) as sb,
        sb.get_queue_receiver(queue, prefetch_count=PREFETCH) as receiver,
    ):
        clock = start_clock()
        got = 0
        while got < count:
            messages = await receiver.receive_messages(max_message_count=RECEIVE_BATCH, max_wait_time=5)
            if not messages:
                raise RuntimeError(f"{client.name} received {got} of {count} messages")
            for message in messages:  # as a user would: look at what came before settling it
                check_received(client, message, body)
            await settle(receiver, messages)
            got += len(messages)
        clock.stop()


async def fill(conn_str: str, queue: str, count: int, body: bytes) -> None:
    """Put ``count`` messages on ``queue`` (untimed), with amqplink's pipelined list send."""
    client = own()
    async with client.aio.ServiceBusClient.from_connection_string(conn_str) as sb, sb.get_queue_sender(queue) as sender:
        await sender.send_messages([client.message(body) for _ in range(count)])


# -- the same scenarios with the blocking clients (azure.servicebus / amqplink.servicebus) ----
def sync_send_one_by_one(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    with client.sync.ServiceBusClient.from_connection_string(conn_str) as sb, sb.get_queue_sender(queue) as sender:
        sender.send_messages(client.message(body))  # attach before the clock starts
        clock = start_clock()
        for _ in range(count - 1):
            sender.send_messages(client.message(body))
        clock.stop()


def sync_send_threads(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    """``THREADS`` threads sending one message at a time on one sender; the SDK's, which is not
    thread-safe (its README, "Thread safety"), behind a ``threading.Lock`` as that README shows."""
    with client.sync.ServiceBusClient.from_connection_string(conn_str) as sb, sb.get_queue_sender(queue) as sender:
        sender.send_messages(client.message(body))  # attach before the clock starts
        lock = threading.Lock() if client.needs_lock else contextlib.nullcontext()

        def work(n: int) -> None:
            for _ in range(n):
                with lock:
                    sender.send_messages(client.message(body))

        share, extra = divmod(count - 1, THREADS)
        clock = start_clock()
        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            for done in [pool.submit(work, share + (i < extra)) for i in range(THREADS)]:
                done.result()
        clock.stop()


def sync_send_batches(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    with client.sync.ServiceBusClient.from_connection_string(conn_str) as sb, sb.get_queue_sender(queue) as sender:
        clock = start_clock()
        left = count
        while left:
            batch = sender.create_message_batch()
            left -= add_until_full(client, batch, body, left)
            sender.send_messages(batch)
        clock.stop()


def sync_send_list(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    with client.sync.ServiceBusClient.from_connection_string(conn_str) as sb, sb.get_queue_sender(queue) as sender:
        clock = start_clock()
        sender.send_messages([client.message(body) for _ in range(count)])
        clock.stop()


def sync_receive_complete_each(client: Client, conn_str: str, queue: str, count: int, body: bytes) -> None:
    """Scenario d with the blocking receiver: each message completed in turn (there is no gather)."""
    asyncio.run(fill(conn_str, queue, count, body))
    with (
        client.sync.ServiceBusClient.from_connection_string(conn_str) as sb,
        sb.get_queue_receiver(queue, prefetch_count=PREFETCH) as receiver,
    ):
        clock = start_clock()
        got = 0
        while got < count:
            messages = receiver.receive_messages(max_message_count=RECEIVE_BATCH, max_wait_time=5)
            if not messages:
                raise RuntimeError(f"{client.name} received {got} of {count} messages")
            for message in messages:
                check_received(client, message, body)
                receiver.complete_message(message)
            got += len(messages)
        clock.stop()


def check_received(client: Client, message: Any, body: bytes) -> None:
    """Read the body and sequence number, as a user processing the message would."""
    if len(b"".join(message.body)) != len(body) or message.sequence_number is None:
        raise RuntimeError(f"{client.name} received a message that is not what was sent")


# -- measuring --------------------------------------------------------------------------------
def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0: none)."""
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def on_loop_thread(action: Callable[[], Any]) -> None:
    """Run ``action`` on amqplink.sync's keeper thread (if it runs) and wait for it: the
    keeper takes the loop over while this thread waits (it drives the loop otherwise)."""
    import amqplink.sync.loop

    current = amqplink.sync.loop._current
    if current is None or not current.thread.is_alive():
        return
    done = threading.Event()

    def run() -> None:
        try:
            action()
        finally:
            done.set()

    current.loop.call_soon_threadsafe(run)
    done.wait()


class Clock:
    """Wall time, this process's CPU time and the broker's between start and stop (the
    scenario starts it once attached); with ``counting``, the function calls made in that
    time by the calling thread and amqplink's keeper thread, which drives the blocking
    client's loop between calls (cProfile's count)."""

    current: Clock | None = None
    broker_pid = 0
    counting = False

    def __init__(self) -> None:
        self.profilers: list[cProfile.Profile] = []
        if self.counting:
            here, loop = cProfile.Profile(), cProfile.Profile()
            on_loop_thread(loop.enable)
            here.enable()
            self.profilers = [here, loop]
        self.broker = process_cpu(self.broker_pid)
        self.wall = time.perf_counter()
        self.cpu = time.process_time()
        self.elapsed = self.cpu_elapsed = self.broker_elapsed = 0.0
        self.calls = 0

    def stop(self) -> None:
        self.elapsed = time.perf_counter() - self.wall
        self.cpu_elapsed = time.process_time() - self.cpu
        self.broker_elapsed = process_cpu(self.broker_pid) - self.broker
        if self.profilers:
            here, loop = self.profilers
            here.disable()
            on_loop_thread(loop.disable)
            self.calls = sum(entry.callcount for p in self.profilers for entry in p.getstats())


def start_clock() -> Clock:
    Clock.current = Clock()
    return Clock.current


Scenario = Callable[[Client, str, str, int, bytes], Any]  # a coroutine function (asyncio) or a function


@dataclass
class Result:
    rate: float  # messages per second
    cpu: float  # client CPU µs per message
    broker_cpu: float  # broker CPU µs per message
    calls: float  # client function calls per message (with --calls)


def measure(client: Client, scenario: Scenario, conn_str: str, count: int, size: int, profile: Path | None) -> Result:
    """Rate and CPU per message of one scenario on a fresh queue (with ``profile``, the
    timed part's cProfile of both threads is written there)."""
    queue = f"{client.name[:8]}-{scenario.__name__}-{uuid.uuid4().hex[:8]}"
    Clock.current = None
    if inspect.iscoroutinefunction(scenario):
        asyncio.run(scenario(client, conn_str, queue, count, bytes(size)))
    else:
        scenario(client, conn_str, queue, count, bytes(size))
    clock = Clock.current
    assert clock is not None and clock.elapsed > 0
    if profile is not None and clock.profilers:
        profile.mkdir(parents=True, exist_ok=True)
        stats = pstats.Stats(*(p for p in clock.profilers if p.getstats()))  # type: ignore[attr-defined]
        stats.dump_stats(profile / f"{client.name}-{scenario.__name__}.prof")
    timed = count - 1 if scenario in (send_one_by_one, sync_send_one_by_one, sync_send_threads) else count
    return Result(
        timed / clock.elapsed, clock.cpu_elapsed * 1e6 / timed, clock.broker_elapsed * 1e6 / timed, clock.calls / timed
    )


@contextlib.contextmanager
def broker_process() -> Iterator[str]:
    """The connection string of ``amqplink broker`` on a free port, in a subprocess (whose
    CPU time the :class:`Clock` reads)."""
    with broker_subprocess() as (conn_str, pid):
        Clock.broker_pid = pid
        try:
            yield conn_str
        finally:
            Clock.broker_pid = 0


@contextlib.contextmanager
def broker_subprocess(*args: str) -> Iterator[tuple[str, int]]:
    """``amqplink broker --port 0`` (with ``args``, e.g. ``--data-dir DIR``) in a subprocess
    of its own session: its connection string and process id; stopped at the end (SIGTERM,
    then SIGKILL). Its log is shown if it does not start."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", "import sys; from amqplink.cli import main; sys.exit(main())", "broker", "--port", "0"]
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            [*cmd, *args], stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True
        )
        try:
            assert process.stdout is not None
            conn_str = None
            for _ in range(10):
                line = process.stdout.readline()
                if not line:
                    break
                if re.match(r"Endpoint=sb://", line):
                    conn_str = line.strip()
                    break
            if conn_str is None:
                log.seek(0)
                raise RuntimeError(f"the broker did not print its connection string: {log.read()[-2000:]}")
            threading.Thread(target=process.stdout.read, daemon=True).start()  # (its stdout never fills up)
            yield conn_str, process.pid
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@dataclass
class Row:
    name: str
    scenario: Scenario
    theirs: Scenario | None  # the SDK's scenario (None: amqplink only, compared with the row above)
    goal: float | None  # the least ratio wanted
    single: bool  # counted with --single-count
    api: str  # "aio" or "sync"
    cpu_goal: float | None = None  # the most client CPU µs per message wanted (amqplink)


SEQUENTIAL_GOAL, SEQUENTIAL_CPU = 4.0, 60.0
"""Issue 24 D: the patterns most code uses (a send awaited at a time, each message completed in
turn) at least 4x the SDK, with at most 60 µs of client CPU per message."""


def sequential(name: str, scenario: Scenario, api: str) -> Row:
    """A row of a pattern most code uses, with issue 24 D's goals."""
    return Row(name, scenario, scenario, SEQUENTIAL_GOAL, True, api, SEQUENTIAL_CPU)


ROWS = [
    sequential("a. single sends, one by one", send_one_by_one, "aio"),
    Row(f"b. single sends, {TASKS} tasks", send_concurrent, send_concurrent, 20.0, True, "aio"),
    Row("c. batch sends", send_batches, send_batches, 2.0, False, "aio"),
    Row("c. send_messages(list)", send_list, None, 2.0, False, "aio"),
    sequential("d. receive + complete each", receive_complete_each, "aio"),
    Row("d. receive + gather(complete)", receive_complete, receive_complete, 10.0, False, "aio"),
    sequential("a. single sends, one by one", sync_send_one_by_one, "sync"),
    Row(f"b. single sends, {THREADS} threads", sync_send_threads, sync_send_threads, 20.0, True, "sync"),
    Row("c. batch sends", sync_send_batches, sync_send_batches, 2.0, False, "sync"),
    Row("c. send_messages(list)", sync_send_list, None, 2.0, False, "sync"),
    sequential("d. receive + complete each", sync_receive_complete_each, "sync"),
]

HEADINGS = {
    "aio": "asyncio: azure.servicebus.aio vs amqplink.servicebus.aio",
    "sync": "blocking: azure.servicebus vs amqplink.servicebus",
}


def selected(args: argparse.Namespace) -> list[Row]:
    return [row for row in ROWS if row.name[0] in args.rows and row.api in args.api]


def run(args: argparse.Namespace) -> dict[tuple[str, str, str], Result]:
    clients = [c for c in (sdk(), own()) if args.only is None or args.only in c.name]
    results: dict[tuple[str, str, str], Result] = {}
    Clock.counting = args.calls or args.profile is not None
    with broker_process() as conn_str:
        for row in selected(args):
            count = args.single_count if row.single else args.count
            for client in clients:
                ours = client.name == "amqplink"
                scenario = row.scenario if ours else row.theirs
                if scenario is not None:
                    n = count * args.scale if ours else count
                    profile = args.profile if ours else None
                    key = (row.api, row.name, client.name)
                    results[key] = measure(client, scenario, conn_str, n, args.size, profile)
    return results


def _cell(result: Result | None, field: str, fmt: str = ",.0f") -> str:
    return "-" if result is None else format(getattr(result, field), fmt)


def print_table(args: argparse.Namespace, results: dict[tuple[str, str, str], Result]) -> None:
    print(
        f"{args.size} B bodies; {args.single_count} messages in a, b and d (each), {args.count} in c and d (gather);"
        f" amqplink x{args.scale}"
    )
    print(
        "broker: `amqplink broker` in a subprocess; CPU: µs per message of the client process"
        " (all its threads) / of the broker" + ("; calls: client function calls per message" if args.calls else "")
    )
    api = None
    theirs: Result | None = None
    for row in selected(args):
        if row.api != api:
            api = row.api
            print(f"\n{HEADINGS[api]}")
            print(
                f"{'scenario':<31}{'azure-servicebus':>17}{'amqplink':>10}{'ratio':>7}{'goal':>7}"
                f"{'SDK CPU':>9}{'ours':>6}{'goal':>6}{'broker (SDK/ours)':>19}{'bound':>7}"
                + (f"{'calls (SDK/ours)':>18}" if args.calls else "")
            )
        if row.theirs is not None:
            theirs = results.get((row.api, row.name, "azure-servicebus"))
        ours = results.get((row.api, row.name, "amqplink"))
        ratio = "-" if ours is None or theirs is None else f"{ours.rate / theirs.rate:.1f}"
        goal = "-" if row.goal is None else f">={row.goal:g}x"
        cpu_goal = "-" if row.cpu_goal is None else f"<={row.cpu_goal:g}"
        broker = f"{_cell(theirs, 'broker_cpu')} / {_cell(ours, 'broker_cpu')}"
        calls = f"{_cell(theirs, 'calls')} / {_cell(ours, 'calls')}" if args.calls else ""
        bounded = row.cpu_goal is not None and ours is not None and theirs is not None
        bound = f"{round_trip_bound(theirs, ours):.1f}x" if bounded else "-"  # type: ignore[arg-type]
        print(
            f"{row.name:<31}{_cell(theirs, 'rate'):>15}/s{_cell(ours, 'rate'):>8}/s{ratio:>6}x{goal:>7}"
            f"{_cell(theirs, 'cpu'):>9}{_cell(ours, 'cpu'):>6}{cpu_goal:>6}{broker:>19}{bound:>7}{calls:>18}"
        )


def round_trip_bound(theirs: Result, ours: Result) -> float:
    """The most a client costing no CPU at all could reach in a round-trip-bound row: the SDK's
    time per message over the broker's own CPU per message of amqplink's run. Each message
    waits for the broker's answer, so no client's message takes less than the broker's work
    on it (the wake-ups between the processes come on top: the true bound is lower)."""
    return (1e6 / theirs.rate) / ours.broker_cpu


ECHO_SERVER = """
import asyncio, sys
class Echo(asyncio.Protocol):
    def connection_made(self, transport): self.transport = transport
    def data_received(self, data): self.transport.write(data[:8])
async def main():
    server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""
"""The floor's server: a bare asyncio protocol answering every read with 8 bytes, no AMQP."""


class _Answer(asyncio.Protocol):
    def __init__(self) -> None:
        self.waiter: asyncio.Future[None] | None = None

    def data_received(self, data: bytes) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


async def _asyncio_round_trips(port: int, count: int, body: bytes) -> None:
    loop = asyncio.get_running_loop()
    transport, answer = await loop.create_connection(_Answer, "127.0.0.1", port)
    clock = start_clock()
    for _ in range(count):
        answer.waiter = loop.create_future()
        transport.write(body)
        await answer.waiter
    clock.stop()
    transport.close()


def _socket_round_trips(port: int, count: int, body: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        clock = start_clock()
        for _ in range(count):
            sock.sendall(body)
            sock.recv(65536)
        clock.stop()


def floor(count: int, size: int) -> dict[str, Result]:
    """The cost of a round trip with no protocol at all, on this machine now: a bare asyncio
    client (write, await the answer), and a blocking socket (``sendall``, ``recv``), against a
    bare asyncio echo server in a subprocess. What any Python client and broker pay per
    sequential message before doing any work on it."""
    process = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdout=subprocess.PIPE, text=True)
    results: dict[str, Result] = {}
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        Clock.broker_pid = process.pid
        for name in ("asyncio", "socket"):
            Clock.current = None
            if name == "asyncio":
                asyncio.run(_asyncio_round_trips(port, count, bytes(size)))
            else:
                _socket_round_trips(port, count, bytes(size))
            clock = Clock.current
            assert clock is not None
            results[name] = Result(
                count / clock.elapsed, clock.cpu_elapsed * 1e6 / count, clock.broker_elapsed * 1e6 / count, 0.0
            )
    finally:
        Clock.broker_pid = 0
        process.kill()
        process.wait(10)
    return results


def print_floor(results: dict[str, Result]) -> None:
    print("\nfloor: a round trip with no protocol (a bare asyncio echo server in a subprocess)")
    labels = {"asyncio": "asyncio client (write, await the answer)", "socket": "blocking socket (sendall, recv)"}
    for name, label in labels.items():
        r = results[name]
        print(
            f"  {label:<42}{1e6 / r.rate:6.0f} µs a round trip, client CPU {r.cpu:4.0f} µs, server CPU"
            f" {r.broker_cpu:4.0f} µs"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=10000, help="messages in scenarios c and d (gather)")
    parser.add_argument("--single-count", type=int, default=5000, help="messages in scenarios a, b and d (each)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument(
        "--scale", type=int, default=4, help="amqplink runs this many times the messages (a longer, steadier run)"
    )
    parser.add_argument("--only", choices=["sdk", "amqplink"], default=None, help="run one client")
    parser.add_argument("--profile", type=Path, default=None, help="write cProfiles of amqplink's timed parts here")
    parser.add_argument("--rows", default="abcd", help="the scenarios to run, by letter (e.g. b or ad)")
    parser.add_argument("--api", default="aio,sync", help="aio, sync or both (aio,sync)")
    parser.add_argument(
        "--calls", action="store_true", help="count the client's function calls per message (slows both clients)"
    )
    args = parser.parse_args(argv)
    print_table(args, run(args))
    if set(args.rows) & set("ad"):
        print_floor(floor(args.single_count, args.size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
