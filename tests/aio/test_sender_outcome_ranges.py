"""A Sender hears of a disposition range as one ``DeliveriesUpdated`` per run of its
deliveries and resolves their futures in one loop: the same results, in the same order, as
when the peer sends a disposition per delivery (runs of one), whatever the ranges, states
and settled flags, and however the range mixes two senders' deliveries."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.aio import connect
from amqplink.codec.types import Symbol, UInt, ULong
from amqplink.engine.link import ROLE_RECEIVER
from amqplink.protocol.definitions import Accepted, Error, Modified, Received, Rejected, Released
from tests import profiles

from .helpers import HoldingServer, eventually

STATES: list[Any] = [
    Accepted(),
    Released(),
    Modified(delivery_failed=True),
    Rejected(error=Error(condition=Symbol("amqp:internal-error"))),
    Received(section_number=UInt(0), section_offset=ULong(3)),  # not terminal: resolves nothing unless settled
    None,
]

Disposition = tuple[int, int, int, bool]  # first index, length, state index, settled


async def _run(ranged: bool, links: list[int], dispositions: list[Disposition]) -> tuple[list[Any], list[int]]:
    """Send one message per entry of ``links`` (0/1: which of two senders), let the server
    send ``dispositions`` over index ranges (past the last delivery too; ``ranged=False``:
    each range as a disposition per delivery-id), then settle all with ``Accepted``; each
    future's result and the order the futures resolved in."""
    async with HoldingServer() as server:
        conn = await connect(server.url)
        senders = [await conn.create_sender(name, max_in_flight=len(links) + 1) for name in ("a", "b")]
        order: list[int] = []
        futures = []
        for i, which in enumerate(links):
            future = await senders[which].send_nowait(bytes([i]))
            future.add_done_callback(lambda _, i=i: order.append(i))
            futures.append(future)
        await eventually(lambda: len(server.held) == len(links))
        ids = sorted(int(d.delivery_id) for _, d in server.held)
        assert ids == list(range(ids[0], ids[0] + len(links)))  # one session: consecutive ids
        session = server.held[0][0].session
        protocol = server.protocols[0]
        for start, length, state, settled in dispositions:
            first = ids[0] + min(start, len(links) - 1)
            for one in [first] if ranged else range(first, first + length):
                last = first + length - 1 if ranged else one
                session.queue_disposition(ROLE_RECEIVER, one, settled, STATES[state], False, last)
                protocol.flush()  # one disposition frame each
        session.queue_disposition(ROLE_RECEIVER, ids[0], True, Accepted(), False, ids[-1])
        protocol.flush()
        results = await asyncio.wait_for(asyncio.gather(*futures), 5)
        await asyncio.sleep(0)  # the done callbacks run one loop turn after the results
        assert sorted(order) == list(range(len(links)))
        assert [s.in_flight for s in senders] == [0, 0]
        await conn.close()
        return results, order


@settings(profiles.HEAVY, deadline=None)
@given(
    links=st.lists(st.integers(0, 1), min_size=1, max_size=24),
    dispositions=st.lists(
        st.tuples(st.integers(0, 23), st.integers(1, 30), st.integers(0, len(STATES) - 1), st.booleans()),
        max_size=6,
    ),
)
def test_ranged_outcomes_match_per_delivery_outcomes(links: list[int], dispositions: list[Disposition]) -> None:
    ranged = asyncio.run(_run(True, links, dispositions))
    per_delivery = asyncio.run(_run(False, links, dispositions))
    assert ranged == per_delivery


def test_a_range_resolves_each_future_with_its_outcome_in_order() -> None:
    released, accepted = Released(), Accepted()
    results, order = asyncio.run(_run(True, [0, 1, 0, 0, 1], [(0, 1, 4, False), (1, 2, 1, False), (3, 1, 4, True)]))
    # 0 received (not terminal, unsettled: unresolved), 1..2 released (terminal, unsettled),
    # 3 settled with a non-terminal state, the rest accepted at the end.
    assert results == [accepted, released, released, STATES[4], accepted]
    assert order == [1, 2, 3, 0, 4]
