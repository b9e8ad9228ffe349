"""The generated classes encode and decode through the codec as the spec says."""

from __future__ import annotations

import inspect
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.codec.decode import decode_all, interpret
from amqplink.codec.encode import encode_value
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Array, Described, Int, Long, Symbol, Timestamp, UByte, UInt, ULong, UShort
from amqplink.protocol import (
    COMPOSITES,
    SECTIONS,
    Accepted,
    AmqpErrorCondition,
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Attach,
    Begin,
    Close,
    Data,
    Declare,
    DeliveryAnnotations,
    Disposition,
    Error,
    Flow,
    Footer,
    Header,
    MessageAnnotations,
    Modified,
    Open,
    Properties,
    ReceiverSettleMode,
    Rejected,
    Released,
    Role,
    SaslInit,
    SaslMechanisms,
    SaslResponse,
    SenderSettleMode,
    Source,
    Target,
    TerminusDurability,
    TerminusExpiryPolicy,
    Transfer,
)

SPEC = json.loads((Path(__file__).resolve().parents[2] / "specs" / "amqp-1.0.json").read_text("utf-8"))
TYPES: dict[str, dict[str, Any]] = {t["name"]: t for t in SPEC["types"]}
COMPOSITE_SPECS = [t for t in SPEC["types"] if t["class"] == "composite"]


def encode(obj: Any) -> bytes:
    out = bytearray()
    encode_value(out, obj)
    return bytes(out)


def round_trip(obj: Any) -> Any:
    return decode_all(encode(obj))


# -- representative values, different for each field position ------------------------------


def _primitive(type_name: str) -> str | None:
    while type_name in TYPES:
        t = TYPES[type_name]
        if t["class"] == "primitive":
            return type_name
        if t["class"] == "composite" or t.get("descriptor"):
            return None
        type_name = t["source"]
    return None


def _choices(type_name: str) -> list[dict[str, str]]:
    while type_name in TYPES and TYPES[type_name]["class"] == "restricted":
        if TYPES[type_name]["choices"]:
            return list(TYPES[type_name]["choices"])
        type_name = TYPES[type_name]["source"]
    return []


def _sample_primitive(primitive: str, i: int) -> Any:
    samples: dict[str, Any] = {
        "boolean": i % 2 == 0,
        "ubyte": UByte(7 + i),
        "ushort": UShort(300 + i),
        "uint": UInt(70_000 + i),
        "ulong": ULong(2**40 + i),
        "int": Int(-5 - i),
        "long": Long(-(2**40) - i),
        "timestamp": Timestamp(1_700_000_000_000 + i),
        "uuid": uuid.UUID(int=i + 1),
        "binary": bytes([i, 0xFF, 0x00]),
        "string": f"text-{i}-\u00e9",
        "symbol": Symbol(f"sym-{i}"),
        "map": {Symbol(f"k{i}"): f"v{i}", Symbol("n"): UInt(i)},
        "list": [i, "a"],
    }
    return samples[primitive]


_ERROR = Error(AmqpErrorCondition.INTERNAL_ERROR, "boom", {Symbol("detail"): "x"})
_BY_REQUIRES: dict[str, Any] = {
    "delivery-state": Accepted(),
    "outcome": Rejected(error=_ERROR),
    "source": Source(address="queue-a", durable=TerminusDurability.CONFIGURATION),
    "target": Target(address="queue-b", capabilities=[Symbol("cap")]),
    "address": "queue-c",
    "message-id": "id-1",
    "txn-id": b"txn-1",
    "global-tx-id": b"gtx-1",
}


def sample_field(field: dict[str, Any], i: int) -> Any:
    if field["type"] == "*":
        value = _BY_REQUIRES[field["requires"]]
    elif TYPES[field["type"]]["class"] == "composite":
        value = {"error": _ERROR}[field["type"]]
    elif choices := _choices(field["type"]):
        choice = choices[i % len(choices)]
        value = _typed_choice(field["type"], choice["value"])
    else:
        primitive = _primitive(field["type"])
        assert primitive is not None
        value = _sample_primitive(primitive, i)
    if field["multiple"]:
        return [value, value]
    return value


def _typed_choice(type_name: str, raw: str) -> Any:
    primitive = _primitive(type_name)
    if primitive == "boolean":
        return raw == "true"
    if primitive == "symbol":
        return Symbol(raw)
    return {"ubyte": UByte, "uint": UInt}[str(primitive)](int(raw))


def full_instance(t: dict[str, Any]) -> Any:
    cls = COMPOSITES[t["descriptor"]["ulong"]]
    kwargs = {f["name"].replace("-", "_"): sample_field(f, i) for i, f in enumerate(t["fields"])}
    return cls(**kwargs)


