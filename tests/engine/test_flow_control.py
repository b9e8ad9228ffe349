"""Flow control exactly per spec: session windows (2.5.6), link credit, delivery-count,
drain and echo (2.6.7)."""

from __future__ import annotations

import pytest

from amqplink.codec.types import UInt
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.events import (
    DeliveriesReceived,
    LinkAttachRequested,
    LinkCreditChanged,
    LinkDrained,
    SessionEnded,
)
from amqplink.engine.link import ReceiverLink, SenderLink
from amqplink.engine.serial import serial_add
from amqplink.protocol.definitions import Flow, Source, Target, Transfer

from .pairs import Pair, frame, frames_in, performatives


def link_pair(pair: Pair) -> tuple[SenderLink, ReceiverLink]:
    session = pair.open()
    sender = session.attach_sender("q", target=Target(address="q"))
    pair.pump()
    receiver = pair.server_link("q", sender=False)
    assert isinstance(receiver, ReceiverLink)
    return sender, receiver


# -- session windows (2.5.6) -----------------------------------------------------------------


def test_sender_keeps_within_the_receivers_incoming_window() -> None:
    """ "remote-incoming-window ... MUST be decremented after every transfer frame is sent":
    no more transfer frames are in flight than the receiver's window allows, counting
    each frame of a split delivery."""
    pair = Pair(server_config=ConnectionConfig(container_id="server", incoming_window=4, max_frame_size=512))
    sender, receiver = link_pair(pair)
    receiver.flow(100)
    pair.pump()
    for i in range(30):
        sender.send(bytes([i]) * (1200 if i % 3 == 0 else 10))  # every third one takes 3 frames
    rounds = received = 0
    while True:
        c2s = pair.client.data_to_send()
        if not c2s:
            break
        rounds += 1
        transfers = [p for _, p, _ in frames_in([c2s]) if isinstance(p, Transfer)]
        assert len(transfers) <= 4
        for event in pair.server.receive_data(c2s):
            assert not isinstance(event, SessionEnded), event
            received += len(event.deliveries) if isinstance(event, DeliveriesReceived) else 0
        pair.client.receive_data(pair.server.data_to_send())
    assert received == 30 and not sender.queue
    assert rounds >= 50 // 4  # 50 frames, at most 4 a round


def test_remote_incoming_window_is_computed_from_the_flow() -> None:
    """ "remote-incoming-window = next-incoming-id(flow) + incoming-window(flow) -
    next-outgoing-id(endpoint)"; without next-incoming-id, initial-outgoing-id is used."""
    pair = Pair()
    sender, receiver = link_pair(pair)
    pair.grant_and_send(sender, receiver, 10, 3)
    session = sender.session
    assert session.next_outgoing_id == 3
    flow = Flow(next_incoming_id=UInt(2), incoming_window=UInt(7), next_outgoing_id=UInt(0), outgoing_window=UInt(9))
    pair.client.receive_data(frame(session.remote_channel or 0, flow))
    assert session.remote_incoming_window == 2 + 7 - 3
    assert session.remote_outgoing_window == 9
    flow = Flow(incoming_window=UInt(7), next_outgoing_id=UInt(0), outgoing_window=UInt(9))
    pair.client.receive_data(frame(session.remote_channel or 0, flow))
    assert session.remote_incoming_window == 0 + 7 - 3


def test_next_incoming_id_follows_the_peers_flow() -> None:
    """ "it MUST update the next-incoming-id directly from the next-outgoing-id of the frame" (2.5.6)."""
    pair = Pair()
    session = pair.open()
    flow = Flow(next_incoming_id=UInt(0), incoming_window=UInt(7), next_outgoing_id=UInt(41), outgoing_window=UInt(9))
    pair.client.receive_data(frame(0, flow))
    assert session.next_incoming_id == 41


def test_session_flow_with_echo_is_answered_with_the_session_state() -> None:
    pair = Pair()
    session = pair.open()
    pair.client.data_to_send()
    flow = Flow(
        next_incoming_id=UInt(0), incoming_window=UInt(7), next_outgoing_id=UInt(0), outgoing_window=UInt(9), echo=True
    )
    pair.client.receive_data(frame(0, flow))
    (answer,) = performatives([pair.client.data_to_send()], Flow)
    assert answer.handle is None and not answer.echo
    assert int(answer.incoming_window) == session.incoming_window
    assert int(answer.next_outgoing_id) == session.next_outgoing_id
    assert int(answer.next_incoming_id) == session.next_incoming_id


# -- link credit and delivery-count (2.6.7) --------------------------------------------------


def test_a_grant_that_crosses_transfers_counts_from_the_receivers_delivery_count() -> None:
    """ "link-credit(snd) := delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)":
    a new grant made before in-flight transfers arrive does not add to them."""
    pair = Pair()
    sender, receiver = link_pair(pair)
    receiver.flow(5)
    pair.pump()
    for i in range(3):
        sender.send(bytes([i]))
    in_flight = pair.client.data_to_send()
    receiver.flow(5)  # the receiver has seen none of the 3: its delivery-count is still 0
    pair.client.receive_data(pair.server.data_to_send())
    assert sender.link_credit == 5 - 3
    for i in range(10):
        sender.send(bytes([i]))
    pair.server_events += pair.server.receive_data(in_flight)
    pair.pump()
    assert len(pair.deliveries("server")) == 5
    assert receiver.excess_transfers == 0 and receiver.link_credit == 0
    assert sender.delivery_count == receiver.delivery_count == 5


