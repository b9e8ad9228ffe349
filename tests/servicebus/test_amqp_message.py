"""``amqplink.servicebus.amqp``, the equivalent of ``azure.servicebus.amqp`` (issue 24, A.3):
``AmqpAnnotatedMessage``, ``AmqpMessageHeader``, ``AmqpMessageProperties``,
``AmqpMessageBodyType`` and ``ServiceBusMessage.raw_amqp_message``, read against the SDK 7.15
source (``azure/servicebus/amqp/_amqp_message.py``) and, in the ``sdk`` tests, against what the
SDK itself gives for the same bytes and the same broker."""

from __future__ import annotations

import datetime as dt
import uuid
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.namespace.envelope import split_message
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Symbol, Timestamp, UInt
from amqplink.message import Message
from amqplink.protocol.definitions import DeliveryAnnotations, Footer
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusMessageBatch
from amqplink.servicebus.amqp import (
    AmqpAnnotatedMessage,
    AmqpMessageBodyType,
    AmqpMessageHeader,
    AmqpMessageProperties,
    sdk_value,
)
from amqplink.servicebus.message import ServiceBusReceivedMessage
from tests.servicebus.scenario import BrokerThread, broker

__all__ = ["broker"]


# -- building one ------------------------------------------------------------------------------
def test_exactly_one_body() -> None:
    """SDK: "There should be one and only one of either data_body, sequence_body or value_body"."""
    for kwargs in ({}, {"data_body": b"a", "value_body": 1}):
        with pytest.raises(ValueError, match="one and only one"):
            AmqpAnnotatedMessage(**kwargs)


def test_bodies_are_normalised_as_the_sdks() -> None:
    """``normalized_data_body``: str encoded, one section per item; ``normalized_sequence_body``:
    a list is one section, a list of lists one section each; ``body`` is a generator."""
    data = AmqpAnnotatedMessage(data_body=["aa", b"bb"])
    assert data.body_type is AmqpMessageBodyType.DATA
    assert type(data.body).__name__ == "generator" and list(data.body) == [b"aa", b"bb"]
    assert str(data) == "aabb"
    one = AmqpAnnotatedMessage(sequence_body=[1, "two"])
    assert list(one.body) == [[1, "two"]] and str(one) == "[[1, 'two']]"
    two = AmqpAnnotatedMessage(sequence_body=[[1], [2]])
    assert list(two.body) == [[1], [2]]
    value = AmqpAnnotatedMessage(value_body={"k": [1, 2]})
    assert value.body == {"k": [1, 2]} and value.body_type is AmqpMessageBodyType.VALUE
    decoded = Message.decode(two._outgoing().encode())
    assert decoded.body_type == "sequences" and decoded.body == [[1], [2]]


def test_header_and_properties_are_the_sdks_dict_mixins() -> None:
    """``AmqpMessageHeader``/``AmqpMessageProperties``: keyword-only fields, readable as
    attributes and as a mapping (``DictMixin``), unknown keywords warned about, equal by value."""
    header = AmqpMessageHeader(priority=9, time_to_live=5000, durable=True)
    assert header.priority == 9 and header["time_to_live"] == 5000
    assert list(header.keys()) == ["delivery_count", "time_to_live", "first_acquirer", "durable", "priority"]
    assert header == AmqpMessageHeader(durable=True, time_to_live=5000, priority=9)
    assert str(header) == str(
        {"delivery_count": None, "time_to_live": 5000, "first_acquirer": None, "durable": True, "priority": 9}
    )
    with pytest.warns(UserWarning, match="Unsupported keyword args"):
        AmqpMessageProperties(subject="s", colour="red")
    props = AmqpMessageProperties(message_id="m", content_type="application/json", creation_time=1_700_000_000_000)
    assert props.get("content_type") == "application/json" and type(props.content_type) is str
    assert props.creation_time == 1_700_000_000_000 and type(props.creation_time) is int
    props["subject"] = "changed"
    assert props.subject == "changed" and "subject" in props and len(props) == 13


