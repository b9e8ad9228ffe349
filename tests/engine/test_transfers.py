"""Transfers (2.6.12-2.6.14, 2.7.5, 2.7.6): tags, message-format, split and aborted
deliveries, the unsettled maps, dispositions with ranges, attach's unsettled field."""

from __future__ import annotations

import pytest

from amqplink.codec.types import Symbol, UByte, UInt, ULong
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import (
    DeliveriesReceived,
    DeliveriesUpdated,
    DeliveryAborted,
    LinkAttachRequested,
)
from amqplink.engine.link import RCV_FIRST, RCV_SECOND, SND_MIXED, ReceiverLink, SenderLink
from amqplink.protocol.definitions import (
    Accepted,
    Attach,
    Detach,
    Disposition,
    Modified,
    Received,
    Rejected,
    Source,
    Target,
    Transfer,
)

from .pairs import Pair, frame, performatives, unsettled_link, updates_in
from .test_violations import server_with_session, with_receiver

BATCH_FORMAT = 0x80013700  # Service Bus's batched message format


def link_pair(pair: Pair, **kw: int) -> tuple[SenderLink, ReceiverLink]:
    session = pair.open()
    sender = session.attach_sender("q", target=Target(address="q"), **kw)
    pair.pump()
    receiver = pair.server_link("q", sender=False)
    assert isinstance(receiver, ReceiverLink)
    return sender, receiver


def test_tags_and_message_format_arrive_as_sent() -> None:
    pair = Pair(server_config=ConnectionConfig(container_id="server", max_frame_size=512))
    sender, receiver = link_pair(pair)
    receiver.flow(10)
    pair.pump()
    sent = [
        sender.send(b"plain"),
        sender.send(b"batch", tag=b"\x01" * 32, message_format=BATCH_FORMAT),
        sender.send(b"s" * 2000, tag=b"split", message_format=BATCH_FORMAT + 1),
        sender.send(b"", tag=b""),
    ]
    pair.pump()
    got = [d for d in pair.deliveries("server")]
    assert [d.tag for d in got] == [d.tag for d in sent] == [bytes(8), b"\x01" * 32, b"split", b""]
    assert [d.message_format for d in got] == [0, BATCH_FORMAT, BATCH_FORMAT + 1, 0]
    assert [bytes(d.payload) for d in got] == [b"plain", b"batch", b"s" * 2000, b""]
    # continuation frames leave delivery-id, tag and format off (2.7.5: "can only be omitted")
    split = [t for t in performatives(pair.wire_c2s, Transfer) if t.delivery_id is None]
    assert split and all(t.delivery_tag is None and t.message_format is None for t in split)


def test_default_tags_are_unique_and_a_tag_over_32_bytes_is_refused() -> None:
    """ "delivery-tag ... can be up to 32 octets of binary data" (2.8.7)."""
    pair = Pair()
    sender, _ = link_pair(pair)
    tags = {sender.send(b"x").tag for _ in range(300)}
    assert len(tags) == 300
    with pytest.raises(ValueError, match="32"):
        sender.send(b"x", tag=b"t" * 33)
    assert len(sender.queue) == 300


def test_settled_on_a_later_frame_settles_the_whole_delivery() -> None:
    """ "For subsequent transfers ... if the settled flag is left unset then it MUST be
    interpreted as true if and only if the value of the settled flag on any of the
    preceding transfers was true" (2.7.5)."""
    server, session = server_with_session()
    link = with_receiver(server)
    server.receive_data(frame(0, Transfer(handle=UInt(0), delivery_id=UInt(0), delivery_tag=b"t", more=True), b"a"))
    assert list(link.unsettled) == [0]
    server.receive_data(frame(0, Transfer(handle=UInt(0), settled=True, more=True), b"b"))
    (event,) = server.receive_data(frame(0, Transfer(handle=UInt(0)), b"c"))
    assert isinstance(event, DeliveriesReceived)
    assert bytes(event.delivery.payload) == b"abc" and event.delivery.remote_settled  # (a run of one)
    assert not link.unsettled and not session.incoming_unsettled  # nothing waits for a disposition


