"""The asyncio receiver settles a batch of distinct unsettled messages of its own with one
``settle_all`` (``Receiver.start_settle``) and any other batch one message at a time
(``_start_settle_each``). Both must do the same: the same dispositions queued, the same
delivery states and waiters, the same ``SettlementError`` at the same message, the same
confirmation. Two connections to one broker receive alike; one settles each batch through
``start_settle``, the other through ``_start_settle_each``, and what they did is compared.

Also: deliveries arrive in runs (``DeliveriesReceived``) and the broker's confirmations of
a range come as one ``DeliveriesUpdated``; a run with nothing decodable wakes no receive.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink import Message
from amqplink.aio import SettlementError, connect
from amqplink.aio.receiver import _Confirmations
from amqplink.broker import Broker
from amqplink.engine.events import DeliveriesReceived, DeliveriesUpdated
from amqplink.protocol.definitions import Accepted, Modified, Released
from tests import profiles
from tests.receiving import receive_exactly

from .helpers import eventually

COUNT = 6
STATES = [Accepted(), Released(), Modified(delivery_failed=True)]

# A pick: ("own", i) the i-th received message; ("foreign", 0) one another receiver took;
# ("plain", 0) a message that was never received.
own = st.tuples(st.just("own"), st.integers(min_value=0, max_value=COUNT - 1))
picks = st.one_of(
    st.lists(own, max_size=COUNT + 2),  # the receiver's own messages only (repeats may come)
    st.lists(st.one_of(own, st.tuples(st.sampled_from(["foreign", "plain"]), st.just(0))), max_size=COUNT + 2),
)


def _waiter(context: Any) -> Any:
    if context is None:
        return None
    if type(context) is _Confirmations:
        return ("confirmations", context.left)
    return ("future", context.done())


async def _settle_on(
    url: str, queue: str, second: bool, pre_settled: list[int], calls: list[tuple[list[Any], int]], each: bool
) -> Any:
    """Receive ``COUNT`` messages on ``queue`` (rcv-settle-mode ``second`` or ``first``),
    accept ``pre_settled``, then make ``calls`` (picks, state) through ``start_settle``
    or, with ``each``, ``_start_settle_each``."""
    async with await connect(url) as conn, await connect(url) as elsewhere:
        sender = await elsewhere.create_sender(queue + "-other")
        await sender.send(Message(b"other"))
        other = await elsewhere.create_receiver(queue + "-other", mode="peek-lock", prefetch=1)
        [foreign] = await receive_exactly(other, 1, accept=False, timeout=5)
        sender = await conn.create_sender(queue)
        await sender.send_many([Message(bytes([i])) for i in range(COUNT)])
        conn.rcv_second_supported = second  # first: the receiver settles at once, unconfirmed
        receiver = await conn.create_receiver(queue, mode="peek-lock", prefetch=COUNT)
        assert receiver.confirm is second
        got = await receive_exactly(receiver, COUNT, accept=False, timeout=5)
        for i in pre_settled:
            await receiver.accept(got[i])
        what = receiver._what()
        session = receiver.link.session
        record: list[Any] = []
        for chosen, state in calls:
            messages: list[Any] = [
                got[i] if kind == "own" else foreign if kind == "foreign" else Message(b"x") for kind, i in chosen
            ]
            start = receiver._start_settle_each if each else receiver.start_settle
            try:
                future = start(messages, STATES[state], "accept")
            except (SettlementError, AttributeError) as exc:
                future = None
                outcome: Any = (type(exc).__name__, str(exc).replace(what, "<receiver>"))
            else:
                outcome = "started" if future is not None else "settled"
            queued = [list(run) for run in session._dispositions]
            waiters = [_waiter(m._delivery.context) for m in got]
            if second:  # the broker confirms each outcome given
                await eventually(lambda: all(m._delivery.remote_settled for m in got if m._delivery.state is not None))
            # A settle call that started is done once the confirmations came (a message given
            # twice is refused the second time: one outcome, one confirmation to wait for).
            if second and future is not None:
                await asyncio.wait_for(asyncio.shield(future), 5)
            record.append((outcome, queued, waiters, future is not None and future.done()))
        states = [(m._delivery.settled, m._delivery.state, m._delivery.remote_settled) for m in got]
        return record, states


@settings(profiles.HEAVY, deadline=None)
@given(
    second=st.booleans(),
    pre_settled=st.lists(st.integers(min_value=0, max_value=COUNT - 1), unique=True, max_size=3),
    calls=st.lists(st.tuples(picks, st.integers(min_value=0, max_value=len(STATES) - 1)), min_size=1, max_size=3),
)
def test_settling_a_batch_together_does_what_settling_each_does(
    second: bool, pre_settled: list[int], calls: list[tuple[list[Any], int]]
) -> None:
    async def both() -> tuple[Any, Any]:
        async with Broker() as broker:
            together = await _settle_on(broker.url, "a", second, pre_settled, calls, each=False)
            one_by_one = await _settle_on(broker.url, "b", second, pre_settled, calls, each=True)
        return together, one_by_one

    together, one_by_one = asyncio.run(both())
    assert together == one_by_one


async def test_a_batch_of_distinct_unsettled_messages_is_settled_together() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q")
        await sender.send_many([Message(bytes([i])) for i in range(COUNT)])
        receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=COUNT)
        got = await receive_exactly(receiver, COUNT, accept=False)
        assert receiver._settleable(got) == [m._delivery for m in got]
        # A message twice, one already settled, or the link gone: one at a time.
        assert receiver._settleable([got[0], got[1], got[0]]) is None
        await receiver.accept(got[0])
        assert receiver._settleable(got) is None
        seen: list[Any] = []
        on_event = receiver._on_event
        receiver._on_event = lambda event: (seen.append(type(event)), on_event(event))  # type: ignore[method-assign]
        await receiver.accept(*got[1:])
        assert all(m.settled for m in got)
        assert seen == [DeliveriesUpdated]  # the broker's confirmations: one range, one event
        await receiver.close()
        assert receiver._settleable(got[1:]) is None


async def test_a_second_outcome_while_the_first_waits_for_the_peer_is_refused() -> None:
    """rcv-settle-mode second: the first settle call's waiter gets the peer's one settlement;
    a second call for the same message (in the same call or a later one) is refused at once
    instead of taking that settlement over and leaving the first waiting for ever."""
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q")
        await sender.send_many([Message(b"a"), Message(b"b")])
        receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=2)
        assert receiver.confirm
        first, second = await receive_exactly(receiver, 2, accept=False)
        try:
            await asyncio.wait_for(receiver.accept(first, first), 5)
        except SettlementError as exc:
            assert "already given" in str(exc)
        else:
            raise AssertionError("a message given twice was accepted twice")
        await eventually(lambda: first.settled)  # the first outcome was sent and confirmed
        # Both calls start in one loop turn: the second comes while the first waits.
        accepting = asyncio.ensure_future(receiver.accept(second))
        releasing = asyncio.ensure_future(receiver.release(second))
        accepted, released = await asyncio.wait_for(asyncio.gather(accepting, releasing, return_exceptions=True), 5)
        assert accepted is None
        assert isinstance(released, SettlementError) and "already given" in str(released)
        assert second.settled and type(second._delivery.state).__name__ == "Accepted"


async def test_deliveries_arrive_in_runs_and_a_run_of_undecodable_ones_wakes_no_receive() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=10)
        seen: list[Any] = []
        on_event = receiver._on_event
        receiver._on_event = lambda event: (seen.append(event), on_event(event))  # type: ignore[method-assign]
        waiting = asyncio.ensure_future(receiver.receive(5, timeout=30))
        sender = await conn.create_sender("q")
        # A data section announcing 200 bytes but holding 2: no message, whatever the reader.
        await (await sender.send_payload_nowait(b"\x00\x53\x75\xa0\xc8ab"))
        await eventually(lambda: receiver.decode_failures == 1)
        arrival = receiver._arrival
        assert arrival is not None and not arrival.done()  # nothing taken: the receive waits on
        assert not waiting.done()
        await sender.send_many([Message(bytes([i])) for i in range(3)])
        got = await waiting
        got += await receive_exactly(receiver, 3 - len(got), accept=False) if len(got) < 3 else []
        assert [m.body for m in got] == [b"\x00", b"\x01", b"\x02"]
        runs = [e for e in seen if type(e) is DeliveriesReceived]
        assert runs and sum(len(e.deliveries) for e in runs) == 4  # the undecodable one and three
