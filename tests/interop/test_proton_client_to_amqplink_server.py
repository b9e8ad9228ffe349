"""qpid-proton's client against amqplink's engine in the server role (the embedded broker)."""

from __future__ import annotations

import uuid

from proton import Message as PMessage
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection

from amqplink import Message
from amqplink.broker import Broker


def _link_name() -> str:
    return f"proton-{uuid.uuid4()}"


def test_proton_sends_and_receives_through_the_embedded_broker(embedded_broker: Broker) -> None:
    conn = BlockingConnection(embedded_broker.url, timeout=10)
    try:
        sender = conn.create_sender("q", name=_link_name())
        for i in range(50):
            sender.send(
                PMessage(
                    body=f"m{i}".encode(),
                    inferred=True,
                    id=f"id-{i}",
                    subject="s",
                    group_id="g",
                    properties={"i": i},
                    annotations={"x-opt-partition-key": "pk"},
                )
            )
        receiver = conn.create_receiver("q", name=_link_name(), credit=10)
        for i in range(50):
            got = receiver.receive(timeout=10)
            assert bytes(got.body) == f"m{i}".encode()
            assert got.id == f"id-{i}" and got.subject == "s" and got.group_id == "g"
            assert got.properties == {"i": i} and got.annotations == {"x-opt-partition-key": "pk"}
            receiver.accept()
        assert len(embedded_broker.queue("q")) == 0
    finally:
        conn.close()


def test_proton_release_is_redelivered_and_presettled_sends_arrive(embedded_broker: Broker) -> None:
    conn = BlockingConnection(embedded_broker.url, timeout=10)
    try:
        sender = conn.create_sender("r", name=_link_name(), options=AtMostOnce())
        sender.send(PMessage(body=b"once", inferred=True))
        sender.send(PMessage(body=b"twice", inferred=True))
        receiver = conn.create_receiver("r", name=_link_name(), credit=1)
        first = receiver.receive(timeout=10)
        assert bytes(first.body) == b"once"
        receiver.release()
        again = receiver.receive(timeout=10)
        assert bytes(again.body) in (b"once", b"twice")
        receiver.accept()
        last = receiver.receive(timeout=10)
        receiver.accept()
        assert {bytes(again.body), bytes(last.body)} == {b"once", b"twice"}
    finally:
        conn.close()


def test_one_mebibyte_from_proton_is_reassembled_by_the_engine(embedded_broker: Broker) -> None:
    body = bytes(range(256)) * 4096
    conn = BlockingConnection(embedded_broker.url, timeout=20)
    try:
        conn.create_sender("big", name=_link_name()).send(PMessage(body=body, inferred=True))
    finally:
        conn.close()
    [payload] = embedded_broker.queue("big").messages
    message = Message.decode(payload)
    assert message.body == body
