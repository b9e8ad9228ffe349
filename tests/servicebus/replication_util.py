"""Two embedded namespaces that can be killed and restarted from their data dirs on the
same port (asyncio tests: the brokers run on the test's own loop)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from amqplink.broker import Broker
from amqplink.servicebus import ServiceBusReceivedMessage, ServiceBusReceiveMode
from amqplink.servicebus.aio import DeduplicatingReceiver, Deduplicator, ServiceBusClient
from amqplink.servicebus.exceptions import MessageLockLostError

ROOT = Path(__file__).resolve().parents[2]
QUEUE = "orders"
CLIENT_OPTIONS = {"retry_total": 0, "timeout": 5}
"""Short retries: a namespace that is down answers at once and the other one counts."""


class Namespace:
    """One embedded namespace with a data dir; :meth:`kill` and :meth:`start` keep its port and key."""

    def __init__(self, data_dir: Path, key: str) -> None:
        self.data_dir, self.key = data_dir, key
        self.port = 0
        self.broker: Broker | None = None

    async def start(self) -> Namespace:
        broker = Broker(servicebus=True, data_dir=self.data_dir, keys={"RootManageSharedAccessKey": self.key})
        self.broker = await broker.start(port=self.port)
        self.port = self.broker.port
        return self

    async def kill(self) -> None:
        """Stop at once: every connection dropped, the data dir kept."""
        assert self.broker is not None
        await self.broker.stop()
        self.broker = None

    @property
    def connection_string(self) -> str:
        return (
            f"Endpoint=sb://127.0.0.1:{self.port};SharedAccessKeyName=RootManageSharedAccessKey;"
            f"SharedAccessKey={self.key};UseDevelopmentEmulator=true"
        )

    def stored(self) -> int:
        """Messages in the queue (locked ones included)."""
        assert self.broker is not None
        queues = self.broker.namespace.queues
        return len(queues[QUEUE].store) if QUEUE in queues else 0


@asynccontextmanager
async def two_namespaces(tmp_path: Path) -> AsyncIterator[tuple[Namespace, Namespace]]:
    first = await Namespace(tmp_path / "primary", "primary-key").start()
    second = await Namespace(tmp_path / "secondary", "secondary-key").start()
    try:
        yield first, second
    finally:
        for ns in (first, second):
            if ns.broker is not None:
                await ns.kill()


@asynccontextmanager
async def clients(*namespaces: Namespace | ProcessNamespace) -> AsyncIterator[list[ServiceBusClient]]:
    opened = [ServiceBusClient.from_connection_string(ns.connection_string, **CLIENT_OPTIONS) for ns in namespaces]
    try:
        yield opened
    finally:
        for client in opened:
            await client.close()


def dedup_receiver(
    opened: list[ServiceBusClient],
    deduplicator: Deduplicator,
    mode: ServiceBusReceiveMode = ServiceBusReceiveMode.PEEK_LOCK,
) -> DeduplicatingReceiver:
    receivers = [c.get_queue_receiver(QUEUE, receive_mode=mode) for c in opened]
    return DeduplicatingReceiver(
        receivers, deduplicator=deduplicator, retry_interval=0.05, max_retry_interval=0.2, poll_time=0.5
    )


async def consume_once(receiver: DeduplicatingReceiver, yielded: Counter[str]) -> None:
    """One receive (up to 50 messages, 0.5 s), completing each in peek-lock mode."""
    got: list[ServiceBusReceivedMessage] = await receiver.receive_messages(50, max_wait_time=0.5)
    for message in got:
        assert message.message_id is not None
        yielded[str(message.message_id)] += 1
        if receiver.receive_mode is ServiceBusReceiveMode.PEEK_LOCK:
            # its namespace may have gone down: the id is recorded, its redelivery will be removed
            with contextlib.suppress(MessageLockLostError):
                await receiver.complete_message(message)


async def consume(
    receiver: DeduplicatingReceiver,
    yielded: Counter[str],
    *,
    until: Callable[[], bool | Awaitable[bool]],
    deadline: float = 60.0,
) -> None:
    """Receive (completing in peek-lock mode) until ``until()`` holds; fail past ``deadline`` s."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while not await _holds(until):
        assert loop.time() < end, f"gave up waiting; yielded {len(yielded)} distinct ids"
        await consume_once(receiver, yielded)


async def _holds(condition: Callable[[], bool | Awaitable[bool]]) -> bool:
    result = condition()
    return await result if inspect.isawaitable(result) else result


class ProcessNamespace:
    """``amqplink broker --data-dir D`` in a subprocess: :meth:`kill` is a SIGKILL (nothing
    flushed, nothing closed), :meth:`start` brings it back on the same port and key."""

    def __init__(self, data_dir: Path, key: str) -> None:
        self.data_dir, self.key = data_dir, key
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None

    async def start(self) -> ProcessNamespace:
        args = ["broker", "--port", str(self.port), "--data-dir", str(self.data_dir), "--key", self.key]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "amqplink.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), 30)
        found = re.search(r"amqp://127\.0\.0\.1:(\d+)", line)
        assert found is not None, f"the broker did not start: {line!r}"
        self.port = int(found.group(1))
        return self

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            self.proc = None

    connection_string = Namespace.connection_string
