"""A serving process collects garbage less often (it holds many long-lived objects), when
its owner opts in: ``serve()`` leaves the process-wide threshold alone, the ``amqplink
broker`` command raises it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Iterator

import pytest

from amqplink.aio import server
from amqplink.commands.broker import run_broker
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import Event


@pytest.fixture
def gc_threshold() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def _no_handler(engine: EngineConnection, protocol: object) -> server.EventHandler:
    def on_events(events: list[Event]) -> None:
        pass

    return on_events


async def test_serve_leaves_the_process_threshold_alone(gc_threshold: None) -> None:
    gc.set_threshold(700, 10, 10)
    listener = await server.serve(_no_handler)
    listener.close()
    await listener.wait_closed()
    assert gc.get_threshold() == (700, 10, 10)


async def test_the_broker_command_raises_the_first_generation_threshold(gc_threshold: None) -> None:
    gc.set_threshold(700, 10, 10)
    ready = asyncio.Event()
    task = asyncio.create_task(run_broker("127.0.0.1", 0, ready=ready, plain=True))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        assert gc.get_threshold() == (server.SERVER_GC_THRESHOLD, 10, 10)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_higher_threshold_or_collection_off_is_kept(gc_threshold: None) -> None:
    for threshold in ((server.SERVER_GC_THRESHOLD * 3, 5, 7), (0, 10, 10)):
        gc.set_threshold(*threshold)
        server.raise_gc_threshold(server.SERVER_GC_THRESHOLD)
        assert gc.get_threshold() == threshold