def test_single_frame_aborted_delivery_uses_credit_and_is_dropped() -> None:
    """ "Aborted messages SHOULD be discarded by the recipient (any payload within the
    frame carrying the performative MUST be ignored). An aborted message is implicitly
    settled." (2.7.5)"""
    server, session = server_with_session()
    link = with_receiver(server, credit=2)
    events = server.receive_data(
        frame(0, Transfer(handle=UInt(0), delivery_id=UInt(0), delivery_tag=b"t", aborted=True, more=True), b"junk")
    )
    assert [type(e) for e in events] == [DeliveryAborted]
    assert events[0].delivery.payload is None and events[0].delivery.settled
    assert link.delivery_count == 1 and link.link_credit == 1
    assert not link.unsettled and not session.incoming_unsettled


def test_abort_before_any_frame_left_drops_the_delivery_without_using_credit() -> None:
    pair = Pair()
    sender, receiver = link_pair(pair)
    doomed = sender.send(b"never")
    kept = sender.send(b"kept")
    sender.abort(doomed)
    assert list(sender.queue) == [kept]
    receiver.flow(1)
    pair.pump()
    assert [bytes(d.payload) for d in pair.deliveries("server")] == [b"kept"]
    assert not pair.of(DeliveryAborted, "server")
    assert doomed.delivery_id is None and list(sender.unsettled) == [kept.delivery_id] == [0]


def test_unsettled_maps_hold_every_delivery_until_it_is_settled() -> None:
    pair = Pair()
    sender, receiver = link_pair(pair, rcv_settle_mode=RCV_SECOND)
    receiver.flow(10)
    pair.pump()
    sent = [sender.send(bytes([i])) for i in range(4)]
    presettled = sender.send(b"p", settled=True)
    pair.pump()
    ids = [d.delivery_id for d in sent]
    assert list(sender.unsettled) == ids and list(receiver.unsettled) == ids
    assert presettled.delivery_id not in sender.unsettled and presettled.delivery_id not in receiver.unsettled
    received = {d.delivery_id: d for d in pair.deliveries("server")}
    receiver.settle(received[ids[1]], Accepted())
    pair.pump()
    # rcv-settle-mode second: the sender settles on the outcome, then the receiver forgets
    assert ids[1] not in sender.unsettled and ids[1] not in receiver.unsettled
    assert list(sender.unsettled) == [ids[0], ids[2], ids[3]] == list(receiver.unsettled)


def test_incoming_disposition_ranges_reach_every_delivery_in_them() -> None:
    """ "first ... last: the lower and upper bounds of the range of deliveries", ids that
    are unknown or already settled inside the range are skipped (2.7.6); batchable is
    only a hint."""
    pair = Pair()
    sender, receiver = link_pair(pair)
    receiver.flow(10)
    pair.pump()
    sent = [sender.send(bytes([i])) for i in range(6)]
    pair.pump()
    channel = sender.session.remote_channel or 0
    rejected = Rejected(error=None)
    events = pair.client.receive_data(
        frame(
            channel, Disposition(role=True, first=UInt(1), last=UInt(3), settled=True, state=Accepted(), batchable=True)
        )
        + frame(channel, Disposition(role=True, first=UInt(0), last=UInt(100), settled=True, state=rejected))
    )
    updates = [(d.delivery_id, type(e.state)) for d, e in updates_in(events)]
    assert updates == [(1, Accepted), (2, Accepted), (3, Accepted), (0, Rejected), (4, Rejected), (5, Rejected)]
    assert all(d.settled and d.remote_settled for d in sent) and not sender.unsettled