def minimal_instance(t: dict[str, Any]) -> Any:
    cls = COMPOSITES[t["descriptor"]["ulong"]]
    kwargs = {f["name"].replace("-", "_"): sample_field(f, i) for i, f in enumerate(t["fields"]) if f["mandatory"]}
    return cls(**kwargs)


# -- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("t", COMPOSITE_SPECS, ids=lambda t: t["name"])
def test_every_composite_round_trips_with_every_field_set(t: dict[str, Any]) -> None:
    obj = full_instance(t)
    wire = encode(obj)
    assert wire[:3] == bytes([0x00, 0x53, t["descriptor"]["ulong"]])
    back = decode_all(wire)
    assert type(back) is type(obj)
    assert back == obj
    for f in t["fields"]:
        name = f["name"].replace("-", "_")
        assert getattr(back, name) == getattr(obj, name), name
    assert encode(back) == wire


@pytest.mark.parametrize("t", COMPOSITE_SPECS, ids=lambda t: t["name"])
def test_every_composite_round_trips_with_defaults(t: dict[str, Any]) -> None:
    obj = minimal_instance(t)
    back = round_trip(obj)
    assert type(back) is type(obj)
    assert back == obj
    params = inspect.signature(type(obj)).parameters
    for f in t["fields"]:
        name = f["name"].replace("-", "_")
        if not f["mandatory"]:
            assert getattr(back, name) == params[name].default, name
    # Nothing but the mandatory prefix goes on the wire: defaults are trimmed.
    fields = decode_all(encode(obj)[3:])
    last_mandatory = max((i for i, f in enumerate(t["fields"]) if f["mandatory"]), default=-1)
    assert len(fields) == last_mandatory + 1


@pytest.mark.parametrize(
    "t", [t for t in COMPOSITE_SPECS if any(f["mandatory"] for f in t["fields"])], ids=lambda t: t["name"]
)
def test_missing_or_null_mandatory_field_is_a_decode_error(t: dict[str, Any]) -> None:
    code = ULong(t["descriptor"]["ulong"])
    values = [sample_field(f, i) for i, f in enumerate(t["fields"])]
    for k, f in enumerate(t["fields"]):
        if not f["mandatory"]:
            continue
        nulled = list(values)
        nulled[k] = None
        with pytest.raises(DecodeError, match=f"{t['name']}: mandatory field '{f['name']}'"):
            decode_all(encode(Described(code, nulled)))
        with pytest.raises(DecodeError, match=f"{t['name']}: mandatory field '{f['name']}'"):
            decode_all(encode(Described(code, values[:k])))


# A value of a neighbouring type for each primitive: what a careless or hostile peer
# might send instead (a string for a symbol, a ulong for a uint...).
_WRONG: dict[str, Any] = {
    "boolean": UByte(1),
    "ubyte": UInt(1),
    "ushort": UInt(1),
    "uint": ULong(1),
    "ulong": UInt(1),
    "int": Long(1),
    "long": Int(1),
    "timestamp": Long(1),
    "uuid": b"\x00" * 16,
    "binary": "text",
    "string": Symbol("sym"),
    "symbol": "text",
    "map": [Symbol("k"), "v"],
    "list": {Symbol("k"): "v"},
}


def _wrong_value(field: dict[str, Any]) -> tuple[Any, str]:
    """A value of the wrong type for ``field`` and the type name the error names."""
    if TYPES[field["type"]]["class"] == "composite":
        return "not an error", field["type"]
    primitive = _primitive(field["type"])
    assert primitive is not None
    return _WRONG[primitive], primitive


@pytest.mark.parametrize("t", [t for t in COMPOSITE_SPECS if t["fields"]], ids=lambda t: t["name"])
def test_a_field_of_the_wrong_type_is_a_decode_error(t: dict[str, Any]) -> None:
    """Every field whose spec type is not ``*`` must arrive as that type (for a
    ``multiple`` field: each item); anything else cannot be read as the composite."""
    code = ULong(t["descriptor"]["ulong"])
    values = [sample_field(f, i) for i, f in enumerate(t["fields"])]
    decode_all(encode(Described(code, values)))  # the well-typed original decodes
    checked = 0
    for k, f in enumerate(t["fields"]):
        if f["type"] == "*":
            continue
        wrong, type_name = _wrong_value(f)
        variants = [wrong, [values[k][0], wrong]] if f["multiple"] else [wrong]
        for variant in variants:
            changed = list(values)
            changed[k] = variant
            got = type(decode_all(encode(wrong))).__name__
            expected = f"{t['name']}: field '{f['name']}' must be {type_name}, got {got}"
            with pytest.raises(DecodeError, match=expected):
                decode_all(encode(Described(code, changed)))
        checked += 1
    assert checked == sum(1 for f in t["fields"] if f["type"] != "*")


