"""Benchmark (not a test): active replication's sends per second with one namespace down,
without the circuit breaker (``break_for=0``: every send waits on the dead namespace's
retries) and with it (the dead one skipped, probed in the background), against both up.

Two ``amqplink broker`` subprocesses; the first is killed (SIGKILL: its port refuses at
once) for the two outage rows. The clients keep the SDK's default retry policy (3 retries,
0.8 s back-off doubling), as an application that did not tune it. ``--tasks`` senders send
single 256-byte messages one after another for ``--seconds`` per row.

    python3 interop/bench_replication_outage.py [--seconds 10] [--tasks 10]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqplink.servicebus import ServiceBusMessage  # noqa: E402
from amqplink.servicebus.aio import ActiveReplicationSender, ServiceBusClient  # noqa: E402
from interop.bench_replication import broker_process  # noqa: E402


async def rate(first: str, second: str, *, break_for: float, seconds: float, tasks: int, queue: str) -> float:
    """Sends per second of ``tasks`` senders for ``seconds``."""
    async with (
        ServiceBusClient.from_connection_string(first) as a,
        ServiceBusClient.from_connection_string(second) as b,
    ):
        sender = ActiveReplicationSender(a.get_queue_sender(queue), b.get_queue_sender(queue), break_for=break_for)
        sent = 0
        deadline = time.monotonic() + seconds

        async def task() -> None:
            nonlocal sent
            while time.monotonic() < deadline:
                await sender.send_messages(ServiceBusMessage(b"x" * 256))
                sent += 1

        started = time.monotonic()
        await asyncio.gather(*(task() for _ in range(tasks)))
        elapsed = time.monotonic() - started
        await sender.close()
    return sent / elapsed


async def main(seconds: float, tasks: int) -> None:
    with broker_process() as (first_proc, first), broker_process() as (_, second):
        both = await rate(first, second, break_for=10.0, seconds=seconds, tasks=tasks, queue="both")
        first_proc.send_signal(signal.SIGKILL)
        first_proc.wait(10)
        without = await rate(first, second, break_for=0.0, seconds=seconds, tasks=tasks, queue="without")
        with_breaker = await rate(first, second, break_for=10.0, seconds=seconds, tasks=tasks, queue="with")
    print(f"active replication, {tasks} tasks x single 256-byte sends, {seconds:g} s per row, default retry policy")
    print(f"{'scenario':<48} {'sends/s':>10} {'ratio':>8}")
    print(f"{'both namespaces up':<48} {both:>10,.1f} {1.0:>7.2f}x")
    print(f"{'one namespace down, no breaker (break_for=0)':<48} {without:>10,.1f} {without / both:>7.2f}x")
    print(f"{'one namespace down, circuit breaker':<48} {with_breaker:>10,.1f} {with_breaker / both:>7.2f}x")
    print(f"breaker / no breaker with one namespace down: {with_breaker / max(without, 1e-9):,.0f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tasks", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.seconds, args.tasks))