def test_non_terminal_state_keeps_the_delivery_unsettled() -> None:
    """A received (2.7.6 "state" as a non-terminal delivery-state) leaves the delivery
    open until a terminal outcome settles it."""
    pair = Pair()
    sender, receiver = link_pair(pair, snd_settle_mode=SND_MIXED)
    receiver.flow(1)
    pair.pump()
    delivery = sender.send(b"x")
    pair.pump()
    channel = sender.session.remote_channel or 0
    progress = Received(section_number=UInt(0), section_offset=ULong(1))
    (update,) = pair.client.receive_data(frame(channel, Disposition(role=True, first=UInt(0), state=progress)))
    assert isinstance(update, DeliveriesUpdated) and update.state == progress and update.deliveries == [delivery]
    assert not delivery.settled and delivery.delivery_id in sender.unsettled
    receiver.settle(pair.deliveries("server")[0], Modified(delivery_failed=True))
    pair.pump()
    assert delivery.settled and isinstance(delivery.remote_state, Modified) and not sender.unsettled


def test_attach_unsettled_map_is_decoded() -> None:
    """ "unsettled: unsettled delivery state ... a map from delivery-tag to delivery-state"
    (2.7.3), kept on the link as the peer's attach."""
    server, _ = server_with_session()
    attach = Attach(
        name="resumed",
        handle=UInt(0),
        role=False,
        target=Target(address="q"),
        unsettled={b"t1": Accepted(), b"t2": None, b"t3": Received(section_number=UInt(1), section_offset=ULong(2))},
        incomplete_unsettled=True,
        initial_delivery_count=UInt(0),
    )
    (event,) = server.receive_data(frame(0, attach))
    assert isinstance(event, LinkAttachRequested)
    remote = event.link.remote_attach
    assert remote is not None and remote.incomplete_unsettled is True
    assert remote.unsettled == {
        b"t1": Accepted(),
        b"t2": None,
        b"t3": Received(section_number=UInt(1), section_offset=ULong(2)),
    }
    assert type(remote.unsettled[b"t1"]) is Accepted and type(remote.unsettled[b"t3"]) is Received


def test_rejected_outcome_keeps_its_error() -> None:
    from amqplink.protocol.definitions import Error

    pair = Pair()
    sender, receiver = link_pair(pair)
    receiver.flow(1)
    pair.pump()
    sender.send(b"x")
    pair.pump()
    error = Error(condition=Symbol("amqp:precondition-failed"), description="no", info={Symbol("k"): 1})
    receiver.settle(pair.deliveries("server")[0], Rejected(error=error))
    pair.pump()
    ((_, update),) = pair.updated()
    assert update.state == Rejected(error=error) and update.settled


def test_a_transfers_rcv_settle_mode_first_overrides_a_link_negotiated_second() -> None:
    """rcv-settle-mode on a transfer: "If first, this indicates that the receiver MUST
    settle the delivery once it has arrived without waiting for the sender to settle
    first. ... If not set, this value is defaulted to the value negotiated on link
    attach." (2.7.5)"""
    server, _ = server_with_session()
    events = server.receive_data(
        frame(
            0,
            Attach(
                name="l",
                handle=UInt(0),
                role=False,
                target=Target(address="q"),
                rcv_settle_mode=UByte(RCV_SECOND),
                initial_delivery_count=UInt(0),
            ),
        )
    )
    link = events[0].link
    assert isinstance(link, ReceiverLink)
    link.attach()
    link.flow(5)
    server.data_to_send()
    (own,) = server.receive_data(
        frame(0, Transfer(handle=UInt(0), delivery_id=UInt(0), delivery_tag=b"a", rcv_settle_mode=UByte(RCV_FIRST)))
    )
    (default,) = server.receive_data(frame(0, Transfer(handle=UInt(0), delivery_id=UInt(1), delivery_tag=b"b")))
    link.settle(own.delivery, Accepted())
    link.settle(default.delivery, Accepted())
    dispositions = performatives([server.data_to_send()], Disposition)
    assert [(int(d.first), d.settled) for d in dispositions] == [(1, False), (0, True)]
    assert own.delivery.settled and not default.delivery.settled
    assert list(link.unsettled) == [1]


