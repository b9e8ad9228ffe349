"""The broker's dispatch path in one process (not a test): CPU per message, no sockets.

A Service Bus connection of the embedded broker and a peek-lock consumer engine are
wired back to back in memory; the queue is filled first, then the consumer grants
credit, accepts what arrives (rcv-settle-mode second, as the SDK's PeekLock) and the
broker completes and settles it. Only the broker's side is timed (``process_time``
around its engine and handler), so the figure is what ``bench_broker`` calls the
broker's CPU per message in the receive phase, less the socket and event loop. On a
shared machine compare the minimum of several rounds, or ``--calls``: the broker's
function calls per message (cProfile's count), which other processes do not disturb, or
``--opcodes``: the Python bytecodes it runs per message (a trace, slow). ``--durable``: as
``bench_ingest``'s (the queue is filled and written before the clock starts).
``--settle-each``: the consumer settles each delivery in turn and the bytes move after
each one, so each read of the broker holds one disposition (the pattern of a receiver
completing each message before the next; ``bench_ingest --read 1100`` is its send side).

    python3 interop/bench_dispatch.py [--count 20000] [--partitioned] [--durable] [--rounds 5] [--profile FILE]
        [--settle-each] [--calls|--opcodes]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqplink.broker.durable import Persistence  # noqa: E402
from amqplink.engine.connection import Connection, ConnectionConfig  # noqa: E402
from amqplink.engine.events import DeliveriesReceived  # noqa: E402
from amqplink.engine.link import RCV_SECOND, SND_UNSETTLED  # noqa: E402
from amqplink.message import Message  # noqa: E402
from amqplink.protocol.definitions import Accepted, Source, Target  # noqa: E402
from interop import inprocess  # noqa: E402
from interop.bench_ingest import OpcodeCounter, data_dir  # noqa: E402


async def run(
    count: int, partitioned: bool, prefetch: int, calls: Any = None, durable: bool = False, settle_each: bool = False
) -> float:
    """Broker CPU seconds to deliver and settle ``count`` messages (with ``calls``, a
    ``cProfile.Profile`` or an ``OpcodeCounter``: it counts the broker's function calls or
    bytecodes, and the time is not meant; ``durable``: the broker keeps the namespace in a
    temporary directory; ``settle_each``: one disposition per read of the broker)."""
    with data_dir(durable) as directory:
        persistence = None if directory is None else Persistence(directory)
        try:
            return await _run(count, partitioned, prefetch, calls, persistence, settle_each)
        finally:
            if persistence is not None:
                await persistence.close()


async def _run(
    count: int, partitioned: bool, prefetch: int, calls: Any, persistence: Persistence | None, settle_each: bool
) -> float:
    namespace, server, handler = inprocess.broker(partitioned, persistence)
    client = Connection(ConnectionConfig(container_id="consumer"))
    body = Message(bytes(1024)).encode()
    now = time.time()
    target = namespace.sender_target("q")
    for _ in range(count):
        namespace.send(target, body, now)
    if persistence is not None:
        await inprocess.committed(persistence)  # (the filled queue written before the clock starts)
    pipe = inprocess.Pipe(client, server, handler, calls=calls, persistence=persistence)
    pump = pipe.pump_stored

    client.open()
    session = client.begin_session()
    receiver = session.attach_receiver(
        "consumer",
        source=Source(address="q"),
        target=Target(address="consumer"),
        snd_settle_mode=SND_UNSETTLED,
        rcv_settle_mode=RCV_SECOND,
    )
    await pump()
    pipe.broker_cpu = 0.0
    accepted = Accepted()
    received = 0
    while received < count:
        receiver.flow(prefetch)
        deliveries = [d for e in await pump() if type(e) is DeliveriesReceived for d in e.deliveries]
        if not deliveries:
            raise RuntimeError(f"stalled at {received}/{count}")
        for delivery in deliveries:
            receiver.settle(delivery, accepted)
            if settle_each:
                await pump()  # this disposition alone in the broker's read
        received += len(deliveries)
        await pump()  # the broker completes and settles (and, with credit left, sends more)
    left = len(namespace.receiver_source("q").store)
    if left:
        raise RuntimeError(f"{left} messages left in the queue")
    return pipe.broker_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--prefetch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitioned", action="store_true")
    parser.add_argument("--durable", action="store_true", help="keep the namespace in a temporary data directory")
    parser.add_argument("--profile", default=None, help="cProfile stats of the last round to this file")
    parser.add_argument("--settle-each", action="store_true", help="one disposition per read of the broker")
    parser.add_argument("--calls", action="store_true", help="count the broker's function calls per message")
    parser.add_argument("--opcodes", action="store_true", help="count the broker's Python opcodes per message")
    args = parser.parse_args()
    more = {"durable": args.durable, "settle_each": args.settle_each}
    if args.opcodes:
        opcodes = OpcodeCounter()
        asyncio.run(run(args.count, args.partitioned, args.prefetch, opcodes, **more))
        print(f"broker: {opcodes.opcodes / args.count:.1f} Python opcodes per message")
        return
    if args.calls:  # deterministic, unlike the CPU time on a shared machine
        import cProfile

        counter = cProfile.Profile()
        asyncio.run(run(args.count, args.partitioned, args.prefetch, counter, **more))
        total = inprocess.call_count(counter)
        print(f"broker: {total / args.count:.2f} function calls per message")
        return
    figures = []
    for i in range(args.rounds):
        if args.profile and i == args.rounds - 1:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
            asyncio.run(run(args.count, args.partitioned, args.prefetch, **more))
            profiler.disable()
            profiler.dump_stats(args.profile)
            break
        cpu = asyncio.run(run(args.count, args.partitioned, args.prefetch, **more))
        figures.append(cpu / args.count * 1e6)
    if figures:
        kind = ("partitioned" if args.partitioned else "plain") + (", durable" if args.durable else "")
        print(f"{kind}: broker us/msg min {min(figures):.2f}  all " + " ".join(f"{f:.2f}" for f in figures))


if __name__ == "__main__":
    main()
