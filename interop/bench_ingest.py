"""The broker's send path in one process (not a test): CPU per message received, no sockets.

A producer engine and a Service Bus connection of the embedded broker are wired back
to back in memory. The producer queues 1 KiB messages (unsettled, as ``bench_broker``'s
producers send them) and its bytes reach the broker in reads of ``--read`` bytes, as a
socket delivers them; the broker stores each message and settles it. Only the broker's
side is timed (``process_time`` around its engine and handler), so the figure is what
``bench_broker`` calls the broker's CPU per message in the send phase, less the socket
and event loop. On a shared machine compare the minimum of several rounds, or what other
processes do not disturb: ``--calls``, the broker's function calls per message (cProfile's
count), or ``--opcodes``, the Python bytecodes it runs per message (a trace, slow).
``--batch N``: the messages go as Service Bus batch transfers of N (message-format
``0x80013700``), each as the PySpark sink sends it (a message-id, a partition key per 256
rows): the path ``bench_spark``'s broker takes. ``--in-flight 1``: each message waits for its
settlement before the next is sent, so each read of the broker holds one transfer and each
of its writes one disposition (the pattern of a send awaited before the next;
``bench_dispatch --settle-each`` is its receive side).

    python3 interop/bench_ingest.py [--count 20000] [--partitioned] [--rounds 5] [--batch N] [--profile FILE]
        [--in-flight N] [--read BYTES] [--calls|--opcodes]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqplink.broker.durable import Persistence  # noqa: E402
from amqplink.engine.connection import Connection, ConnectionConfig  # noqa: E402
from amqplink.engine.link import SND_UNSETTLED  # noqa: E402
from amqplink.message import Message  # noqa: E402
from amqplink.protocol.definitions import Source, Target  # noqa: E402
from amqplink.sbwire.formats import BATCH_FORMAT  # noqa: E402
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusMessageBatch  # noqa: E402
from interop import inprocess  # noqa: E402


class OpcodeCounter:
    """Counts the Python bytecodes run between :meth:`enable` and :meth:`disable` (what
    ``run`` asks of a ``cProfile.Profile``), through a trace function: deterministic, slow."""

    def __init__(self) -> None:
        self.opcodes = 0

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.opcodes += 1
        return self._local

    def _call(self, frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return self._local

    def enable(self) -> None:
        sys.settrace(self._call)

    def disable(self) -> None:
        sys.settrace(None)


@contextlib.contextmanager
def data_dir(durable: bool) -> Any:
    """A temporary data directory when ``durable`` (else None), removed afterwards."""
    if not durable:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="bench-") as directory:
        yield directory


def batch_payload(batch: int) -> bytes:
    """One Service Bus batch transfer (message-format ``0x80013700``) of ``batch`` messages
    as the PySpark sink sends them: 1 KiB body, a message id, a partition key per 256."""
    envelope = ServiceBusMessageBatch(1 << 30)
    for row in range(batch):
        envelope.add_message(ServiceBusMessage(bytes(1024), message_id=f"w:0:{row}", partition_key=f"w:0:{row // 256}"))
    return envelope._payload()


async def run(
    count: int, partitioned: bool, in_flight: int, read: int, calls: Any = None, durable: bool = False, batch: int = 0
) -> float:
    """Broker CPU seconds to store and settle ``count`` messages (with ``calls``, a
    ``cProfile.Profile``: it counts the broker's function calls, and the time is not meant;
    ``durable``: the broker keeps the namespace in a temporary directory; ``batch``: sent
    as Service Bus batch transfers of that many messages, see :func:`batch_payload`)."""
    with data_dir(durable) as directory:
        persistence = None if directory is None else Persistence(directory)
        try:
            return await _run(count, partitioned, in_flight, read, calls, persistence, batch)
        finally:
            if persistence is not None:
                await persistence.close()


async def _run(
    count: int, partitioned: bool, in_flight: int, read: int, calls: Any, persistence: Persistence | None, batch: int
) -> float:
    namespace, server, handler = inprocess.broker(partitioned, persistence)
    client = Connection(ConnectionConfig(container_id="producer"))
    body = batch_payload(batch) if batch else Message(bytes(1024)).encode()
    per_transfer, message_format = (batch, BATCH_FORMAT) if batch else (1, 0)
    pipe = inprocess.Pipe(client, server, handler, read=read, calls=calls, persistence=persistence)
    pump = pipe.pump_stored

    client.open()
    session = client.begin_session()
    sender = session.attach_sender(
        "producer", source=Source(address="producer"), target=Target(address="q"), snd_settle_mode=SND_UNSETTLED
    )
    await pump()
    pipe.broker_cpu = 0.0
    sent = 0
    while sent < count:
        n = min(in_flight, (count - sent) // per_transfer)
        if n == 0:
            raise ValueError(f"--count {count} is not a multiple of --batch {batch}")
        for _ in range(n):
            sender.send(body, message_format=message_format)
        sent += n * per_transfer
        await pump()
    if sender.unsettled:
        raise RuntimeError(f"{len(sender.unsettled)} messages not settled")
    stored = len(namespace.receiver_source("q").store)
    if stored != count:
        raise RuntimeError(f"{stored} of {count} messages stored")
    return pipe.broker_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--in-flight", type=int, default=1000)
    parser.add_argument("--read", type=int, default=65536, help="bytes per socket read")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitioned", action="store_true")
    parser.add_argument("--batch", type=int, default=0, help="Service Bus batch transfers of this many messages")
    parser.add_argument("--durable", action="store_true", help="keep the namespace in a temporary data directory")
    parser.add_argument("--profile", default=None, help="cProfile stats of the broker's side (one round) to this file")
    parser.add_argument("--calls", action="store_true", help="count the broker's function calls per message")
    parser.add_argument("--opcodes", action="store_true", help="count the broker's Python opcodes per message")
    args = parser.parse_args()
    go = (args.count, args.partitioned, args.in_flight, args.read)
    more = {"durable": args.durable, "batch": args.batch}
    if args.opcodes:
        opcodes = OpcodeCounter()
        asyncio.run(run(*go, opcodes, **more))
        print(f"broker: {opcodes.opcodes / args.count:.1f} Python opcodes per message")
        return
    if args.calls or args.profile:  # call counts are deterministic, unlike CPU time on a shared machine
        import cProfile

        counter = cProfile.Profile()
        asyncio.run(run(*go, counter, **more))
        if args.profile:
            counter.dump_stats(args.profile)
        total = inprocess.call_count(counter)
        print(f"broker: {total / args.count:.2f} function calls per message")
        return
    figures = [asyncio.run(run(*go, **more)) / args.count * 1e6 for _ in range(args.rounds)]
    kind = ("partitioned" if args.partitioned else "plain") + (", durable" if args.durable else "")
    kind += f", batches of {args.batch}" if args.batch else ""
    print(f"{kind}: broker us/msg min {min(figures):.2f}  all " + " ".join(f"{f:.2f}" for f in figures))


if __name__ == "__main__":
    main()
