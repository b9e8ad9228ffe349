"""Clients no one here wrote against the embedded broker: qpid-proton's drain and its
SASL-less connection (items 21, 23), azure-servicebus's low-level ``SendClient``
with its default settle modes (item 22)."""

from __future__ import annotations

import uuid

from proton import Message as PMessage
from proton.utils import BlockingConnection

from amqplink.broker import Broker


def _name() -> str:
    return f"peer-{uuid.uuid4()}"


def test_proton_drain_gets_what_is_queued_before_the_broker_answers(embedded_broker: Broker) -> None:
    """ "drain: ... the sender ... MUST either use all the available credit or ... advance
    the delivery-count" (2.6.7): what is queued is used first."""
    conn = BlockingConnection(embedded_broker.url, timeout=10)
    try:
        sender = conn.create_sender("drained", name=_name())
        for i in range(3):
            sender.send(PMessage(body=f"d{i}"))
        receiver = conn.create_receiver("drained", name=_name(), credit=0)
        fetched = receiver.fetcher.incoming  # type: ignore[union-attr]
        receiver.link.drain(10)
        # Credit falls to 0 only with the broker's answer (its flow follows the transfers).
        conn.wait(lambda: receiver.link.credit == 0, msg="drain", timeout=10)
        assert len(fetched) == 3
        got = [receiver.receive(timeout=1).body for _ in range(3)]
        assert got == ["d0", "d1", "d2"]
        receiver.accept()
        assert len(embedded_broker.queue("drained")) == 0
        # A drain with nothing queued is answered at once, with no message.
        receiver.link.drain(5)
        conn.wait(lambda: receiver.link.credit == 0, msg="empty drain", timeout=10)
        assert not fetched
    finally:
        conn.close()


def test_proton_without_sasl_connects_sends_and_receives(embedded_broker: Broker) -> None:
    conn = BlockingConnection(embedded_broker.url, timeout=10, sasl_enabled=False)
    try:
        conn.create_sender("no-sasl", name=_name()).send(PMessage(body=b"plain", inferred=True))
        receiver = conn.create_receiver("no-sasl", name=_name(), credit=1)
        assert bytes(receiver.receive(timeout=10).body) == b"plain"
        receiver.accept()
    finally:
        conn.close()


def test_azure_servicebus_pyamqp_send_client_with_its_defaults(embedded_broker: Broker) -> None:
    """The SDK's ``SendClient`` asks rcv-settle-mode second and waits for a settled
    outcome: the broker answers ``first`` and settles each message as it stores it."""
    from azure.servicebus._pyamqp import SendClient
    from azure.servicebus._pyamqp.authentication import SASLPlainAuth
    from azure.servicebus._pyamqp.message import Message as PAMessage
    from azure.servicebus._pyamqp.sasl import SASLAnonymousCredential

    class Anonymous(SASLPlainAuth):  # type: ignore[misc]
        def __init__(self) -> None:
            self.sasl = SASLAnonymousCredential()

    hostport = embedded_broker.url.split("://", 1)[1]
    client = SendClient(hostport, target=f"amqp://{hostport}/sdk", auth=Anonymous(), use_tls=False)
    client.open()
    try:
        for i in range(3):
            client.send_message(PAMessage(data=[b"sdk-%d" % i]), timeout=10)
    finally:
        client.close()
    assert len(embedded_broker.queue(f"amqp://{hostport}/sdk")) == 3
