"""Received messages -> the source's rows (an Arrow record batch), and the source's schema.

The columns take the sink's names (:mod:`.columns`), so a read can be written back
unchanged (the sink ignores the three the broker sets, :data:`.columns.IGNORED`). ``body``
is the message's data sections joined (an AMQP value body: text as UTF-8, anything else as
its ``str``); ``application_properties``
holds every property as text (a number as its ``str``); ``entity`` is the path read from.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from amqplink.message import Message
from amqplink.sbwire.annotations import ENQUEUED_TIME, PARTITION_KEY, SEQUENCE_NUMBER
from amqplink.servicebus.message import ServiceBusReceivedMessage
from amqplink.spark.buffers import binary_array, int_array, text_array

__all__ = ["SCHEMA", "arrow_schema", "to_arrow", "utc_ms"]

SCHEMA = (
    "body binary, message_id string, sequence_number bigint, enqueued_time timestamp, session_id string, "
    "partition_key string, subject string, content_type string, correlation_id string, reply_to string, "
    "`to` string, time_to_live interval day to second, delivery_count int, "
    "application_properties map<string,string>, entity string"
)
"""The source's schema, as Spark's DDL."""
_TEXT = ("message_id", "session_id", "partition_key", "subject", "content_type", "correlation_id", "reply_to", "to")


def arrow_schema() -> Any:
    """:data:`SCHEMA` as a ``pyarrow.Schema`` (Spark's types as its Arrow reader takes them)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("body", pa.binary()),
            ("message_id", pa.string()),
            ("sequence_number", pa.int64()),
            ("enqueued_time", pa.timestamp("us", tz="UTC")),
            *((name, pa.string()) for name in _TEXT[1:]),
            ("time_to_live", pa.duration("us")),
            ("delivery_count", pa.int32()),
            ("application_properties", pa.map_(pa.string(), pa.string())),
            ("entity", pa.string()),
        ]
    )


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _body(message: ServiceBusReceivedMessage) -> bytes:
    body = message.body
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8", "surrogatepass")
    try:
        chunks = list(body)
    except TypeError:
        return str(body).encode("utf-8", "surrogatepass")
    if all(isinstance(chunk, bytes | bytearray) for chunk in chunks):
        return b"".join(chunks)
    return str(chunks).encode("utf-8", "surrogatepass")


def _properties(message: ServiceBusReceivedMessage) -> list[tuple[str, str]] | None:
    props = message.application_properties
    if not props:
        return None
    return [(str(_text(k)), str(_text(v))) for k, v in props.items() if v is not None]


def to_arrow(messages: Sequence[ServiceBusReceivedMessage], entity: str) -> Any:
    """The rows of ``messages`` as a ``pyarrow.RecordBatch`` of :func:`arrow_schema`.

    A message of the usual shape (one data section, text properties or none, no application
    properties) is read from its AMQP sections once (:func:`_plain`), its times as
    milliseconds that Arrow converts a column at a time; any other through the message's
    getters (:func:`_general`), which give the same values (tests compare the two)."""
    import pyarrow as pa

    map_type = pa.map_(pa.string(), pa.string())
    rows = [_plain(m.amqplink_message) or _general(m) for m in messages]
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [()] * _COLUMNS
    maps = columns[13]  # (pyarrow converts a map column: only where a row has application properties)
    arrays = [
        binary_array(columns[0]),
        text_array(columns[1]),
        int_array(columns[2]),
        int_array(columns[3]).cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
        *(text_array(columns[4 + i]) for i in range(len(_TEXT) - 1)),
        int_array(columns[11]).cast(pa.duration("ms")).cast(pa.duration("us")),
        int_array(columns[12], "i"),
        pa.nulls(len(rows), map_type) if maps.count(None) == len(rows) else pa.array(maps, map_type),
        text_array([entity] * len(rows)),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema())


_COLUMNS = 14
"""Columns of a row tuple (``entity`` is added a column at a time)."""
_NEVER_MS = 10**5 * 86_400_000
"""A time-to-live from this many milliseconds on is Service Bus's "never expires": no TTL."""
_PROPERTY_TEXT = attrgetter("message_id", "group_id", "subject", "content_type", "correlation_id", "reply_to", "to")
_NO_PROPERTIES = (None,) * 7


def _plain(message: Message) -> tuple[Any, ...] | None:
    """The row of a message of the usual shape, from its sections; None for any other."""
    body = message.body
    if message.body_type != "data" or type(body) is not bytes or message.application_properties:
        return None
    props = message.properties
    text = _NO_PROPERTIES if props is None else _PROPERTY_TEXT(props)
    for value in text:
        if value is not None and not isinstance(value, str):
            return None  # a uuid, binary or ulong id: as the getters make it text
    anns = message.message_annotations or _EMPTY
    seq, enqueued, key = anns.get(SEQUENCE_NUMBER), anns.get(ENQUEUED_TIME), anns.get(PARTITION_KEY)
    if key is not None and not isinstance(key, str):
        return None
    header = message.header
    if header is None:
        ttl = count = None
    else:
        ttl = header.ttl
        ttl = int(ttl) if ttl and ttl < _NEVER_MS else None
        count = int(header.delivery_count or 0)
    return (body, text[0], None if seq is None else int(seq), int(enqueued) if enqueued else None, text[1], key,
            text[2], text[3], text[4], text[5], text[6], ttl, count, None)  # fmt: skip


def _general(message: ServiceBusReceivedMessage) -> tuple[Any, ...]:
    """The row of any message, through its getters (times as milliseconds, as :func:`_plain`)."""
    enqueued = message.enqueued_time_utc
    ttl = _ttl(message)
    return (
        _body(message),
        _text(message.message_id),
        message.sequence_number,
        None if enqueued is None else utc_ms(enqueued),
        *(_text(getattr(message, name)) for name in _TEXT[1:]),
        None if ttl is None else ttl // _MS,
        message.delivery_count,
        _properties(message),
    )


_EMPTY: dict[Any, Any] = {}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS = dt.timedelta(milliseconds=1)


def utc_ms(when: dt.datetime) -> int:
    """``when`` (aware) as milliseconds since the epoch, as AMQP timestamps count (1.6.20)."""
    return (when - _EPOCH) // _MS


def _ttl(message: ServiceBusReceivedMessage) -> dt.timedelta | None:
    ttl = message.time_to_live
    return ttl if ttl is None or ttl < dt.timedelta(days=10**5) else None  # "never expires" is no TTL
