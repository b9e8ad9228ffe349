"""kill -9 while transactions commit: a subprocess broker with ``--data-dir`` moves messages
from ``src`` to ``dst`` in transactions (each: receive, send the result via ``src``, settle,
commit), SIGKILLed at a random moment, then restarted from the same directory. Each move is
all or nothing: the input is still in ``src`` and its result absent, or the input is gone and
its result in ``dst`` exactly once; every commit acknowledged before the kill is there."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

import pytest

from amqplink.aio.connection import Connection
from amqplink.aio.errors import AMQPError
from amqplink.message import Message
from amqplink.sbwire.nodes import TRANSFER_DESTINATION_ADDRESS
from tests.broker.test_durable_crash import BrokerProcess, broker

pytestmark = pytest.mark.slow

COUNT = 300


async def _drain(conn: Connection, queue: str) -> Counter[str]:
    receiver = await conn.create_receiver(queue, mode="receive-and-delete", prefetch=1000)
    seen: Counter[str] = Counter()
    while True:
        batch = await receiver.receive(1000, timeout=1.0)
        if not batch:
            return seen
        seen.update(str(m.message_id) for m in batch)


async def _move_until_killed(proc: BrokerProcess, conn: Connection, kill_after: int) -> set[str]:
    """Move messages one transaction at a time; SIGKILL the broker once ``kill_after`` commits
    were acknowledged (the next move is then under way). The ids whose move was acknowledged."""
    receiver = await conn.create_receiver("src", prefetch=5)
    onward = await conn.create_sender("src", properties={TRANSFER_DESTINATION_ADDRESS: "dst"})
    committed: set[str] = set()
    try:
        while True:
            (message,) = await receiver.receive(1, timeout=30)
            txn = await conn.transaction()
            await txn.send(onward, Message(b"result", message_id=f"out-{message.message_id}"))
            await txn.settle(receiver, message)
            await txn.commit()
            committed.add(str(message.message_id))
            if len(committed) == kill_after:
                asyncio.get_running_loop().call_later(random.random() * 0.01, proc.kill)
    except (AMQPError, OSError, ValueError):
        return committed


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
async def test_each_move_is_all_or_nothing_across_sigkill(tmp_path: Path, seed: int) -> None:
    kill_after = random.Random(seed).randrange(10, 200)
    async with broker(tmp_path) as (proc, conn):
        sender = await conn.create_sender("src")
        await asyncio.gather(*[sender.send(Message(b"input", message_id=f"m{i}")) for i in range(COUNT)])
        committed = await _move_until_killed(proc, conn, kill_after)
    assert len(committed) >= kill_after
    async with broker(tmp_path) as (_, conn):
        left = await _drain(conn, "src")
        results = await _drain(conn, "dst")
    assert max(left.values(), default=1) == 1 and max(results.values(), default=1) == 1, "a message came twice"
    for i in range(COUNT):
        mid = f"m{i}"
        moved = f"out-{mid}" in results
        assert moved != (mid in left), f"{mid}: input {'and' if moved else 'nor'} result both there"
        if mid in committed:
            assert moved, f"the acknowledged move of {mid} was lost"
    assert set(results) <= {f"out-m{i}" for i in range(COUNT)}
