"""``ReceiverLink.settle_all`` settles a list that is a run of open deliveries at consecutive
delivery-ids (as a broker settles a producer's run) in one go (``_settle_range``): the
deliveries, the unsettled maps and the dispositions written must be exactly what settling
them one after another (``_settle_each``, the general path) gives, for any list.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec.types import Symbol
from amqplink.engine.events import DeliveryReceived
from amqplink.engine.link import RCV_FIRST, RCV_SECOND, SND_MIXED, Delivery, ReceiverLink
from amqplink.protocol.definitions import Accepted, Error, Rejected, Target

from .pairs import Pair

OUTCOMES = [Accepted(), Rejected(error=Error(condition=Symbol("amqp:internal-error"))), None]


def _received(rcv_settle_mode: int, sent_settled: list[bool]) -> tuple[Pair, ReceiverLink, list[Delivery]]:
    """A server receiver (``rcv_settle_mode``) with a delivery for each of ``sent_settled``
    (settled by the sender or not), in delivery-id order."""
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender(
        "q", target=Target(address="queue"), snd_settle_mode=SND_MIXED, rcv_settle_mode=rcv_settle_mode
    )
    pair.pump()
    receiver = pair.server_link("q", sender=False)
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(len(sent_settled) + 1)
    pair.pump()
    for i, settled in enumerate(sent_settled):
        sender.send(bytes([i]), settled=settled)
    pair.pump()
    return pair, receiver, [e.delivery for e in pair.of(DeliveryReceived, "server")]


def _seen(pair: Pair, receiver: ReceiverLink, deliveries: list[Delivery]) -> list[Any]:
    return [
        [(d.delivery_id, d.settled, d.remote_settled, d.state) for d in deliveries],
        sorted(receiver.unsettled),
        sorted(receiver.session._incoming),
        pair.server.data_to_send(),
    ]


@settings(max_examples=150, deadline=None)
@given(
    rcv_settle_mode=st.sampled_from([RCV_FIRST, RCV_SECOND]),
    sent_settled=st.lists(st.booleans(), min_size=1, max_size=10),
    data=st.data(),
    outcome=st.integers(0, len(OUTCOMES) - 1),
    batchable=st.booleans(),
    settled_before=st.lists(st.integers(0, 9), max_size=2),
)
def test_a_list_settles_as_one_delivery_after_another(
    rcv_settle_mode: int,
    sent_settled: list[bool],
    data: st.DataObject,
    outcome: int,
    batchable: bool,
    settled_before: list[int],
) -> None:
    seen = []
    picks = data.draw(st.lists(st.integers(0, len(sent_settled) - 1), min_size=1, max_size=12))
    if data.draw(st.booleans()):  # most often a run as it arrived
        start = picks[0]
        picks = list(range(start, start + data.draw(st.integers(1, len(sent_settled) - start))))
    for each in (False, True):
        pair, receiver, deliveries = _received(rcv_settle_mode, sent_settled)
        for i in settled_before:
            if i < len(deliveries):
                receiver.settle(deliveries[i], Accepted())
        pair.server.data_to_send()
        chosen = [deliveries[i] for i in picks]
        if each:
            receiver._settle_each(chosen, OUTCOMES[outcome], batchable)
        else:
            receiver.settle_all(chosen, OUTCOMES[outcome], batchable=batchable)
        seen.append(_seen(pair, receiver, deliveries))
    assert seen[0] == seen[1]


def test_a_run_of_open_deliveries_settles_in_one_range() -> None:
    _, receiver, deliveries = _received(RCV_FIRST, [False] * 5)
    calls: list[Any] = []
    receiver._settle_each = lambda *args: calls.append(args)  # type: ignore[method-assign]
    receiver.settle_all(deliveries[1:4], Accepted())
    assert calls == []  # not one at a time
    assert [d.settled for d in deliveries] == [False, True, True, True, False]
    assert sorted(receiver.unsettled) == sorted(receiver.session._incoming) == [0, 4]
    receiver.settle_all([deliveries[4], deliveries[0]], Accepted())  # not consecutive: one at a time
    assert len(calls) == 1
