"""Engine options a broker needs: a drain held until the application has filled the
link (``SenderLink.hold_drain``/``drained``), a receiver answering an attach with its own
rcv-settle-mode, and half-received deliveries let go when the transport ends."""

from __future__ import annotations

from amqplink.codec.types import UInt
from amqplink.engine.events import DeliveriesReceived, LinkDrained
from amqplink.engine.link import RCV_FIRST, RCV_SECOND, ReceiverLink, SenderLink
from amqplink.protocol.definitions import Accepted, Attach, Source, Target, Transfer

from .pairs import Pair, frame, performatives


def _server_sender(pair: Pair) -> tuple[SenderLink, ReceiverLink]:
    receiver = pair.open().attach_receiver("out", source=Source(address="out"))
    pair.pump()
    sender = pair.server_link("out", sender=True)
    assert isinstance(sender, SenderLink)
    return sender, receiver


def test_a_held_drain_is_answered_after_what_the_application_sends() -> None:
    pair = Pair()
    sender, receiver = _server_sender(pair)
    sender.hold_drain = True
    receiver.flow(5, drain=True)
    pair.pump()
    assert sender.drain and sender.link_credit == 5 and not pair.of(LinkDrained, "client")
    sender.send(b"one")
    sender.send(b"two")
    sender.drained()
    pair.pump()
    kinds = [type(e) for e in pair.client_events if isinstance(e, DeliveriesReceived | LinkDrained)]
    assert kinds == [DeliveriesReceived, LinkDrained] and len(pair.deliveries()) == 2
    assert sender.link_credit == 0 and receiver.link_credit == 0
    assert sender.delivery_count == receiver.delivery_count


def test_without_hold_a_drain_is_answered_at_once() -> None:
    pair = Pair()
    sender, receiver = _server_sender(pair)
    receiver.flow(5, drain=True)
    pair.pump()
    assert pair.of(LinkDrained, "client") and sender.link_credit == 0


def test_a_receiver_answers_with_its_own_rcv_settle_mode() -> None:
    """"rcv-settle-mode: ... the receiver's value is the one in force" (2.7.3)."""
    pair = Pair(auto_accept_links=False)
    session = pair.open()
    sender = session.attach_sender("in", target=Target(address="in"), rcv_settle_mode=RCV_SECOND)
    pair.pump()
    receiver = pair.server_link("in", sender=False)
    assert isinstance(receiver, ReceiverLink)
    receiver.answer_rcv_settle_mode = RCV_FIRST
    receiver.attach()
    pair.pump()
    (answer,) = [a for a in performatives(pair.wire_s2c, Attach) if a.name == "in"]
    assert int(answer.rcv_settle_mode) == RCV_FIRST and sender.rcv_settle_mode == RCV_FIRST
    pair.grant_and_send(sender, receiver, 1, 1)
    (delivery,) = [d for d in pair.deliveries("server")]
    receiver.settle(delivery, Accepted())
    pair.pump()
    assert delivery.settled and not sender.unsettled


def test_the_end_of_the_transport_lets_go_of_a_half_received_delivery() -> None:
    pair = Pair()
    session = pair.open()
    session.attach_sender("big", target=Target(address="big"))
    pair.pump()
    receiver = pair.server_link("big", sender=False)
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(1)
    pair.pump()
    part = Transfer(handle=UInt(0), delivery_id=UInt(0), delivery_tag=b"t", message_format=UInt(0), more=True)
    pair.server.receive_data(frame(0, part, b"x" * 1000))
    partial = receiver.partial_delivery
    assert partial is not None and partial.chunks
    pair.server.transport_closed()
    assert receiver.partial_delivery is None and partial.chunks is None
