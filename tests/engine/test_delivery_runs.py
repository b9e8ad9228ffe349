"""Whole deliveries come in runs (``DeliveriesReceived``): a run goes on while a link's
deliveries complete one after another and ends at any other event, so events keep their
order; a delivery on its own is a run of one. ``ReceiverLink.settle_all`` settles several
at once, a run of consecutive delivery-ids as one disposition range.

The run boundaries do not depend on the reader: the same client byte stream (every kind of
transfer the receive path tells apart, cut at random points) goes into two server engines,
one with the fast reader (a run of single-frame transfers handed to the link at once),
settling each run with ``settle_all``, one with the reference reader (``fast_paths=False``:
each transfer decoded and taken on its own), settling each delivery with ``settle``. They
must report the same deliveries in the same runs among the same other events, and write
the same bytes; and no run is followed by another of the same link in the same read.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import DeliveriesReceived, Event, LinkAttachRequested
from amqplink.engine.link import RCV_SECOND, Delivery, ReceiverLink
from amqplink.protocol.definitions import Accepted, Rejected, Target

from .pairs import Pair, frames_in
from .test_transfer_receive_fast_path import HANDSHAKE, MAX_FRAME, _describe, _transfers, deliveries


def _serve(stream: bytes, cuts: list[int], fast: bool) -> tuple[list[Any], bytes, list[list[Event]]]:
    """The server's events, its bytes, and the events of each read."""
    server = Connection(ConnectionConfig(container_id="server", max_frame_size=MAX_FRAME), server=True, fast_paths=fast)
    seen: list[Any] = []
    written = bytearray()
    reads: list[list[Event]] = []
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for piece in [HANDSHAKE] + [stream[start:end] for start, end in pairwise(points)]:
        events = server.receive_data(piece)
        reads.append(events)
        for event in events:
            seen.append(_describe(event))
            if isinstance(event, LinkAttachRequested):
                assert isinstance(event.link, ReceiverLink)
                event.link.attach()
                event.link.flow(100)
            elif isinstance(event, DeliveriesReceived):
                link = event.link
                assert isinstance(link, ReceiverLink) and event.deliveries
                unsettled = [d for d in event.deliveries if not d.settled]
                if fast:
                    link.settle_all(unsettled, Accepted())
                for delivery in [] if fast else unsettled:
                    link.settle(delivery, Accepted())
        written += server.data_to_send()
    seen += [_describe(e) for e in server.take_events()]
    return seen, bytes(written), reads


@settings(deadline=None)
@given(plan=deliveries, cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=8))
def test_runs_end_at_any_other_event_whichever_reader(
    plan: list[tuple[str, bytes, bytes, bool, int]], cuts: list[int]
) -> None:
    stream = _transfers(plan)
    fast = _serve(stream, cuts, fast=True)
    reference = _serve(stream, cuts, fast=False)
    assert fast[:2] == reference[:2]  # the same runs among the same events, the same bytes
    for events in fast[2]:
        for before, after in pairwise(events):
            # a run goes on while nothing else happens: two in a row are of two links
            assert not (type(before) is type(after) is DeliveriesReceived and before.link is after.link)  # type: ignore[attr-defined]


def test_whole_deliveries_of_one_read_are_one_run() -> None:
    stream = _transfers([("whole", b"m%d" % i, b"t%d" % i, False, 0) for i in range(5)])
    for fast in (True, False):
        _, written, reads = _serve(stream, [], fast=fast)
        runs = [e for e in reads[-1] if isinstance(e, DeliveriesReceived)]
        assert [[bytes(d.payload) for d in run.deliveries] for run in runs] == [[b"m%d" % i for i in range(5)]]
        dispositions = [p for _, p, _ in frames_in([written]) if type(p).__name__ == "Disposition"]
        assert [(int(d.first), int(d.last), d.settled) for d in dispositions] == [(0, 4, True)]


def test_a_run_ends_at_another_event_and_a_delivery_alone_is_a_run_of_one() -> None:
    plan = [("whole", b"a", b"ta", False, 0), ("whole", b"b", b"tb", False, 0)]
    stream = _transfers([*plan, ("aborted", bytes(900), b"tx", False, 0), ("whole", b"c", b"tc", False, 0)])
    for fast in (True, False):
        _, _, reads = _serve(stream, [], fast=fast)
        kinds = [(type(e).__name__, [bytes(d.payload) for d in getattr(e, "deliveries", [])]) for e in reads[-1]]
        assert kinds == [("DeliveriesReceived", [b"a", b"b"]), ("DeliveryAborted", []), ("DeliveriesReceived", [b"c"])]


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
    got = pair.deliveries("server")
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
        results.append((pair.server.data_to_send(), states, sorted(receiver.session.incoming_unsettled)))
    assert results[0] == results[1]
