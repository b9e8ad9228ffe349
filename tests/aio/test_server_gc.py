"""A serving process collects garbage less often (it holds many long-lived objects)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from amqplink.aio import server
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


async def test_serve_raises_the_first_generation_threshold(gc_threshold: None) -> None:
    gc.set_threshold(700, 10, 10)
    listener = await server.serve(_no_handler)
    listener.close()
    await listener.wait_closed()
    assert gc.get_threshold() == (server.SERVER_GC_THRESHOLD, 10, 10)


async def test_a_higher_threshold_or_collection_off_is_kept(gc_threshold: None) -> None:
    for threshold in ((server.SERVER_GC_THRESHOLD * 3, 5, 7), (0, 10, 10)):
        gc.set_threshold(*threshold)
        server.raise_gc_threshold(server.SERVER_GC_THRESHOLD)
        assert gc.get_threshold() == threshold
