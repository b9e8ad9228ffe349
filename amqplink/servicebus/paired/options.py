"""``PairedNamespaceOptions``: what a paired client needs to know about its secondary namespace.

A frozen, picklable value (a Spark sink carries it to executors): the secondary's
connection string is its only secret and never appears in ``repr`` or an error. The
defaults are the retired .NET client's (``SendAvailabilityPairedNamespaceOptions``):
10 backlog queues, failover after 10 s without a successful send, a ping each minute.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import re
import urllib.parse
from dataclasses import dataclass, field

from amqplink.servicebus.connection_string import ServiceBusConnectionString, parse_connection_string

__all__ = ["BACKLOG_SEGMENT", "PairedNamespaceOptions", "backlog_queue_name", "namespace_label"]

BACKLOG_SEGMENT = "x-servicebus-transfer"
"""Seed 000/001: backlog queues are named ``[primary namespace]/x-servicebus-transfer/[index]``."""

DEFAULT_FAILOVER_INTERVAL = dt.timedelta(seconds=10)
DEFAULT_PING_PRIMARY_INTERVAL = dt.timedelta(minutes=1)
DEFAULT_BACKLOG_QUEUE_COUNT = 10
DEFAULT_MANAGEMENT_TIMEOUT = 30.0
"""Seconds the management REST calls made at start may take, each; then a clear error."""
DEFAULT_SYPHON_WAIT = dt.timedelta(minutes=1)
"""How long one syphon receive waits for a parked message (the seed's long poll is 15 min;
shorter here so that a closing client is not held and a restarted secondary is noticed)."""


def _seconds(value: dt.timedelta | float, what: str) -> float:
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else float(value)
    if not seconds > 0:
        raise ValueError(f"PairedNamespaceOptions.{what} must be positive, not {value!r}")
    return seconds


@dataclass(frozen=True)
class PairedNamespaceOptions:
    """The secondary namespace of a paired client, and how failover behaves.

    ``secondary_connection_string``: the namespace that holds the backlog queues (its own
    SAS key). ``backlog_queue_count``: queues ``<primary>/x-servicebus-transfer/<i>`` checked
    and created if missing. ``failover_interval``: "after a TimeSpan period consisting of
    the FailoverInterval property value during which no successful messages are sent, the
    failover is engaged" (seed 001). ``ping_primary_interval``: how often a failed-over
    entity is pinged. ``enable_syphon``: run the syphon (moves parked messages back) in this
    process. ``management_endpoint``: the secondary's management REST API (default
    ``https://<secondary host>/``). ``connection_verify``: a CA bundle path, or ``False``
    to skip certificate checks (the embedded broker's self-signed certificate), for it.
    ``seed``: makes the random choice of backlog queue repeatable (tests).
    """

    secondary_connection_string: str = field(repr=False)
    backlog_queue_count: int = DEFAULT_BACKLOG_QUEUE_COUNT
    failover_interval: dt.timedelta | float = DEFAULT_FAILOVER_INTERVAL
    ping_primary_interval: dt.timedelta | float = DEFAULT_PING_PRIMARY_INTERVAL
    enable_syphon: bool = False
    management_endpoint: str | None = None
    connection_verify: str | bool | None = None
    management_timeout: float = DEFAULT_MANAGEMENT_TIMEOUT
    syphon_wait: dt.timedelta | float = DEFAULT_SYPHON_WAIT
    seed: int | None = None

    def __post_init__(self) -> None:
        self.secondary  # noqa: B018 -- parse now: a bad string fails at construction (without echoing it)
        if not isinstance(self.backlog_queue_count, int) or self.backlog_queue_count < 1:
            raise ValueError(f"backlog_queue_count must be a positive int, not {self.backlog_queue_count!r}")
        for name in ("failover_interval", "ping_primary_interval", "syphon_wait"):
            _seconds(getattr(self, name), name)
        if self.management_endpoint:
            parts = urllib.parse.urlsplit(self.management_endpoint)
            if parts.scheme not in ("https", "http") or not parts.hostname:
                raise ValueError(f"management_endpoint must be an https:// URL, not {self.management_endpoint!r}")
        if not self.management_timeout > 0:
            raise ValueError(f"management_timeout must be positive, not {self.management_timeout!r}")

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr)
        return f"PairedNamespaceOptions(secondary={self.secondary.fully_qualified_namespace!r}, {shown})"

    @property
    def secondary(self) -> ServiceBusConnectionString:
        """The parsed secondary connection string (its repr hides the key)."""
        return parse_connection_string(self.secondary_connection_string)

    @property
    def failover_seconds(self) -> float:
        """``failover_interval`` in seconds (a ``timedelta`` or a number was given)."""
        return _seconds(self.failover_interval, "failover_interval")

    @property
    def ping_seconds(self) -> float:
        """``ping_primary_interval`` in seconds."""
        return _seconds(self.ping_primary_interval, "ping_primary_interval")

    @property
    def syphon_wait_seconds(self) -> float:
        """``syphon_wait`` in seconds."""
        return _seconds(self.syphon_wait, "syphon_wait")

    @property
    def management_url(self) -> str:
        """The secondary's management endpoint, ``https://HOST/`` unless given."""
        if self.management_endpoint:
            return self.management_endpoint.rstrip("/") + "/"
        host = self.secondary.fully_qualified_namespace
        return f"https://[{host}]/" if ":" in host else f"https://{host}/"


def namespace_label(host: str, port: int | None) -> str:
    """The primary namespace's name in backlog queue paths: ``contoso`` for
    ``contoso.servicebus.windows.net``; for an IP address or ``localhost`` (an embedded
    broker), the host and port, e.g. ``127-0-0-1-5672`` (two local brokers must differ)."""
    try:
        ipaddress.ip_address(host)
        local = True
    except ValueError:
        local = host.lower() == "localhost"
    if local:
        return re.sub(r"[^A-Za-z0-9]+", "-", f"{host}-{port}").strip("-")
    return host.split(".", 1)[0]


def backlog_queue_name(label: str, index: int) -> str:
    """``<label>/x-servicebus-transfer/<index>``."""
    return f"{label}/{BACKLOG_SEGMENT}/{index}"
