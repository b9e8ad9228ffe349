"""Soak the embedded broker: a fast producer, a slow consumer and many idle sockets.

    python3 interop/soak_broker.py [--seconds 180] [--idle 1000] [--interval 5]

The broker runs in a child process (so its memory is its own); this process drives
it over 127.0.0.1 only:

* a fast producer (the amqplink client) sends ``--size`` byte messages to queue
  ``soak`` as fast as the broker's credit lets it;
* a slow consumer (a raw socket) grants 1,000,000 credit for pre-settled
  deliveries and reads at most ``--read-rate`` bytes a second, the client that once
  drove the broker to gigabytes;
* ``--idle`` sockets connect and say nothing; the broker drops them at its handshake
  deadline and they connect again (at most ``--idle`` reconnections a tick).

Every ``--interval`` seconds it prints the broker's resident memory, what was sent,
accepted, refused and read, and how many idle sockets are open. It ends after
``--seconds`` (every loop checks that deadline) and stops the broker. Not a test:
``tests/interop/test_soak_smoke.py`` runs it for a few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"  # never anything else
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from amqplink.codec.types import UInt  # noqa: E402
from amqplink.engine.frames import AMQP_HEADER, FRAME_TYPE_AMQP, write_frame  # noqa: E402
from amqplink.protocol.definitions import Attach, Begin, Flow, Open, Source  # noqa: E402

SND_SETTLED = 1


@dataclass
class Counters:
    sent: int = 0
    accepted: int = 0
    refused: int = 0
    read_bytes: int = 0
    idle_open: int = 0
    idle_reconnects: int = 0
    idle_refused: int = 0


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (Linux ``/proc``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the broker process ------------------------------------------------------------------
async def serve(args: argparse.Namespace) -> None:
    from amqplink.aio.server import SERVER_GC_THRESHOLD, raise_gc_threshold
    from amqplink.broker import Broker

    raise_gc_threshold(SERVER_GC_THRESHOLD)  # as `amqplink broker` does (this process only serves)

    broker = Broker(
        handshake_timeout=args.handshake_timeout,
        max_connections=args.idle + 100,
        max_queue_bytes=args.max_queue_bytes,
    )
    await broker.start(HOST, 0)
    print(f"PORT {broker.port}", flush=True)
    try:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent goes
    finally:
        await broker.stop()


def start_broker(args: argparse.Namespace) -> tuple[subprocess.Popen[str], int]:
    command = [
        sys.executable, str(Path(__file__).resolve()), "--serve",
        "--idle", str(args.idle),
        "--handshake-timeout", str(args.handshake_timeout),
        "--max-queue-bytes", str(args.max_queue_bytes),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line.startswith("PORT "):
        child.kill()
        raise SystemExit(f"the broker did not start (said {line!r})")
    return child, int(line.split()[1])


# -- the clients -------------------------------------------------------------------------
async def producer(port: int, size: int, deadline: float, counters: Counters) -> None:
    from amqplink.aio import connect
    from amqplink.aio.errors import MessageRejected

    def settled(future: asyncio.Future[object]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is None:
            counters.accepted += 1
        elif isinstance(error, MessageRejected):
            counters.refused += 1  # a full queue; anything else is the end of the run

    body = bytes(size)
    async with await connect(f"amqp://{HOST}:{port}") as conn:
        sender = await conn.create_sender("soak", max_in_flight=500)
        while time.monotonic() < deadline:
            future = await sender.send_nowait(body)
            future.add_done_callback(settled)
            counters.sent += 1


def frame(performative: object) -> bytes:
    out = bytearray()
    write_frame(out, FRAME_TYPE_AMQP, 0, performative)
    return bytes(out)


async def slow_consumer(port: int, read_rate: int, deadline: float, counters: Counters) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(
        AMQP_HEADER
        + frame(Open(container_id="soak-slow-consumer"))
        + frame(Begin(next_outgoing_id=UInt(0), incoming_window=UInt(0x7FFFFFFF), outgoing_window=UInt(100)))
        + frame(
            Attach(name="slow", handle=UInt(0), role=True, snd_settle_mode=SND_SETTLED, source=Source(address="soak"))
        )
        + frame(
            Flow(
                next_incoming_id=UInt(0), incoming_window=UInt(0x7FFFFFFF), next_outgoing_id=UInt(0),
                outgoing_window=UInt(100), handle=UInt(0), delivery_count=UInt(0), link_credit=UInt(1_000_000),
            )
        )
    )
    tick = 0.1
    try:
        while time.monotonic() < deadline:
            chunk = await reader.read(max(1, int(read_rate * tick)))
            if not chunk:
                return
            counters.read_bytes += len(chunk)
            await asyncio.sleep(tick)
    finally:
        writer.close()


async def idle_sockets(port: int, count: int, deadline: float, counters: Counters) -> None:
    """Keep ``count`` silent sockets open; the broker closes them, they come back."""
    open_sockets: set[asyncio.Task[None]] = set()

    async def one() -> None:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
        except OSError:
            counters.idle_refused += 1
            return
        counters.idle_open += 1
        try:
            while time.monotonic() < deadline and await reader.read(1024):
                pass  # anything the broker says ends in EOF
        except OSError:
            pass
        finally:
            counters.idle_open -= 1
            writer.close()

    first = True
    while time.monotonic() < deadline:
        open_sockets = {task for task in open_sockets if not task.done()}
        missing = count - len(open_sockets)
        for _ in range(missing):  # at most ``count`` per tick
            open_sockets.add(asyncio.ensure_future(one()))
        if not first:
            counters.idle_reconnects += missing
        first = False
        await asyncio.sleep(0.2)
    for task in open_sockets:
        task.cancel()
    await asyncio.gather(*open_sockets, return_exceptions=True)


async def soak(args: argparse.Namespace) -> int:
    child, port = start_broker(args)
    counters = Counters()
    start = time.monotonic()
    deadline = start + args.seconds
    peak = 0.0
    tasks = [
        asyncio.ensure_future(slow_consumer(port, args.read_rate, deadline, counters)),
        asyncio.ensure_future(producer(port, args.size, deadline, counters)),
        asyncio.ensure_future(idle_sockets(port, args.idle, deadline, counters)),
    ]
    print(f"soak: broker pid {child.pid} on {HOST}:{port}, {args.seconds:.0f} s, {args.idle} idle sockets", flush=True)
    print(" t(s)  rss(MiB)      sent  accepted  refused  read(MiB)  idle-open  idle-reconnects", flush=True)
    try:
        while time.monotonic() < deadline:
            await asyncio.sleep(min(args.interval, max(0.0, deadline - time.monotonic())))
            rss = rss_mib(child.pid)
            peak = max(peak, rss)
            print(
                f"{time.monotonic() - start:5.0f}  {rss:8.1f}  {counters.sent:8d}  {counters.accepted:8d}"
                f"  {counters.refused:7d}  {counters.read_bytes / 2**20:9.1f}  {counters.idle_open:9d}"
                f"  {counters.idle_reconnects:15d}",
                flush=True,
            )
            failed = [task for task in tasks if task.done() and task.exception() is not None]
            if failed:
                raise failed[0].exception()  # type: ignore[misc]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(OSError):
            assert child.stdin is not None
            child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(5)
    print(
        f"soak: done; peak broker RSS {peak:.1f} MiB; sent {counters.sent}, accepted {counters.accepted},"
        f" refused {counters.refused}, slow consumer read {counters.read_bytes / 2**20:.1f} MiB",
        flush=True,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=180.0, help="how long to run (default: %(default)s)")
    parser.add_argument("--idle", type=int, default=1000, help="idle sockets to hold (default: %(default)s)")
    parser.add_argument("--size", type=int, default=10_240, help="message size in bytes (default: %(default)s)")
    parser.add_argument("--read-rate", type=int, default=1 << 20, help="slow consumer bytes/s (default: %(default)s)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between reports (default: %(default)s)")
    parser.add_argument(
        "--handshake-timeout", type=float, default=10.0, help="the broker's handshake deadline (default: %(default)s)"
    )
    parser.add_argument(
        "--max-queue-bytes", type=int, default=64 << 20, help="the broker's queue size limit (default: %(default)s)"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.idle < 0 or args.size < 1 or args.read_rate < 1 or args.interval <= 0:
        parser.error("--seconds, --size, --read-rate and --interval must be positive, --idle not negative")
    if args.serve:
        asyncio.run(serve(args))
        return 0
    return asyncio.run(soak(args))


if __name__ == "__main__":
    sys.exit(main())
