"""Envelope.deliver (the fast delivery encoding) carries exactly what Envelope.encode does."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.namespace import envelope as envelope_module
from amqplink.broker.namespace.envelope import (
    DA_EMPTY,
    DA_LOCKED,
    ENQUEUED_TIME,
    LOCKED_UNTIL,
    SEQUENCE_NUMBER,
    Envelope,
    body_only,
    deliver_all,
    delivery_stamps,
    split_message,
)
from amqplink.broker.namespace.store import MessageState, StoredMessage
from amqplink.codec.encode import encode
from amqplink.codec.types import Symbol, UByte, UInt
from amqplink.message import Message
from amqplink.protocol.definitions import DeliveryAnnotations, Header

_times = st.one_of(st.floats(0, 4e9), st.just(1e13))  # 1e13: beyond year 9999, clamped
_annotation_keys = st.one_of(
    st.sampled_from(["x-opt-partition-key", "x-opt-scheduled-enqueue-time", "custom"]),
    st.sampled_from([str(SEQUENCE_NUMBER), str(LOCKED_UNTIL), str(ENQUEUED_TIME)]),  # a stamp already there
    st.text("abcdefgh", min_size=1, max_size=100),  # a few make a map32
)
_annotation_values = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=20), st.booleans())


@st.composite
def messages(draw: Any) -> Message:
    header = None
    if draw(st.booleans()):
        header = Header(
            durable=draw(st.one_of(st.none(), st.booleans())),
            priority=draw(st.one_of(st.none(), st.integers(0, 255).map(UByte))),
            ttl=draw(st.one_of(st.none(), st.integers(0, 2**32 - 1).map(UInt))),
            first_acquirer=draw(st.one_of(st.none(), st.booleans())),
            delivery_count=draw(st.one_of(st.none(), st.integers(0, 10).map(UInt))),
        )
    annotations = draw(st.dictionaries(_annotation_keys.map(Symbol), _annotation_values, max_size=8))
    delivery_keys = st.sampled_from(["x-da", "x-opt-lock-token", "other"]).map(Symbol)  # (a lock token of its own)
    delivery_annotations = draw(st.dictionaries(delivery_keys, _annotation_values, max_size=3))
    return Message(
        draw(st.binary(max_size=64)),
        header=header,
        message_annotations=annotations or None,
        delivery_annotations=delivery_annotations or None,
        message_id=draw(st.one_of(st.none(), st.text(max_size=8))),
        application_properties=draw(
            st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.integers(0, 1000), max_size=3))
        ),
    )


@settings(deadline=None)
@given(
    messages(),
    st.integers(1, 2**63 - 1),
    _times,
    st.one_of(st.none(), _times),
    st.integers(0, 2**32 - 1),
    st.binary(min_size=16, max_size=16),
)
def test_deliver_matches_encode(
    message: Message, seq: int, enqueued: float, locked: float | None, count: int, token: bytes
) -> None:
    """Service Bus's delivery-annotations: the sender's (an empty map without), with the lock
    token merged in when locked."""
    envelope = split_message(message.encode())
    lock_token = None if locked is None else token
    own = message.delivery_annotations or {}
    if own:
        merged = own if lock_token is None else {**own, Symbol("x-opt-lock-token"): uuid.UUID(bytes=token)}
        annotations = encode(DeliveryAnnotations(merged))
    else:
        annotations = DA_EMPTY if lock_token is None else DA_LOCKED + lock_token
    expected = Message.decode(envelope.encode(delivery_stamps(seq, enqueued, locked), count, None, annotations))
    lock = {Symbol("x-opt-lock-token"): uuid.UUID(bytes=token)}
    assert expected.delivery_annotations == (own if locked is None else {**own, **lock})
    for _ in range(2):  # the second time from the cached annotations and header
        got = Message.decode(envelope.deliver(seq, enqueued, locked, count, None, lock_token))
        assert got.header == expected.header
        assert got.delivery_annotations == expected.delivery_annotations
        assert got.message_annotations == expected.message_annotations
        assert got.properties == expected.properties
        assert got.application_properties == expected.application_properties
        assert got.body == expected.body


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(messages(), st.binary(max_size=64).map(Message)),  # most have no header nor annotations
            st.integers(1, 2**63 - 1),
            _times,
            _times,
            st.one_of(st.just(1), st.integers(0, 5)),
            st.binary(min_size=16, max_size=16),
        ),
        max_size=6,
    ),
    st.booleans(),
)
def test_deliver_all_is_deliver_of_each(batch: list[Any], peek_lock: bool) -> None:
    """The batch's deliveries (the locked first ones assembled at once) are exactly
    :meth:`Envelope.deliver`'s: a peek-lock batch's locked-until stamped and its lock tokens
    (the delivery-tags, in .NET GUID order) in the delivery-annotations as uuids."""
    state = MessageState.LOCKED if peek_lock else MessageState.AVAILABLE
    stored = [
        StoredMessage(seq, split_message(message.encode()), enqueued, 0.0, state, count, locked_until=until, lock=tag)
        for message, seq, enqueued, until, count, tag in batch
    ]
    expected = [
        m.envelope.deliver(
            m.sequence_number,
            m.enqueued_at,
            m.locked_until if peek_lock else None,
            max(m.delivery_count - 1, 0),
            None,
            uuid.UUID(bytes_le=m.lock).bytes if peek_lock else None,
        )
        for m in stored
    ]
    got = deliver_all(stored, [m.lock for m in stored] if peek_lock else None)
    assert got == expected
    for payload, m in zip(got, stored, strict=True):
        annotations = Message.decode(payload).delivery_annotations
        own = m.envelope.delivery_annotations or {}
        assert annotations == ({**own, Symbol("x-opt-lock-token"): uuid.UUID(bytes_le=m.lock)} if peek_lock else own)


def test_header_cache_is_bounded() -> None:
    envelope = split_message(Message(b"x", ttl=1.0).encode())
    for count in range(envelope_module.HEADER_CACHE_MAX + 10):
        envelope.deliver(1, 0.0, None, count)
    assert 0 < len(envelope_module._headers) <= envelope_module.HEADER_CACHE_MAX


@settings(deadline=None)
@given(messages())
def test_head_and_pieces_are_encode(message: Message) -> None:
    """The store writes head(), props_raw and body as they are: together exactly encode()'s bytes."""
    envelope = split_message(message.encode())
    assert envelope.head() + envelope.props_raw + envelope.body == envelope.encode()


