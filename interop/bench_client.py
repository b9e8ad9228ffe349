"""Client benchmark: amqplink vs qpid-proton's Python client vs azure-servicebus's _pyamqp.

One run, one broker, the same message sizes. By default the broker is Debian's
proton C example broker (built with a large credit window by interop/peers.py) so
that the sink is not the bottleneck. Scenarios:

* unsettled pipelined send (every message waits for its ``accepted``),
* pre-settled send,
* peek-lock receive with accept (the queue is filled first),

each for 64 B and 1 KiB bodies. Prints a table of msg/s and the ratio of amqplink
to each other client. ``--memory`` instead sends 1,000,000 messages through
``send_nowait`` with ``max_in_flight=1000`` and prints the RSS as it goes.

    python3 interop/bench_client.py [--url amqp://127.0.0.1:5672] [--count 50000] [--opcodes]

``--opcodes`` prints amqplink's Python opcodes per message in each scenario instead (a
trace: slow, but deterministic enough to compare two versions on a shared machine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Result = float  # messages per second


# -- amqplink ----------------------------------------------------------------------------
def amqplink_send(url: str, queue: str, count: int, size: int, settled: bool) -> Result:
    from amqplink import Message
    from amqplink.aio import connect

    async def run() -> Result:
        conn = await connect(url)
        sender = await conn.create_sender(queue, settle_mode="settled" if settled else "unsettled", max_in_flight=1000)
        body = bytes(size)
        failures = 0

        def check(future: asyncio.Future[Any]) -> None:
            nonlocal failures
            if type(future.result()).__name__ != "Accepted":
                failures += 1

        start = time.perf_counter()
        for _ in range(count):
            future = await sender.send_nowait(Message(body))
            if not settled:
                future.add_done_callback(check)
        await sender.wait_settled()
        if settled:
            # Pre-settled messages have no outcome: the clock stops when the broker has
            # answered close, i.e. read every frame before it (as for proton below).
            await conn.close()
        elapsed = time.perf_counter() - start
        await conn.close()
        if failures:
            raise RuntimeError(f"{failures} messages not accepted")
        return count / elapsed

    return asyncio.run(run())


def amqplink_receive(url: str, queue: str, count: int, size: int) -> Result:
    from amqplink.aio import connect

    async def run() -> Result:
        async with await connect(url) as conn:
            receiver = await conn.create_receiver(queue, mode="peek-lock", prefetch=1000)
            got = 0
            start = time.perf_counter()
            while got < count:
                batch = await receiver.receive(1000, timeout=30)
                if not batch:
                    raise RuntimeError(f"amqplink receive stalled at {got}/{count}")
                await receiver.accept(*batch)
                got += len(batch)
            elapsed = time.perf_counter() - start
            await receiver.close()
            return count / elapsed

    return asyncio.run(run())


# -- qpid-proton -------------------------------------------------------------------------
def proton_send(url: str, queue: str, count: int, size: int, settled: bool) -> Result:
    from proton import Message as PMessage
    from proton.handlers import MessagingHandler
    from proton.reactor import AtMostOnce, Container

    class Send(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.sent = 0
            self.confirmed = 0
            self.start = 0.0
            self.end = 0.0
            self.body = bytes(size)

        def on_start(self, event: Any) -> None:
            conn = event.container.connect(url)
            options = AtMostOnce() if settled else None
            event.container.create_sender(conn, queue, name=f"bench-{uuid.uuid4()}", options=options)
            self.start = time.perf_counter()

        def on_sendable(self, event: Any) -> None:
            while event.sender.credit and self.sent < count:
                event.sender.send(PMessage(body=self.body, inferred=True))
                self.sent += 1
            if settled and self.sent == count:
                event.connection.close()

        def on_connection_closed(self, event: Any) -> None:
            if settled:
                self.end = time.perf_counter()  # the broker answered close: it read every frame

        def on_accepted(self, event: Any) -> None:
            self.confirmed += 1
            if self.confirmed == count:
                self.end = time.perf_counter()
                event.connection.close()

    handler = Send()
    Container(handler).run()
    return count / (handler.end - handler.start)


def proton_receive(url: str, queue: str, count: int, size: int) -> Result:
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    class Receive(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(prefetch=1000, auto_accept=True)
            self.got = 0
            self.start = 0.0
            self.end = 0.0

        def on_start(self, event: Any) -> None:
            conn = event.container.connect(url)
            event.container.create_receiver(conn, queue, name=f"bench-{uuid.uuid4()}")
            self.start = time.perf_counter()

        def on_message(self, event: Any) -> None:
            self.got += 1
            if self.got == count:
                self.end = time.perf_counter()
                event.receiver.close()
                event.connection.close()

    handler = Receive()
    Container(handler).run()
    return count / (handler.end - handler.start)


# -- azure-servicebus _pyamqp ------------------------------------------------------------
def pyamqp_send(url: str, queue: str, count: int, size: int, settled: bool) -> Result:
    from azure.servicebus._pyamqp import SendClient
    from azure.servicebus._pyamqp.authentication import SASLPlainAuth
    from azure.servicebus._pyamqp.constants import SenderSettleMode
    from azure.servicebus._pyamqp.message import Message as PAMessage
    from azure.servicebus._pyamqp.sasl import SASLAnonymousCredential

    class Anonymous(SASLPlainAuth):
        def __init__(self) -> None:
            self.sasl = SASLAnonymousCredential()

    hostport = url.split("://", 1)[1]
    client = SendClient(
        hostport,
        target=f"amqp://{hostport}/{queue}",
        auth=Anonymous(),
        use_tls=False,
        send_settle_mode=SenderSettleMode.Settled if settled else SenderSettleMode.Unsettled,
        network_trace="--trace" in sys.argv,
    )
    client.open()
    while not client.client_ready():
        client.do_work()
    body = bytes(size)
    start = time.perf_counter()
    for _ in range(count):
        client.send_message(PAMessage(data=[body]))  # a list of data sections, as the SDK builds it
    elapsed = time.perf_counter() - start
    client.close()
    return count / elapsed


# -- harness -----------------------------------------------------------------------------
def fill(url: str, queue: str, count: int, size: int) -> None:
    amqplink_send(url, queue, count, size, settled=False)


@contextlib.contextmanager
def broker(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from interop.peers.proton_c import ProtonCBroker

    with ProtonCBroker() as peer:
        yield peer.url


def run_table(url: str, count: int, sizes: list[int], clients: list[str], repeat: int = 1) -> None:
    senders: dict[str, Callable[[str, str, int, int, bool], Result]] = {
        "amqplink": amqplink_send,
        "proton": proton_send,
        "pyamqp": pyamqp_send,
    }
    receivers: dict[str, Callable[[str, str, int, int], Result]] = {
        "amqplink": amqplink_receive,
        "proton": proton_receive,
    }

    def run_once(client: str, scenario: str, size: int) -> Result | None:
        queue = f"bench-{client}-{size}-{uuid.uuid4().hex[:8]}"
        n = count if client != "pyamqp" else max(200, count // 10)  # one synchronous round trip per message
        if scenario == "peek-lock receive+accept":
            if client not in receivers:
                return None
            fill(url, queue, n, size)
            return receivers[client](url, queue, n, size)
        if scenario == "pre-settled send" and client == "pyamqp":
            return None  # with send_settle_mode=Settled its send_message never returned here (5 messages, 2 minutes)
        return senders[client](url, queue, n, size, scenario == "pre-settled send")

    rows: list[tuple[str, int, dict[str, Result]]] = []
    for size in sizes:
        for scenario in ("unsettled send", "pre-settled send", "peek-lock receive+accept"):
            runs: dict[str, list[Result]] = {}
            # Clients take turns, run after run, so a slow spell of the machine hits all alike.
            for attempt in range(1, repeat + 1):
                for client in clients:
                    result = run_once(client, scenario, size)
                    if result is None:
                        continue
                    runs.setdefault(client, []).append(result)
                    print(
                        f"  {scenario:<26} {size:>5} B  {client:<9} {result:>10,.0f} msg/s  (run {attempt}/{repeat})",
                        flush=True,
                    )
            rows.append((scenario, size, {client: statistics.median(r) for client, r in runs.items()}))
    print()
    median = f" (medians of {repeat} runs)" if repeat > 1 else ""
    print(f"{'scenario':<26} {'size':>6} " + " ".join(f"{c:>10}" for c in clients) + f"   amqplink vs others{median}")
    for scenario, size, results in rows:
        cells = " ".join(f"{results[c]:>10,.0f}" if c in results else f"{'-':>10}" for c in clients)
        ratios = ", ".join(
            f"{results['amqplink'] / results[c]:.2f}x {c}" for c in clients if c != "amqplink" and c in results
        )
        print(f"{scenario:<26} {size:>5}B {cells}   {ratios}")


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_memory(url: str, total: int, size: int) -> None:
    from amqplink import Message
    from amqplink.aio import connect

    async def run() -> None:
        async with await connect(url) as conn:
            sender = await conn.create_sender(f"memory-{uuid.uuid4().hex[:8]}", max_in_flight=1000)
            body = bytes(size)
            step = total // 10
            start = time.perf_counter()
            print(f"{'sent':>10} {'in flight':>10} {'RSS MiB':>9} {'msg/s':>9}")
            for i in range(1, total + 1):
                await sender.send_nowait(Message(body))
                if i % step == 0:
                    rate = i / (time.perf_counter() - start)
                    print(f"{i:>10,} {sender.in_flight:>10} {rss_mib():>9.1f} {rate:>9,.0f}", flush=True)
            await sender.wait_settled()

    asyncio.run(run())


def run_opcodes(url: str, count: int, sizes: list[int]) -> None:
    """amqplink's Python opcodes per message in each scenario, connecting included: unlike
    the time, deterministic enough on a shared machine to compare two versions of the code
    (the broker is another process; only how the socket splits the bytes varies)."""
    from interop.bench_ingest import OpcodeCounter

    for size in sizes:
        for scenario in ("unsettled send", "pre-settled send", "peek-lock receive+accept"):
            queue = f"bench-opcodes-{size}-{uuid.uuid4().hex[:8]}"
            receive = scenario == "peek-lock receive+accept"
            if receive:
                fill(url, queue, count, size)
            counter = OpcodeCounter()
            counter.enable()
            try:
                if receive:
                    amqplink_receive(url, queue, count, size)
                else:
                    amqplink_send(url, queue, count, size, scenario == "pre-settled send")
            finally:
                counter.disable()
            print(f"{scenario:<26} {size:>5}B  {counter.opcodes / count:8.1f} opcodes per message", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="broker URL (default: start Debian's proton C broker)")
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--sizes", default="64,1024")
    parser.add_argument("--clients", default="amqplink,proton,pyamqp")
    parser.add_argument("--repeat", type=int, default=3, help="runs per client and scenario; the table shows medians")
    parser.add_argument("--memory", action="store_true", help="1,000,000 send_nowait with max_in_flight=1000")
    parser.add_argument("--memory-count", type=int, default=1_000_000)
    parser.add_argument(
        "--opcodes", action="store_true", help="amqplink's Python opcodes per message in each scenario (a trace, slow)"
    )
    args = parser.parse_args(argv)
    with broker(args.url) as url:
        if args.opcodes:
            run_opcodes(url, args.count, [int(s) for s in args.sizes.split(",")])
        elif args.memory:
            run_memory(url, args.memory_count, 64)
        else:
            run_table(url, args.count, [int(s) for s in args.sizes.split(",")], args.clients.split(","), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