def test_fields_of_type_any_take_any_type() -> None:
    """message-id is ``*`` (ulong, uuid, binary or string: 3.2.11-3.2.14), not checked."""
    for message_id in (ULong(7), uuid.UUID(int=7), b"id", "id"):
        assert round_trip(Properties(message_id=message_id)).message_id == message_id


def test_composite_body_must_be_a_list() -> None:
    with pytest.raises(DecodeError, match="open: expected a list"):
        decode_all(encode(Described(ULong(0x10), {"container-id": "c"})))


def test_symbolic_descriptor_decodes_too() -> None:
    assert decode_all(encode(Described(Symbol("amqp:open:list"), ["c"]))) == Open("c")


def test_extra_trailing_fields_are_ignored() -> None:
    assert decode_all(encode(Described(ULong(0x18), [None, "from a later version"]))) == Close()


def test_null_fields_take_their_defaults() -> None:
    back = decode_all(encode(Described(ULong(0x10), ["c", None, None, None])))
    assert back.max_frame_size == 4294967295
    assert back.channel_max == 65535
    src = decode_all(encode(Described(ULong(0x28), ["q", None, None, None, None])))
    assert src.durable == TerminusDurability.NONE
    assert src.expiry_policy == TerminusExpiryPolicy.SESSION_END
    assert src.timeout == 0 and src.dynamic is False


# -- multiple fields -----------------------------------------------------------------------


def test_multiple_field_single_value_becomes_a_list() -> None:
    back = decode_all(encode(Described(ULong(0x10), ["c", None, None, None, None, None, None, Symbol("one")])))
    assert back.offered_capabilities == [Symbol("one")]
    assert isinstance(back.offered_capabilities, list)


def test_multiple_field_array_and_null() -> None:
    obj = Open("c", offered_capabilities=[Symbol("a"), Symbol("b")], desired_capabilities=None)
    wire = encode(obj)
    back = decode_all(wire)
    assert back.offered_capabilities == [Symbol("a"), Symbol("b")]
    assert isinstance(back.offered_capabilities, list)
    assert back.desired_capabilities is None
    assert b"\xe0" in wire  # sent as an array


def test_multiple_field_single_value_encodes_as_one_element() -> None:
    one = Open("c", offered_capabilities=Symbol("solo"))  # type: ignore[arg-type]
    assert round_trip(one).offered_capabilities == [Symbol("solo")]


def test_mandatory_multiple_field_normalised() -> None:
    back = decode_all(encode(Described(ULong(0x40), [Symbol("PLAIN")])))
    assert back == SaslMechanisms([Symbol("PLAIN")])
    arr = Array([Symbol("ANONYMOUS"), Symbol("PLAIN")])
    assert round_trip(SaslMechanisms(arr)).sasl_server_mechanisms == [Symbol("ANONYMOUS"), Symbol("PLAIN")]


# -- message sections ----------------------------------------------------------------------


def test_a_protocol_composite_in_a_section_is_data_until_interpreted() -> None:
    # A coordinator's declare (4.5) is an amqp-value holding a composite: read as a message
    # section's value it is a Described, which interpret() makes the composite.
    wire = encode(AmqpValue(Declare(global_id=b"g")))
    back = decode_all(wire)
    assert type(back) is AmqpValue and type(back.value) is Described
    assert back.value.descriptor == Declare.DESCRIPTOR_CODE and encode(back) == wire
    assert interpret(back.value) == Declare(global_id=b"g")


@pytest.mark.parametrize(
    "section",
    [
        Data(b"\x00payload\xff"),
        Data(b""),
        AmqpSequence([1, "two", Symbol("three"), None]),
        AmqpSequence([]),
        AmqpValue({"k": [1, 2]}),
        AmqpValue("text"),
        AmqpValue(None),
        DeliveryAnnotations({Symbol("x-opt-lock-token"): uuid.UUID(int=5)}),
        MessageAnnotations({Symbol("x-opt-sequence-number"): 42, Symbol("x-opt-partition-key"): "p"}),
        ApplicationProperties({"prop": 1, "other": "x"}),
        Footer({Symbol("hash"): b"\x01"}),
    ],
    ids=repr,
)
def test_sections_round_trip(section: Any) -> None:
    wire = encode(section)
    assert wire[:3] == bytes([0x00, 0x53, section.DESCRIPTOR_CODE])
    back = decode_all(wire)
    assert type(back) is type(section)
    assert back == section
    assert SECTIONS[section.DESCRIPTOR_CODE] is type(section)