def test_sections_given_reach_the_wire() -> None:
    message = AmqpAnnotatedMessage(
        value_body=[1, "x"],
        header={"priority": 4, "time_to_live": 60_000},
        properties={"subject": "s", "group_id": "g"},
        application_properties={b"bytes-key": 1, "k": "v"},
        annotations={"x-custom": "a"},
        delivery_annotations={"d": 1},
        footer={"f": "t"},
    )
    wire = Message.decode(message._outgoing().encode())
    assert wire.priority == 4 and wire.ttl == 60 and wire.subject == "s" and wire.session_id == "g"
    assert wire.application_properties == {"bytes-key": 1, "k": "v"}
    assert wire.message_annotations == {Symbol("x-custom"): "a"}
    assert wire.delivery_annotations == {Symbol("d"): 1} and wire.footer == {Symbol("f"): "t"}
    # as the SDK's to_outgoing_amqp_message: a header ttl sets creation and expiry times
    assert wire.properties is not None
    assert wire.properties.absolute_expiry_time - wire.properties.creation_time == 60_000


# -- reading one -------------------------------------------------------------------------------
def _received(message: Message) -> ServiceBusReceivedMessage:
    return ServiceBusReceivedMessage(Message.decode(message.encode()))


def test_received_values_are_plain_and_strings_bytes() -> None:
    """pyamqp (the SDK's decoder) gives strings and symbols as bytes, timestamps as int ms,
    every number as a plain int: no AMQP wrappers reach the user."""
    sent = Message(
        {"s": "x", "n": UInt(5), "t": Timestamp(1_700_000_000_000), "u": uuid.UUID(int=3), "sym": Symbol("y")},
        application_properties={"n": UInt(7), "t": Timestamp(12), "s": "v"},
        message_annotations={Symbol("x-opt-sequence-number"): 42},
        content_type="text/plain",
        message_id="mid",
    )
    received = _received(sent)
    raw = received.raw_amqp_message
    assert raw.body == {b"s": b"x", b"n": 5, b"t": 1_700_000_000_000, b"u": uuid.UUID(int=3), b"sym": b"y"}
    assert all(type(v) in (bytes, int, uuid.UUID) for v in raw.body.values())
    assert received.body == raw.body and str(received) == str(raw.body)
    assert received.application_properties == {b"n": 7, b"t": 12, b"s": b"v"}
    assert [type(v) for v in received.application_properties.values()] == [int, int, bytes]
    assert raw.annotations == {b"x-opt-sequence-number": 42}
    assert raw.properties is not None and raw.properties.content_type == b"text/plain"
    assert raw.properties.message_id == b"mid" and received.message_id == "mid"
    assert raw.header is None  # none on the wire, none read (the SDK's reads the same)


def test_the_view_is_lazy_and_reused() -> None:
    """Nothing is converted for a received message until ``raw_amqp_message`` is read, and
    then once: receiving costs the same whether or not a user ever looks."""
    received = _received(Message(b"x", application_properties={"k": "v"}))
    assert b"".join(received.body) == b"x" and received.sequence_number is None
    assert getattr(received, "_raw", None) is None
    assert received.raw_amqp_message is received.raw_amqp_message


def test_writing_through_the_view_changes_what_is_sent() -> None:
    """The SDK's ``raw_amqp_message`` is the message that is sent: its header, properties and
    maps written through it go on the wire (here too: the view is over the message itself)."""
    message = ServiceBusMessage("x", message_id="m")
    raw = message.raw_amqp_message
    assert raw.header is not None and raw.properties is not None  # a message being sent has both, as the SDK's
    raw.header.priority = 7
    raw.properties.subject = "via-raw"
    raw.annotations = {"x-opt-partition-key": "pk"}
    raw.application_properties = {"a": 1}
    wire = Message.decode(message.amqplink_message.encode())
    assert (wire.priority, wire.subject, wire.partition_key, wire.application_properties) == (
        7,
        "via-raw",
        "pk",
        {"a": 1},
    )
    assert message.subject == "via-raw" and message.partition_key == "pk"


