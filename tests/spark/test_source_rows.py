"""The source's rows (:func:`amqplink.spark.rows.to_arrow`): the usual shape read from the
sections gives what the message's getters give, for every shape."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec.types import Symbol, Timestamp, UInt, ULong
from amqplink.message import Message
from amqplink.protocol.definitions import Header
from amqplink.servicebus.message import ServiceBusReceivedMessage
from amqplink.spark import rows
from amqplink.spark.rows import arrow_schema, to_arrow


def reference(messages: list[ServiceBusReceivedMessage], entity: str) -> Any:
    """The rows as the getters give them, one message at a time (the conversion before the
    usual shape was read from the sections)."""
    columns: dict[str, list[Any]] = {
        "body": [rows._body(m) for m in messages],
        "message_id": [rows._text(m.message_id) for m in messages],
        "sequence_number": [m.sequence_number for m in messages],
        "enqueued_time": [m.enqueued_time_utc for m in messages],
    }
    for name in rows._TEXT[1:]:
        columns[name] = [rows._text(getattr(m, name)) for m in messages]
    columns["time_to_live"] = [rows._ttl(m) for m in messages]
    columns["delivery_count"] = [m.delivery_count for m in messages]
    columns["application_properties"] = [rows._properties(m) for m in messages]
    columns["entity"] = [entity] * len(messages)
    return pa.RecordBatch.from_pydict(columns, schema=arrow_schema())


longs = st.integers(-(2**63), 2**63 - 1)
texts = st.one_of(st.none(), st.text(max_size=8))
ids = st.one_of(texts, st.uuids(), st.binary(max_size=6), st.integers(0, 2**64 - 1).map(ULong),
                st.just(Symbol("sym")))  # fmt: skip


@st.composite
def messages(draw: Any) -> ServiceBusReceivedMessage:
    annotations: dict[Any, Any] = {}
    if draw(st.booleans()):
        annotations[Symbol("x-opt-sequence-number")] = draw(st.integers(0, 2**63 - 1))
    if draw(st.booleans()):
        annotations[Symbol("x-opt-enqueued-time")] = Timestamp(draw(st.integers(0, 2**44)))
    if draw(st.booleans()):
        annotations[Symbol("x-opt-partition-key")] = draw(st.text(max_size=5))
    header = None
    if draw(st.booleans()):
        ttl = draw(st.one_of(st.none(), st.integers(0, 2**32 - 1), st.just(2**32 - 1)))
        header = Header(ttl=None if ttl is None else UInt(ttl), delivery_count=UInt(draw(st.integers(0, 9))))
    body = draw(st.one_of(st.binary(max_size=20), st.lists(st.binary(max_size=5), min_size=1, max_size=3),
                          st.text(max_size=5)))  # fmt: skip
    message = Message(
        body,
        header=header,
        message_annotations=annotations or None,
        application_properties=draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=3), longs, max_size=2))),
        message_id=draw(ids),
        correlation_id=draw(ids),
        session_id=draw(texts),
        subject=draw(texts),
        content_type=draw(st.one_of(st.none(), st.just("application/json"))),
        reply_to=draw(texts),
        to=draw(texts),
    )
    return ServiceBusReceivedMessage.from_bytes(message.encode())


@settings(max_examples=100, deadline=None)
@given(st.lists(messages(), max_size=5))
def test_the_rows_are_what_the_getters_give(got: list[ServiceBusReceivedMessage]) -> None:
    assert to_arrow(got, "q").to_pylist() == reference(got, "q").to_pylist()


def test_the_usual_shape_is_read_from_its_sections() -> None:
    token = uuid.uuid4()
    message = Message(b"body", header=Header(delivery_count=UInt(2)), message_id="id-1",
                      delivery_annotations={Symbol("x-opt-lock-token"): token},
                      message_annotations={Symbol("x-opt-sequence-number"): 7,
                                           Symbol("x-opt-enqueued-time"): Timestamp(1_000)})  # fmt: skip
    received = ServiceBusReceivedMessage.from_bytes(message.encode())
    assert rows._plain(received.amqplink_message) is not None
    [row] = to_arrow([received], "q").to_pylist()
    assert row["body"] == b"body" and row["message_id"] == "id-1" and row["sequence_number"] == 7
    assert row["enqueued_time"] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC) and row["delivery_count"] == 2
    assert to_arrow([received], "q").to_pylist() == reference([received], "q").to_pylist()
