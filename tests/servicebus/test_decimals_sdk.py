"""Decimals between the official SDK and our client, through the broker (docs/protocol.md#decimals).

The SDK sends a ``decimal.Decimal`` as the standard decimal128, which the broker delivers so
to our client: it reads a ``decimal.Decimal``. Our client sends one the same way; the broker
writes it in Service Bus's layout for the SDK (as the service does), which the SDK reads as
a ``decimal.Decimal`` (right up to 32 bits of coefficient: it misreads wider ones from
Service Bus too).
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest
from azure.servicebus import ServiceBusClient as SdkClient
from azure.servicebus import ServiceBusMessage as SdkMessage
from azure.servicebus import ServiceBusReceiveMode, ServiceBusReceiver, ServiceBusSender
from azure.servicebus.amqp import AmqpAnnotatedMessage as SdkAnnotated
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from amqplink.servicebus import ServiceBusReceiveMode as ReceiveMode
from tests import profiles
from tests.broker.sdkutil import running_broker
from tests.broker.typesutil import decimal_tuples, dotnet_numbers


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker() as b:
        yield b


@pytest.fixture(scope="module")
def sdk(broker: Broker) -> Iterator[SdkClient]:
    with SdkClient.from_connection_string(broker.connection_string) as c:
        yield c


@pytest.fixture(scope="module")
def ours(broker: Broker) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(broker.connection_string) as c:
        yield c


# One SDK sender and receiver for all examples: the SDK takes half a second to open or close one.
@pytest.fixture(scope="module")
def sdk_sender(sdk: SdkClient) -> Iterator[ServiceBusSender]:
    with sdk.get_queue_sender("sdk-to-ours") as sender:
        yield sender


@pytest.fixture(scope="module")
def sdk_receiver(sdk: SdkClient) -> Iterator[ServiceBusReceiver]:
    with sdk.get_queue_receiver("ours-to-sdk", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        yield receiver


def _props(numbers: list[Decimal]) -> dict[str, Decimal]:
    return {f"d{i}": number for i, number in enumerate(numbers)}


@settings(profiles.HEAVY, deadline=None)
@given(st.lists(dotnet_numbers(), min_size=1, max_size=6))
def test_what_the_sdk_sends_our_client_reads_as_decimals(
    sdk_sender: ServiceBusSender, ours: ServiceBusClient, numbers: list[Decimal]
) -> None:
    sdk_sender.send_messages(SdkMessage("x", application_properties=_props(numbers)))
    # (a list body: the SDK sends no body for a false one, Decimal(0) among them)
    sdk_sender.send_messages(SdkAnnotated(value_body=numbers, annotations={"x-d": numbers[-1]}))
    expected = {f"d{i}".encode(): number.as_tuple() for i, number in enumerate(numbers)}
    with ours.get_queue_receiver("sdk-to-ours", receive_mode=ReceiveMode.RECEIVE_AND_DELETE) as receiver:
        peeked = receiver.peek_messages(max_message_count=5)
        got = receiver.receive_messages(max_message_count=2, max_wait_time=10)
        if len(got) < 2:
            got += receiver.receive_messages(max_message_count=2 - len(got), max_wait_time=10)
    assert len(peeked) == len(got) == 2
    for message in (peeked[0], got[0]):
        assert decimal_tuples(message.application_properties) == expected
    for message in (peeked[1], got[1]):
        raw = message.raw_amqp_message
        assert [v.as_tuple() for v in raw.body] == [number.as_tuple() for number in numbers]
        assert raw.annotations is not None and raw.annotations[b"x-d"].as_tuple() == numbers[-1].as_tuple()


@settings(profiles.HEAVY, deadline=None)
@given(st.lists(dotnet_numbers(32), min_size=1, max_size=6))
def test_what_our_client_sends_the_sdk_reads_as_decimals(
    ours: ServiceBusClient, sdk_receiver: ServiceBusReceiver, numbers: list[Decimal]
) -> None:
    with ours.get_queue_sender("ours-to-sdk") as sender:
        sender.send_messages(ServiceBusMessage("x", application_properties=_props(numbers)))
    expected = {f"d{i}".encode(): number.as_tuple() for i, number in enumerate(numbers)}
    (peeked,) = sdk_receiver.peek_messages(max_message_count=5)  # (from the last one it peeked)
    (got,) = sdk_receiver.receive_messages(max_message_count=1, max_wait_time=10)
    for message in (peeked, got):
        assert decimal_tuples(message.application_properties) == expected
