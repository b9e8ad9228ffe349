"""amqplink.Message: sections, friendly names, body kinds, exact bytes, defensive decoding."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink import Message
from amqplink.codec.errors import DecodeError, EncodeError
from amqplink.codec.types import Char, Decimal32, Decimal64, Decimal128, Symbol, Timestamp, UByte, UInt, ULong
from amqplink.message import data_section_header
from amqplink.protocol.definitions import AmqpValue, ApplicationProperties, Data, Header, Properties


def round_trip(message: Message) -> Message:
    return Message.decode(message.encode())


def test_bytes_body_fast_path_exact_bytes() -> None:
    assert Message(b"hi").encode() == b"\x00\x53\x75\xa0\x02hi"
    big = bytes(300)
    assert Message(big).encode() == b"\x00\x53\x75\xb0\x00\x00\x01\x2c" + big
    generic = bytearray()
    Data(big)._amqp_encode(generic)
    assert Message(big).encode() == bytes(generic)


@given(size=st.one_of(st.integers(0, 600), st.integers(600, 70_000)))
def test_data_section_header_and_the_bytes_fast_path_encode_what_data_encodes(size: int) -> None:
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    generic = bytearray()
    Data(body)._amqp_encode(generic)
    assert data_section_header(size) + body == bytes(generic) == Message(body).encode()


@pytest.mark.parametrize(
    ("body", "body_type", "expected_type"),
    [
        (b"abc", None, "data"),
        ([b"a", b"bc"], "data", "data"),
        ([1, "two", None], "sequence", "sequence"),
        ([[1], ["x", b"y"]], "sequences", "sequences"),
        ({"k": 1}, None, "value"),
        ("text", None, "value"),
        (b"raw", "value", "value"),
        (None, None, "value"),
        (12, None, "value"),
    ],
)
def test_every_body_kind_round_trips(body: object, body_type: str | None, expected_type: str) -> None:
    got = round_trip(Message(body, body_type=body_type))
    assert got.body_type == expected_type
    assert got.body == body


@pytest.mark.parametrize("body", [Decimal32(bytes(4)), Decimal64(bytes(range(8))), Decimal128(bytes(range(16)))])
def test_decimal_bodies_are_amqp_values_not_data_sections(body: bytes) -> None:
    # The decimal types subclass bytes; they must not be taken for a data section.
    message = Message(body)
    assert message.body_type == "value"
    got = round_trip(message)
    assert got.body_type == "value" and type(got.body) is type(body) and got.body == body


def test_empty_message_encodes_a_null_value_body() -> None:
    payload = Message().encode()
    expected = bytearray()
    AmqpValue(None)._amqp_encode(expected)
    assert payload == bytes(expected)


def test_friendly_names_map_to_sections() -> None:
    when = dt.datetime(2026, 11, 22, 12, 0, 0, 123000, tzinfo=dt.UTC)
    m = Message(
        b"x",
        message_id=42,
        correlation_id=uuid.UUID(int=7),
        user_id=b"me",
        to="queue-1",
        reply_to="replies",
        subject="order",
        content_type="application/json",
        content_encoding="gzip",
        creation_time=when,
        absolute_expiry_time=when,
        session_id="s-1",
        group_sequence=3,
        reply_to_session_id="rs",
        durable=True,
        priority=7,
        ttl=1.5,
        first_acquirer=False,
        delivery_count=2,
        partition_key="pk",
    )
    assert m.properties is not None and m.header is not None
    assert m.properties.message_id == 42 and type(m.properties.message_id) is ULong
    assert m.properties.group_id == "s-1" and m.group_id == "s-1"
    assert m.properties.reply_to_group_id == "rs"
    assert type(m.properties.content_type) is Symbol
    assert m.header.ttl == 1500 and type(m.header.ttl) is UInt
    assert type(m.header.priority) is UByte
    assert m.message_annotations == {Symbol("x-opt-partition-key"): "pk"}
    got = round_trip(m)
    assert got == m
    assert got.message_id == 42 and got.correlation_id == uuid.UUID(int=7)
    assert got.creation_time == when and got.absolute_expiry_time == when
    assert got.ttl == 1.5 and got.priority == 7 and got.durable is True and got.first_acquirer is False
    assert got.session_id == "s-1" and got.reply_to_session_id == "rs" and got.partition_key == "pk"
    assert got.content_type == "application/json" and got.content_encoding == "gzip"
    assert got.user_id == b"me" and got.to == "queue-1" and got.reply_to == "replies" and got.subject == "order"
    assert got.group_sequence == 3 and got.delivery_count == 2


def test_setting_a_friendly_name_to_none_on_an_absent_section_creates_nothing() -> None:
    m = Message(b"x")
    m.subject = None
    m.ttl = None
    m.partition_key = None
    assert m.properties is None and m.header is None and m.message_annotations is None
    m.partition_key = "p"
    m.partition_key = None
    assert m.partition_key is None


APP_VALUES = {
    "null": None,
    "bool": True,
    "ubyte": UByte(200),
    "uint": UInt(70000),
    "ulong": ULong(2**40),
    "int": -5,
    "big": 2**40,
    "float": 1.25,
    "char": Char("é"),
    "ts": Timestamp(1_700_000_000_000),
    "uuid": uuid.UUID(int=99),
    "bin": b"\x00\x01",
    "str": "text",
    "sym": Symbol("sym"),
}


def test_application_property_value_types_round_trip() -> None:
    got = round_trip(Message(b"", application_properties=dict(APP_VALUES)))
    assert got.application_properties == APP_VALUES
    for key, value in APP_VALUES.items():
        assert type(got.application_properties[key]) is type(value), key  # type: ignore[index]


@pytest.mark.parametrize("bad", [{"a": 1}, [1], (1,)])
def test_application_properties_refuse_compound_values(bad: object) -> None:
    with pytest.raises(EncodeError, match="'k'"):
        Message(b"", application_properties={"k": bad}).encode()


def test_application_properties_refuse_non_string_keys() -> None:
    with pytest.raises(EncodeError, match="keys must be strings"):
        Message(b"", application_properties={1: "x"}).encode()  # type: ignore[dict-item]


def test_annotations_and_footer_round_trip_with_symbol_keys() -> None:
    m = Message(
        "v",
        delivery_annotations={"x-opt-d": 1},
        message_annotations={"x-opt-m": "two"},
        footer={"x-opt-f": b"3"},
    )
    got = round_trip(m)
    assert got.delivery_annotations == {Symbol("x-opt-d"): 1}
    assert all(type(k) is Symbol for k in got.message_annotations or {})
    assert got.footer == {Symbol("x-opt-f"): b"3"}


def test_bad_arguments_are_clear() -> None:
    with pytest.raises(TypeError, match="colour"):
        Message(b"", colour="red")
    with pytest.raises(ValueError, match="sequence"):
        Message(5, body_type="sequence")
    with pytest.raises(ValueError, match="body_type"):
        Message(b"", body_type="xml")
    with pytest.raises(ValueError, match="message id"):
        Message(b"", message_id=1.5)
    with pytest.raises(ValueError, match="ttl"):
        Message(b"", ttl=-1)


def _encoded(*sections: object) -> bytes:
    out = bytearray()
    for s in sections:
        s._amqp_encode(out)  # type: ignore[attr-defined]
    return bytes(out)


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (_encoded(Properties(subject="s"), Header(durable=True), Data(b"x")), "out of order"),
        (_encoded(Header(), Header(), Data(b"x")), "out of order or repeated"),
        (_encoded(Data(b"x"), AmqpValue(1)), "mixes or repeats"),
        (_encoded(AmqpValue(1), AmqpValue(2)), "mixes or repeats"),
        (b"\xa1\x03abc", "not a message section"),
        (b"\x00\x53\x75\xa0\x09abc", "binary"),
        (_encoded(ApplicationProperties({"a": 1}))[:-1], ".+"),
    ],
)
def test_malformed_payloads_raise_decode_error(payload: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        Message.decode(payload)


def test_decode_accepts_memoryview_and_subclasses_keep_their_type() -> None:
    class Tagged(Message):
        __slots__ = ("tag",)

    payload = Message(b"z" * 100_000, subject="s").encode()
    got = Tagged.decode(memoryview(payload))
    assert type(got) is Tagged and got.body == b"z" * 100_000 and got.subject == "s"


def test_repr_is_short() -> None:
    text = repr(Message(bytes(10_000), message_id="id-1", application_properties={"a": 1}))
    assert len(text) < 200 and "10000 bytes" in text and "id-1" in text


simple_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.uuids(),
)
bodies = st.one_of(
    st.binary(max_size=600).map(lambda b: (b, None)),
    st.lists(st.binary(max_size=50), min_size=2, max_size=4).map(lambda b: (b, "data")),
    st.lists(simple_values, max_size=5).map(lambda s: (s, "sequence")),
    simple_values.map(lambda v: (v, "value")),
)


@given(
    body=bodies,
    message_id=st.one_of(st.none(), st.text(max_size=10), st.integers(min_value=0, max_value=2**64 - 1)),
    subject=st.one_of(st.none(), st.text(max_size=10)),
    ttl=st.one_of(st.none(), st.integers(min_value=0, max_value=10**6).map(lambda ms: ms / 1000)),
    priority=st.one_of(st.none(), st.integers(min_value=0, max_value=255)),
    app=st.dictionaries(st.text(max_size=8), simple_values, max_size=5),
    partition_key=st.one_of(st.none(), st.text(max_size=8)),
)
def test_decode_of_encode_is_identity(
    body: tuple[object, str | None],
    message_id: object,
    subject: str | None,
    ttl: float | None,
    priority: int | None,
    app: dict[str, object],
    partition_key: str | None,
) -> None:
    m = Message(
        body[0],
        body_type=body[1],
        message_id=message_id,
        subject=subject,
        ttl=ttl,
        priority=priority,
        application_properties=app or None,
        partition_key=partition_key,
    )
    got = round_trip(m)
    assert got == m
    assert got.ttl == ttl and got.partition_key == partition_key


def _reference_encoding(message: Message) -> bytes:
    """The sections encoded one by one with the generated classes (no fast path)."""
    out = bytearray()
    properties = message.properties
    if properties is not None and any(getattr(properties, f) is not None for f in Properties.__slots__):
        properties._amqp_encode(out)
    for chunk in message.body if isinstance(message.body, list) else [message.body]:
        Data(chunk)._amqp_encode(out)
    return bytes(out)


@given(
    message_id=st.one_of(st.none(), st.text(max_size=300), st.uuids(), st.integers(0, 2**64 - 1)),
    subject=st.one_of(st.none(), st.text(max_size=5)),
    body=st.one_of(st.binary(max_size=300), st.lists(st.binary(max_size=300), min_size=1, max_size=3)),
)
def test_id_only_and_data_fast_paths_encode_what_the_sections_encode(
    message_id: object, subject: str | None, body: object
) -> None:
    message = Message(body, body_type="data", message_id=message_id, subject=subject)
    assert message.encode() == _reference_encoding(message)


@given(chunks=st.lists(st.binary(max_size=300), min_size=1, max_size=4), message_id=st.text(max_size=5))
def test_encode_with_data_is_the_message_with_those_data_sections(chunks: list[bytes], message_id: str) -> None:
    envelope = Message(None, message_id=message_id, partition_key="p")
    assert (
        envelope.encode_with_data(chunks)
        == Message(chunks, body_type="data", message_id=message_id, partition_key="p").encode()
    )


@given(body=st.binary(max_size=300), message_id=st.one_of(st.none(), st.text(max_size=5)))
def test_of_data_is_the_constructor_without_its_checks(body: bytes, message_id: str | None) -> None:
    properties = None if message_id is None else Properties(message_id=message_id)
    fast = Message.of_data(body, properties)
    slow = Message(body, properties=properties)
    assert fast == slow and fast.encode() == slow.encode() and fast.body_type == "data"


@given(
    body=st.binary(max_size=600),
    durable=st.one_of(st.none(), st.booleans()),
    priority=st.one_of(st.none(), st.integers(min_value=0, max_value=255)),
    message_id=st.one_of(st.none(), st.text(max_size=300), st.integers(0, 2**64 - 1)),
    subject=st.one_of(st.none(), st.text(max_size=5)),
    empty_header=st.booleans(),
)
def test_durable_only_header_fast_path_encodes_what_encode_into_does(
    body: bytes, durable: bool | None, priority: int | None, message_id: object, subject: str | None, empty_header: bool
) -> None:
    message = Message(body, durable=durable, priority=priority, message_id=message_id, subject=subject)
    if empty_header and message.header is None:
        message.header = Header()  # present with no field set: no section either way
    out = bytearray()
    message.encode_into(out)
    assert message.encode() == bytes(out)
    assert Message.decode(message.encode()) == message