# -- sending one ------------------------------------------------------------------------------
def test_send_and_receive_annotated_messages(broker: BrokerThread) -> None:
    """The official ``send_and_receive_amqp_annotated_message`` sample's three messages, sent
    alone, in a list and in a batch, come back with their body types and sections."""
    shapes: list[Callable[[], AmqpAnnotatedMessage]] = [
        lambda: AmqpAnnotatedMessage(data_body=[b"aa", b"bb", b"cc"], application_properties={"body_type": "data"}),
        lambda: AmqpAnnotatedMessage(
            sequence_body=[b"message", 123.456, True],
            footer={"footer_key": "footer_value"},
            properties={"subject": "sequence"},
            application_properties={"body_type": "sequence"},
        ),
        lambda: AmqpAnnotatedMessage(
            value_body={b"key": [-123, b"data", False]},
            header={"priority": 10},
            annotations={"annotation_key": "value"},
            application_properties={"body_type": "value"},
        ),
    ]
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("plain") as sender:
            for shape in shapes:
                sender.send_messages(shape())
            sender.send_messages([shape() for shape in shapes])
            batch = sender.create_message_batch()
            for shape in shapes:
                batch.add_message(shape())
            sender.send_messages(batch)
            sender.schedule_messages(shapes[2](), dt.datetime.now(dt.UTC))
        got = []
        with client.get_queue_receiver("plain", max_wait_time=2) as receiver:
            while len(got) < 10:
                batch_got = receiver.receive_messages(max_message_count=10, max_wait_time=5)
                assert batch_got, f"only {len(got)} of 10"
                got += batch_got
            for m in got:
                receiver.complete_message(m)
    kinds = [m.raw_amqp_message.body_type for m in got]
    assert kinds == [AmqpMessageBodyType.DATA, AmqpMessageBodyType.SEQUENCE, AmqpMessageBodyType.VALUE] * 3 + [
        AmqpMessageBodyType.VALUE
    ]
    data, seq, value = got[:3]
    assert list(data.body) == [b"aa", b"bb", b"cc"] and str(data) == "aabbcc"
    assert list(seq.body) == [[b"message", 123.456, True]] and seq.raw_amqp_message.footer == {
        b"footer_key": b"footer_value"
    }
    assert seq.subject == "sequence" and seq.application_properties == {b"body_type": b"sequence"}
    assert value.body == {b"key": [-123, b"data", False]}
    raw = value.raw_amqp_message
    assert raw.header is not None and raw.header.priority == 10
    assert raw.annotations is not None and raw.annotations[b"annotation_key"] == b"value"
    assert all(m.body == value.body for m in got[5::3])


# -- the broker and the SDK's encoder ------------------------------------------------------------
def _section(section: Any) -> bytes:
    out = bytearray()
    section._amqp_encode(out)
    return bytes(out)


def test_broker_drops_trailing_delivery_annotations() -> None:
    """pyamqp writes delivery-annotations after the body and footer (``encode_payload``: "the
    delivery annotations must be finally encoded"); Service Bus accepts it, so does the broker,
    and drops them (hop-by-hop, 3.2.2). Anything after them, or them amid the body, is refused."""
    body = Message(b"payload", footer={"f": 1}).encode()
    trailing = _section(DeliveryAnnotations({Symbol("k"): "v"}))
    envelope = split_message(body + trailing, check=True)
    assert envelope.body == body
    with pytest.raises(DecodeError, match="last section"):
        split_message(body + trailing + _section(Footer({Symbol("x"): 1})), check=True)
    data = Message(b"payload").encode()
    with pytest.raises(DecodeError):
        split_message(data + trailing + data, check=True)


# -- against the SDK ------------------------------------------------------------------------------
def _snapshot(message: Any) -> dict[str, Any]:
    """What a user reads of a received message, with types (no time-dependent values)."""

    def typed(value: Any) -> Any:
        if isinstance(value, dict):
            return {typed(k): typed(v) for k, v in value.items()}
        if isinstance(value, list):
            return [typed(v) for v in value]
        return (value, type(value).__name__)

    raw = message.raw_amqp_message
    volatile = (b"x-opt-enqueued-time", b"x-opt-locked-until")
    annotations = {k: v for k, v in (raw.annotations or {}).items() if k not in volatile}
    lock_token = (b"x-opt-lock-token", "x-opt-lock-token")  # a new one each delivery
    delivery_annotations = raw.delivery_annotations or {}
    props = None if raw.properties is None else dict(raw.properties.items())
    if props is not None:
        props = {k: v for k, v in props.items() if k not in ("creation_time", "absolute_expiry_time")}
    body = message.body
    return {
        "str": str(message),
        "body_type": str(message.body_type),
        "body": typed(list(body) if message.body_type != AmqpMessageBodyType.VALUE else body),
        "raw_body": typed(list(raw.body) if raw.body_type != AmqpMessageBodyType.VALUE else raw.body),
        "application_properties": typed(message.application_properties),
        "raw_application_properties": typed(raw.application_properties),
        "annotations": typed(annotations),
        "delivery_annotations": typed({k: v for k, v in delivery_annotations.items() if k not in lock_token}),
        "lock_token_annotated": any(k in lock_token for k in delivery_annotations),
        "footer": typed(raw.footer),
        "header": None if raw.header is None else typed(dict(raw.header.items())),
        "properties": None if props is None else typed(props),
        "ids": (message.message_id, message.correlation_id, message.content_type, message.subject, message.to),
        "ttl": message.time_to_live,
    }