@pytest.mark.parametrize(
    ("code", "value", "name"),
    [
        (0x75, "not binary", "data"),
        (0x76, {"a": 1}, "amqp-sequence"),
        (0x74, [1], "application-properties"),
        (0x72, "x", "message-annotations"),
    ],
)
def test_section_with_wrong_value_type_is_a_decode_error(code: int, value: Any, name: str) -> None:
    with pytest.raises(DecodeError, match=name):
        decode_all(encode(Described(ULong(code), value)))


def test_header_and_properties_sections() -> None:
    header = Header(durable=True, priority=UByte(4), ttl=UInt(60_000), first_acquirer=False, delivery_count=2)
    props = Properties(
        message_id=uuid.UUID(int=9),
        user_id=b"u",
        to="queue",
        subject="s",
        reply_to="r",
        correlation_id=ULong(7),
        content_type=Symbol("application/json"),
        absolute_expiry_time=Timestamp(10),
        creation_time=Timestamp(5),
        group_id="session-1",
        group_sequence=UInt(3),
        reply_to_group_id="g",
    )
    for section in (header, props, Header(), Properties()):
        assert round_trip(section) == section
        assert SECTIONS[section.DESCRIPTOR_CODE] is type(section)


# -- exact bytes ---------------------------------------------------------------------------


def test_open_exact_bytes_and_trailing_defaults_trimmed() -> None:
    expected = bytes([0x00, 0x53, 0x10, 0xC0, 0x04, 0x01, 0xA1, 0x01, ord("c")])
    assert encode(Open(container_id="c")) == expected
    assert encode(Open(container_id="c", max_frame_size=4294967295)) == expected
    assert encode(Open(container_id="c", max_frame_size=4294967295, channel_max=65535)) == expected
    out = bytearray(b"prefix")
    Open(container_id="c")._amqp_encode(out)
    assert bytes(out) == b"prefix" + expected


def test_transfer_and_disposition_exact_bytes() -> None:
    transfer = Transfer(handle=0, delivery_id=0, delivery_tag=b"\x00", message_format=0, settled=True)
    assert encode(transfer).hex() == "005314c008054343a001004341"
    disposition = Disposition(role=Role.RECEIVER, first=1, settled=True, state=Accepted())
    assert encode(disposition).hex() == "005315c00a05415201404100532445"
    assert encode(Accepted()).hex() == "00532445"


def test_non_trailing_default_is_sent_as_given() -> None:
    # A default in the middle stays (as its value): only trailing ones are trimmed.
    wire = encode(Open("c", max_frame_size=4294967295, idle_time_out=1000))
    back = decode_all(wire)
    assert back.max_frame_size == 4294967295 and back.idle_time_out == 1000


# -- construction, equality, repr ----------------------------------------------------------


def test_mandatory_fields_after_optional_ones_are_checked() -> None:
    with pytest.raises(TypeError, match="next-outgoing-id"):
        Begin()
    with pytest.raises(TypeError, match="incoming-window"):
        Flow(next_outgoing_id=0, outgoing_window=1)
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    assert begin.handle_max == 4294967295 and begin.remote_channel is None
    with pytest.raises(TypeError):
        Transfer(None)  # type: ignore[arg-type]


def test_defaults_use_the_choice_constants() -> None:
    attach = Attach("link", 0, Role.SENDER)
    assert attach.snd_settle_mode is SenderSettleMode.MIXED
    assert attach.rcv_settle_mode is ReceiverSettleMode.FIRST
    assert UByte(2) == SenderSettleMode.MIXED and type(SenderSettleMode.MIXED) is UByte
    assert Role.RECEIVER is True and Role.SENDER is False
    assert AmqpErrorCondition.INTERNAL_ERROR == "amqp:internal-error"
    assert isinstance(AmqpErrorCondition.INTERNAL_ERROR, Symbol)
    assert UInt(2) == TerminusDurability.UNSETTLED_STATE and type(TerminusDurability.NONE) is UInt


def test_equality_and_hash() -> None:
    assert Accepted() == Accepted()
    assert Accepted() != Released()
    assert Open("a") != Open("b")
    assert Open("a") == Open("a", channel_max=65535)
    assert Modified(delivery_failed=True) != Modified(delivery_failed=True, undeliverable_here=True)
    assert Data(b"x") == Data(b"x") and Data(b"x") != AmqpValue(b"x")
    with pytest.raises(TypeError):
        hash(Open("a"))


