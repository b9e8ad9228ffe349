"""What the broker cannot keep or deliver it refuses at the transfer, naming the field
(issue 30, item 2): ``amqp:decode-error``, nothing stored; and a message it fails to write
for a delivery or a peek is given back, never lost (amqplink/broker/namespace/storable.py,
unwritable.py; docs/broker-semantics.md#what-is-refused-at-the-transfer)."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.aio import connect
from amqplink.aio.errors import LinkDetachedError
from amqplink.aio.request_response import RequestResponseLink
from amqplink.broker import Broker
from amqplink.broker.namespace import BATCH_FORMAT, Entity, EntityError, Namespace
from amqplink.broker.namespace.decimals import servicebus_decimals
from amqplink.broker.namespace.envelope import Envelope
from amqplink.codec import AMQPType, Array, Decimal32, Decimal64, Decimal128, Described, Long, Symbol, ULong
from amqplink.message import Message
from amqplink.protocol.definitions import ApplicationProperties, MessageAnnotations, Properties, Rejected
from amqplink.sbwire.decimals import dotnet_decimal, in_servicebus_layout, read_decimal, servicebus_decimal128
from tests.broker.nsutil import T0

DATA = b"\x00\x53\x75\xa0\x01x"
"""A body: one data section."""


def with_application(properties: dict[Any, Any]) -> bytes:
    out = bytearray()
    ApplicationProperties(properties)._amqp_encode(out)
    return bytes(out) + DATA


def with_annotations(annotations: dict[Any, Any]) -> bytes:
    out = bytearray()
    MessageAnnotations(annotations)._amqp_encode(out)
    return bytes(out) + DATA


def with_properties(**fields: Any) -> bytes:
    out = bytearray()
    Properties(**fields)._amqp_encode(out)
    return bytes(out) + DATA


def refused(payload: bytes, *, address: str = "q", message_format: int = 0) -> str:
    """The description of the decode-error refusal of ``payload`` sent to ``address``; the
    queue holds nothing after it."""
    ns = Namespace()
    target = ns.sender_target(address)
    with pytest.raises(EntityError) as refusal:
        ns.send(target, payload, T0, message_format)
    assert refusal.value.condition == "amqp:decode-error"
    assert len(ns.receiver_source(address).store) == 0
    return refusal.value.description


_not_simple = st.one_of(
    st.just([1, 2]),
    st.just({"a": 1}),
    st.just(Array([Symbol("a")], AMQPType.SYMBOL)),
    st.just(Described(Symbol("x:list"), [1])),
    st.sampled_from(["NaN", "-Infinity", "1E-29", str(2**96), "1E+80"]).flatmap(
        lambda text: st.sampled_from(
            [kind.from_decimal(text) for kind in (Decimal32, Decimal64, Decimal128) if _holds(kind, text)]
        )
    ),
)


def _holds(kind: type, text: str) -> bool:
    try:
        kind.from_decimal(text)
    except ValueError:
        return False
    return True


@given(
    key=st.text(min_size=1, max_size=8),
    value=_not_simple,
    others=st.dictionaries(st.text(max_size=4), st.integers(-(2**63), 2**63 - 1), max_size=3),
)
def test_an_application_property_the_broker_cannot_keep_is_refused_naming_it(
    key: str, value: Any, others: dict[str, int]
) -> None:
    properties = {**others, key: value}
    description = refused(with_application(properties))
    assert f"application property {key!r}" in description and "'q'" in description


def test_a_batch_holding_one_such_message_is_refused_whole() -> None:
    inner = [Message(b"ok").encode(), with_application({"d": Decimal128.from_decimal("NaN")})]
    payload = Message(inner, body_type="data").encode()
    assert "application property 'd'" in refused(payload, message_format=BATCH_FORMAT)


@pytest.mark.parametrize(
    "key",
    [Symbol("k"), 5, b"k", None],  # strings only (3.2.5): a symbol is not one
)
def test_application_property_keys_are_strings(key: Any) -> None:
    assert "keys must be strings" in refused(with_application({key: 1}))


@pytest.mark.parametrize("value", ["now", 1.5, float("nan"), True, [1], Symbol("x")])
def test_a_scheduled_enqueue_time_is_a_timestamp(value: Any) -> None:
    payload = with_annotations({Symbol("x-opt-scheduled-enqueue-time"): value})
    assert "'x-opt-scheduled-enqueue-time'" in refused(payload)


@pytest.mark.parametrize(
    ("field", "value"),
    [("message_id", [1]), ("message_id", {"a": 1}), ("message_id", 1.5), ("correlation_id", Symbol("s")),
     ("correlation_id", Described(ULong(1), "x"))],
)  # fmt: skip
def test_ids_are_of_the_types_the_spec_allows(field: str, value: Any) -> None:
    # a list as the message-id of a queue with duplicate detection had ended the connection
    description = refused(with_properties(**{field: value}))
    assert field.replace("_", "-") in description


@pytest.mark.parametrize("value", ["id", ULong(7), b"\x01", uuid.UUID(int=3)])
def test_ids_of_the_allowed_types_are_kept(value: Any) -> None:
    ns = Namespace()
    ns.send(ns.sender_target("q"), with_properties(message_id=value, correlation_id=value), T0)
    (msg,) = ns.receiver_source("q").receive_many(T0, 10, lock=False)
    assert msg.envelope.message_id == value


@pytest.mark.parametrize("text", ["1.5", "-0.001", "0", str(2**96 - 1), "1E-28", "-79228162514264337593543950335"])
def test_a_decimal_in_service_buss_layout_is_kept_and_given_back_as_sent(text: str) -> None:
    # Service Bus writes this layout itself and takes it back (its .NET decoder reads either);
    # read as a standard decimal128 it is below 1E-4579, which no .NET decimal holds
    value = servicebus_decimal128(Decimal128.from_decimal(text))
    assert in_servicebus_layout(value) and dotnet_decimal(value) is not None
    payload = with_application({"d": value, "standard": Decimal128.from_decimal(text)})
    ns = Namespace()
    ns.send(ns.sender_target("q"), payload, T0)
    entity = ns.receiver_source("q")
    (msg,) = entity.receive_many(T0, 10, lock=False)
    peeked = Message.decode(entity.encode(msg, peek=True)).application_properties
    assert peeked == {"d": value, "standard": Decimal128.from_decimal(text)}  # the bytes as sent
    assert read_decimal(peeked["d"]).as_tuple() == Decimal(text).as_tuple()
    # to a receiver that reads only Service Bus's layout (the Python SDK): both the same bytes
    written = Message.decode(servicebus_decimals(entity.encode(msg, peek=True))).application_properties
    assert written == {"d": value, "standard": value}


def test_an_annotation_that_would_not_be_written_back_as_sent_is_refused() -> None:
    # a descriptor that is a string (reserved, 1.2) is read as str and would go out a symbol
    entry = b"\xa3\x06x-test" + b"\x00\xa1\x01k\x41"
    section = b"\x00\x53\x72\xc1" + bytes((len(entry) + 1, 2)) + entry
    assert "message annotation 'x-test' cannot be kept as sent" in refused(section + DATA)
    # the same described value in the application properties is kept as sent: those are not rewritten
    entry = b"\xa1\x01k" + b"\x00\xa1\x01k\x41"
    section = b"\x00\x53\x74\xc1" + bytes((len(entry) + 1, 2)) + entry
    ns = Namespace()
    ns.send(ns.sender_target("q"), section + DATA, T0)
    (msg,) = ns.receiver_source("q").receive_many(T0, 10, lock=False)
    assert section in ns.receiver_source("q").encode(msg, peek=True)


async def test_over_the_wire_the_sender_sees_the_refusal_and_the_link_goes_on() -> None:
    async with Broker(servicebus=True) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            outcome = await asyncio.wait_for(await sender.send_payload_nowait(with_application({"list": [1, 2]})), 10)
            assert type(outcome) is Rejected and outcome.error is not None
            assert outcome.error.condition == "amqp:decode-error"
            description = str(outcome.error.description)
            assert "application property 'list'" in description and "3.2.5" in description
            await sender.send(Message(b"next"), timeout=10)  # the link is still there
            assert len(broker.namespace.receiver_source("q").store) == 1
        finally:
            await conn.close()


# -- the guard: a message that fails to be written is given back ----------------------
@pytest.fixture()
def unwritable(monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Make every delivery and peek of a message whose body is ``b"poison"`` fail to be
    written (a bug the checks at the transfer did not foresee)."""
    poison = Message(b"poison").encode()
    encode_all, encode = Entity.encode_all, Envelope.encode

    def failing_all(self: Entity, messages: Any, tags: Any = None) -> list[bytes]:
        messages = list(messages)
        if any(msg.envelope.body == poison for msg in messages):
            raise ValueError("injected: this message cannot be written")
        return encode_all(self, messages, tags)

    def failing(self: Envelope, *args: Any, **kwargs: Any) -> bytes:
        if self.body == poison:
            raise ValueError("injected: this message cannot be written")
        return encode(self, *args, **kwargs)

    monkeypatch.setattr(Entity, "encode_all", failing_all)
    monkeypatch.setattr(Envelope, "encode", failing)
    return poison


