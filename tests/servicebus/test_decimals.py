"""The Service Bus client gives a decimal as a ``decimal.Decimal``, as the SDK does, in either
layout it may arrive in (docs/protocol.md#decimals): the standard one the broker sends this
client, and Service Bus's, which the service writes (and the broker, to a connection that
names the official SDK's product: the stand-in for the service here). It sends one as the
standard decimal128, which the broker (as Service Bus) keeps.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.codec import Decimal32, Decimal64, Decimal128, Symbol
from amqplink.message import Message
from amqplink.sbwire.decimals import PYTHON_SDK_PRODUCT, in_servicebus_layout, servicebus_decimal128
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from amqplink.servicebus import holder as holder_module
from amqplink.servicebus.amqp import AmqpAnnotatedMessage
from amqplink.servicebus.client_options import connection_properties
from tests import profiles
from tests.broker.sdkutil import running_broker
from tests.broker.typesutil import decimal_tuples, dotnet_numbers


# -- the client alone --------------------------------------------------------------------------
def _received(message: Message) -> ServiceBusReceivedMessage:
    return ServiceBusReceivedMessage.from_bytes(message.encode())


def test_a_received_decimal_in_either_layout_is_a_python_decimal_in_every_section() -> None:
    standard = Decimal128.from_decimal("-12.50")
    servicebus = servicebus_decimal128(standard)
    body = [standard, servicebus, Decimal32.from_decimal("7"), Decimal64.from_decimal("0.5")]
    message = Message(body, body_type="value")
    message.application_properties = {"standard": standard, "servicebus": servicebus}
    message.message_annotations = {Symbol("x-d"): servicebus}
    message.footer = {Symbol("f"): standard}
    got = _received(message)
    expected = Decimal("-12.50").as_tuple()
    assert decimal_tuples(got.application_properties) == {b"standard": expected, b"servicebus": expected}
    raw = got.raw_amqp_message
    assert decimal_tuples(raw.application_properties) == {b"standard": expected, b"servicebus": expected}
    assert raw.annotations is not None and raw.annotations[b"x-d"].as_tuple() == expected
    assert raw.footer is not None and raw.footer[b"f"].as_tuple() == expected
    assert [v.as_tuple() for v in raw.body] == [expected, expected, Decimal(7).as_tuple(), Decimal("0.5").as_tuple()]
    assert got.amqplink_message.application_properties == {"standard": standard, "servicebus": servicebus}  # the bytes


def test_a_sent_decimal_goes_out_as_the_standard_decimal128() -> None:
    message = ServiceBusMessage("x", application_properties={"d": Decimal("1.50")})
    assert message.application_properties == {"d": Decimal("1.50")}  # as given, as the SDK's
    sent = Message.decode(message.amqplink_message.encode()).application_properties
    assert sent == {"d": Decimal128.from_decimal("1.50")} and not in_servicebus_layout(sent["d"])
    annotated = AmqpAnnotatedMessage(value_body=Decimal("2.5"), annotations={"x-d": Decimal("-1")})
    decoded = Message.decode(annotated._outgoing().encode())
    assert decoded.body == Decimal128.from_decimal("2.5")
    assert decoded.message_annotations == {Symbol("x-d"): Decimal128.from_decimal("-1")}


# -- through the broker ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker() as b:
        yield b


@pytest.fixture(scope="module", params=["standard", "servicebus"])
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def client(broker: Broker, layout: str) -> Iterator[ServiceBusClient]:
    """Our client; for ``servicebus``, one whose open names the SDK's product, so that the
    broker writes decimal application properties in Service Bus's layout, as the service does."""
    with pytest.MonkeyPatch.context() as patch:
        if layout == "servicebus":
            patch.setattr(
                holder_module,
                "connection_properties",
                lambda user_agent=None: {**connection_properties(user_agent), Symbol("product"): PYTHON_SDK_PRODUCT},
            )
        made = ServiceBusClient.from_connection_string(broker.connection_string)
    with made as c:
        yield c


@settings(profiles.HEAVY, deadline=None)
@given(st.lists(st.tuples(dotnet_numbers(), st.booleans()), min_size=1, max_size=6))
@example([(Decimal("0"), False), (Decimal("-0.00"), True), (Decimal(2**96 - 1).scaleb(-28), False),
          (Decimal("1E-28"), True), (Decimal(2**96 - 1), False)])  # fmt: skip
@example([(Decimal("-12.50"), True)])  # Service Bus's layout, as a sender may pass it on: was refused
def test_decimals_round_trip_through_the_broker_received_peeked_and_deferred(
    client: ServiceBusClient, layout: str, numbers: list[tuple[Decimal, bool]]
) -> None:
    """Each number sent as a ``decimal.Decimal`` (the standard decimal128 goes out) or, when
    its flag is set, as the decimal128 Service Bus writes; received as the number either way,
    in the layout it was sent in, or in Service Bus's for a receiver that reads only that."""
    queue = f"dec-{uuid.uuid4().hex[:12]}"
    props = {
        f"d{i}": servicebus_decimal128(Decimal128.from_decimal(number)) if theirs else number
        for i, (number, theirs) in enumerate(numbers)
    }
    expected = {f"d{i}".encode(): number.as_tuple() for i, (number, _) in enumerate(numbers)}
    sent_layout = {f"d{i}": theirs or layout == "servicebus" for i, (_, theirs) in enumerate(numbers)}
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("x", application_properties=props))
    with client.get_queue_receiver(queue, max_wait_time=10) as receiver:
        (peeked,) = receiver.peek_messages(max_message_count=5)
        (got,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
        receiver.defer_message(got)
        assert got.sequence_number is not None
        (deferred,) = receiver.receive_deferred_messages([got.sequence_number])
        receiver.complete_message(deferred)
    for message in (peeked, got, deferred):
        assert decimal_tuples(message.application_properties) == expected
        wire = message.amqplink_message.application_properties
        assert wire is not None and {k: in_servicebus_layout(v) for k, v in wire.items()} == sent_layout
