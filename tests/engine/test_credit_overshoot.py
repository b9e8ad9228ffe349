"""A sender that overshoots its link credit (as RabbitMQ 3.x does under load).

"the receiver MAY either handle the excess messages normally or detach the link with
a transfer-limit-exceeded error code" (2.6.7): by default the engine detaches; with
``on_excess_transfer="deliver"`` it hands them on and counts them.
"""

from __future__ import annotations

from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.events import ConnectionClosed, LinkDetached, SessionEnded
from amqplink.engine.link import ReceiverLink, SenderLink
from amqplink.protocol.definitions import Source

from .pairs import Pair


def _overshooting_pair(on_excess_transfer: str) -> tuple[Pair, ReceiverLink, SenderLink]:
    pair = Pair(ConnectionConfig(container_id="client", on_excess_transfer=on_excess_transfer))  # type: ignore[arg-type]
    session = pair.open()
    receiver = session.attach_receiver("r", source=Source(address="queue"))
    pair.pump()
    sender = pair.server_link("r", sender=True)
    assert isinstance(sender, SenderLink)
    return pair, receiver, sender


def test_transfer_beyond_every_grant_detaches_with_transfer_limit_exceeded() -> None:
    pair, receiver, sender = _overshooting_pair("detach")
    pair.grant_and_send(sender, receiver, 2, 2)
    assert len(pair.deliveries()) == 2 and receiver.link_credit == 0
    sender.link_credit = 1  # the sender believes in credit it was never given
    sender.send(b"excess")
    pair.pump()
    assert len(pair.deliveries()) == 2  # the excess delivery is not handed on
    (detached,) = pair.of(LinkDetached, "server")
    assert detached.error is not None and detached.error.condition == "amqp:link:transfer-limit-exceeded"
    assert "delivery-id 2" in (detached.error.description or "")
    assert not receiver.is_attached
    # Only the link ends: the session and the connection stay up.
    assert not pair.of(SessionEnded) and not pair.of(ConnectionClosed)


def test_transfer_within_an_earlier_higher_grant_is_legal() -> None:
    # The sender may act on a grant it saw before a lower one crossed it on the wire.
    pair, receiver, sender = _overshooting_pair("detach")
    receiver.flow(5)
    pair.pump()
    receiver.flow(1)  # lowered; the sender has not seen it yet
    for i in range(4):
        sender.send(bytes([i]))
    pair.pump()
    assert len(pair.deliveries()) == 4 and receiver.is_attached
    assert not pair.of(LinkDetached, "server")


def test_transfers_beyond_credit_are_delivered_and_counted() -> None:
    pair, receiver, sender = _overshooting_pair("deliver")
    pair.grant_and_send(sender, receiver, 2, 2)
    assert receiver.excess_transfers == 0 and receiver.link_credit == 0
    sender.link_credit = 3  # the sender believes in credit it was never given
    for i in range(2, 5):
        sender.send(bytes([i]))
    pair.pump()
    assert [bytes(d.payload) for d in pair.deliveries()] == [bytes([i]) for i in range(5)]
    assert receiver.excess_transfers == 3 and receiver.link_credit == 0
    assert not pair.of(LinkDetached) and not pair.of(LinkDetached, "server")
    assert not pair.of(ConnectionClosed) and receiver.is_attached
    # Both sides counted the excess: a new grant means the same to each.
    receiver.flow(1)
    pair.pump()
    assert sender.link_credit == 1
    sender.send(b"granted")
    pair.pump()
    assert bytes(pair.deliveries()[-1].payload) == b"granted"
    assert receiver.excess_transfers == 3 and receiver.link_credit == 0
