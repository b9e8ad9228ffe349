"""Settlements queued in any order leave as the fewest first..last ranges.

The session keeps queued dispositions as runs it extends in place; at the next
``data_to_send`` they go out as if every settlement had been sorted by delivery-id
(within role, settled and batchable) and consecutive ids with the same outcome
merged into one disposition (2.7.6: "first", "last").
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec.types import Symbol
from amqplink.engine.link import ReceiverLink
from amqplink.protocol.definitions import Accepted, Disposition, Error, Rejected, Released, Target
from tests import profiles

from .pairs import Pair, performatives

OUTCOMES = [Accepted(), Released(), Rejected(error=Error(condition=Symbol("amqp:internal-error")))]


def _expected(settled: list[tuple[int, int, bool]]) -> list[tuple[int, int, Any, bool]]:
    """The reference: sort by (batchable, id), merge consecutive ids with equal outcomes."""
    out: list[tuple[int, int, Any, bool]] = []
    for delivery_id, outcome, batchable in sorted(settled, key=lambda s: (s[2], s[0])):
        if out and out[-1][1] + 1 == delivery_id and out[-1][2] == OUTCOMES[outcome] and out[-1][3] == batchable:
            out[-1] = (out[-1][0], delivery_id, out[-1][2], batchable)
        else:
            out.append((delivery_id, delivery_id, OUTCOMES[outcome], batchable))
    return out


@settings(profiles.HEAVY, deadline=None)
@given(
    data=st.data(),
    count=st.integers(min_value=1, max_value=40),
)
def test_settlements_in_any_order_merge_into_ranges(data: st.DataObject, count: int) -> None:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("q", target=Target(address="queue"))
    pair.pump()
    receiver = pair.server_link("q", sender=False)
    assert isinstance(receiver, ReceiverLink)
    pair.grant_and_send(sender, receiver, count, count)
    deliveries = {int(d.delivery_id): d for d in pair.deliveries("server")}
    order = data.draw(st.permutations(sorted(deliveries)))
    chosen = order[: data.draw(st.integers(min_value=1, max_value=count))]
    settled = [(i, data.draw(st.integers(min_value=0, max_value=2)), data.draw(st.booleans())) for i in chosen]
    before = len(performatives(pair.wire_s2c, Disposition))
    for delivery_id, outcome, batchable in settled:
        receiver.settle(deliveries[delivery_id], OUTCOMES[outcome], batchable=batchable)
    pair.pump()
    sent = [
        (int(d.first), int(d.first if d.last is None else d.last), d.state, bool(d.batchable))
        for d in performatives(pair.wire_s2c, Disposition)[before:]
    ]
    assert sent == _expected(settled)
