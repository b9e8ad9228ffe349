"""A receiver link with ``deliver_in_runs`` reports the deliveries that complete one after
another as one ``DeliveriesReceived``; ``ReceiverLink.settle_all`` settles several at once,
a run of consecutive delivery-ids as one disposition range.

Both must behave exactly as the one-at-a-time forms: the same client byte stream (every
kind of transfer the receive path tells apart, cut at random points) goes into two server
engines, one taking runs and settling them with ``settle_all``, one taking a
``DeliveryReceived`` each and settling it with ``settle``; they must see the same
deliveries in the same order among the same other events, and write the same bytes.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import DeliveriesReceived, DeliveryReceived, LinkAttachRequested
from amqplink.engine.link import RCV_SECOND, Delivery, ReceiverLink
from amqplink.protocol.definitions import Accepted, Rejected, Target

from .pairs import Pair, frames_in
from .test_transfer_receive_fast_path import HANDSHAKE, MAX_FRAME, _describe, _transfers, deliveries


def _serve(stream: bytes, cuts: list[int], runs: bool) -> tuple[list[Any], bytes, list[int]]:
    """The server's events (a run spelled out as the DeliveryReceived events it stands
    for), its bytes, and the sizes of the runs it saw."""
    server = Connection(ConnectionConfig(container_id="server", max_frame_size=MAX_FRAME), server=True)
    seen: list[Any] = []
    written = bytearray()
    sizes: list[int] = []
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for piece in [HANDSHAKE] + [stream[start:end] for start, end in pairwise(points)]:
        for event in server.receive_data(piece):
            if isinstance(event, LinkAttachRequested):
                assert isinstance(event.link, ReceiverLink)
                event.link.deliver_in_runs = runs
                event.link.attach()
                event.link.flow(100)
            if isinstance(event, DeliveriesReceived):
                assert runs
                sizes.append(len(event.deliveries))
                seen += [_describe(DeliveryReceived(event.link, d)) for d in event.deliveries]
                assert isinstance(event.link, ReceiverLink)
                event.link.settle_all([d for d in event.deliveries if not d.settled], Accepted())
                continue
            seen.append(_describe(event))
            if isinstance(event, DeliveryReceived):
                assert not runs
                assert isinstance(event.link, ReceiverLink)
                if not event.delivery.settled:
                    event.link.settle(event.delivery, Accepted())
        written += server.data_to_send()
    seen += [_describe(e) for e in server.take_events()]
    return seen, bytes(written), sizes


@settings(deadline=None)
@given(plan=deliveries, cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=8))
def test_runs_and_single_deliveries_agree(plan: list[tuple[str, bytes, bytes, bool, int]], cuts: list[int]) -> None:
    stream = _transfers(plan)
    by_runs = _serve(stream, cuts, runs=True)
    one_by_one = _serve(stream, cuts, runs=False)
    assert by_runs[:2] == one_by_one[:2]
    assert one_by_one[2] == []


def test_whole_deliveries_of_one_read_are_one_run() -> None:
    stream = _transfers([("whole", b"m%d" % i, b"t%d" % i, False, 0) for i in range(5)])
    _, written, sizes = _serve(stream, [], runs=True)
    assert sizes == [5]
    dispositions = [p for _, p, _ in frames_in([written]) if type(p).__name__ == "Disposition"]
    assert [(int(d.first), int(d.last), d.settled) for d in dispositions] == [(0, 4, True)]


def _received(rcv_settle_mode: int, settled: list[bool]) -> tuple[Pair, ReceiverLink, list[Delivery]]:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("s", target=Target(address="q"), rcv_settle_mode=rcv_settle_mode)
    pair.pump()
    receiver = next(e.link for e in pair.server_events if isinstance(e, LinkAttachRequested))
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(len(settled) + 1)
    pair.pump()
    for i, pre_settled in enumerate(settled):
        sender.send(b"m%d" % i, settled=pre_settled)
    pair.pump()
    got = [e.delivery for e in pair.server_events if isinstance(e, DeliveryReceived)]
    assert len(got) == len(settled)
    return pair, receiver, got


@settings(deadline=None)
@given(
    mode=st.sampled_from([0, RCV_SECOND]),
    settled=st.lists(st.booleans(), min_size=1, max_size=12),
    picks=st.lists(st.integers(min_value=0, max_value=11), max_size=12),
    reject=st.booleans(),
)
def test_settle_all_writes_what_settling_one_by_one_writes(
    mode: int, settled: list[bool], picks: list[int], reject: bool
) -> None:
    """Any subset of the deliveries, in any order, repeats allowed; pre-settled ones too."""
    outcome = Rejected() if reject else Accepted()
    results = []
    for together in (True, False):
        pair, receiver, got = _received(mode, settled)
        chosen = [got[i % len(got)] for i in picks]
        if together:
            receiver.settle_all(chosen, outcome)
        else:
            for delivery in chosen:
                receiver.settle(delivery, outcome)
        states = [(d.settled, d.state, d.delivery_id in receiver.unsettled) for d in got]
        results.append((pair.server.data_to_send(), states, sorted(receiver.session._incoming)))
    assert results[0] == results[1]
