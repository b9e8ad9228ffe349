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
from typing import Any

from amqplink.servicebus.message import ServiceBusReceivedMessage

__all__ = ["SCHEMA", "arrow_schema", "to_arrow"]

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
    """The rows of ``messages`` as a ``pyarrow.RecordBatch`` of :func:`arrow_schema`."""
    import pyarrow as pa

    columns: dict[str, list[Any]] = {
        "body": [_body(m) for m in messages],
        "message_id": [_text(m.message_id) for m in messages],
        "sequence_number": [m.sequence_number for m in messages],
        "enqueued_time": [m.enqueued_time_utc for m in messages],
    }
    for name in _TEXT[1:]:
        columns[name] = [_text(getattr(m, name)) for m in messages]
    columns["time_to_live"] = [_ttl(m) for m in messages]
    columns["delivery_count"] = [m.delivery_count for m in messages]
    columns["application_properties"] = [_properties(m) for m in messages]
    columns["entity"] = [entity] * len(messages)
    return pa.RecordBatch.from_pydict(columns, schema=arrow_schema())


def _ttl(message: ServiceBusReceivedMessage) -> dt.timedelta | None:
    ttl = message.time_to_live
    return ttl if ttl is None or ttl < dt.timedelta(days=10**5) else None  # "never expires" is no TTL
