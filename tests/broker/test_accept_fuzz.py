"""A fuzz of the broker's accept path (issue 30, item 2): well-framed but odd message
sections, in every encoding and of every type, sent to a queue and a partitioned queue,
alone or in a batch. The invariant: each is refused with ``amqp:decode-error`` (nothing
stored), or it is stored AND delivered AND peeked AND read back from a durable store's
records, every time holding what was sent; never acknowledged and then lost.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig
from amqplink.broker.durable.records import State, messages_records, stored_message
from amqplink.broker.namespace import BATCH_FORMAT, EntityError, Namespace
from amqplink.codec import same_value
from amqplink.codec.decode import decode
from amqplink.codec.errors import DecodeError
from amqplink.message import Message
from amqplink.protocol.definitions import AmqpSequence, AmqpValue, Data, DeliveryAnnotations, Footer
from amqplink.sbwire.annotations import (
    ENQUEUED_TIME,
    LOCK_TOKEN,
    LOCKED_UNTIL,
    MESSAGE_STATE,
    SEQUENCE_NUMBER,
)
from tests import profiles
from tests.broker.nsutil import T0
from tests.codec.wire_strategies import scalar_bytes, typed, wire_maps, wire_values

pytestmark = pytest.mark.fuzz

_NAMES = {
    0x70: "amqp:header:list", 0x71: "amqp:delivery-annotations:map", 0x72: "amqp:message-annotations:map",
    0x73: "amqp:properties:list", 0x74: "amqp:application-properties:map", 0x75: "amqp:data:binary",
    0x76: "amqp:amqp-sequence:list", 0x77: "amqp:amqp-value:*", 0x78: "amqp:footer:map",
}  # fmt: skip
_STAMPS = {SEQUENCE_NUMBER, ENQUEUED_TIME, LOCKED_UNTIL, MESSAGE_STATE}
"""What the broker writes into every delivery's annotations itself (Service Bus's stamps)."""


def _u32(n: int) -> bytes:
    return n.to_bytes(4, "big")


def _descriptor(code: int) -> st.SearchStrategy[bytes]:
    """A section's descriptor: mostly a smallulong, also a full ulong or its symbol."""
    name = _NAMES[code].encode()
    forms = [b"\x00\x80" + code.to_bytes(8, "big"), b"\x00\xa3" + bytes((len(name),)) + name]
    return st.sampled_from([b"\x00\x53" + bytes((code,))] * 6 + forms)


def _list(items: list[bytes], wide: bool) -> bytes:
    body = b"".join(items)
    if not items and not wide:
        return b"\x45"
    if wide or len(body) >= 255:
        return b"\xd0" + _u32(len(body) + 4) + _u32(len(items)) + body
    return b"\xc0" + bytes((len(body) + 1, len(items))) + body


def _fields(kinds: list[st.SearchStrategy[bytes]]) -> st.SearchStrategy[bytes]:
    """A composite's field list: each field of its type (any width), null, or anything at all."""
    field = [st.one_of(kind, st.just(b"\x40"), scalar_bytes if i % 3 == 0 else kind) for i, kind in enumerate(kinds)]
    return st.integers(0, len(kinds)).flatmap(
        lambda n: st.tuples(st.tuples(*field[:n]) if n else st.just(()), st.booleans())
    ).map(lambda t: _list(list(t[0]), t[1]))


_BOOL, _UINT, _UBYTE, _STR, _SYM, _TIME, _BIN = (
    typed(0x41, 0x42, 0x56), typed(0x70, 0x52, 0x43), typed(0x50), typed(0xA1, 0xB1), typed(0xA3, 0xB3),
    typed(0x83), typed(0xA0, 0xB0),
)  # fmt: skip
_ID = st.one_of(_STR, typed(0x80, 0x53, 0x44), typed(0x98), _BIN)
_HEADER = _fields([_BOOL, _UBYTE, _UINT, _BOOL, _UINT])
_PROPERTIES = _fields([_ID, _BIN, _STR, _STR, _STR, _ID, _SYM, _SYM, _TIME, _TIME, _STR, _UINT, _STR])
_ANNOTATION_KEYS = st.one_of(_SYM, typed(0x80, 0x53, 0x44), scalar_bytes)
_APPLICATION_KEYS = st.one_of(_STR, _STR, _STR, scalar_bytes)


