"""One rule decides whether a send hands its message over at once or pauses first
(``Sender._hand_over``): ``try_send_payload`` refuses exactly when ``send_nowait`` would
wait, for room under ``max_in_flight`` and after ``YIELD_EVERY`` sends in a row; and
outcome futures come from the loop's own ``create_future`` unless that is asyncio's."""

from __future__ import annotations

import asyncio
from typing import Any

from amqplink.aio import connect
from amqplink.aio.sender import YIELD_EVERY, future_factory
from amqplink.protocol.definitions import Accepted

from .helpers import HoldingServer, eventually


async def test_futures_of_an_asyncio_loop_are_asyncio_futures_on_it() -> None:
    loop = asyncio.get_running_loop()
    make = future_factory(loop)
    future = make()
    assert type(future) is type(loop.create_future()) and future.get_loop() is loop
    assert make() is not future and not future.done()


class _OwnFutures(asyncio.SelectorEventLoop):
    """A loop with a create_future of its own (as uvloop has): the sender must use it."""

    made = 0

    def create_future(self) -> asyncio.Future[Any]:
        self.made += 1
        return super().create_future()


def test_a_loop_with_its_own_create_future_makes_the_futures() -> None:
    loop = _OwnFutures()
    try:
        make = future_factory(loop)
        future = make()
        assert loop.made == 1 and future.get_loop() is loop
    finally:
        loop.close()


def test_a_sender_on_a_loop_with_its_own_futures_sends() -> None:
    async def run() -> int:
        async with HoldingServer() as server, await connect(server.url) as conn:
            sender = await conn.create_sender("q", max_in_flight=10)
            loop = asyncio.get_running_loop()
            assert isinstance(loop, _OwnFutures)
            before = loop.made
            futures = [await sender.send_nowait(b"x") for _ in range(3)]
            made = loop.made - before
            await eventually(lambda: len(server.held) == 3)
            server.settle(3, Accepted())
            assert await asyncio.gather(*futures) == [Accepted()] * 3
            return made

    loop = _OwnFutures()
    try:
        assert loop.run_until_complete(run()) >= 3  # one per message, from the loop's own method
    finally:
        loop.close()


async def test_try_send_refuses_exactly_when_send_nowait_waits_for_room() -> None:
    async with HoldingServer() as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q", max_in_flight=3)
        first = [sender.try_send_payload(b"\x00\x53\x77\x45") for _ in range(3)]
        assert all(f is not None for f in first) and sender.in_flight == 3
        assert sender.try_send_payload(b"\x00\x53\x77\x45") is None  # no room: nothing handed over
        assert sender.in_flight == 3
        waiting = asyncio.ensure_future(sender.send_nowait(b"x"))
        await eventually(lambda: len(server.held) == 3)
        assert not waiting.done()  # waits for an outcome, as try_send_payload said
        server.settle(1, Accepted())
        fourth = await asyncio.wait_for(waiting, 5)
        assert await asyncio.wait_for(first[0], 5) == Accepted()  # type: ignore[arg-type]
        assert sender.in_flight == 3 and not fourth.done()
        assert sender.try_send_payload(b"\x00\x53\x77\x45") is None


async def test_try_send_refuses_after_yield_every_sends_until_a_send_has_yielded() -> None:
    async with HoldingServer() as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q", max_in_flight=YIELD_EVERY * 4)
        handed = [sender.try_send_payload(b"\x00\x53\x77\x45") for _ in range(YIELD_EVERY)]
        assert all(f is not None for f in handed)
        assert sender.try_send_payload(b"\x00\x53\x77\x45") is None  # room, but the loop's turn
        turns = 0

        async def other() -> None:
            nonlocal turns
            turns += 1

        task = asyncio.ensure_future(other())
        await sender.send_nowait(b"x")  # yields once, then hands over
        assert task.done() and turns == 1 and sender.in_flight == YIELD_EVERY + 1
        assert sender.try_send_payload(b"\x00\x53\x77\x45") is not None
        await eventually(lambda: len(server.held) == YIELD_EVERY + 2)
