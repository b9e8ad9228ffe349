"""The sink's columns: the schema check (before anything is sent) and rows -> ``ServiceBusMessage``.

Columns take the SDK's property names: ``body`` (binary or string, required) and the
optional ``message_id``, ``session_id``, ``partition_key``, ``subject``, ``content_type``,
``correlation_id``, ``to``, ``reply_to``, ``time_to_live`` (seconds as a number, or a
day-time interval), ``scheduled_enqueue_time`` (timestamp), ``application_properties``
(``map<string,string>`` or a struct) and ``entity`` (where the row goes when no ``entity``
option is given: the option wins, as Kafka's ``topic`` option wins over its ``topic`` column).
The source's broker-set columns (:data:`IGNORED`) are taken and not sent. An unknown column
or a wrong type is an error naming it.

Message ids, when no ``message_id`` column gives one (:class:`IdScheme`):

- ``messageIdMode=position`` (default): ``<query id>:<batch id>:<partition>:<row>`` when
  streaming (a micro-batch replayed from the checkpoint makes the same ids),
  ``<write id>:<partition>:<row>`` in a batch write (the write id made once on the driver), so
  a retried task makes the same ids as long as it sees the same rows in the same order;
- ``messageIdMode=content``: a digest of the message's body and properties
  (:func:`content_id`), whatever order the rows come in: right after a shuffle or any
  non-deterministic input; re-running a whole job makes the same ids too, and identical rows
  share an id (duplicate detection keeps one);
- ``messageIdMode=none``: the client's random id (as the SDK gives): a resent row is a new message.

docs/spark.md#message-ids says when each is right.

A row without ``partition_key`` or ``session_id`` gets a partition key made from its id
(:meth:`IdScheme.partition_key`; ``autoPartitionKey=false`` turns this off).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from amqplink import AMQPLinkError
from amqplink.servicebus.message import MESSAGE_PROPERTY_MAX_LENGTH, ServiceBusMessage

__all__ = [
    "COLUMNS",
    "BadRowError",
    "Columns",
    "IdScheme",
    "SinkSchemaError",
    "bad_row",
    "check_schema",
    "check_struct",
    "columns_of_rows",
    "content_id",
    "messages",
    "row_id",
]

_STRING = ("string",)
_NUMBER = ("tinyint", "smallint", "int", "bigint", "float", "double")
COLUMNS: dict[str, tuple[str, ...]] = {
    "body": ("binary", "string"),
    "message_id": _STRING,
    "session_id": _STRING,
    "partition_key": _STRING,
    "subject": _STRING,
    "content_type": _STRING,
    "correlation_id": _STRING,
    "to": _STRING,
    "reply_to": _STRING,
    "time_to_live": (*_NUMBER, "interval day to second", "decimal"),
    "scheduled_enqueue_time": ("timestamp", "timestamp_ntz"),
    "application_properties": ("map<string,string>", "struct"),
    "entity": _STRING,
    "sequence_number": ("bigint", "int"),
    "enqueued_time": ("timestamp", "timestamp_ntz"),
    "delivery_count": ("int", "bigint"),
}
"""Column name -> the Spark types (``DataType.simpleString()``, prefix-matched) it may have."""
IGNORED = ("sequence_number", "enqueued_time", "delivery_count")
"""The source's columns the broker sets (:mod:`.rows`): taken, so that a read can be written back
unchanged, and not sent (Service Bus sets them again)."""
_KWARGS = {"scheduled_enqueue_time": "scheduled_enqueue_time_utc"}
_NOT_PROPERTIES = frozenset(("body", "entity", *IGNORED))
_PYTHON = {"message_id", "session_id", "partition_key", "subject", "content_type", "correlation_id", "to", "reply_to"}

Columns = Mapping[str, Sequence[Any]]
"""Column name -> its values for a chunk of rows (what Arrow's ``to_pylist`` gives)."""


class SinkSchemaError(AMQPLinkError, ValueError):
    """A column the sink does not know, or of a type it cannot send; the message names it."""


def check_schema(fields: Iterable[tuple[str, str]], *, entity_option: bool) -> None:
    """Check ``(name, simpleString type)`` pairs before anything is sent.

    Raises :class:`SinkSchemaError` naming the first unknown column, a column of the
    wrong type, a missing ``body``, or no entity (neither the option nor a column).
    """
    names = set()
    for name, spark_type in fields:
        allowed = COLUMNS.get(name)
        if allowed is None:
            raise SinkSchemaError(
                f"column {name!r} is not a message property the servicebus sink knows; "
                f"the columns are: {', '.join(COLUMNS)} (select or rename the columns to send)"
            )
        if not any(spark_type == kind or spark_type.startswith(kind + "(") or spark_type.startswith(kind + "<")
                   for kind in allowed):  # fmt: skip
            raise SinkSchemaError(
                f"column {name!r} has type {spark_type}; the servicebus sink takes {' or '.join(allowed)} there"
            )
        names.add(name)
    if "body" not in names:
        raise SinkSchemaError("the servicebus sink needs a 'body' column (binary or string)")
    if not entity_option and "entity" not in names:
        raise SinkSchemaError(
            "no queue or topic to send to: give the 'entity' option (or EntityPath in the connection string) "
            "or an 'entity' column"
        )


def check_struct(schema: Any, *, entity_option: bool) -> None:
    """:func:`check_schema` of a Spark ``StructType`` (a DataFrame's ``schema``), on the driver."""
    fields = getattr(schema, "fields", None)
    if fields is None:
        raise TypeError(f"schema: give the DataFrame's schema (df.schema), not {type(schema).__name__}")
    check_schema([(f.name, f.dataType.simpleString()) for f in fields], entity_option=entity_option)


KEY_ROWS = 256
"""Consecutive rows that share an automatic partition key (position ids)."""
KEY_BUCKETS = 16
"""Automatic partition keys for ids not made from positions (content or a ``message_id`` column)."""


@dataclass(frozen=True, slots=True)
class IdScheme:
    """How a row without a ``message_id`` gets one; ``prefix`` is ``<query>:<batch>`` or the write id.

    ``partition_keys``: give a row without ``partition_key`` or ``session_id`` a partition key
    made from its id (see :meth:`partition_key`).
    """

    mode: str
    prefix: str
    partition: int
    partition_keys: bool = True

    def position(self, row: int) -> str:
        """``<prefix>:<partition>:<row>``."""
        return f"{self.prefix}:{self.partition}:{row}"

    def partition_key(self, row: int, message_id: str | None) -> str | None:
        """The automatic partition key: ``<prefix>:<partition>:<row // 256>`` for position ids,
        one of 16 buckets of the id's CRC-32 otherwise, None without an id.

        A partitioned entity with duplicate detection pins a message by its MessageId and
        refuses a batch of distinct ids (Service Bus, and the embedded broker); with one key
        per run of rows the sink can batch there, and a resent row keeps its key, so it
        reaches the fragment that remembers its id.
        """
        if message_id is None or not self.partition_keys:
            return None
        if self.mode == "position" and message_id == self.position(row):
            return f"{self.prefix}:{self.partition}:{row // KEY_ROWS}"
        return f"k{zlib.crc32(message_id.encode('utf-8', 'surrogatepass')) % KEY_BUCKETS}"


def content_id(body: str | bytes, fields: Mapping[str, Any]) -> str:
    """The first 32 hex digits of SHA-256 over a message's content: its body (text as UTF-8, so
    a string and a binary body with the same bytes agree) and its properties as sent (``fields``:
    the :class:`ServiceBusMessage` keywords, nulls already left out; application properties by
    key), each length-prefixed, so the id depends on what the message holds, not on the
    DataFrame's column order, a null column or a missing one."""
    digest = hashlib.sha256()

    def put(tag: str, data: bytes) -> None:
        name = tag.encode("utf-8", "surrogatepass")
        digest.update(b"%d:%s%d:%s" % (len(name), name, len(data), data))

    put("body", body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body)
    for name in sorted(fields):
        value = fields[name]
        if name == "application_properties":
            for key in sorted(value):
                put(f"p:{key}", _canonical(value[key]))
        else:
            put(f"f:{name}", _canonical(value))
    return digest.hexdigest()[:32]


def _canonical(value: Any) -> bytes:
    if isinstance(value, str):
        return b"s" + value.encode("utf-8", "surrogatepass")
    if isinstance(value, bytes | bytearray | memoryview):
        return b"b" + bytes(value)
    if isinstance(value, dt.timedelta):
        return b"t%d" % (value // dt.timedelta(microseconds=1))
    if isinstance(value, dt.datetime):
        return b"d" + value.astimezone(dt.UTC).isoformat().encode()
    return f"{type(value).__name__}:{value!r}".encode("utf-8", "surrogatepass")


def _properties(value: Any, column: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif hasattr(value, "asDict"):  # a pyspark Row (a struct in foreachPartition)
        items = value.asDict().items()
    elif isinstance(value, list):  # Arrow's map: a list of (key, value) pairs
        items = value
    else:
        raise _Bad(column, f"expected a map or a struct, not {type(value).__name__}")
    return {str(k): v for k, v in items if v is not None}


def _ttl(value: Any) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        ttl = value
    elif (isinstance(value, int | float) and not isinstance(value, bool)) or hasattr(value, "as_integer_ratio"):
        ttl = dt.timedelta(seconds=float(value))
    else:
        raise _Bad("time_to_live", f"expected seconds or an interval, not {type(value).__name__}")
    if ttl <= dt.timedelta(0):
        raise _Bad("time_to_live", f"is {value!r}: a time to live must be more than 0")
    return ttl


def _when(value: Any) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        raise _Bad("scheduled_enqueue_time", f"expected a timestamp, not {type(value).__name__}")
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _body(value: Any) -> str | bytes:
    if isinstance(value, bytes | str):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if value is None:
        raise _Bad("body", NULL_BODY)
    raise _Bad("body", f"expected binary or string, not {type(value).__name__}")


NULL_BODY = "is null (every message needs a body)"
LIMITED = ("message_id", "session_id", "partition_key")
"""Columns Service Bus bounds to :data:`MESSAGE_PROPERTY_MAX_LENGTH` characters."""


class _Bad(AMQPLinkError):
    """What is wrong with one value of a row (``column``, ``reason``); :func:`messages` turns it
    into a :class:`BadRowError` naming the row. Never leaves this package."""

    def __init__(self, column: str, reason: str) -> None:
        super().__init__(column, reason)
        self.column = column
        self.reason = reason


class BadRowError(SinkSchemaError):
    """A row the sink cannot send however often it is tried: a null body, a value of the wrong
    type or length, a message larger than the entity takes. Names the partition, the row (its
    position in the partition and its message id) and the column.

    The data source's writers catch it in the task and return it to the driver, whose ``commit``
    raises it: the write fails once, at once, instead of Spark running the task four times.
    """

    def __init__(self, partition: int, row: int, message_id: str | None, column: str, reason: str) -> None:
        self.partition = partition
        self.row = row
        self.message_id = message_id
        self.column = column
        self.reason = reason
        named = "no message id (messageIdMode=none)" if message_id is None else f"message id {message_id!r}"
        super().__init__(
            f"servicebus sink: row {row} of partition {partition} ({named}) cannot be sent: column {column!r} "
            f"{reason}; retrying will not help: fix or filter such rows before the write"
        )

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (a commit message carries it to the driver)
        return (type(self), (self.partition, self.row, self.message_id, self.column, self.reason))


def row_id(columns: Columns, index: int, scheme: IdScheme, first_row: int) -> str | None:
    """The message id of row ``index`` of ``columns`` (numbered from ``first_row``), as
    :func:`messages` gives it: the ``message_id`` column's, else the scheme's."""
    given = columns["message_id"][index] if "message_id" in columns else None
    if isinstance(given, str):
        return given
    if scheme.mode == "content":
        others = [(name, columns[name]) for name in columns if name not in _NOT_PROPERTIES]
        return content_id(_body(columns["body"][index]), _fields(index, others))
    if scheme.mode == "none":
        return None
    return scheme.position(first_row + index)


def _fields(index: int, others: list[tuple[str, Sequence[Any]]]) -> dict[str, Any]:
    """Row ``index``'s ``ServiceBusMessage`` keywords from ``others`` (the columns but the body
    and the entity), checked and normalized; nulls left out. Raises :class:`_Bad`."""
    kwargs: dict[str, Any] = {}
    for name, values in others:
        value = values[index]
        if value is None:
            continue
        if name in _PYTHON:
            if not isinstance(value, str):
                raise _Bad(name, f"expected a string, not {type(value).__name__}")
            if name in LIMITED and len(value) > MESSAGE_PROPERTY_MAX_LENGTH:
                raise _Bad(name, f"is {len(value)} characters long; Service Bus takes at most "
                                 f"{MESSAGE_PROPERTY_MAX_LENGTH}")  # fmt: skip
            kwargs[name] = value
        elif name == "application_properties":
            kwargs[name] = _properties(value, name)
        elif name == "time_to_live":
            kwargs[name] = _ttl(value)
        else:
            kwargs[_KWARGS[name]] = _when(value)
    session, key = kwargs.get("session_id"), kwargs.get("partition_key")
    if session is not None and key is not None and key != session:
        raise _Bad("partition_key", f"is {key!r} but session_id is {session!r}: a session's messages take its id "
                                    "as their partition key")  # fmt: skip
    return kwargs


def _message(
    index: int, row: int, columns: Columns, others: list[tuple[str, Sequence[Any]]], scheme: IdScheme
) -> ServiceBusMessage:
    kwargs = _fields(index, others)
    body = _body(columns["body"][index])
    if "message_id" not in kwargs and scheme.mode != "none":
        kwargs["message_id"] = content_id(body, kwargs) if scheme.mode == "content" else scheme.position(row)
    if "partition_key" not in kwargs and "session_id" not in kwargs:
        automatic = scheme.partition_key(row, kwargs.get("message_id"))
        if automatic is not None:
            kwargs["partition_key"] = automatic
    return ServiceBusMessage(body, **kwargs)


def messages(columns: Columns, scheme: IdScheme, first_row: int) -> Iterator[tuple[str | None, ServiceBusMessage]]:
    """``(entity or None, message)`` per row of ``columns``; rows are numbered from ``first_row``.

    Raises :class:`BadRowError` naming the first row that cannot be a message."""
    names = list(columns)
    unknown = [name for name in names if name not in COLUMNS]
    if unknown:
        check_schema([(unknown[0], "?")], entity_option=True)
    if "body" not in columns:
        raise SinkSchemaError("the servicebus sink needs a 'body' column (binary or string)")
    count = len(columns["body"])
    others = [(name, columns[name]) for name in names if name not in _NOT_PROPERTIES]
    entities = columns.get("entity")
    for index in range(count):
        try:
            message = _message(index, first_row + index, columns, others, scheme)
        except _Bad as bad:
            raise bad_row(columns, index, scheme, first_row, bad.column, bad.reason) from None
        yield None if entities is None else entities[index], message


def bad_row(columns: Columns, index: int, scheme: IdScheme, first_row: int, column: str, reason: str) -> BadRowError:
    """The :class:`BadRowError` of row ``index`` of ``columns`` (numbered from ``first_row``)."""
    try:
        message_id = row_id(columns, index, scheme, first_row)
    except Exception:  # the row is bad enough that its content id cannot be made
        message_id = None
    return BadRowError(scheme.partition, first_row + index, message_id, column, reason)


def columns_of_rows(rows: Sequence[Any]) -> dict[str, list[Any]]:
    """Rows (pyspark ``Row`` objects or mappings) as columns, for ``foreachPartition``."""
    if not rows:
        return {}
    first = rows[0]
    names = list(first.asDict() if hasattr(first, "asDict") else first)
    table: dict[str, list[Any]] = {name: [] for name in names}
    for row in rows:
        values = row.asDict() if hasattr(row, "asDict") else row
        for name in names:
            table[name].append(values[name])
    return table
