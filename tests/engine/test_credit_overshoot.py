"""A sender that overshoots its link credit (as RabbitMQ 3.x does under load).

"the receiver MAY either handle the excess messages normally or detach the link with
a transfer-limit-exceeded error code" (2.6.7): the engine handles them and counts them.
"""

from __future__ import annotations

from amqplink.engine.events import ConnectionClosed, DeliveryReceived, LinkDetached
from amqplink.engine.link import SenderLink
from amqplink.protocol.definitions import Source

from .pairs import Pair


def test_transfers_beyond_credit_are_delivered_and_counted() -> None:
    pair = Pair()
    session = pair.open()
    receiver = session.attach_receiver("r", source=Source(address="queue"))
    pair.pump()
    sender = pair.server_link("r", sender=True)
    assert isinstance(sender, SenderLink)
    receiver.flow(2)
    pair.pump()
    for i in range(2):
        sender.send(bytes([i]))
    pair.pump()
    assert receiver.excess_transfers == 0 and receiver.link_credit == 0
    sender.link_credit = 3  # the sender believes in credit it was never given
    for i in range(2, 5):
        sender.send(bytes([i]))
    pair.pump()
    assert [bytes(e.delivery.payload) for e in pair.of(DeliveryReceived)] == [bytes([i]) for i in range(5)]
    assert receiver.excess_transfers == 3 and receiver.link_credit == 0
    assert not pair.of(LinkDetached) and not pair.of(LinkDetached, "server")
    assert not pair.of(ConnectionClosed) and receiver.is_attached
    # Both sides counted the excess: a new grant means the same to each.
    receiver.flow(1)
    pair.pump()
    assert sender.link_credit == 1
    sender.send(b"granted")
    pair.pump()
    assert bytes(pair.of(DeliveryReceived)[-1].delivery.payload) == b"granted"
    assert receiver.excess_transfers == 3 and receiver.link_credit == 0