@given(body=st.binary(max_size=64))
def test_a_bare_body_envelope_is_the_one_the_dataclass_makes(body: bytes) -> None:
    """``body_only`` (split_message's shortcut) sets every field as ``Envelope(...)`` does."""
    encoded = b"\x00\x53\x75\xb0" + len(body).to_bytes(4, "big") + body
    made = Envelope(None, {}, None, None, b"", encoded)
    for given_as in (encoded, memoryview(encoded)):
        fast = body_only(given_as)
        assert fast is not None
        assert [getattr(fast, n) for n in Envelope.__slots__] == [getattr(made, n) for n in Envelope.__slots__]
    assert body_only(Message(body, message_id="m").encode()) is None  # a properties section to split
    # a sent message the general path decides: another message-format, over max-message-size
    assert body_only(encoded, 0x80013700) is None
    assert body_only(encoded, 0, len(encoded) - 1) is None
    assert body_only(encoded, 0, len(encoded)) is not None
    assert split_message(encoded) == Envelope(None, {}, None, None, b"", encoded)
    assert split_message(encoded).size == len(encoded)


_texts = st.text(max_size=300)


@settings(deadline=None)
@given(
    message_id=st.one_of(_texts, st.binary(max_size=20), st.integers(min_value=0, max_value=2**64 - 1)),
    subject=st.one_of(st.none(), _texts),
    ttl=st.one_of(st.none(), st.integers(min_value=0, max_value=4_000_000)),  # seconds
    app=st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), max_size=3)),
)
def test_id_only_properties_split_as_the_generic_decoder_splits_them(
    message_id: Any, subject: str | None, ttl: int | None, app: dict[str, Any] | None
) -> None:
    """A properties section with only a message-id is read by the client decoder's reader for
    that shape; every message splits exactly as with the generic decoder alone."""
    payload = Message(b"body", message_id=message_id, subject=subject, ttl=ttl, application_properties=app).encode()
    fast = split_message(payload)
    original = envelope_module._id_only_properties
    envelope_module._id_only_properties = lambda buf, pos: None  # type: ignore[assignment]
    try:
        generic = split_message(payload)
    finally:
        envelope_module._id_only_properties = original
    assert fast == generic
    assert fast.size == generic.size


def test_a_message_id_only_properties_section_skips_the_generic_decoder(monkeypatch: Any) -> None:
    payload = Message(b"body", message_id="a0b1c2").encode()

    def refuse(*_: Any) -> Any:
        raise AssertionError("the generic decoder was asked")

    monkeypatch.setattr(envelope_module, "decode", refuse)
    envelope = split_message(payload)
    assert envelope.message_id == "a0b1c2"
    assert envelope.body == Message(b"body").encode()