def _send_all(amqp: Any, sb: Any, sender: Any) -> None:
    sender.send_messages(amqp.AmqpAnnotatedMessage(data_body=[b"aa", "bb"], application_properties={"kind": "data"}))
    sender.send_messages(
        amqp.AmqpAnnotatedMessage(
            sequence_body=[b"m", 1.5, True, "s"],
            footer={"fk": "fv"},
            properties={"subject": "seq"},
        )
    )
    sender.send_messages(
        amqp.AmqpAnnotatedMessage(
            value_body={b"key": [-123, b"data", False], "s": "x", "u": uuid.UUID(int=5)},
            header={"priority": 10, "time_to_live": 60_000},
            annotations={"annotation_key": "value"},
        )
    )
    sender.send_messages(
        sb.ServiceBusMessage(
            "hi",
            application_properties={
                "i": 5,
                "f": 1.5,
                "s": "str",
                "b": b"bytes",
                "bool": True,
                "u": uuid.UUID(int=7),
                "neg": -3,
                "t": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            },
            correlation_id="c",
            content_type="text/plain",
            subject="subj",
            to="to",
            reply_to="rt",
            reply_to_session_id="rts",
            time_to_live=dt.timedelta(seconds=100),
            partition_key="pk",
            message_id="mid",
        )
    )


@pytest.mark.sdk
@pytest.mark.parametrize("sending", ["azure", "amqplink"])
def test_what_a_user_reads_is_the_sdks(broker: BrokerThread, sending: str) -> None:
    """Sent by either library, the same messages read the same through both: body (its type
    too), str(), application properties, annotations, header, properties, footer."""
    import importlib

    snapshots = {}
    for reading in ("azure", "amqplink"):
        root = "azure.servicebus" if sending == "azure" else "amqplink.servicebus"
        sb, amqp = importlib.import_module(root), importlib.import_module(f"{root}.amqp")
        read_root = "azure.servicebus" if reading == "azure" else "amqplink.servicebus"
        reader = importlib.import_module(read_root)
        with (
            sb.ServiceBusClient.from_connection_string(broker.connection_string) as client,
            client.get_queue_sender("plain") as sender,
        ):
            _send_all(amqp, sb, sender)
        with (
            reader.ServiceBusClient.from_connection_string(broker.connection_string) as client,
            client.get_queue_receiver("plain", max_wait_time=2) as receiver,
        ):
            got: list[Any] = []
            while len(got) < 4:
                more = receiver.receive_messages(max_message_count=4, max_wait_time=5)
                assert more
                got += more
            snapshots[reading] = [_snapshot(m) for m in got]
            for m in got:
                receiver.complete_message(m)
    for ours, sdk in zip(snapshots["amqplink"], snapshots["azure"], strict=True):
        for snapshot in (ours, sdk):  # what differs from one delivery to the next
            kept = {k: v for k, v in snapshot["annotations"].items() if "sequence-number" not in str(k)}
            snapshot["annotations"] = kept
            assert snapshot["lock_token_annotated"]  # peek-lock: the delivery names its lock token
        assert ours == sdk


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.uuids(),
    st.builds(Timestamp, st.integers(0, 2**41)),
    st.builds(UInt, st.integers(0, 2**32 - 1)),
    st.builds(Symbol, st.text(alphabet="abcxyz-", max_size=6)),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@pytest.mark.sdk
