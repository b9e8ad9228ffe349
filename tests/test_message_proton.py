"""Messages cross-checked against qpid-proton's own message codec, both directions."""

from __future__ import annotations

import uuid

import proton
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink import Message
from amqplink.codec.types import Symbol

MIB = bytes(range(256)) * 4096
_C_STRING_CHARS = st.characters(codec="utf-8", exclude_characters="\x00")


def to_proton(message: Message) -> proton.Message:
    got = proton.Message()
    got.decode(message.encode())
    return got


def from_proton(message: proton.Message) -> Message:
    return Message.decode(bytes(message.encode()))


def _bytes(value: object) -> object:
    return bytes(value) if isinstance(value, memoryview) else value


def test_amqplink_message_read_by_proton() -> None:
    m = Message(
        b"payload",
        message_id="id-1",
        correlation_id=uuid.UUID(int=3),
        subject="order",
        content_type="application/json",
        session_id="session-1",
        reply_to="replies",
        to="queue-1",
        ttl=2.5,
        durable=True,
        priority=6,
        delivery_count=1,
        application_properties={"tenant": "contoso", "attempt": 3, "ok": True},
        partition_key="pk-1",
    )
    p = to_proton(m)
    assert p.inferred is True  # a data section, as proton calls it
    assert _bytes(p.body) == b"payload"
    assert p.id == "id-1" and p.correlation_id == uuid.UUID(int=3)
    assert p.subject == "order" and p.content_type == "application/json"
    assert p.group_id == "session-1" and p.reply_to == "replies" and p.address == "queue-1"
    assert p.ttl == 2.5 and p.durable is True and p.priority == 6 and p.delivery_count == 1
    assert p.properties == {"tenant": "contoso", "attempt": 3, "ok": True}
    assert p.annotations == {Symbol("x-opt-partition-key"): "pk-1"}


def test_proton_message_read_by_amqplink() -> None:
    p = proton.Message(
        body=b"abc",
        id=5,
        subject="s",
        ttl=1.5,
        durable=True,
        priority=7,
        group_id="g",
        content_type="text/plain",
        properties={"a": 1, "b": "two"},
        annotations={"x-opt-partition-key": "pk"},
    )
    m = from_proton(p)
    assert m.body_type == "value" and m.body == b"abc"  # proton sends bytes as amqp-value unless inferred
    assert m.message_id == 5 and m.subject == "s" and m.ttl == 1.5 and m.durable is True and m.priority == 7
    assert m.session_id == "g" and m.content_type == "text/plain"
    assert m.application_properties == {"a": 1, "b": "two"}
    assert m.partition_key == "pk"


def test_data_sections_and_sequences_both_ways() -> None:
    p = proton.Message(body=b"raw", inferred=True)
    assert from_proton(p).body_type == "data" and from_proton(p).body == b"raw"
    p = proton.Message(body=[1, "two", 3.5], inferred=True)
    m = from_proton(p)
    assert m.body_type == "sequence" and m.body == [1, "two", 3.5]
    back = to_proton(Message([1, "two"], body_type="sequence"))
    assert back.inferred is True and list(back.body) == [1, "two"]
    value = to_proton(Message({"k": [1, 2]}))
    assert value.inferred is False and value.body == {"k": [1, 2]}


def test_one_mebibyte_bodies_both_ways() -> None:
    assert _bytes(to_proton(Message(MIB)).body) == MIB
    assert from_proton(proton.Message(body=MIB, inferred=True)).body == MIB


@settings(deadline=None)
@given(
    body=st.binary(max_size=2000),
    message_id=st.one_of(st.none(), st.text(min_size=1, max_size=10)),
    # proton's C API passes subject and group-id as NUL-terminated strings: no NULs there;
    # and AMQP strings are UTF-8, so no lone surrogates either (as st.text() already excludes).
    subject=st.one_of(st.none(), st.text(_C_STRING_CHARS, max_size=10)),
    group_id=st.one_of(st.none(), st.text(_C_STRING_CHARS, max_size=10)),
    ttl_ms=st.one_of(st.none(), st.integers(min_value=1, max_value=10**7)),
    app=st.dictionaries(
        st.text(max_size=6), st.one_of(st.integers(-(2**31), 2**31 - 1), st.text(max_size=6), st.booleans()), max_size=4
    ),
)
def test_generated_messages_agree_with_proton_both_ways(
    body: bytes,
    message_id: str | None,
    subject: str | None,
    group_id: str | None,
    ttl_ms: int | None,
    app: dict[str, object],
) -> None:
    ttl = None if ttl_ms is None else ttl_ms / 1000
    m = Message(
        body, message_id=message_id, subject=subject, session_id=group_id, ttl=ttl, application_properties=app or None
    )
    p = to_proton(m)
    assert _bytes(p.body) == body and p.id == message_id and p.subject == subject and p.group_id == group_id
    assert (p.ttl or None) == ttl
    assert (p.properties or {}) == app
    p2 = proton.Message(body=body, inferred=True, id=message_id, subject=subject, group_id=group_id)
    if ttl is not None:
        p2.ttl = ttl
    if app:
        p2.properties = app
    back = from_proton(p2)
    assert back.body == body and back.message_id == message_id and back.subject == subject
    # proton truncates seconds to milliseconds (16.345 s -> 16344 ms); amqplink must read
    # exactly the milliseconds proton put on the wire, which proton reads back as p2.ttl.
    assert back.session_id == group_id and (back.ttl or 0.0) == p2.ttl and (back.application_properties or {}) == app
    assert ttl is None or abs(back.ttl - ttl) <= 0.001
