"""Benchmark (not a test): a paired-namespace client against a plain client, in one run.

Two embedded brokers (``amqplink broker`` subprocesses: the primary, and the secondary
with its management REST API), each measurement on a fresh queue:

0. healthy: Python function calls per message under cProfile for both clients, sends
   awaited one by one and from 100 tasks (timing-free: the healthy paired path is the plain one);
a. healthy, single sends from 100 concurrent tasks (``send_messages(msg)`` each) on one
   sender: the paired client and the plain client alternate for ``--rounds`` rounds; the
   median ratio is reported (goal: >= 0.95x: no per-message cost while healthy);
b. healthy, ``send_nowait`` of every message then one ``gather`` (the Spark sink's way);
c. failed over: the primary queue made unavailable (``entity-unavailable``, through
   ``$control``), failover engaged (untimed), then the same 100-task sends, which are all
   parked in a backlog queue; compared with a plain client sending the same messages
   straight to a queue of the secondary (what parking costs on top of a send);
d. the syphon: the fault cleared, a fresh client with ``enable_syphon=True`` moves the
   parked messages back to the primary; its rate from start until every one is forwarded.

    python3 interop/bench_paired.py [--count 20000] [--rounds 5] [--size 256]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime as dt
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqplink.commands.broker_fault import run_broker_fault  # noqa: E402
from amqplink.servicebus import PairedNamespaceOptions, ServiceBusMessage  # noqa: E402
from amqplink.servicebus.aio import ServiceBusClient, ServiceBusSender  # noqa: E402

TASKS = 100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def broker(*extra: str) -> Iterator[str]:
    """``amqplink broker`` in a subprocess; its connection string."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", "import sys; from amqplink.cli import main; sys.exit(main())", "broker", "--port", "0"]
    process = subprocess.Popen([*cmd, *extra], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert process.stdout is not None
        for _ in range(5):
            line = process.stdout.readline()
            if re.match(r"Endpoint=sb://", line):
                yield line.strip()
                return
        raise RuntimeError("the broker did not print its connection string")
    finally:
        process.kill()
        process.wait(10)


async def concurrent_sends(sender: ServiceBusSender, messages: list[ServiceBusMessage]) -> float:
    """Seconds for ``TASKS`` tasks to send ``messages`` one ``send_messages`` each."""
    it = iter(messages)

    async def task() -> None:
        for message in it:
            await sender.send_messages(message)

    started = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(TASKS)))
    return time.perf_counter() - started


async def nowait_sends(sender: ServiceBusSender, messages: list[ServiceBusMessage]) -> float:
    started = time.perf_counter()
    futures = [await sender.send_nowait(m) for m in messages]
    await asyncio.gather(*futures)
    return time.perf_counter() - started


Scenario = Callable[[ServiceBusSender, list[ServiceBusMessage]], Awaitable[float]]


def messages(count: int, size: int) -> list[ServiceBusMessage]:
    return [ServiceBusMessage(bytes(size), message_id=f"m{i}") for i in range(count)]


async def rate(client: ServiceBusClient, queue: str, scenario: Scenario, count: int, size: int) -> tuple[float, float]:
    """(messages per second, this process's CPU µs per message) of ``scenario``."""
    async with client, client.get_queue_sender(queue) as sender:
        await sender.send_messages(ServiceBusMessage(b"attach"))
        batch = messages(count, size)
        cpu = time.process_time()
        took = await scenario(sender, batch)
        return count / took, (time.process_time() - cpu) * 1e6 / count


async def one_by_one(sender: ServiceBusSender, batch: list[ServiceBusMessage]) -> float:
    started = time.perf_counter()
    for message in batch:
        await sender.send_messages(message)
    return time.perf_counter() - started


async def calls(client: ServiceBusClient, queue: str, scenario: Scenario, count: int, size: int) -> float:
    """Python function calls per message of ``scenario`` (counted by cProfile: the same for
    both clients when the paired one adds nothing per message)."""
    async with client, client.get_queue_sender(queue) as sender:
        await sender.send_messages(ServiceBusMessage(b"attach"))
        batch = messages(count, size)
        profile = cProfile.Profile()
        profile.enable()
        await scenario(sender, batch)
        profile.disable()
    return sum(entry.callcount for entry in profile.getstats()) / count


def options(secondary: str, http_port: int, **kwargs: Any) -> PairedNamespaceOptions:
    return PairedNamespaceOptions(
        secondary,
        management_endpoint=f"https://127.0.0.1:{http_port}/",
        connection_verify=False,
        failover_interval=dt.timedelta(seconds=0.5),
        ping_primary_interval=dt.timedelta(seconds=1),
        **kwargs,
    )