def test_repr_shows_fields_but_not_credentials() -> None:
    assert repr(Transfer(3, more=True)).startswith("Transfer(handle=3, delivery_id=None")
    assert "more=True" in repr(Transfer(3, more=True))
    init = SaslInit(Symbol("PLAIN"), b"\x00user\x00hunter2", "host")
    text = repr(init)
    assert "hunter2" not in text and "13 bytes redacted" in text and "hostname='host'" in text
    assert "hunter2" not in repr(SaslResponse(b"hunter2"))
    assert "hunter2" not in repr(round_trip(init))


def test_pattern_matching_by_position_and_keyword() -> None:
    frame = round_trip(Transfer(7, delivery_id=9, more=True))
    match frame:
        case Transfer(handle, delivery_id, more=more):
            assert (handle, delivery_id, more) == (7, 9, True)
        case _:
            pytest.fail("Transfer did not match")


def test_nested_attach_round_trip() -> None:
    source = Source(
        address="q",
        durable=TerminusDurability.UNSETTLED_STATE,
        expiry_policy=TerminusExpiryPolicy.NEVER,
        timeout=30,
        dynamic=False,
        filter={Symbol("f"): Described(Symbol("apache.org:selector-filter:string"), "a = 1")},
        default_outcome=Modified(delivery_failed=True),
        outcomes=[Symbol("amqp:accepted:list")],
    )
    attach = Attach(
        "receiver-1",
        1,
        Role.RECEIVER,
        SenderSettleMode.UNSETTLED,
        ReceiverSettleMode.SECOND,
        source=source,
        target=Target(address="client"),
        initial_delivery_count=0,
        max_message_size=ULong(262144),
        properties={Symbol("com.microsoft:timeout"): UInt(60000)},
    )
    back = round_trip(attach)
    assert back == attach
    assert back.source.filter[Symbol("f")].value == "a = 1"
    assert isinstance(back.source.default_outcome, Modified)


# -- property tests on the hot performatives -----------------------------------------------

uints = st.integers(0, 0xFFFFFFFF).map(UInt)
optional_uints = st.none() | uints
delivery_states = st.sampled_from([None, Accepted(), Released(), Rejected(), Modified(delivery_failed=True)])


@given(
    handle=uints,
    delivery_id=optional_uints,
    tag=st.none() | st.binary(max_size=32),
    message_format=optional_uints,
    settled=st.none() | st.booleans(),
    more=st.booleans(),
    rcv=st.none() | st.sampled_from([ReceiverSettleMode.FIRST, ReceiverSettleMode.SECOND]),
    state=delivery_states,
    resume=st.booleans(),
    aborted=st.booleans(),
    batchable=st.booleans(),
)
def test_transfer_round_trip_property(
    handle: int,
    delivery_id: int | None,
    tag: bytes | None,
    message_format: int | None,
    settled: bool | None,
    more: bool,
    rcv: int | None,
    state: Any,
    resume: bool,
    aborted: bool,
    batchable: bool,
) -> None:
    obj = Transfer(handle, delivery_id, tag, message_format, settled, more, rcv, state, resume, aborted, batchable)
    assert round_trip(obj) == obj


@given(
    next_incoming_id=optional_uints,
    incoming_window=uints,
    next_outgoing_id=uints,
    outgoing_window=uints,
    handle=optional_uints,
    delivery_count=optional_uints,
    link_credit=optional_uints,
    available=optional_uints,
    drain=st.booleans(),
    echo=st.booleans(),
)
def test_flow_round_trip_property(
    next_incoming_id: int | None,
    incoming_window: int,
    next_outgoing_id: int,
    outgoing_window: int,
    handle: int | None,
    delivery_count: int | None,
    link_credit: int | None,
    available: int | None,
    drain: bool,
    echo: bool,
) -> None:
    obj = Flow(
        next_incoming_id,
        incoming_window,
        next_outgoing_id,
        outgoing_window,
        handle,
        delivery_count,
        link_credit,
        available,
        drain,
        echo,
    )
    assert round_trip(obj) == obj


@given(
    role=st.booleans(),
    first=uints,
    last=optional_uints,
    settled=st.booleans(),
    state=delivery_states,
    batchable=st.booleans(),
)
def test_disposition_round_trip_property(
    role: bool, first: int, last: int | None, settled: bool, state: Any, batchable: bool
) -> None:
    obj = Disposition(role, first, last, settled, state, batchable)
    assert round_trip(obj) == obj
