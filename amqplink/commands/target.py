"""Where a command connects: a Service Bus connection string or an AMQP URL.

A connection string (``Endpoint=sb://...;SharedAccessKeyName=...;SharedAccessKey=...``,
what ``amqplink broker`` prints, or a real namespace's) is used through the Service Bus
client (:mod:`amqplink.servicebus`): SAS tokens put over ``$cbs`` per entity, so it works
against ``amqplink broker --require-auth`` and Azure. An ``amqp://`` or ``amqps://`` URL is
used through the plain AMQP 1.0 client (:mod:`amqplink.aio`): any AMQP 1.0 broker, with
SASL PLAIN when the URL has ``user:pass@``. The text of a target is never shown (it may
hold a key): :attr:`Target.shown` is what messages print.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amqplink.aio.url import parse_url
from amqplink.servicebus.connection_string import ServiceBusConnectionString, parse_connection_string

__all__ = ["Target", "is_connection_string", "parse_target", "split_subscription"]

EXPECTED = (
    "expected the connection string the broker prints (Endpoint=sb://HOST:PORT;SharedAccessKeyName=NAME;"
    "SharedAccessKey=KEY, quoted for the shell) or an amqp://host[:port] URL"
)


def is_connection_string(text: str) -> bool:
    """Whether ``text`` looks like ``Endpoint=...;...`` rather than a URL."""
    return "=" in text and "endpoint" in text.lower() and not text.startswith(("amqp://", "amqps://"))


@dataclass(frozen=True)
class Target:
    """A parsed ``TARGET`` argument; ``text`` (which may hold a key) is left out of ``repr``."""

    text: str = field(repr=False)
    connection: ServiceBusConnectionString | None
    """The parsed connection string (None for a URL)."""
    shown: str
    """Safe to print: the AMQP URL without credentials."""

    @property
    def servicebus(self) -> bool:
        """True for a connection string (the Service Bus client), False for a URL."""
        return self.connection is not None


def parse_target(text: str) -> Target:
    """``ValueError`` (never echoing the text, which may hold a key) for neither form."""
    if is_connection_string(text):
        parsed = parse_connection_string(text)
        return Target(text, parsed, parsed.amqp_url)
    if text.startswith(("amqp://", "amqps://")):
        return Target(text, None, parse_url(text).url)
    raise ValueError(EXPECTED)


def split_subscription(address: str) -> tuple[str, str | None]:
    """``TOPIC/Subscriptions/NAME`` -> (TOPIC, NAME); anything else -> (address, None)."""
    parts = address.split("/")
    if len(parts) == 3 and parts[1].lower() == "subscriptions" and parts[0] and parts[2]:
        return parts[0], parts[2]
    return address, None