@settings(max_examples=150, deadline=None)
@given(
    body=_values,
    app=st.dictionaries(st.text(min_size=1, max_size=6), _scalars, max_size=4),
    kind=st.sampled_from(["value", "sequence"]),
)
def test_values_read_as_pyamqp_decodes_them(body: Any, app: dict[str, Any], kind: str) -> None:
    """Property: for any message amqplink encodes, what ``raw_amqp_message`` gives equals what
    the SDK's own decoder (pyamqp ``decode_payload`` + ``AmqpAnnotatedMessage(message=...)``)
    gives for the same bytes: body, application properties, str()."""
    from azure.servicebus._pyamqp._decode import decode_payload
    from azure.servicebus.amqp import AmqpAnnotatedMessage as SdkAnnotated

    sequence = body if isinstance(body, list) else [body]
    message = Message(sequence, body_type="sequence") if kind == "sequence" else Message(body, body_type="value")
    message.application_properties = app or None
    payload = message.encode()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sdk = SdkAnnotated(message=decode_payload(memoryview(payload)))
    ours = _received(message).raw_amqp_message
    assert ours.body_type == sdk.body_type
    if kind == "sequence":
        assert list(ours.body) == list(sdk.body)
    else:
        assert ours.body == sdk.body
    assert ours.application_properties == sdk.application_properties
    assert str(ours) == str(sdk)


def test_sdk_value_of_nested_wrappers() -> None:
    assert sdk_value({Symbol("a"): [UInt(1), Timestamp(2), "s"]}) == {b"a": [1, 2, b"s"]}
    assert [type(v) for v in sdk_value([UInt(1), Timestamp(2)])] == [int, int]


def test_batch_takes_an_annotated_message() -> None:
    batch = ServiceBusMessageBatch(10_000)
    batch.add_message(AmqpAnnotatedMessage(value_body=[1, 2]))
    assert len(batch) == 1
    with pytest.raises(TypeError, match="AmqpAnnotatedMessage"):
        batch.add_message(3)  # type: ignore[arg-type]


def test_a_paired_sender_parks_an_annotated_message_as_one_message() -> None:
    """Failover parks what ``send_messages`` took: an annotated message is one message (its
    own sections), not an iterable to read."""
    from amqplink.servicebus.paired.pairing import REPEATABLE, outgoing_list

    annotated = AmqpAnnotatedMessage(sequence_body=[1, 2], application_properties={"k": "v"})
    assert isinstance(annotated, REPEATABLE)
    (parked,) = outgoing_list(annotated)
    assert parked.amqplink_message is annotated._message and parked.raw_amqp_message is annotated


@pytest.mark.sdk
@pytest.mark.parametrize(
    "kwargs",
    [
        {"body": None},
        {"body": "text", "message_id": "m", "subject": "s", "application_properties": {"k": "v", "n": 1}},
        {"body": b"raw", "session_id": "sess", "time_to_live": dt.timedelta(seconds=30), "content_type": "a/b"},
        {"body": "x", "partition_key": "pk", "correlation_id": "c", "reply_to": "r", "to": "t"},
    ],
)
def test_a_message_being_sent_reads_as_the_sdks(kwargs: dict[str, Any]) -> None:
    """A ``ServiceBusMessage`` not yet sent: its ``raw_amqp_message`` reads as the SDK's (values as
    given, header and properties present), creation and expiry times aside (set from the clock)."""
    import azure.servicebus as sdk

    def view(message: Any) -> dict[str, Any]:
        raw = message.raw_amqp_message
        props = {k: v for k, v in raw.properties.items() if k not in ("creation_time", "absolute_expiry_time")}
        return {
            "str": str(message),
            "body": list(message.body) if message.body_type == AmqpMessageBodyType.DATA else message.body,
            "body_type": str(message.body_type),
            "header": dict(raw.header.items()),
            "properties": props,
            "application_properties": raw.application_properties,
            "annotations": {
                str(k.decode() if isinstance(k, bytes) else k): v for k, v in (raw.annotations or {}).items()
            },
        }

    ours, theirs = view(ServiceBusMessage(**kwargs)), view(sdk.ServiceBusMessage(**kwargs))
    if "message_id" not in kwargs:  # a fresh id on each side
        ours["properties"].pop("message_id"), theirs["properties"].pop("message_id")
    assert ours == theirs