def test_delivery_count_wraps_around_as_a_serial_number() -> None:
    """ "delivery-count ... sequence-no" is an RFC-1982 serial number (2.8.9)."""
    pair = Pair(auto_accept_links=False)
    session = pair.open()
    receiver = session.attach_receiver("r", source=Source(address="q"))
    pair.pump()
    sender = pair.of(LinkAttachRequested, "server")[0].link
    assert isinstance(sender, SenderLink)
    sender.delivery_count = 2**32 - 2
    sender.attach()
    pair.pump()
    assert receiver.delivery_count == 2**32 - 2
    receiver.flow(5)
    pair.pump()
    assert sender.link_credit == 5
    for i in range(7):
        sender.send(bytes([i]))
    pair.pump()
    assert len(pair.deliveries()) == 5
    assert sender.delivery_count == receiver.delivery_count == serial_add(2**32 - 2, 5) == 3
    assert sender.link_credit == receiver.link_credit == 0 and receiver.excess_transfers == 0
    receiver.flow(2)
    pair.pump()
    assert len(pair.deliveries()) == 7 and not sender.queue


# -- drain (2.6.7) ---------------------------------------------------------------------------


def test_drain_ends_when_transfers_use_up_the_credit() -> None:
    """With more to send than credit, the sender uses it all: the drain is over when the
    last credited delivery arrives, without a flow from the sender."""
    pair = Pair()
    sender, receiver = link_pair(pair)
    for i in range(5):
        sender.send(bytes([i]))
    receiver.flow(2, drain=True)
    pair.pump()
    events = [e for e in pair.server_events if isinstance(e, DeliveriesReceived | LinkDrained)]
    assert [type(e) for e in events] == [DeliveriesReceived, LinkDrained]  # the drain ends the run
    assert [bytes(d.payload) for d in pair.deliveries("server")] == [b"\x00", b"\x01"]
    assert not receiver.drain and receiver.link_credit == 0
    assert len(sender.queue) == 3
    assert not [f for f in performatives(pair.wire_c2s, Flow) if f.handle is not None]


def test_drain_of_a_split_delivery_ends_when_its_last_frame_arrives() -> None:
    pair = Pair(server_config=ConnectionConfig(container_id="server", max_frame_size=512))
    sender, receiver = link_pair(pair)
    sender.send(b"b" * 3000)
    sender.send(b"next")
    receiver.flow(1, drain=True)
    pair.pump()
    kinds = [type(e) for e in pair.server_events if isinstance(e, DeliveriesReceived | LinkDrained)]
    assert kinds == [DeliveriesReceived, LinkDrained]
    assert [len(d.payload) for d in pair.deliveries("server")] == [3000]


def test_drain_with_no_credit_is_over_at_once() -> None:
    pair = Pair()
    sender, receiver = link_pair(pair)
    receiver.flow(0, drain=True)
    assert pair.server.take_events() == [LinkDrained(receiver)]
    assert not receiver.drain
    pair.pump()
    assert sender.link_credit == 0


def test_drain_with_nothing_queued_advances_delivery_count() -> None:
    """ "If the sender's drain flag is set and there are no available messages, the
    sender MUST advance the delivery-count until link-credit is zero, and send its
    updated flow state to the receiver." (2.6.7)"""
    pair = Pair()
    sender, receiver = link_pair(pair)
    receiver.flow(7, drain=True)
    pair.pump()
    (answer,) = [f for f in performatives(pair.wire_c2s, Flow) if f.handle is not None]
    assert int(answer.delivery_count) == 7 and int(answer.link_credit) == 0
    assert sender.delivery_count == receiver.delivery_count == 7 and sender.link_credit == 0
    assert pair.of(LinkDrained, "server") == [LinkDrained(receiver)]
    assert [(e.credit, e.drain) for e in pair.of(LinkCreditChanged)] == [(7, True)]


# -- echo (2.6.7) ----------------------------------------------------------------------------


def test_receiver_echo_is_answered_by_the_sender_with_its_state() -> None:
    """ "echo: request state from partner" (2.7.4): the sender answers with its own flow."""
    pair = Pair()
    sender, receiver = link_pair(pair)
    receiver.flow(2)
    pair.pump()
    sender.send(b"a")
    pair.pump()
    before = len(performatives(pair.wire_c2s, Flow))
    receiver.flow(4, echo=True)
    pair.pump()
    answers = performatives(pair.wire_c2s, Flow)[before:]
    assert len(answers) == 1
    (answer,) = answers
    assert int(answer.handle) == sender.handle and not answer.echo
    assert int(answer.delivery_count) == 1 and int(answer.link_credit) == 4


def test_sender_echo_is_answered_by_the_receiver() -> None:
    pair = Pair()
    sender, receiver = link_pair(pair)
    receiver.flow(3)
    pair.pump()
    before = len(performatives(pair.wire_s2c, Flow))
    sender._send_flow(echo=True)
    pair.pump()
    (answer,) = performatives(pair.wire_s2c, Flow)[before:]
    assert int(answer.handle) == receiver.handle and int(answer.link_credit) == 3 and not answer.echo


# -- available (2.7.4) -----------------------------------------------------------------------


def test_sender_announces_available_as_queued_plus_backlog() -> None:
    """ "available: the number of messages awaiting credit at the link sender endpoint" (2.7.4)."""
    pair = Pair()
    sender, receiver = link_pair(pair)
    for i in range(3):
        sender.send(bytes([i]))  # no credit yet: all three wait
    sender.announce_available(10)
    pair.pump()
    assert receiver.available == 13
    receiver.flow(2, echo=True)  # two go out; the echo answer reports what still waits
    pair.pump()
    assert len(pair.deliveries("server")) == 2
    assert receiver.available == 11
    with pytest.raises(ValueError):
        sender.announce_available(-1)
