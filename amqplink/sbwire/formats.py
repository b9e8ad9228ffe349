"""Service Bus's message formats and time encoding on the wire.

docs/protocol.md#batches-and-pings: a batch is one transfer of message-format
``0x80013700`` with a Data section per encoded message; a paired namespace's ping is a
message of content type ``application/vnd.ms-servicebus-ping``, accepted and dropped.
docs/protocol.md#sessions: ``com.microsoft:locked-until-utc`` is a .NET ``DateTime`` in
ticks (100 ns since 0001-01-01).
"""

from __future__ import annotations

import datetime as dt

__all__ = [
    "BATCH_FORMAT",
    "DOTNET_EPOCH_TICKS",
    "PING_CONTENT_TYPE",
    "TICKS_PER_SECOND",
    "datetime_from_ticks",
    "dotnet_ticks",
]

BATCH_FORMAT = 0x80013700
"""A batch: one transfer of this message-format, a Data section per encoded message."""
PING_CONTENT_TYPE = "application/vnd.ms-servicebus-ping"
"""A paired namespace's ping: "an empty BrokeredMessage with its ContentType property set to
application/vnd.ms-servicebus-ping and a TimeToLive value of 1 second" (docs/protocol.md#batches-and-pings)."""
DOTNET_EPOCH_TICKS = 621355968000000000
"""1970-01-01 in .NET ticks."""
TICKS_PER_SECOND = 10_000_000
_UNIX_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def dotnet_ticks(seconds: float) -> int:
    """.NET ``DateTime`` ticks (100 ns since 0001-01-01) of a Unix time, as the SDK reads them."""
    return DOTNET_EPOCH_TICKS + int(seconds * TICKS_PER_SECOND)


def datetime_from_ticks(ticks: int) -> dt.datetime:
    """A .NET ``DateTime`` in ticks (100 ns since 0001-01-01) as an aware UTC datetime."""
    return _UNIX_EPOCH + dt.timedelta(microseconds=(int(ticks) - DOTNET_EPOCH_TICKS) // 10)
