"""Benchmark (not a test): what replication costs against no replication, in one run.

Two embedded namespaces (``amqplink broker`` subprocesses, in memory, so that neither
shares the GIL with the client); each scenario on a fresh queue name:

a. sends of single messages from 100 concurrent tasks: a plain sender on one namespace
   (the reference), a passive replication sender while both namespaces are healthy (one
   operation per message), an active one (every message to both);
b. receive + complete (peek-lock, batches of 100): a plain receiver taking N messages
   from one namespace (the reference), the de-duplicating receiver taking the same N ids
   from both namespaces (2N copies, N yielded, N completed as duplicates), in memory and
   with a SQLite file;
c. ``Deduplicator.seen`` on new ids: in memory, SQLite (``synchronous=NORMAL``), SQLite
   with ``synchronous_full=True``; ``seen_many`` in batches of 100 (one commit each).

Prints msg/s (ids/s) per row and the ratio to the reference row.

    python3 interop/bench_replication.py [--count 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqplink.servicebus import ServiceBusMessage  # noqa: E402
from amqplink.servicebus.aio import (  # noqa: E402
    ActiveReplicationSender,
    DeduplicatingReceiver,
    Deduplicator,
    PassiveReplicationSender,
    ServiceBusClient,
)

TASKS = 100


@contextmanager
def broker_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A broker subprocess and its connection string (the process: to kill it midway)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0", "--key", "bench"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        found = re.search(r"amqp://127\.0\.0\.1:(\d+)", proc.stdout.readline())
        assert found is not None, "the broker did not start"
        yield proc, (
            f"Endpoint=sb://127.0.0.1:{found.group(1)};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=bench;UseDevelopmentEmulator=true"
        )
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(10)


@contextmanager
def broker() -> Iterator[str]:
    """A broker subprocess; its connection string."""
    with broker_process() as (_, conn_str):
        yield conn_str


async def _timed(count: int, work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return count / (time.perf_counter() - started)


async def _from_tasks(count: int, send: Callable[[ServiceBusMessage], Awaitable[None]]) -> None:
    async def task(n: int) -> None:
        for _ in range(n):
            await send(ServiceBusMessage(b"x" * 256))

    await asyncio.gather(*(task(count // TASKS) for _ in range(TASKS)))


async def sends(a: ServiceBusClient, b: ServiceBusClient, count: int) -> list[tuple[str, float]]:
    queue = f"s-{uuid.uuid4().hex[:8]}"
    plain = a.get_queue_sender(queue)
    passive = PassiveReplicationSender(a.get_queue_sender(queue + "p"), b.get_queue_sender(queue + "p"))
    active = ActiveReplicationSender(a.get_queue_sender(queue + "a"), b.get_queue_sender(queue + "a"))
    senders: list[tuple[str, Callable[[ServiceBusMessage], Awaitable[None]]]] = [
        ("a. plain sender, one namespace", plain.send_messages),
        ("a. passive replication, healthy", passive.send_messages),
        ("a. active replication (2 copies)", active.send_messages),
    ]
    for _, send in senders:  # warm up: connections, links, the broker's queues
        await _from_tasks(count // 5, send)
    return [(label, await _timed(count, lambda send=send: _from_tasks(count, send))) for label, send in senders]


async def _fill(client: ServiceBusClient, queue: str, ids: list[str]) -> None:
    async with client.get_queue_sender(queue) as sender:
        await sender.send_messages([ServiceBusMessage(b"x" * 256, message_id=i) for i in ids])


async def receives(a: ServiceBusClient, b: ServiceBusClient, count: int, tmp: Path) -> list[tuple[str, float]]:
    rows = []
    ids = [str(uuid.uuid4()) for _ in range(count)]
    queue = f"r-{uuid.uuid4().hex[:8]}"
    await _fill(a, queue, ids)
    plain = a.get_queue_receiver(queue, prefetch_count=1000)

    async def take_plain() -> None:
        got = 0
        while got < count:
            batch = await plain.receive_messages(100, max_wait_time=5)
            await asyncio.gather(*(plain.complete_message(m) for m in batch))
            got += len(batch)

    rows.append(("b. plain receiver, one namespace", await _timed(count, take_plain)))
    for label, path in (("in memory", None), ("SQLite file", tmp / "bench.sqlite")):
        queue = f"r-{uuid.uuid4().hex[:8]}"
        await _fill(a, queue, ids)
        await _fill(b, queue, ids)
        dedup = Deduplicator(path=path)
        receiver = DeduplicatingReceiver(
            [c.get_queue_receiver(queue, prefetch_count=1000) for c in (a, b)], deduplicator=dedup
        )

        async def take_deduplicated(receiver: DeduplicatingReceiver = receiver) -> None:
            got = 0
            while got < count:  # the copies are removed in the same calls (a few stay for the next)
                batch = await receiver.receive_messages(100, max_wait_time=5)
                await asyncio.gather(*(receiver.complete_message(m) for m in batch))
                got += len(batch)
            assert got == count and receiver.duplicates_removed > count * 0.9, (got, receiver.duplicates_removed)

        rows.append((f"b. de-duplicating receiver, 2 namespaces, {label}", await _timed(count, take_deduplicated)))
        await receiver.close()
    return rows


def dedup_rows(count: int, tmp: Path) -> list[tuple[str, float]]:
    rows = []
    for label, options in (
        ("c. Deduplicator.seen, in memory", {}),
        ("c. Deduplicator.seen, SQLite NORMAL", {"path": tmp / "n.sqlite"}),
        ("c. Deduplicator.seen, SQLite FULL", {"path": tmp / "f.sqlite", "synchronous_full": True}),
    ):
        with Deduplicator(**options) as dedup:  # type: ignore[arg-type]
            n = count if options else count * 20
            ids = [f"id-{i}" for i in range(n)]
            started = time.perf_counter()
            for i in ids:
                dedup.seen(i)
            rows.append((label, n / (time.perf_counter() - started)))
    with Deduplicator(path=tmp / "m.sqlite") as dedup:
        ids = [f"id-{i}" for i in range(count * 5)]
        started = time.perf_counter()
        for at in range(0, len(ids), 100):
            dedup.seen_many(ids[at : at + 100])
        rows.append(("c. Deduplicator.seen_many (100 ids), SQLite NORMAL", len(ids) / (time.perf_counter() - started)))
    return rows


def show(rows: list[tuple[str, float]]) -> None:
    reference = rows[0][1]
    for label, rate in rows:
        print(f"{label:<58} {rate:>10.0f}/s  {rate / reference:5.2f}x")


async def main(count: int) -> None:
    with broker() as first, broker() as second, tempfile.TemporaryDirectory() as tmp:
        async with (
            ServiceBusClient.from_connection_string(first) as a,
            ServiceBusClient.from_connection_string(second) as b,
        ):
            show(await sends(a, b, count))
            show(await receives(a, b, count, Path(tmp)))
        show(dedup_rows(count, Path(tmp)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    asyncio.run(main(parser.parse_args().count))