async def healthy(args: argparse.Namespace, primary: str, secondary: str, http_port: int, scenario: Scenario) -> None:
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    for n in range(args.rounds):
        results: dict[str, tuple[float, float]] = {}
        order = ("plain", "paired") if n % 2 == 0 else ("paired", "plain")
        for kind in order:
            paired = options(secondary, http_port) if kind == "paired" else None
            client = ServiceBusClient.from_connection_string(primary, paired_namespace=paired)
            queue = f"{kind}-{uuid.uuid4().hex[:8]}"
            results[kind] = await rate(client, queue, scenario, args.count, args.size)
        (plain, plain_cpu), (paired_rate, paired_cpu) = results["plain"], results["paired"]
        ratios.append(paired_rate / plain)
        cpu_ratios.append(plain_cpu / paired_cpu)
        print(f"  round {n + 1}: plain {plain:>9,.0f} msg/s {plain_cpu:5.1f} µs/msg   paired {paired_rate:>9,.0f}"
              f" msg/s {paired_cpu:5.1f} µs/msg   ratio {ratios[-1]:.3f} (CPU {cpu_ratios[-1]:.3f})")  # fmt: skip
    print(f"  median ratio paired/plain: {statistics.median(ratios):.3f} msg/s,"
          f" {statistics.median(cpu_ratios):.3f} by client CPU per message (goal >= 0.95)")  # fmt: skip


async def failed_over(args: argparse.Namespace, primary: str, secondary: str, http_port: int) -> int:
    queue = f"down-{uuid.uuid4().hex[:8]}"
    count = args.failover_count
    plain_client = ServiceBusClient.from_connection_string(secondary)
    reference, reference_cpu = await rate(plain_client, queue, concurrent_sends, count, args.size)
    answer = await run_broker_fault(
        primary, "entity-unavailable", params={"entity": queue, "condition": "amqp:internal-error"}
    )
    client = ServiceBusClient.from_connection_string(
        primary, paired_namespace=options(secondary, http_port), retry_total=0
    )
    async with client, client.get_queue_sender(queue) as sender:
        deadline = time.monotonic() + 30
        while client.paired_state is None or not client.paired_state.failed_over:  # engage failover (untimed)
            assert time.monotonic() < deadline, "failover did not engage"
            with contextlib.suppress(Exception):
                await sender.send_messages(ServiceBusMessage(b"engage"))
            await asyncio.sleep(0.05)
        batch = messages(count, args.size)
        cpu = time.process_time()
        took = await concurrent_sends(sender, batch)
        cpu_per = (time.process_time() - cpu) * 1e6 / count
        state = client.paired_state
        assert state is not None
        parked = state.parked
    print(f"  plain client straight to the secondary: {reference:>9,.0f} msg/s {reference_cpu:5.1f} µs/msg")
    print(f"  paired client, failed over (parked):    {count / took:>9,.0f} msg/s {cpu_per:5.1f} µs/msg"
          f"  ratio {count / took / reference:.3f}; parked {parked}")  # fmt: skip
    await run_broker_fault(primary, "clear", params={"id": answer["id"]})
    return parked


async def syphon(primary: str, secondary: str, http_port: int, parked: int) -> None:
    client = ServiceBusClient.from_connection_string(
        primary, paired_namespace=options(secondary, http_port, enable_syphon=True, syphon_wait=dt.timedelta(seconds=1))
    )
    async with client:
        started = time.perf_counter()
        deadline = time.monotonic() + 300
        while (client.paired_state.syphoned if client.paired_state else 0) < parked:
            assert time.monotonic() < deadline, "the syphon did not finish"
            await asyncio.sleep(0.01)
        took = time.perf_counter() - started
    print(f"  syphon: {parked} parked messages forwarded in {took:.2f} s: {parked / took:>9,.0f} msg/s")


async def call_counts(args: argparse.Namespace, primary: str, secondary: str, http_port: int) -> None:
    for name, scenario in (("one by one", one_by_one), (f"{TASKS} tasks", concurrent_sends)):
        counted = []
        for paired in (None, options(secondary, http_port)):
            client = ServiceBusClient.from_connection_string(primary, paired_namespace=paired)
            counted.append(await calls(client, f"calls-{uuid.uuid4().hex[:8]}", scenario, 5000, args.size))
        print(f"  {name}: function calls per send: plain {counted[0]:.1f}, paired {counted[1]:.1f}")


async def main_async(args: argparse.Namespace, primary: str, secondary: str, http_port: int) -> None:
    print(
        "0. healthy: Python function calls per message (timing-free; the batching of concurrent sends varies a little)"
    )
    await call_counts(args, primary, secondary, http_port)
    print(f"a. healthy, single sends from {TASKS} tasks, {args.count} messages of {args.size} bytes")
    await healthy(args, primary, secondary, http_port, concurrent_sends)
    print(f"b. healthy, send_nowait then gather, {args.count} messages")
    await healthy(args, primary, secondary, http_port, nowait_sends)
    print(f"c. failed over, single sends from {TASKS} tasks, {args.failover_count} messages")
    parked = await failed_over(args, primary, secondary, http_port)
    print("d. syphon")
    await syphon(primary, secondary, http_port, parked)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--failover-count", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args(argv)
    http_port = free_port()
    with broker() as primary, broker("--http-port", str(http_port)) as secondary:
        asyncio.run(main_async(args, primary, secondary, http_port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
