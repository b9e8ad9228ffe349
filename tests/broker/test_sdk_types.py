"""Issue 30, item 2, as the official SDK met it: a ``decimal.Decimal`` application property.

The SDK writes a decimal128 in the standard layout and reads one only in Service Bus's
(amqplink/sbwire/decimals.py); the broker delivered the bytes it was sent, so the message
was acknowledged and then never reached the application: ``peek_messages`` raised,
``receive_messages`` returned nothing while the message stayed locked. Now every delivery
and peek to the SDK carries the decimal as Service Bus does (the SDK's own live test,
``test_message_property``, passes), other receivers get the sender's bytes, and a decimal
Service Bus cannot hold is refused at the send.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.exceptions import ServiceBusError

import amqplink.sync
from amqplink.broker import Broker
from amqplink.codec import Decimal128
from amqplink.message import Message
from amqplink.sbwire.decimals import servicebus_decimal128
from tests.broker.sdkutil import running_broker


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker() as b:
        yield b


@pytest.fixture()
def client(broker: Broker) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(broker.connection_string) as c:
        yield c


def _send(client: ServiceBusClient, queue: str, **properties: object) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("hello", application_properties=properties))


def test_the_sdks_own_message_property_test(client: ServiceBusClient) -> None:
    # azure-servicebus 7.15 tests/test_message.py::test_message_property (a live test)
    _send(client, "props", prop="test", intprop=1, byteprop=b"byte", decimalprop=decimal.Decimal("1.2345"))
    with client.get_queue_receiver("props", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        (incoming,) = receiver.receive_messages(max_wait_time=10)
    assert incoming.application_properties[b"prop"] == b"test"
    assert incoming.application_properties[b"intprop"] == 1
    assert incoming.application_properties[b"byteprop"] == b"byte"
    assert incoming.application_properties[b"decimalprop"] == decimal.Decimal("1.2345")


@pytest.mark.parametrize("value", ["1.5", "-0.001", "0", "4294967295", "1E+5", "123.4567890123456789012345678"])
def test_a_decimal_is_peeked_received_and_completed(client: ServiceBusClient, broker: Broker, value: str) -> None:
    queue = f"dec-{value}"
    _send(client, queue, d=decimal.Decimal(value))
    with client.get_queue_receiver(queue) as receiver:
        (peeked,) = receiver.peek_messages(max_message_count=5)
        (got,) = receiver.receive_messages(max_wait_time=10)
        if len(decimal.Decimal(value).as_tuple().digits) <= 9:  # pyamqp reads 32 bits of coefficient right
            assert peeked.application_properties[b"d"] == decimal.Decimal(value)
            assert got.application_properties[b"d"] == decimal.Decimal(value)
        receiver.complete_message(got)
    assert len(broker.namespace.receiver_source(queue).store) == 0


def test_other_receivers_get_the_decimal_as_it_was_sent(client: ServiceBusClient, broker: Broker) -> None:
    _send(client, "dec-ours", d=decimal.Decimal("1.5"))
    with amqplink.sync.connect(broker.url) as conn:
        receiver = conn.create_receiver("dec-ours", prefetch=1)
        (got,) = receiver.receive(1, timeout=10)
        receiver.accept(got)
    value = got.application_properties["d"]  # type: ignore[index]
    assert type(value) is Decimal128 and value == Decimal128.from_decimal("1.5")  # the standard layout


def test_a_decimal_sent_in_service_buss_layout_reaches_the_sdk_as_the_number(
    client: ServiceBusClient, broker: Broker
) -> None:
    # a sender passing on what Service Bus delivered it: was refused as a number below 1E-4579
    value = servicebus_decimal128(Decimal128.from_decimal("-12.5"))
    with amqplink.sync.connect(broker.url) as conn:
        conn.create_sender("dec-theirs").send(Message("x", application_properties={"d": value}), timeout=10)
    with client.get_queue_receiver("dec-theirs") as receiver:
        (peeked,) = receiver.peek_messages(max_message_count=5)
        (got,) = receiver.receive_messages(max_wait_time=10)
        receiver.complete_message(got)
    assert peeked.application_properties[b"d"] == got.application_properties[b"d"] == decimal.Decimal("-12.5")


@pytest.mark.parametrize("value", ["1E-29", "79228162514264337593543950336"])  # 29 places; 2**96
def test_a_decimal_service_bus_cannot_hold_is_refused_at_the_send(
    client: ServiceBusClient, broker: Broker, value: str
) -> None:
    queue = f"dec-refused-{len(value)}"
    with pytest.raises(ServiceBusError, match=r"application property .d.*amqp:decode-error"):
        _send(client, queue, d=decimal.Decimal(value))
    assert len(broker.namespace.receiver_source(queue).store) == 0
