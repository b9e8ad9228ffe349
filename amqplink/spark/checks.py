"""Each Arrow record batch checked whole before any of its rows is sent.

A null body, an id longer than Service Bus takes, a session's row with another partition key,
a time to live of 0 or less, a row larger than the entity takes, a row with no entity: none of
these gets better when the task is tried again. The row-by-row encoder finds them too
(:func:`.columns.messages`), but only when it reaches the row, after the rows before it were
sent. Here the whole batch is checked with ``pyarrow.compute`` (vectorized: one pass per
column, not a Python loop per row) before its first row is encoded, and the first bad row is named
(:class:`.columns.BadRowError`: its position in the partition, its message id, the column).

The size check is a lower bound (the body's bytes and the string columns', with a data
section's head): a row it passes can still be a few bytes too large for the entity once
encoded, which the send loop then reports the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amqplink.servicebus.message import MESSAGE_PROPERTY_MAX_LENGTH
from amqplink.spark.columns import LIMITED, NULL_BODY, BadRowError, IdScheme, bad_row

__all__ = ["IN_BATCH_OVERHEAD", "check_arrow", "entities_of", "too_large"]

IN_BATCH_OVERHEAD = 8
"""A message's data section head inside a batch transfer (5 bytes, 8 from 256 bytes on)."""
_SIZED = ("message_id", "session_id", "partition_key", "subject", "content_type", "correlation_id", "to", "reply_to")


def entities_of(batch: Any, entity_option: str | None) -> list[str]:
    """The entities the rows of ``batch`` (a ``pyarrow.RecordBatch``) go to: the option's, else
    the ``entity`` column's (the option wins over the column, as Kafka's topic option does)."""
    if entity_option is not None:
        return [entity_option]
    if "entity" not in batch.schema.names:
        return []
    import pyarrow.compute as pc

    return [e for e in pc.unique(batch.column("entity")).to_pylist() if e is not None]


def _first(mask: Any) -> int:
    """The index of the first true value of a boolean array (nulls are false), or -1."""
    import pyarrow.compute as pc

    return int(pc.index(pc.fill_null(mask, False), True).as_py())


def check_arrow(
    batch: Any, scheme: IdScheme, first_row: int, entity_option: str | None, limits: Mapping[str, int]
) -> None:
    """Raise :class:`BadRowError` for the first row of ``batch`` (rows numbered from
    ``first_row``) that cannot be sent; ``limits``: entity -> the largest batch transfer it takes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    found: list[tuple[int, str, str]] = []  # (row index, column, reason): the earliest one is named

    def note(index: int, column: str, reason: str) -> None:
        if index >= 0:
            found.append((index, column, reason))

    body = batch.column(names.index("body"))
    if body.null_count:
        note(_first(pc.is_null(body)), "body", NULL_BODY)
    if "entity" in names and entity_option is None and batch.column("entity").null_count:
        note(_first(pc.is_null(batch.column("entity"))), "entity",
             "is null and no 'entity' option says where to send the row")  # fmt: skip
    for name in LIMITED:
        if name in names:
            lengths = pc.utf8_length(batch.column(name))
            at = _first(pc.greater(lengths, MESSAGE_PROPERTY_MAX_LENGTH))
            if at >= 0:
                note(at, name, f"is {lengths[at].as_py()} characters long; Service Bus takes at most "
                               f"{MESSAGE_PROPERTY_MAX_LENGTH}")  # fmt: skip
    if "session_id" in names and "partition_key" in names:
        session, key = batch.column("session_id"), batch.column("partition_key")
        at = _first(pc.not_equal(session, key))
        if at >= 0:
            note(at, "partition_key", f"is {key[at].as_py()!r} but session_id is {session[at].as_py()!r}: a "
                                      "session's messages take its id as their partition key")  # fmt: skip
    if "time_to_live" in names:
        ttl = batch.column("time_to_live")
        if pa.types.is_integer(ttl.type) or pa.types.is_floating(ttl.type) or pa.types.is_decimal(ttl.type):
            at = _first(pc.less_equal(ttl, pa.scalar(0, ttl.type)))
        elif pa.types.is_duration(ttl.type):
            at = _first(pc.less_equal(pc.cast(ttl, pa.int64()), 0))
        else:
            at = -1
        if at >= 0:
            note(at, "time_to_live", f"is {ttl[at].as_py()!r}: a time to live must be more than 0")
    _check_sizes(batch, entity_option, limits, note)
    if found:
        index, column, reason = min(found)
        row = batch.slice(index, 1).to_pydict()
        raise bad_row(row, 0, scheme, first_row + index, column, reason)


def _check_sizes(batch: Any, entity_option: str | None, limits: Mapping[str, int], note: Any) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    size = pc.add(pc.binary_length(batch.column("body")), IN_BATCH_OVERHEAD)
    for name in _SIZED:
        if name in names:
            size = pc.add(size, pc.fill_null(pc.binary_length(batch.column(name)), 0))
    if "entity" not in names or entity_option is not None:
        limit = limits.get(entity_option or "")
        if limit is not None:
            at = _first(pc.greater(size, limit))
            if at >= 0:
                note(at, "body", _too_large(size[at].as_py(), entity_option or "", limit))
        return
    entity = batch.column("entity")
    for name, limit in limits.items():
        at = _first(pc.and_(pc.equal(entity, pa.scalar(name, entity.type)), pc.greater(size, limit)))
        if at >= 0:
            note(at, "body", _too_large(size[at].as_py(), name, limit))


def _too_large(size: int, entity: str, limit: int) -> str:
    return (f"makes a message of at least {size} bytes, and {entity} takes at most {limit} in one transfer "
            "(the entity's max message size, or maxBatchBytes if smaller)")  # fmt: skip


def too_large(partition: int, row: int, message_id: str | None, size: int, entity: str, limit: int) -> BadRowError:
    """The :class:`BadRowError` of a row whose encoded message (``size`` bytes) does not fit ``entity``."""
    reason = _too_large(size, entity, limit).replace("at least ", "")
    return BadRowError(partition, row, message_id, "body", reason)
