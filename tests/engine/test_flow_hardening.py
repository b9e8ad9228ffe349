"""Flow-control defects from issue 9, each against two engines in memory: uint session
windows (2.5.6), credit from the sender's initial-delivery-count (2.6.7, 2.7.4), a drain
right behind an attach, blocked senders held once, and max-message-size (2.7.3)."""

from __future__ import annotations

import pytest

from amqplink.codec.types import UInt
from amqplink.engine import errors
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.events import (
    LinkAttachRequested,
    LinkCreditChanged,
    LinkDetached,
    LinkDrained,
)
from amqplink.engine.link import DEFAULT_MAX_MESSAGE_SIZE, ReceiverLink, SenderLink
from amqplink.engine.serial import serial_add
from amqplink.protocol.definitions import Attach, Flow, Source, Target, Transfer

from .pairs import Pair, frame, performatives
from .test_flow_control import link_pair

NEAR_WRAP = 2**32 - 5  # RabbitMQ 4 starts its senders here


def receiver_first(pair: Pair, credit: int, *, drain: bool = False) -> tuple[ReceiverLink, SenderLink]:
    """The client attaches a receiver and grants ``credit`` at once, before the server's
    application has answered (or even seen) the attach; returns both ends unanswered."""
    session = pair.open()
    receiver = session.attach_receiver("r", source=Source(address="q"))
    receiver.flow(credit, drain=drain)
    pair.pump()
    (request,) = pair.of(LinkAttachRequested, "server")
    sender = request.link
    assert isinstance(sender, SenderLink)
    assert not performatives(pair.wire_s2c, Attach), "the server's application has not answered"
    return receiver, sender


def link_flows(chunks: list[bytes]) -> list[Flow]:
    return [f for f in performatives(chunks, Flow) if f.handle is not None]


# -- 1. session windows are uints (2.5.6) -------------------------------------------------------


@pytest.mark.parametrize("window", [2**31, 2**32 - 1])
def test_a_peer_incoming_window_of_2_31_or_more_does_not_stall_the_sender(window: int) -> None:
    """Microsoft's stack advertises incoming-window 0xFFFFFFFF: the remote incoming window
    is a uint, not a serial number, and never turns negative."""
    pair = Pair(server_config=ConnectionConfig(container_id="server", incoming_window=window))
    sender, receiver = link_pair(pair)
    pair.grant_and_send(sender, receiver, 10, 5)
    assert len(pair.deliveries("server")) == 5 and not sender.queue
    session = sender.session
    assert session.remote_incoming_window == window - 5
    # the same from a hand-made flow that has seen two of the five transfers
    flow = Flow(
        next_incoming_id=UInt(2), incoming_window=UInt(window), next_outgoing_id=UInt(0), outgoing_window=UInt(1)
    )
    pair.client.receive_data(frame(session.remote_channel or 0, flow))
    assert session.remote_incoming_window == window - 3


# -- 2. credit counts from the sender's initial-delivery-count (2.6.7) --------------------------


def test_a_grant_of_one_from_a_sender_starting_near_2_32_admits_one_delivery() -> None:
    pair = Pair(auto_accept_links=False)
    receiver, sender = receiver_first(pair, 1)
    sender.delivery_count = NEAR_WRAP
    sender.attach()
    for i in range(5):
        sender.send(bytes([i]))
    pair.pump()
    assert len(pair.deliveries()) == 1
    assert len(sender.queue) == 4
    assert sender.link_credit == receiver.link_credit == 0, "no phantom credit on either end"
    assert sender.delivery_count == receiver.delivery_count == serial_add(NEAR_WRAP, 1)
    assert receiver.excess_transfers == 0
    receiver.flow(2)
    pair.pump()
    assert len(pair.deliveries()) == 3 and len(sender.queue) == 2
    assert sender.delivery_count == receiver.delivery_count == serial_add(NEAR_WRAP, 3)


def test_a_sender_near_2_32_that_ignores_credit_is_caught() -> None:
    """Without any grant, every delivery from a sender that starts at 2**32-5 is excess
    (no credit appears from the distance between 0 and its initial count)."""
    config = ConnectionConfig(container_id="client", on_excess_transfer="deliver")
    pair = Pair(client_config=config, auto_accept_links=False)
    receiver, sender = receiver_first(pair, 0)
    sender.delivery_count = NEAR_WRAP
    sender.attach()
    pair.pump()
    sender.link_credit = 3  # a peer that does not count
    for i in range(3):
        sender.send(bytes([i]))
    pair.pump()
    assert len(pair.deliveries()) == 3
    assert receiver.excess_transfers == 3 and receiver.link_credit == 0


def test_a_credit_overshoot_near_2_32_detaches_by_default() -> None:
    pair = Pair(auto_accept_links=False)
    _, sender = receiver_first(pair, 1)
    sender.delivery_count = NEAR_WRAP
    sender.attach()
    pair.pump()
    sender.link_credit = 2  # one more than granted
    sender.send(b"a")
    sender.send(b"b")
    pair.pump()
    assert len(pair.deliveries()) == 1
    (detached,) = pair.of(LinkDetached, "server")
    assert detached.error is not None and detached.error.condition == errors.TRANSFER_LIMIT_EXCEEDED


