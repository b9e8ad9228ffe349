"""Typed key-values of rules: ``KeyValueOfstringanyType`` with an ``xsi:type``'d ``Value``.

Correlation filter properties and SQL filter/action parameters travel as
``<KeyValueOfstringanyType><Key>k</Key><Value i:type="d6p1:int" xmlns:d6p1="...XMLSchema">5</Value>``.
The types are the SDK's (``azure.servicebus.management._utils.serialize_value_type``):
``string``, ``int`` (32 bits, else ``long``), ``double``, ``boolean``, ``dateTime`` (ISO-8601;
aware in UTC, or naive when sent naive, as the service keeps a .NET DateTime's kind) and
``duration`` (ISO-8601, a :class:`datetime.timedelta`).
"""

from __future__ import annotations

import datetime as dt
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from typing import Any

from amqplink.atom.document import XSD_NS, XSI_NS, duration_timedelta, element, format_duration
from amqplink.atom.xmlsafe import local_name

__all__ = [
    "CORRELATION_FIELDS",
    "KeyValue",
    "format_value",
    "key_values_xml",
    "parse_time",
    "parse_value",
    "read_key_values",
]

KeyValue = str | int | float | bool | dt.datetime | dt.timedelta
"""What a key-value may hold."""

CORRELATION_FIELDS = (
    ("CorrelationId", "correlation_id"),
    ("MessageId", "message_id"),
    ("To", "to"),
    ("ReplyTo", "reply_to"),
    ("Label", "label"),
    ("SessionId", "session_id"),
    ("ReplyToSessionId", "reply_to_session_id"),
    ("ContentType", "content_type"),
)
"""A ``CorrelationFilter``'s elements in the service's order, with the SDK's attribute names."""

_XSI_TYPE = f"{{{XSI_NS}}}type"


def parse_time(text: str, *, naive: bool = False) -> dt.datetime:
    """``2026-11-23T09:00:00.1234567Z`` (up to 7 fraction digits, as .NET writes) -> an aware datetime.

    Text without an offset is UTC, or with ``naive=True`` stays naive: a key-value's .NET
    ``DateTime`` of unspecified kind, which the service gives back as it was sent."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    head, dot, rest = value.partition(".")
    if dot:  # Python reads at most 6 fraction digits
        digits = len(rest) - len(rest.lstrip("0123456789"))
        value = head + "." + rest[: min(digits, 6)].ljust(6, "0") + rest[digits:]
    moment = dt.datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None or naive else moment.replace(tzinfo=dt.UTC)


def _iso_time(value: dt.datetime) -> str:
    """An aware datetime in UTC with ``Z``; a naive one as it is, without an offset (as the SDK sends it)."""
    if value.tzinfo is None:
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_value(value: Any) -> tuple[str, str]:
    """``(xsd type, text)`` of a value; :class:`ValueError` for a type Service Bus does not take."""
    if isinstance(value, bool):
        return "boolean", "true" if value else "false"
    if isinstance(value, int):
        return ("int" if -(2**31) <= value < 2**31 else "long"), str(value)
    if isinstance(value, float):
        return "double", repr(value)
    if isinstance(value, str):
        return "string", value
    if isinstance(value, dt.datetime):
        return "dateTime", _iso_time(value)
    if isinstance(value, dt.timedelta):
        return "duration", format_duration(value.total_seconds())
    kind = type(value).__name__
    raise ValueError(f"a value of type {kind} is not supported (str, int, float, bool, datetime, timedelta)")


def key_values_xml(tag: str, values: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> str:
    """``<tag>`` holding one ``KeyValueOfstringanyType`` per item."""
    items = values.items() if isinstance(values, Mapping) else values
    inner = ""
    for key, value in items:
        kind, text = format_value(value)
        typed = element("Value", text, f' i:type="d6p1:{kind}" xmlns:d6p1="{XSD_NS}" xmlns:i="{XSI_NS}"')
        inner += f"<KeyValueOfstringanyType>{element('Key', key)}{typed}</KeyValueOfstringanyType>"
    return f"<{tag}>{inner}</{tag}>"


def parse_value(kind: str, text: str) -> Any:
    """The value ``format_value`` gave ``(kind, text)`` for; :class:`ValueError` (or
    :class:`LookupError` for an unknown kind) otherwise."""
    if kind in ("int", "long"):
        return int(text)
    if kind == "double":
        number = float(text)
        if not math.isfinite(number):
            raise ValueError(text)
        return number
    if kind == "boolean":
        if text.strip().lower() not in ("true", "false"):
            raise ValueError(text)
        return text.strip().lower() == "true"
    if kind == "string":
        return text
    if kind == "dateTime":
        return parse_time(text, naive=True)
    if kind == "duration":
        return duration_timedelta(text.strip())
    raise LookupError(kind)


def read_key_values(node: ET.Element | None, where: str) -> dict[str, Any]:
    """The key-values under ``node`` (None: none); :class:`ValueError` naming the key and what is wrong."""
    out: dict[str, Any] = {}
    for kv in () if node is None else node:
        fields = {local_name(child.tag): child for child in kv}
        key, value = fields.get("Key"), fields.get("Value")
        if key is None or value is None or not key.text:
            raise ValueError(f"{where}: a {local_name(kv.tag)} needs a Key and a Value")
        kind = value.attrib.get(_XSI_TYPE, "string").rsplit(":", 1)[-1]
        try:
            out[key.text] = parse_value(kind, value.text or "")
        except LookupError:
            raise ValueError(
                f"{where}.{key.text}: type {kind!r} is not supported"
                " (string, int, long, double, boolean, dateTime, duration)"
            ) from None
        except (ValueError, OverflowError):
            raise ValueError(f"{where}.{key.text}: {value.text!r} is not a {kind}") from None
    return out
