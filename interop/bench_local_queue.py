"""Benchmark (not a test): what a send costs when the local queue stores it (the primary
down: its port refuses), against a plain send accepted by a live broker.

An ``amqplink broker`` subprocess for the plain rows; the local queue in a temporary
directory (each commit synced: ``fdatasync``). Single 256-byte messages, one task awaiting
each send in turn, then ``--tasks`` concurrent tasks (their stores share commits).

    python3 interop/bench_local_queue.py [--count 2000] [--tasks 100]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqplink.servicebus import LocalQueueOptions, ServiceBusMessage  # noqa: E402
from amqplink.servicebus.aio import ServiceBusClient  # noqa: E402
from interop.bench_replication import broker  # noqa: E402


def refusing() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"


async def rate(client: ServiceBusClient, count: int, tasks: int) -> float:
    sender = client.get_queue_sender("bench")
    await sender.send_messages(ServiceBusMessage(b"x" * 256))  # attached (or, when down, stored: local first)
    per_task = count // tasks

    async def task() -> None:
        for _ in range(per_task):
            await sender.send_messages(ServiceBusMessage(b"x" * 256))

    started = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(tasks)))
    return per_task * tasks / (time.perf_counter() - started)


async def main(count: int, tasks: int) -> None:
    rows = []
    with broker() as conn_str, tempfile.TemporaryDirectory() as work:
        for n in (1, tasks):
            async with ServiceBusClient.from_connection_string(conn_str) as plain:
                reference = await rate(plain, count, n)
            local = LocalQueueOptions(Path(work) / f"lq-{n}", max_bytes=1 << 30)
            async with ServiceBusClient.from_connection_string(refusing(), local_queue=local, retry_total=0) as down:
                stored = await rate(down, count, n)
            rows.append((n, reference, stored))
    print(f"{'tasks':>5} {'plain send, broker up':>24} {'stored locally (down)':>24} {'ratio':>7}")
    for n, reference, stored in rows:
        print(f"{n:>5} {reference:>20,.0f} msg/s {stored:>20,.0f} msg/s {stored / reference:>6.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(main(args.count, args.tasks))