def _section(code: int, value: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.tuples(_descriptor(code), value).map(b"".join)


_body = st.one_of(
    st.lists(_section(0x75, _BIN), min_size=1, max_size=3).map(b"".join),
    st.lists(_section(0x76, st.tuples(st.lists(wire_values, max_size=3), st.booleans()).map(lambda t: _list(*t))),
             min_size=1, max_size=2).map(b"".join),
    _section(0x77, wire_values),
)  # fmt: skip


def _maybe(section: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(st.just(b""), section)


odd_messages = st.tuples(
    _maybe(_section(0x70, _HEADER)),
    _maybe(_section(0x71, wire_maps(_ANNOTATION_KEYS))),
    _maybe(_section(0x72, wire_maps(_ANNOTATION_KEYS))),
    _maybe(_section(0x73, _PROPERTIES)),
    _maybe(_section(0x74, wire_maps(_APPLICATION_KEYS))),
    _body,
    _maybe(_section(0x78, wire_maps(_ANNOTATION_KEYS))),
).flatmap(
    # now and then two sections swapped: out of order, which is refused
    lambda parts: st.one_of(st.just(parts), st.permutations(parts))
).map(b"".join)
"""A message of well-framed sections holding odd values, in any encoding."""

_EXPIRED_TO_DEAD_LETTERS = {"dead_lettering_on_message_expiration": True}
NAMESPACE = NamespaceConfig(
    queues=(
        QueueConfig("q", EntityProperties(**_EXPIRED_TO_DEAD_LETTERS)),
        QueueConfig("pq", EntityProperties(enable_partitioning=True, partition_count=2, **_EXPIRED_TO_DEAD_LETTERS)),
    )
)
_BODY = (Data, AmqpSequence, AmqpValue, Footer)


def _assert_holds(sent: Message, got: Message, what: str) -> None:
    """``got`` holds ``sent``'s sections: the header's fields but the two the broker sets
    (delivery-count, and the ttl in force when the message had none), the annotations but
    the broker's stamps, the rest exactly; the sender's delivery annotations kept (as Service
    Bus keeps them), but a lock token the broker's own replaces."""
    assert got.body_type == sent.body_type and same_value(got.body, sent.body), what
    if sent.header is not None:
        assert got.header is not None
        for name in ("durable", "priority", "first_acquirer", "ttl"):
            assert getattr(got.header, name) == getattr(sent.header, name), (what, name)
    for key, value in (sent.message_annotations or {}).items():
        if key not in _STAMPS:
            assert same_value((got.message_annotations or {}).get(key), value), (what, key)
    assert got.properties == sent.properties or (got.properties is None and _empty(sent)), what
    assert same_value(got.application_properties or None, sent.application_properties or None), what
    assert same_value(got.footer or None, sent.footer or None), what
    for key, value in (sent.delivery_annotations or {}).items():
        if key != LOCK_TOKEN:
            assert same_value((got.delivery_annotations or {}).get(key), value), (what, key)


def _empty(sent: Message) -> bool:
    props = sent.properties
    return props is None or all(getattr(props, name) is None for name in props.__slots__)


def _peek_all(ns: Namespace, address: str) -> list[Any]:
    """Every stored message, peeked as the SDK pages (a partitioned queue answers one fragment at a time)."""
    entity = ns.receiver_source(address)
    found: list[Any] = []
    start = 0
    while page := entity.peek(start, 100, T0):
        found += page
        start = page[-1].sequence_number + 1
    return found


def _held_by_one(sent: list[Message], got: Message, what: str) -> None:
    """``got`` holds what one of ``sent`` holds (messages of a batch may share a body)."""
    failures = []
    for one in sent:
        try:
            _assert_holds(one, got, what)
            return
        except AssertionError as exc:
            failures.append(exc)
    raise failures[0]


def _check_kept(ns: Namespace, address: str, sent: list[Message]) -> None:
    """Every message of ``sent`` is stored, peeked, read back from the records a durable store
    writes of it, and delivered, each time holding what it was sent with. The one way out
    without a delivery is the sender's own: a header ttl of 0 expires it on arrival, into the
    dead-letter queue (3.2.1: "messages that live longer than their expiration time will be
    discarded (or dead lettered)")."""
    live = [m for m in sent if m.header is None or m.header.ttl != 0]
    entity = ns.receiver_source(address)
    peeked = _peek_all(ns, address)
    assert len(peeked) == len(live), f"{address}: {len(peeked)} peeked, {len(live)} acknowledged and live"
    expired = _peek_all(ns, f"{address}/$deadletterqueue")
    assert len(expired) == len(sent) - len(live), f"{address}: {len(expired)} expired of {len(sent) - len(live)}"
    records: list[bytes] = []
    messages_records(records, 1, peeked)
    state = State()
    state.apply(b"".join(records))
    for msg in peeked:
        _held_by_one(live, Message.decode(entity.encode(msg, peek=True)), f"{address} peeked")
        restored = stored_message(msg.sequence_number, state.messages[1][msg.sequence_number])
        assert restored is not None, f"{address}: the durable store's record of it does not read back"
        _held_by_one(live, Message.decode(restored.envelope.encode()), f"{address} restored")
    taken = entity.receive_many(T0, 100, lock=True)
    assert len(taken) == len(live), f"{address}: {len(taken)} of {len(live)} delivered"
    for payload in entity.encode_all(taken):
        _held_by_one(live, Message.decode(payload), f"{address} delivered")


def _read(payload: bytes, address: str) -> Message:
    """``payload`` as a receiver reads it once the broker kept it: with delivery annotations
    after the body as the message's delivery annotations (the official SDK writes them there,
    the broker keeps them: envelope.check_body). A message the broker kept must be one a
    receiver reads."""
    sections = []
    pos = 0
    while pos < len(payload):
        start = pos
        section, pos = decode(payload, pos)
        sections.append((start, type(section)))
    trailing = None
    if len(sections) > 1 and sections[-1][1] is DeliveryAnnotations and sections[-2][1] in _BODY:
        trailing = decode(payload, sections[-1][0])[0].value
        payload = payload[: sections[-1][0]]
    try:
        message = Message.decode(payload)
    except DecodeError as exc:
        raise AssertionError(f"{address} kept a message no receiver reads: {exc}") from None
    if trailing is not None:
        message.delivery_annotations = trailing
    return message


@settings(profiles.FUZZ, deadline=None)
@given(payload=odd_messages)
def test_an_odd_message_is_refused_or_kept_whole(payload: bytes) -> None:
    ns = Namespace(NAMESPACE)
    for address in ("q", "pq"):
        try:
            ns.send(ns.sender_target(address), payload, T0)
        except EntityError as refused:
            assert refused.condition == "amqp:decode-error", refused
            assert _peek_all(ns, address) == []
            continue
        _check_kept(ns, address, [_read(payload, address)])


@settings(profiles.FUZZ, deadline=None)
@given(payloads=st.lists(odd_messages, min_size=1, max_size=3))
@example(  # no MessageId, then "" (found by the fuzz)
    payloads=[
        b"\x00Su\xa0\x00",
        b"\x00Ss\xc0%\x0b\xa1\x00\xa0\x00\xa1\x00\xa1\x00\xa1\x00\xa1\x00\xa3\x00\xa3\x00\x83\x00\x00\x00\x00\x00\x00"
        b"\x00\x00\x83\x00\x00\x00\x00\x00\x00\x00\x00\xa1\x00\x00Sw@",
    ]
)
def test_a_batch_of_odd_messages_is_refused_or_kept_whole(payloads: list[bytes]) -> None:
    ns = Namespace(NAMESPACE)
    batch = Message(payloads, body_type="data").encode()
    for address in ("q", "pq"):
        try:
            ns.send(ns.sender_target(address), batch, T0, BATCH_FORMAT)
        except EntityError as refused:
            # a partitioned entity also refuses a batch whose messages name distinct keys
            # (SessionId, PartitionKey, MessageId: one of them "", another none), as Service Bus does
            batching = address == "pq" and len(payloads) > 1 and refused.condition == "com.microsoft:argument-error"
            assert refused.condition == "amqp:decode-error" or batching, refused
            assert _peek_all(ns, address) == []  # a batch is kept whole or not at all
            continue
        _check_kept(ns, address, [_read(p, address) for p in payloads])
