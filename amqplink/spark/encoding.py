"""Rows -> encoded messages ready for a batch, with a fast path for the usual shape.

The general path makes a ``ServiceBusMessage`` per row (:func:`.columns.messages`) and
encodes it. When a chunk has only a ``body`` column and the sink makes the ids from
positions (the default), every message is the same three sections but for its bytes:
message annotations with the partition key (encoded once per key), properties with the
message id, and one data section. Those are written directly, byte for byte what the
general path writes (a test compares them), at a fraction of its cost; the
``ServiceBusMessage`` is made only for the first message of a batch, whose ids the batch
envelope carries. They come as runs (:class:`Run`), the rows that share a partition key
(:data:`.columns.KEY_ROWS` of them, or the whole chunk without keys), which the send loop
adds to their batch as many at a time as fit (``ServiceBusMessageBatch.add_run``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import cast

from amqplink.message import ID_ONLY_HEADS, ID_ONLY_MAX, data_section_header
from amqplink.servicebus.message import ServiceBusMessage
from amqplink.spark.columns import KEY_ROWS, NULL_BODY, Columns, IdScheme, bad_row, messages

__all__ = ["Encoded", "Run", "body_runs", "encoded_rows", "message_head", "runs_of"]

Encoded = tuple[str | None, str | None, bytes, int, ServiceBusMessage | Callable[[], ServiceBusMessage]]
"""``(entity or None, batch key, encoded message, body bytes, the message or a function making it)``;
messages of one batch share an entity and a batch key (session id or partition key)."""

_PROPERTIES_MARK = ID_ONLY_HEADS[1] + b"\x00"


def message_head(key: str | None) -> bytes:
    """The encoded sections before the properties of a message with partition key ``key``
    (its message annotations; nothing without a key)."""
    encoded = ServiceBusMessage(b"", message_id="\x00", partition_key=key).amqplink_message.encode()
    return encoded[: encoded.index(_PROPERTIES_MARK)]


@dataclass(slots=True)
class Run:
    """Consecutive rows of a chunk that go to one batch key (the sink's entity option):
    their encoded messages, their bodies, and what makes the message of the run's ``i``-th row
    (:meth:`message`: a batch's first message gives the envelope its ids)."""

    key: str | None
    encoded: list[bytes]
    bodies: list[bytes]
    ids: list[str]

    def message(self, i: int) -> ServiceBusMessage:
        """The ``ServiceBusMessage`` of the run's ``i``-th row."""
        return ServiceBusMessage(self.bodies[i], message_id=self.ids[i], partition_key=self.key)


def _as_bytes(bodies: list[object], at: int, scheme: IdScheme, first_row: int) -> bytes:
    """``bodies[at]`` as bytes; :class:`BadRowError` naming the row if it is neither text nor binary."""
    body = bodies[at]
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    reason = NULL_BODY if body is None else f"expected binary or string, not {type(body).__name__}"
    raise bad_row({"body": bodies}, at, scheme, first_row, "body", reason)


def body_runs(bodies: list[object], scheme: IdScheme, first_row: int) -> list[Run] | None:
    """A body-only chunk with position ids as runs of rows sharing a partition key, each
    message encoded directly (see the module's docstring); None when an id is too long for
    that (the general path encodes it)."""
    prefix = f"{scheme.prefix}:{scheme.partition}:"
    if len((prefix + str(first_row + len(bodies))).encode()) > ID_ONLY_MAX:
        return None
    step = KEY_ROWS if scheme.partition_keys else len(bodies) or 1
    runs: list[Run] = []
    row = first_row
    at = 0
    heads = ID_ONLY_HEADS
    while at < len(bodies):
        take = min(step - row % step, len(bodies) - at) if scheme.partition_keys else len(bodies)
        key = scheme.partition_key(row, prefix + str(row))
        head = message_head(key)
        part = cast(list[bytes], bodies[at : at + take])
        if not all(type(body) is bytes for body in part):
            part = [body if type(body) is bytes else _as_bytes(bodies, at + i, scheme, first_row)
                    for i, body in enumerate(part)]  # fmt: skip
        ids = [prefix + str(r) for r in range(row, row + take)]
        encoded = [
            b"".join((head, heads[len(raw)], raw, data_section_header(len(body)), body))
            for raw, body in zip([i.encode() for i in ids], part, strict=True)
        ]
        runs.append(Run(key, encoded, part, ids))
        row += take
        at += take
    return runs


def _fast(runs: list[Run]) -> Iterator[Encoded]:
    for run in runs:
        for i, encoded in enumerate(run.encoded):
            yield None, run.key, encoded, len(run.bodies[i]), partial(run.message, i)


def _general(columns: Columns, scheme: IdScheme, first_row: int) -> Iterator[Encoded]:
    bodies = columns.get("body")
    for index, (entity, message) in enumerate(messages(columns, scheme, first_row)):
        body = bodies[index] if bodies is not None else None  # messages() checked there is one
        size = len(body.encode()) if isinstance(body, str) else len(body) if isinstance(body, bytes | bytearray) else 0
        key = message.session_id or message.partition_key
        yield entity, key, message.amqplink_message.encode(), size, message


def runs_of(columns: Columns, scheme: IdScheme, first_row: int) -> list[Run] | None:
    """The rows of ``columns`` (numbered from ``first_row``) as :func:`body_runs` when they
    take the fast path (only a ``body`` column, position ids); else None."""
    if list(columns) == ["body"] and scheme.mode == "position":
        return body_runs(list(columns["body"]), scheme, first_row)
    return None


def encoded_rows(columns: Columns, scheme: IdScheme, first_row: int) -> Iterator[Encoded]:
    """Each row of ``columns`` (numbered from ``first_row``) as :data:`Encoded`."""
    runs = runs_of(columns, scheme, first_row)
    return _general(columns, scheme, first_row) if runs is None else _fast(runs)
