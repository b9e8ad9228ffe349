"""What the broker checks of a sent message before it acknowledges it: that it can keep it
and deliver it as it came (docs/broker-semantics.md#what-is-refused-at-the-transfer).

An acknowledged message is a promise. The broker reads a sent message's head sections into
values, and writes the message annotations again from those values for every delivery,
every peek and every record of a durable store; the other sections it keeps as bytes. So
a message is refused at the transfer (:class:`NotStorable`, the sender's outcome
``amqp:decode-error``, the section and field named) when any of these would fail later,
at a delivery or after a restart:

- application properties: string keys and simple values only (3.2.5,
  :func:`amqplink.message.application.application_property_error`), and a decimal only
  if Service Bus's .NET decimal holds it (:func:`amqplink.sbwire.decimals.dotnet_decimal`:
  the broker delivers it as Service Bus does to a receiver that reads that layout);
- message annotations: every value written again reads back as it was sent, the same
  types and bits (a compound or described value is written and read once, here, to see;
  the scalars the codec writes back exactly are not), and
  ``x-opt-scheduled-enqueue-time`` a timestamp (or an integer of milliseconds);
- properties: a message-id and a correlation-id of the types 3.2.11-14 allow (ulong, uuid,
  binary, string: the broker keys duplicate detection and filters on them).

The usual message costs a type look-up per section: only a value of an unusual type is
looked into.
"""

from __future__ import annotations

import uuid
from typing import Any

from amqplink.broker.namespace.errors import DECODE_ERROR, EntityError
from amqplink.codec.decode import section_context, value_decoders
from amqplink.codec.encode import encode_map
from amqplink.codec.errors import DecodeError, EncodeError
from amqplink.codec.types import (
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    same_value,
)
from amqplink.message.application import application_property_error
from amqplink.protocol.definitions import Properties
from amqplink.sbwire.annotations import SCHEDULED_ENQUEUE_TIME
from amqplink.sbwire.decimals import DOTNET_MAX_SCALE, dotnet_decimal

__all__ = ["NotStorable", "check_annotations", "check_application_properties", "check_properties", "refusal"]

_EXACT_SCALARS = frozenset((
    type(None), bool, int, float, str, bytes, Symbol, UByte, UShort, UInt, ULong, Byte, Short, Int, Long, Float,
    Timestamp, Char, uuid.UUID, Decimal32, Decimal64, Decimal128,
))  # fmt: skip
"""The types of the values the codec reads and writes back exactly (its property tests)."""
_SIMPLE_PLAIN = _EXACT_SCALARS - {Decimal32, Decimal64, Decimal128}
"""The application property values that need no look: simple, and no decimal."""
_STRINGS = frozenset((str,))
_DECIMALS = (Decimal32, Decimal64, Decimal128)
_ID_TYPES = frozenset((type(None), str, ULong, bytes, uuid.UUID))
"""message-id and correlation-id: "ulong, uuid, binary, string" (3.2.11-14), or none."""
_READERS = value_decoders()
_SECTION = section_context()


class NotStorable(DecodeError):
    """A sent message, valid AMQP, that the broker could not keep or deliver as it came:
    refused at the transfer with ``amqp:decode-error`` (the module's docstring)."""


def refusal(exc: DecodeError, path: str, what: str = "the message") -> EntityError:
    """The ``amqp:decode-error`` refusal of a message sent to ``path`` that did not decode or
    could not be kept (``exc``), saying which and what the sender can do."""
    if isinstance(exc, NotStorable):
        return EntityError(
            DECODE_ERROR,
            f"{what} was not stored in {path!r}: {exc}; send it without that value, or as a type the broker"
            " keeps (docs/broker-semantics.md#what-is-refused-at-the-transfer)",
        )
    return EntityError(DECODE_ERROR, f"{what} is not valid AMQP, so it was not stored in {path!r}: {exc}")


def check_application_properties(app: dict[Any, Any], offset: int) -> None:
    """:class:`NotStorable` unless ``app`` (an application-properties section at
    ``offset``) may be kept: string keys, simple values, decimals Service Bus holds."""
    if _SIMPLE_PLAIN.issuperset(map(type, app.values())) and _STRINGS.issuperset(map(type, app)):
        return
    for key, value in app.items():
        problem = application_property_error(key, value)
        if problem is None and type(key) is not str:
            problem = f"application property keys must be strings, not {type(key).__name__} ({key!r})"
        if problem is not None:
            raise NotStorable(problem, offset)
        inner = value
        while type(inner) is Described:
            inner = inner.value
        if isinstance(inner, _DECIMALS) and dotnet_decimal(inner) is None:
            raise NotStorable(
                f"application property {key!r} is the {type(inner).__name__.lower()} {inner.to_decimal()}, which"
                f" Service Bus's decimal (96 bits, at most {DOTNET_MAX_SCALE} places) does not hold",
                offset,
            )


def check_annotations(annotations: dict[Any, Any], offset: int, what: str = "message annotation") -> None:
    """:class:`NotStorable` unless ``annotations`` (a message-annotations section at
    ``offset``; ``what``: or the delivery-annotations) are written again as they came, and a
    scheduled enqueue time is a time."""
    when = annotations.get(SCHEDULED_ENQUEUE_TIME) if what == "message annotation" else None
    if when is not None and (not isinstance(when, int) or type(when) is bool):  # a timestamp, or ms
        raise NotStorable(
            f"message annotation {_name(SCHEDULED_ENQUEUE_TIME)} is a {type(when).__name__} ({when!r}): it must"
            " be a timestamp",
            offset,
        )
    if _EXACT_SCALARS.issuperset(map(type, annotations.values())):
        return
    for key, value in annotations.items():
        if type(value) in _EXACT_SCALARS:
            continue
        problem = _rewritten({key: value})
        if problem is not None:
            raise NotStorable(f"{what} {_name(key)} cannot be kept as sent: {problem}", offset)


def check_properties(properties: Properties, offset: int) -> None:
    """:class:`NotStorable` unless the message-id and correlation-id are of the types
    3.2.11-14 allow."""
    for name in ("message_id", "correlation_id"):
        value = getattr(properties, name)
        if type(value) not in _ID_TYPES:
            raise NotStorable(
                f"the properties' {name.replace('_', '-')} is a {type(value).__name__} ({value!r}): it must be a"
                " ulong, uuid, binary or string (3.2.11-14)",
                offset,
            )


def _name(key: Any) -> str:
    """An annotation key as an error names it (a symbol as its text, quoted)."""
    return repr(str(key)) if isinstance(key, str) else repr(key)


def _rewritten(entries: dict[Any, Any]) -> str | None:
    """Why ``entries`` would not read back as they are once written (None: they would)."""
    out = bytearray()
    try:
        encode_map(out, entries)
        back, end = _READERS[out[0]](out, 1, 1, _SECTION.copy())
    except (EncodeError, DecodeError) as exc:
        return str(exc)
    if end != len(out) or not same_value(back, entries):
        return f"written again it would read {back!r}"
    return None