# -- 3. no delivery-count before the sender's attach (2.7.4) -------------------------------------


def test_receiver_flow_before_the_senders_attach_carries_no_delivery_count() -> None:
    """ "If the receiver has not yet received the attach frame from the sender then the
    delivery-count MUST NOT be set." (2.7.4)"""
    pair = Pair(auto_accept_links=False)
    receiver, sender = receiver_first(pair, 4)
    (early,) = link_flows(pair.wire_c2s)
    assert early.delivery_count is None and int(early.link_credit) == 4
    assert sender.link_credit == 4
    sender.delivery_count = 7
    sender.attach()
    pair.pump()
    receiver.flow(6)
    pair.pump()
    later = link_flows(pair.wire_c2s)[-1]
    assert int(later.delivery_count) == 7 and int(later.link_credit) == 6
    assert sender.link_credit == 6


# -- 4. a drain right behind an attach (2.6.7) ----------------------------------------------------


@pytest.mark.parametrize("initial", [0, NEAR_WRAP])
def test_a_drain_right_behind_an_attach_is_answered_once_the_attach_is_sent(initial: int) -> None:
    pair = Pair(auto_accept_links=False)
    receiver, sender = receiver_first(pair, 3, drain=True)
    assert sender.drain and sender.link_credit == 3
    assert not link_flows(pair.wire_s2c), "nothing is said before the attach"
    sender.delivery_count = initial
    sender.attach()
    pair.pump()
    attach, *_ = performatives(pair.wire_s2c, Attach)
    assert int(attach.initial_delivery_count) == initial
    (answer,) = link_flows(pair.wire_s2c)
    assert int(answer.delivery_count) == serial_add(initial, 3) and int(answer.link_credit) == 0
    assert pair.of(LinkDrained) == [LinkDrained(receiver)]
    assert sender.delivery_count == receiver.delivery_count == serial_add(initial, 3)
    assert sender.link_credit == receiver.link_credit == 0 and not receiver.drain
    receiver.flow(2)
    sender.send(b"after")
    pair.pump()
    assert [bytes(d.payload) for d in pair.deliveries()] == [b"after"]
    assert sender.link_credit == receiver.link_credit == 1


def test_a_drain_behind_an_attach_lets_the_first_sends_use_the_credit() -> None:
    """The application that answers the attach and sends at once uses the drained credit;
    only what is left is given back."""
    pair = Pair(auto_accept_links=False)
    receiver, sender = receiver_first(pair, 3, drain=True)
    sender.attach()
    sender.send(b"one")
    sender.send(b"two")
    pair.pump()
    assert [bytes(d.payload) for d in pair.deliveries()] == [b"one", b"two"]
    assert pair.of(LinkDrained) == [LinkDrained(receiver)]
    assert sender.delivery_count == receiver.delivery_count == 3
    assert sender.link_credit == receiver.link_credit == 0


def test_a_drain_is_answered_after_the_application_sends_on_credit_changed() -> None:
    """A sender that sends on LinkCreditChanged (as the broker does) gets to use the
    drained credit before the engine gives the rest back."""
    pair = Pair()
    sender, receiver = link_pair(pair)
    receiver.flow(5, drain=True)
    events = pair.client.receive_data(pair.server.data_to_send())
    assert [(e.credit, e.drain) for e in events if isinstance(e, LinkCreditChanged)] == [(5, True)]
    sender.send(b"a")
    sender.send(b"b")
    pair.pump()
    assert [bytes(d.payload) for d in pair.deliveries("server")] == [b"a", b"b"]
    assert pair.of(LinkDrained, "server") == [LinkDrained(receiver)]
    assert sender.delivery_count == receiver.delivery_count == 5
    assert sender.link_credit == receiver.link_credit == 0


# -- 8. blocked senders are held once -------------------------------------------------------------


def test_a_sender_blocked_by_the_session_window_is_held_once() -> None:
    """Every send on a link blocked by the remote incoming window used to append the link
    again (quadratic draining); the link is held once however many sends wait."""
    pair = Pair(server_config=ConnectionConfig(container_id="server", incoming_window=10))
    sender, receiver = link_pair(pair)
    receiver.flow(1000)
    pair.pump()
    session = sender.session
    for i in range(1000):
        sender.send(i.to_bytes(2, "big"))
    assert session.remote_incoming_window == 0 and len(sender.queue) == 990
    assert len(session._blocked) == 1
    pair.pump()
    got = [int.from_bytes(d.payload, "big") for d in pair.deliveries("server")]
    assert got == list(range(1000))
    assert len(session._blocked) <= 1


# -- 9. max-message-size (2.7.3) ------------------------------------------------------------------


