"""The single-pass decoder for the usual message shapes agrees with the generic one.

``Message.decode`` reads the common shapes (header, annotations, properties, application
properties, one data section, footer) in one pass and leaves everything else to the
generic section decoder. Property: on every payload - well-formed, out of order, repeated,
truncated or with a byte changed - the message decoded (or the ``DecodeError`` raised) is
the same as the generic decoder's, and the single pass never accepts a payload the generic
decoder rejects. Runs of messages of one shape (a broker's deliveries: the Service Bus
stamps, an id-only properties section...) check the same with the map layouts the single
pass learns from the first of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.codec.errors import DecodeError
from amqplink.codec.layouts import MapLayouts
from amqplink.codec.types import Symbol, Timestamp, UByte, UInt
from amqplink.message import Message
from amqplink.message import _decode as decoder
from amqplink.message._decode import decode_common
from amqplink.message._id_only import id_only_properties_at
from amqplink.protocol import definitions as sections_

AmqpSequence, AmqpValue, Data, Footer = sections_.AmqpSequence, sections_.AmqpValue, sections_.Data, sections_.Footer
Header, Properties = sections_.Header, sections_.Properties
ApplicationProperties, DeliveryAnnotations = sections_.ApplicationProperties, sections_.DeliveryAnnotations
MessageAnnotations = sections_.MessageAnnotations


def _generic(payload: bytes) -> Message:
    msg = Message.__new__(Message)
    msg.header = msg.delivery_annotations = msg.message_annotations = None
    msg.properties = msg.application_properties = msg.footer = None
    msg._decode_sections(payload, len(payload))
    return msg


def _shape(msg: Message) -> str:
    """Values and their exact types (UInt is not int, Symbol is not str)."""

    def typed(value: Any) -> Any:
        if isinstance(value, dict):
            return [(typed(k), typed(v)) for k, v in value.items()]
        if isinstance(value, list):
            return [typed(v) for v in value]
        if hasattr(value, "__slots__") and not isinstance(value, (str, bytes, int)):
            return (type(value).__name__, [typed(getattr(value, f)) for f in type(value).__slots__])
        return (type(value).__name__, value)

    sections = (msg.header, msg.delivery_annotations, msg.message_annotations, msg.properties,
                msg.application_properties, msg.footer, msg.body_type, msg.body)  # fmt: skip
    return repr(typed(list(sections)))


def _outcome(decoder: Any, payload: bytes) -> tuple[str, str]:
    try:
        return "ok", _shape(decoder(payload))
    except DecodeError as exc:
        return "error", str(exc)


def _check(payload: bytes) -> None:
    generic = _outcome(_generic, payload)
    assert _outcome(Message.decode, payload) == generic
    single = Message.__new__(Message)
    if decode_common(single, payload, len(payload)):  # it accepted: the generic decoder must agree
        assert generic == ("ok", _shape(single))


keys = st.sampled_from(
    ["x-opt-sequence-number", "x-opt-enqueued-time", "x-opt-locked-until", "x-opt-partition-key", "k"]
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=0, max_value=2**40).map(Timestamp),
    st.text(max_size=12),
    st.binary(max_size=12),
    st.integers(min_value=0, max_value=255).map(UInt),
)
annotations = st.dictionaries(keys.map(Symbol), values, max_size=5)
header = st.builds(
    Header,
    durable=st.one_of(st.none(), st.booleans()),
    priority=st.one_of(st.none(), st.integers(0, 255).map(UByte)),
    ttl=st.one_of(st.none(), st.integers(0, 2**32 - 1).map(UInt)),
    first_acquirer=st.one_of(st.none(), st.booleans()),
    delivery_count=st.one_of(st.none(), st.integers(0, 2**32 - 1).map(UInt)),
)
properties = st.builds(
    Properties,
    message_id=st.one_of(st.none(), st.text(max_size=40)),
    subject=st.one_of(st.none(), st.text(max_size=10)),
    group_id=st.one_of(st.none(), st.text(max_size=10)),
    creation_time=st.one_of(st.none(), st.integers(0, 2**40).map(Timestamp)),
    content_type=st.one_of(st.none(), st.just(Symbol("application/json"))),
)
sections = st.one_of(
    header,
    annotations.map(DeliveryAnnotations),
    annotations.map(MessageAnnotations),
    properties,
    st.dictionaries(st.text(max_size=6), values, max_size=4).map(ApplicationProperties),
    st.binary(max_size=300).map(Data),
    st.lists(values, max_size=3).map(AmqpSequence),
    values.map(AmqpValue),
    annotations.map(Footer),
)


def _encode(parts: list[Any]) -> bytes:
    out = bytearray()
    for part in parts:
        part._amqp_encode(out)
    return bytes(out)


def _usual(draw: Any) -> list[Any]:
    """The usual order, each section present or not, one data body."""
    parts = [draw(st.one_of(st.none(), s)) for s in (header, annotations.map(DeliveryAnnotations),
             annotations.map(MessageAnnotations), properties,
             st.dictionaries(st.text(max_size=6), values, max_size=4).map(ApplicationProperties))]  # fmt: skip
    parts.append(Data(draw(st.binary(max_size=300))))
    parts.append(draw(st.one_of(st.none(), annotations.map(Footer))))
    return [p for p in parts if p is not None]


@st.composite
def payloads(draw: Any) -> bytes:
    parts = _usual(draw) if draw(st.booleans()) else draw(st.lists(sections, max_size=6))
    payload = bytearray(_encode(parts))
    mutation = draw(st.sampled_from(["none", "truncate", "flip", "insert"]))
    if payload and mutation == "truncate":
        del payload[draw(st.integers(0, len(payload) - 1)) :]
    elif payload and mutation == "flip":
        at = draw(st.integers(0, len(payload) - 1))
        payload[at] = draw(st.integers(0, 255))
    elif mutation == "insert":
        payload.insert(draw(st.integers(0, len(payload))), draw(st.integers(0, 255)))
    return bytes(payload)


@given(payloads())
def test_single_pass_and_generic_decoders_agree(payload: bytes) -> None:
    _check(payload)


def test_the_broker_shape_takes_the_single_pass() -> None:
    payload = _encode([
        Header(delivery_count=UInt(0)),
        MessageAnnotations({Symbol("x-opt-sequence-number"): 7, Symbol("x-opt-enqueued-time"): Timestamp(1)}),
        Properties(message_id="id-1"),
        ApplicationProperties({"a": 1}),
        Data(b"body" * 300),
    ])  # fmt: skip
    msg = Message.__new__(Message)
    assert decode_common(msg, payload, len(payload))
    assert msg.body == b"body" * 300 and msg.message_id == "id-1" and msg.delivery_count == 0
    _check(payload)


@pytest.mark.parametrize(
    "payload",
    [
        # a header whose durable field is a ubyte: the header's field check rejects it
        b"\x00\x53\x70\xc0\x03\x01\x50\x01" + b"\x00\x53\x75\xa0\x01x",
        # message annotations with a duplicate key
        b"\x00\x53\x72\xc1\x09\x04\xa3\x01k\x41\xa3\x01k\x42" + b"\x00\x53\x75\xa0\x01x",
        # application properties that are a list, not a map
        b"\x00\x53\x74\xc0\x01\x00" + b"\x00\x53\x75\xa0\x01x",
        # a string that is not UTF-8 in the properties
        b"\x00\x53\x73\xc0\x04\x01\xa1\x01\xff" + b"\x00\x53\x75\xa0\x01x",
        # a map whose size field disagrees with its contents
        b"\x00\x53\x72\xc1\x05\x02\xa3\x01k\x41\x40" + b"\x00\x53\x75\xa0\x01x",
    ],
)
def test_malformed_usual_shapes_are_rejected_as_by_the_generic_decoder(payload: bytes) -> None:
    with pytest.raises(DecodeError):
        Message.decode(payload)
    assert not decode_common(Message.__new__(Message), payload, len(payload))
    _check(payload)


# -- runs of one shape: the map layouts learned from the first message read the next ones -----
@contextmanager
def fresh_layouts() -> Iterator[None]:
    """The single pass with no map or head layout learned yet (and the module's own ones back after)."""
    saved = dict(decoder._LAYOUTS)
    saved_heads = dict(decoder._HEADS)
    decoder._LAYOUTS.update({code: MapLayouts() for code in saved})
    decoder._HEADS.clear()
    try:
        yield
    finally:
        decoder._LAYOUTS.update(saved)
        decoder._HEADS.clear()
        decoder._HEADS.update(saved_heads)


LOCK_TOKEN = Symbol("x-opt-lock-token")
STAMP_KEYS = [Symbol(k) for k in ("x-opt-sequence-number", "x-opt-enqueued-time", "x-opt-enqueue-sequence-number",
                                  "x-opt-locked-until")]  # fmt: skip
shape_values = st.sampled_from(
    [
        st.integers(2**8, 2**62),  # a long
        st.integers(0, 2**40).map(Timestamp),
        st.integers(0, 255).map(UInt),  # smalluint
        st.text(min_size=3, max_size=3),  # str8 of 3 characters (not always 3 bytes)
        st.binary(min_size=2, max_size=2),
        st.booleans(),
        st.none(),
        st.floats(allow_nan=False),  # a double: no layout
    ]
)


@st.composite
def shaped_runs(draw: Any) -> list[bytes]:
    """Messages of one shape: header, the stamps and some more annotations, properties,
    application properties, a data section, each message with new values and maybe mutated."""
    extra_keys = draw(st.lists(st.sampled_from(["x-opt-partition-key", "k", "user"]), max_size=2, unique=True))
    extra = [(Symbol(k), draw(shape_values)) for k in extra_keys]
    app_keys = draw(st.lists(st.sampled_from(["a", "bb", "DeadLetterReason"]), max_size=2, unique=True))
    app_values = [(k, draw(shape_values)) for k in app_keys]
    with_header, id_length = draw(st.booleans()), draw(st.integers(0, 40))
    rich_properties = draw(st.integers(0, 4)) == 0
    locked = draw(st.booleans())  # a peek-locked delivery: its lock token in the delivery annotations
    run = []
    for _ in range(draw(st.integers(2, 4))):
        stamps = [draw(st.integers(2**8, 2**62)), draw(st.integers(0, 2**40).map(Timestamp))]
        stamps += [stamps[0], draw(st.integers(0, 2**40).map(Timestamp))]
        annotations = dict(zip(STAMP_KEYS, stamps, strict=True))
        annotations.update({k: draw(kind) for k, kind in extra})
        message_id = draw(st.text(min_size=id_length, max_size=id_length))
        parts: list[Any] = [Header(delivery_count=UInt(draw(st.integers(0, 3))))] if with_header else []
        if locked:
            parts.append(DeliveryAnnotations({LOCK_TOKEN: uuid.UUID(bytes=draw(st.binary(min_size=16, max_size=16)))}))
        parts.append(MessageAnnotations(annotations))
        parts.append(Properties(message_id=message_id, subject="s" if rich_properties else None))
        if app_values:
            parts.append(ApplicationProperties({k: draw(kind) for k, kind in app_values}))
        parts.append(Data(draw(st.binary(max_size=300))))
        payload = bytearray(_encode(parts))
        mutation = draw(st.sampled_from(["none", "none", "truncate", "flip", "insert", "delete"]))
        at = draw(st.integers(0, len(payload) - 1))
        if mutation == "truncate":
            del payload[at:]
        elif mutation == "flip":
            payload[at] = draw(st.integers(0, 255))
        elif mutation == "insert":
            payload.insert(at, draw(st.integers(0, 255)))
        elif mutation == "delete":
            del payload[at]
        run.append(bytes(payload))
    return run


def _learned_heads() -> list[Any]:
    return [head for heads in decoder._HEADS.values() for head in heads]


@given(shaped_runs())
def test_runs_of_one_shape_decode_as_by_the_generic_decoder(run: list[bytes]) -> None:
    with fresh_layouts():
        for payload in run:
            _check(payload)
        for head in _learned_heads():  # the key of a head's layouts is all skeleton
            assert head is None or len(head.skeleton[0]) >= decoder.HEAD_KEY


def _delivery(sequence: int, message_id: str, *extra: Any) -> bytes:
    """A message as the broker delivers it: header, the stamps, id-only properties, data."""
    annotations = {STAMP_KEYS[0]: sequence, STAMP_KEYS[1]: Timestamp(sequence + 1),
                   STAMP_KEYS[2]: sequence, STAMP_KEYS[3]: Timestamp(sequence + 2)}  # fmt: skip
    return _encode([Header(delivery_count=UInt(0)), MessageAnnotations(annotations),
                    Properties(message_id=message_id), *extra, Data(b"body")])  # fmt: skip


def test_the_broker_stamps_are_learned_and_read_from_their_layout() -> None:
    delivery = _delivery

    with fresh_layouts():
        first, later = delivery(1000, "id-1"), delivery(2**40, "id-2")
        _check(first)
        layouts = decoder._LAYOUTS[0x72]._layouts
        assert list(layouts.values()) != [None] and len(layouts) == 1
        msg = Message.decode(later)
        assert msg.message_annotations == {STAMP_KEYS[0]: 2**40, STAMP_KEYS[1]: 2**40 + 1,
                                           STAMP_KEYS[2]: 2**40, STAMP_KEYS[3]: 2**40 + 2}  # fmt: skip
        assert type(msg.message_annotations[STAMP_KEYS[1]]) is Timestamp and msg.message_id == "id-2"
        _check(later)


@pytest.mark.parametrize(
    "payload",
    [
        # id-only properties whose message-id is not UTF-8
        b"\x00\x53\x73\xc0\x05\x01\xa1\x02\xff\xfe" + b"\x00\x53\x75\xa0\x01x",
        # id-only properties whose list size disagrees with the id's length
        b"\x00\x53\x73\xc0\x06\x01\xa1\x02ok" + b"\x00\x53\x75\xa0\x01x",
        # id-only properties cut inside the id
        b"\x00\x53\x73\xc0\x05\x01\xa1\x02o",
        # a data section longer than the payload
        b"\x00\x53\x73\xc0\x05\x01\xa1\x02ok" + b"\x00\x53\x75\xb0\x00\x00\x00\x02x",
    ],
)
def test_malformed_id_only_properties_and_data_are_rejected_as_by_the_generic_decoder(payload: bytes) -> None:
    with pytest.raises(DecodeError):
        Message.decode(payload)
    _check(payload)


def test_id_only_properties_are_read_as_the_encoder_writes_them() -> None:
    for message_id in ("", "id", "é" * 126, "x" * 252):
        payload = Message(b"body", message_id=message_id).encode()
        assert id_only_properties_at(payload, 0) is not None
        _check(payload)


@pytest.mark.parametrize("app", [[], [ApplicationProperties({"a": UInt(1), "reason": "abc"})]])
def test_a_learned_head_is_read_without_the_section_readers(app: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    with fresh_layouts():
        _check(_delivery(1000, "id-1", *app))
        assert [head is not None for head in _learned_heads()] == [True]

        def refuse(*args: Any) -> Any:
            raise AssertionError("a section reader was asked")

        for reader in ("_header", "_map_section", "id_only_properties_at", "_read_head_sections"):
            monkeypatch.setattr(decoder, reader, refuse)
        later = _delivery(2**50, "id-2", *app)
        msg = Message.__new__(Message)
        assert decode_common(msg, later, len(later))
        assert msg.message_id == "id-2" and msg.delivery_count == 0 and msg.body == b"body"
        assert msg.message_annotations is not None and msg.message_annotations[STAMP_KEYS[2]] == 2**50
        assert msg.application_properties == (app[0].value if app else None)
        monkeypatch.undo()
        _check(later)


def test_a_peek_locked_delivery_s_lock_token_is_read_from_the_learned_head(monkeypatch: pytest.MonkeyPatch) -> None:
    """Service Bus puts a peek-locked delivery's lock token (a uuid) in its delivery
    annotations: the head with them is learned, and the token read as a field of it."""

    def locked(sequence: int, message_id: str, token: uuid.UUID) -> bytes:
        annotations = {STAMP_KEYS[0]: sequence, STAMP_KEYS[1]: Timestamp(sequence + 1)}
        return _encode([Header(delivery_count=UInt(0)), DeliveryAnnotations({LOCK_TOKEN: token}),
                        MessageAnnotations(annotations), Properties(message_id=message_id), Data(b"body")])  # fmt: skip

    with fresh_layouts():
        first = locked(1000, "id-1", uuid.uuid4())
        _check(first)
        assert [head is not None for head in _learned_heads()] == [True]
        token = uuid.uuid4()
        later = locked(2**50, "id-2", token)
        for reader in ("_header", "_map_section", "id_only_properties_at", "_read_head_sections"):
            monkeypatch.setattr(decoder, reader, None)
        msg = Message.__new__(Message)
        assert decode_common(msg, later, len(later))
        assert msg.delivery_annotations == {LOCK_TOKEN: token}
        assert type(msg.delivery_annotations[LOCK_TOKEN]) is uuid.UUID
        assert msg.message_id == "id-2" and msg.body == b"body"
        monkeypatch.undo()
        _check(later)


def test_heads_of_one_key_are_tried_most_recent_first() -> None:
    """Ids of several lengths give one key several heads; each payload is read from its own
    head whatever the order they come in, and the head a payload matched is tried first for
    the next one (consecutive messages are mostly alike)."""
    with fresh_layouts():
        ids = ["a", "bb", "ccc", "dddd"]
        for message_id in ids:  # one head per id length, learned in this order
            _check(_delivery(1000, message_id))
        (heads,) = decoder._HEADS.values()
        assert len(heads) == len(ids) and all(head is not None for head in heads)
        for message_id in [*reversed(ids), "ee", "ee", "f", "gggg"]:
            payload = _delivery(2**40, message_id)
            _check(payload)
            assert Message.decode(payload).message_id == message_id
            assert decoder.decode_learned(Message.__new__(Message), payload, len(payload))
            first = heads[0]
            assert first is not None and first.unpack(payload, 0)[0::2] == first.skeleton  # its head is first
        assert len(heads) == len(ids)  # nothing learned twice


def test_a_head_unlike_the_learned_one_is_read_section_by_section() -> None:
    with fresh_layouts():
        _check(_delivery(1000, "id-1"))
        for later in (
            _delivery(1000, "xy-z"),  # another id of the same length
            _delivery(1000, "id-1")[:40],  # cut inside the head
            _delivery(1000, "id-1").replace(b"id-1", b"i\xff-1"),  # a message-id that is not UTF-8
            _delivery(1000, "id-1").replace(b"\x00\x53\x75", b"\x00\x53\x77"),  # an amqp-value body
        ):
            _check(later)


def test_a_learned_head_reads_the_data_section_and_leaves_the_rest_to_the_generic_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The learned head takes in the data section's own head (its size a field); what follows
    the body is a footer or the generic decoder's to judge."""
    with fresh_layouts():
        _check(_delivery(1000, "id-1"))
        [head] = _learned_heads()
        assert head is not None and head.size == len(_delivery(1000, "id-1")) - len(b"body")
        footer = _encode([Footer({Symbol("f"): 1})])
        for later in (
            _delivery(7, "id-2") + footer,  # a footer after the body
            _delivery(7, "id-2") + _encode([Data(b"more")]),  # a second data section
            _delivery(7, "id-2") + _encode([AmqpValue(1)]),  # a body of mixed sections
            _delivery(7, "id-2") + footer + footer,  # a footer twice
            _delivery(7, "id-2")[:-1],  # the data section runs past the payload
            _delivery(7, "id-2").replace(b"\xa0\x04body", b"\xa0\x02body"),  # a shorter data section
        ):
            _check(later)
        msg = Message.__new__(Message)
        monkeypatch.setattr(decoder, "_read_head_sections", None)  # the learned head alone reads it
        assert decoder.decode_learned(msg, _delivery(7, "id-2") + footer, len(_delivery(7, "id-2") + footer))
        assert msg.footer == {Symbol("f"): 1} and msg.body == b"body" and msg.message_id == "id-2"


def test_a_learned_head_of_a_vbin8_body_does_not_read_a_vbin32_one() -> None:
    with fresh_layouts():
        small = _delivery(1000, "id-1")
        large = small.replace(b"\x00\x53\x75\xa0\x04body", _encode([Data(b"b" * 300)]))
        for payload in (small, large, small, large):
            _check(payload)
        assert len(_learned_heads()) == 2  # one head each: the data section's constructor is skeleton


@given(payloads())
def test_a_view_of_a_payload_decodes_as_the_payload(payload: bytes) -> None:
    """The receive path hands over a view of the frame; the data-only fast path reads it in place."""
    assert _outcome(lambda p: Message.decode(memoryview(bytearray(p))), payload) == _outcome(Message.decode, payload)


@pytest.mark.parametrize(
    ("size", "wide"), [(n, False) for n in (0, 1, 2, 3, 4, 254)] + [(n, True) for n in (0, 1, 2, 3, 4, 255, 256, 1024)]
)
@pytest.mark.parametrize("change", ["none", "longer", "shorter", "trailing"])
def test_a_lone_data_section_decodes_as_by_the_generic_decoder(size: int, wide: bool, change: str) -> None:
    """The data-only fast path (vbin8 or vbin32, whatever the size) reads a lone data section
    as the generic decoder does, from bytes or a view, and leaves anything else to it."""
    body = bytes(range(256)) * 4
    body = body[:size]
    announced = size + (change == "longer") - (change == "shorter" and size > 0)
    head = b"\x00\x53\x75" + (b"\xb0" + announced.to_bytes(4, "big") if wide else bytes((0xA0, announced)))
    payload = head + body + (b"\x00\x53\x78\xc1\x01\x00" if change == "trailing" else b"")
    _check(payload)
    view = _outcome(lambda p: Message.decode(memoryview(bytearray(p))), payload)
    assert view == _outcome(_generic, payload)
    if change == "none":
        assert view[0] == "ok" and Message.decode(memoryview(payload)).body == body


# -- no silent fallback: only decode errors send a payload to the generic decoder ---------------
def _with_footer() -> bytes:
    return _delivery(1000, "id-1") + _encode([Footer({Symbol("k"): UInt(1)})])


@pytest.mark.parametrize("learned", [False, True])
def test_a_bug_in_the_single_pass_is_raised_not_hidden(learned: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A footer makes both passes call ``_footer``; a bug there (here a TypeError) must reach
    the caller instead of turning into a slower generic decode."""
    payload = _with_footer()
    with fresh_layouts():
        if learned:
            _check(payload)
            assert [head is not None for head in _learned_heads()] == [True]

        def bug(*args: Any) -> Any:
            raise TypeError("a bug in the single pass")

        monkeypatch.setattr(decoder, "_footer", bug)
        with pytest.raises(TypeError, match="a bug in the single pass"):
            Message.decode(payload)


@pytest.mark.parametrize("learned", [False, True])
def test_a_decode_error_in_the_single_pass_leaves_the_payload_to_the_generic_decoder(
    learned: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = _with_footer()
    expected = _shape(_generic(payload))
    with fresh_layouts():
        if learned:
            _check(payload)

        def refuse(buf: bytes, pos: int, n: int) -> Any:
            raise DecodeError("not read here", pos)

        monkeypatch.setattr(decoder, "_footer", refuse)
        single = Message.__new__(Message)
        assert not decode_common(single, payload, len(payload))
        assert _shape(Message.decode(payload)) == expected