@pytest.mark.parametrize("mode", ["peek-lock", "receive-and-delete"])
async def test_a_delivery_that_cannot_be_written_gives_the_message_back(unwritable: bytes, mode: Any) -> None:
    async with Broker(servicebus=True) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            await sender.send(Message(b"poison"), timeout=10)
            entity = broker.namespace.receiver_source("q")
            receiver = await conn.create_receiver("q", prefetch=5, mode=mode)
            with pytest.raises(LinkDetachedError) as detached:
                await receiver.receive(1, timeout=10)
            assert detached.value.condition == "amqp:internal-error"
            assert "message 1 of 'q'" in str(detached.value) and "injected" in str(detached.value)
            (kept,) = list(entity.store)  # not lost, not counted as a delivery
            assert kept.state.value == "available" and kept.delivery_count == 0
        finally:
            await conn.close()


async def test_a_peek_that_cannot_be_written_answers_internal_error(unwritable: bytes) -> None:
    async with Broker(servicebus=True) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            await sender.send(Message(b"poison"), timeout=10)
            pair = await RequestResponseLink.open(conn, "q/$management")
            body = {"from-sequence-number": Long(1), "message-count": 5}
            peek = Message(body, application_properties={"operation": "com.microsoft:peek-message"})
            answer = await pair.request(peek)
            app = answer.application_properties or {}
            assert app["statusCode"] == 500 and app["errorCondition"] == "amqp:internal-error"
            assert "message 1 of 'q'" in app["statusDescription"]
            assert len(broker.namespace.receiver_source("q").store) == 1
        finally:
            await conn.close()


def test_receive_by_sequence_number_that_cannot_be_written_gives_the_messages_back(unwritable: bytes) -> None:
    from amqplink.broker.namespace.management import handle_management

    ns = Namespace()
    ns.send(ns.sender_target("q"), unwritable, T0)
    entity = ns.receiver_source("q")
    (msg,) = entity.receive_many(T0, 1, lock=True)
    entity.defer(msg.lock_token, T0)  # type: ignore[arg-type]
    app = {"operation": "com.microsoft:receive-by-sequence-number"}
    body = {"sequence-numbers": [Long(1)], "receiver-settle-mode": 0}  # receive-and-delete
    answer = handle_management(ns, "q/$management", Message(body, application_properties=app), T0)
    assert (answer.application_properties or {})["statusCode"] == 500
    (kept,) = list(entity.store)
    assert kept.deferred and kept.sequence_number == 1


def test_the_encodings_the_tests_build_are_valid() -> None:
    assert Message.decode(with_application({"a": 1})).application_properties == {"a": 1}
    assert Message.decode(with_annotations({Symbol("x-a"): 1})).message_annotations == {"x-a": 1}
