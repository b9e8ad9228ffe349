"""Writing the Atom documents of the Service Bus management API.

An entity is an Atom ``entry`` whose ``content`` holds its description
(``QueueDescription``, ``TopicDescription``, ``SubscriptionDescription``,
``RuleDescription``) in the Service Bus namespace; a list is a ``feed`` of entries
with a ``next`` link while more remain; an error is ``<Error><Code/><Detail/></Error>``.
Times are ISO-8601 UTC, durations ISO-8601 as .NET's XmlConvert writes a TimeSpan
(an unbounded one is ``TimeSpan.MaxValue``, ``P10675199DT2H48M5.4775807S``).
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections.abc import Iterable
from typing import Any
from xml.sax.saxutils import escape, quoteattr

__all__ = [
    "ATOM_NS",
    "MAX_TIMESPAN",
    "SB_NS",
    "XSI_NS",
    "duration_seconds",
    "duration_timedelta",
    "element",
    "entry",
    "error_document",
    "feed",
    "format_duration",
    "format_time",
]

ATOM_NS = "http://www.w3.org/2005/Atom"
SB_NS = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
COUNTS_NS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
XSD_NS = "http://www.w3.org/2001/XMLSchema"
MAX_TIMESPAN = "P10675199DT2H48M5.4775807S"
_MAX_TIMESPAN_SECONDS = 10675199 * 86400 + 2 * 3600 + 48 * 60 + 5.4775807
_TICKS_PER_SECOND = 10_000_000


def format_duration(seconds: float) -> str:
    """``60.0`` -> ``PT1M``; infinity (or more than .NET can hold) -> :data:`MAX_TIMESPAN`."""
    if not math.isfinite(seconds) or seconds >= _MAX_TIMESPAN_SECONDS:
        return MAX_TIMESPAN
    ticks = max(0, round(seconds * _TICKS_PER_SECOND))
    days, ticks = divmod(ticks, 86400 * _TICKS_PER_SECOND)
    hours, ticks = divmod(ticks, 3600 * _TICKS_PER_SECOND)
    minutes, ticks = divmod(ticks, 60 * _TICKS_PER_SECOND)
    whole, fraction = divmod(ticks, _TICKS_PER_SECOND)
    out = "P" + (f"{days}D" if days else "")
    clock = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if fraction:
        clock += f"{whole}.{fraction:07d}".rstrip("0") + "S"
    elif whole:
        clock += f"{whole}S"
    if clock:
        out += "T" + clock
    return out if out != "P" else "PT0S"


_DURATION = re.compile(
    r"P(?!$)(?:(?P<Y>\d+(?:\.\d+)?)Y)?(?:(?P<Mo>\d+(?:\.\d+)?)M)?(?:(?P<W>\d+(?:\.\d+)?)W)?"
    r"(?:(?P<D>\d+(?:\.\d+)?)D)?"
    r"(?:T(?!$)(?:(?P<H>\d+(?:\.\d+)?)H)?(?:(?P<Mi>\d+(?:\.\d+)?)M)?(?:(?P<S>\d+(?:\.\d+)?)S)?)?",
    re.ASCII,
)
# .NET's XmlConvert counts a year as 365 days and a month as 30.
_UNIT_SECONDS = {
    "Y": 365 * 86400.0,
    "Mo": 30 * 86400.0,
    "W": 7 * 86400.0,
    "D": 86400.0,
    "H": 3600.0,
    "Mi": 60.0,
    "S": 1.0,
}


def duration_seconds(text: Any) -> float:
    """Seconds in an ISO-8601 duration (``PT1M`` -> 60.0); :class:`ValueError` saying why otherwise."""
    if not isinstance(text, str) or len(text) > 64:
        raise ValueError(f"{text!r} is not an ISO-8601 duration")
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not an ISO-8601 duration")
    seconds = sum(float(v) * _UNIT_SECONDS[k] for k, v in match.groupdict().items() if v is not None)
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is too long a duration")
    return seconds


def duration_timedelta(text: str) -> datetime.timedelta:
    """An ISO-8601 duration as a timedelta, to the microsecond (``TimeSpan.MaxValue`` exactly:
    ``P10675199DT2H48M5.4775807S`` -> 10675199 days, 10085.477581 s, as the SDK reads it)."""
    duration_seconds(text)  # ValueError saying why
    match = _DURATION.fullmatch(text)
    assert match is not None
    total = sum(
        (decimal.Decimal(v) * decimal.Decimal(_UNIT_SECONDS[k]) for k, v in match.groupdict().items() if v is not None),
        decimal.Decimal(0),
    )
    micros = int(total.scaleb(6).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
    return datetime.timedelta(microseconds=micros)


def format_time(timestamp: float) -> str:
    """Unix seconds -> ``2026-11-23T09:00:00.123456Z``."""
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def element(name: str, value: object, attrs: str = "") -> str:
    """``<name attrs>value</name>`` with the value escaped (booleans as ``true``/``false``)."""
    text = ("true" if value else "false") if isinstance(value, bool) else escape(str(value))
    return f"<{name}{attrs}>{text}</{name}>"


def entry(url: str, title: str, description: str, *, published: float, updated: float, author: str) -> str:
    """One Atom entry for an entity at ``url`` (without query) holding ``description``."""
    return (
        f'<entry xmlns="{ATOM_NS}">'
        + element("id", url)
        + element("title", title, ' type="text"')
        + element("published", format_time(published))
        + element("updated", format_time(updated))
        + f"<author>{element('name', author)}</author>"
        + f'<link rel="self" href={quoteattr(url)}/>'
        + f'<content type="application/xml">{description}</content>'
        + "</entry>"
    )


def feed(url: str, title: str, entries: Iterable[str], *, updated: float, next_url: str | None) -> str:
    """An Atom feed of ``entries``; ``next_url`` names the next page when more remain."""
    links = f'<link rel="self" href={quoteattr(url)}/>'
    if next_url is not None:
        links += f'<link rel="next" href={quoteattr(next_url)}/>'
    return (
        f'<feed xmlns="{ATOM_NS}">'
        + element("title", title, ' type="text"')
        + element("id", url)
        + element("updated", format_time(updated))
        + links
        + "".join(entries)
        + "</feed>"
    )


def error_document(code: int, detail: str) -> str:
    """The body of an error response, as Service Bus writes it."""
    return f"<Error>{element('Code', code)}{element('Detail', detail)}</Error>"