def test_receivers_advertise_the_default_max_message_size() -> None:
    pair = Pair()
    session = pair.open()
    session.attach_receiver("default", source=Source(address="q"))
    session.attach_receiver("own", source=Source(address="q"), max_message_size=4096)
    session.attach_sender("s", target=Target(address="q"))
    pair.pump()
    attaches = {a.name: a for a in performatives(pair.wire_c2s, Attach)}
    assert attaches["default"].max_message_size == DEFAULT_MAX_MESSAGE_SIZE
    assert attaches["own"].max_message_size == 4096
    # a receiving link the peer attaches gets the connection's default too
    server_receiver = pair.server_link("s", sender=False)
    assert server_receiver.max_message_size == DEFAULT_MAX_MESSAGE_SIZE
    answers = {a.name: a for a in performatives(pair.wire_s2c, Attach)}
    assert answers["s"].max_message_size == DEFAULT_MAX_MESSAGE_SIZE


def test_max_message_size_zero_in_the_config_means_no_limit() -> None:
    pair = Pair(client_config=ConnectionConfig(container_id="client", max_message_size=0))
    session = pair.open()
    receiver = session.attach_receiver("r", source=Source(address="q"))
    pair.pump()
    (attach,) = performatives(pair.wire_c2s, Attach)
    assert attach.max_message_size is None and receiver.max_message_size is None
    with pytest.raises(ValueError):
        ConnectionConfig(max_message_size=-1)


def test_an_endless_multi_frame_delivery_is_refused_not_held() -> None:
    """A peer that sends ``more=true`` frames for ever: the receiver detaches with
    amqp:link:message-size-exceeded once the limit is passed and drops what it held."""
    limit = 20_000
    pair = Pair(server_config=ConnectionConfig(container_id="server", max_message_size=limit))
    sender, receiver = link_pair(pair)
    receiver.flow(1)
    pair.pump()
    channel = sender.session.channel
    chunk = b"x" * 1000
    first = Transfer(handle=UInt(sender.handle), delivery_id=UInt(0), delivery_tag=b"t", more=True)
    pair.server.receive_data(frame(channel, first, chunk))
    frames = 1
    while not receiver.detach_sent and frames < 1000:
        pair.server.receive_data(frame(channel, Transfer(handle=UInt(sender.handle), more=True), chunk))
        frames += 1
    assert frames == limit // len(chunk) + 1
    assert receiver.detach_sent and receiver.error is not None
    assert receiver.error.condition == errors.MESSAGE_SIZE_EXCEEDED
    assert receiver.partial_delivery is None, "the frames held so far are dropped"
    pair.pump()
    (detached,) = pair.of(LinkDetached)
    assert detached.error is not None and detached.error.condition == errors.MESSAGE_SIZE_EXCEEDED


def test_a_message_at_the_limit_is_received() -> None:
    limit = 3000
    pair = Pair(server_config=ConnectionConfig(container_id="server", max_message_size=limit, max_frame_size=512))
    sender, receiver = link_pair(pair)
    receiver.flow(1)
    pair.pump()
    sender.send(b"y" * limit)
    pair.pump()
    (received,) = pair.deliveries("server")
    assert len(received.payload) == limit and not receiver.is_detached


def test_a_sender_refuses_a_message_larger_than_the_receivers_max_message_size() -> None:
    pair = Pair(server_config=ConnectionConfig(container_id="server", max_message_size=100))
    sender, receiver = link_pair(pair)
    assert sender.peer_max_message_size == 100
    with pytest.raises(errors.MessageSizeExceededError, match=r"101 bytes.*max-message-size 100") as caught:
        sender.send(b"z" * 101)
    assert caught.value.condition == errors.MESSAGE_SIZE_EXCEEDED
    assert not sender.queue
    pair.grant_and_send(sender, receiver, 1, 0)
    sender.send(b"z" * 100)
    pair.pump()
    assert len(pair.deliveries("server")) == 1 and not receiver.is_detached


def test_a_server_sets_a_links_max_message_size_before_answering_its_attach() -> None:
    """The hook a broker uses per link: ``link.max_message_size`` set on
    LinkAttachRequested, before ``attach()``, is advertised and enforced."""
    pair = Pair(auto_accept_links=False)
    session = pair.open()
    sender = session.attach_sender("s", target=Target(address="q"))
    pair.pump()
    (request,) = pair.of(LinkAttachRequested, "server")
    receiver = request.link
    assert isinstance(receiver, ReceiverLink)
    receiver.max_message_size = 50
    receiver.attach()
    pair.pump()
    assert sender.peer_max_message_size == 50
    receiver.flow(2)
    pair.pump()
    sender.peer_max_message_size = 0  # a sender that does not check
    sender.send(b"w" * 51)
    pair.pump()
    (detached,) = pair.of(LinkDetached)
    assert detached.error is not None and detached.error.condition == errors.MESSAGE_SIZE_EXCEEDED
    assert not pair.deliveries("server")