def test_a_transfer_asking_second_on_a_link_negotiated_first_detaches_it() -> None:
    """ "If the negotiated link value is first, then it is illegal to set this field to
    second." (2.7.5)"""
    server, session = server_with_session()
    link = with_receiver(server)
    assert link.rcv_settle_mode == RCV_FIRST
    server.receive_data(
        frame(0, Transfer(handle=UInt(0), delivery_id=UInt(0), delivery_tag=b"a", rcv_settle_mode=UByte(RCV_SECOND)))
    )
    (detach,) = performatives([server.data_to_send()], Detach)
    assert detach.error is not None and detach.error.condition == "amqp:not-allowed"
    assert link.detach_sent and session.is_mapped


def test_a_receiver_whose_sender_answers_rcv_settle_mode_first_settles_first() -> None:
    # The receiver asks for second; a sender that answers first (qpid-proton's default)
    # settles only after the receiver does, so the receiver must settle with its outcome.
    pair = Pair(auto_accept_links=False)
    session = pair.open()
    receiver = session.attach_receiver("q", source=Source(address="q"), rcv_settle_mode=RCV_SECOND)
    pair.pump()
    [request] = pair.of(LinkAttachRequested, "server")
    sender = request.link
    assert isinstance(sender, SenderLink) and sender.remote_attach is not None
    sender.rcv_settle_mode = RCV_FIRST
    sender.attach(sender.remote_attach.source, sender.remote_attach.target, keep=False)
    pair.pump()
    assert receiver.rcv_settle_mode == RCV_FIRST
    pair.grant_and_send(sender, receiver, 1, 1)
    [received] = pair.deliveries()
    receiver.settle(received, Accepted())
    assert received.settled and not receiver.unsettled
    pair.pump()
    [disposition] = performatives(pair.wire_c2s, Disposition)
    assert disposition.settled is True
    [(_, updated)] = pair.updated("server")
    assert updated.settled and isinstance(updated.state, Accepted)


def test_a_receiver_whose_sender_confirms_keeps_rcv_settle_mode_second() -> None:
    pair = Pair()
    session = pair.open()
    receiver = session.attach_receiver("q", source=Source(address="q"), rcv_settle_mode=RCV_SECOND)
    pair.pump()
    assert receiver.rcv_settle_mode == RCV_SECOND
    sender = pair.server_link("q", sender=True)
    assert isinstance(sender, SenderLink)
    pair.grant_and_send(sender, receiver, 1, 1)
    [received] = pair.deliveries()
    receiver.settle(received, Accepted())
    assert not received.settled  # waits for the sender's settlement
    pair.pump()
    assert received.settled


@pytest.mark.parametrize("message_format", [-1, 2**32])
def test_a_message_format_outside_uint_is_refused_before_anything_is_queued(message_format: int) -> None:
    """ "message-format: uint" (2.7.5): a value outside it raises at send, naming the link,
    and leaves the link's credit, queue and delivery-ids as they were."""
    pair, session, sender, receiver = unsettled_link(10, 4096)
    receiver.flow(5)
    pair.pump()
    before = (sender.link_credit, sender.delivery_count, len(sender.queue), session.next_outgoing_id)
    with pytest.raises(ValueError, match=r"'a'.*message_format"):
        sender.send(b"x", message_format=message_format)
    assert (sender.link_credit, sender.delivery_count, len(sender.queue), session.next_outgoing_id) == before
    sender.send(b"y")
    pair.pump()
    assert [bytes(d.payload) for d in pair.deliveries("server")] == [b"y"]


def test_fast_transfers_is_the_former_name_of_fast_paths() -> None:
    conn = Connection(fast_paths=False)
    assert not conn.fast_paths and not conn.fast_transfers
    conn.fast_transfers = True
    assert conn.fast_paths and conn.transfer_writer.fast and conn.transfer_reader.fast
