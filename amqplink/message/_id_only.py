"""The properties section of a message-id and nothing else (what every ``ServiceBusMessage``
has), written and read in one place: the encoder writes it from fixed heads, the single-pass
decoder (:mod:`amqplink.message._decode`) and the broker's envelope read it back, and the
Spark sink writes it straight into its payloads."""

from __future__ import annotations

from operator import attrgetter

from amqplink.protocol.definitions import Properties

__all__ = ["ID_ONLY_HEADS", "ID_ONLY_MAX", "id_only_properties", "id_only_properties_at"]

ID_ONLY_MAX = 252
"""The longest UTF-8 message-id whose one-field properties list still fits a list8."""
ID_ONLY_HEADS = tuple(b"\x00\x53\x73\xc0" + bytes((n + 3, 1, 0xA1, n)) for n in range(ID_ONLY_MAX + 1))
"""A properties section of a message-id of ``n`` UTF-8 bytes and nothing else, up to the id:
a list8 of one str8 field, ``00 53 73 c0 <size> 01 a1 <n>``, size = n + 3 <= 255."""
_OTHER_PROPERTIES = attrgetter(*(name for name in Properties.__match_args__ if name != "message_id"))
_NO_OTHER_PROPERTIES = (None,) * (len(Properties.__match_args__) - 1)


def id_only_properties(properties: Properties) -> bytes | None:
    """The encoded properties section when it holds a short string message-id and nothing
    else; None for any other properties."""
    message_id = properties.message_id
    if type(message_id) is not str or _OTHER_PROPERTIES(properties) != _NO_OTHER_PROPERTIES:
        return None
    raw = message_id.encode()
    n = len(raw)
    if n > ID_ONLY_MAX:
        return None
    return b"".join((ID_ONLY_HEADS[n], raw))


def id_only_properties_at(buf: bytes, pos: int) -> tuple[Properties, int] | None:
    """The properties section at ``pos`` if it is the one :func:`id_only_properties` writes
    (a message-id of valid UTF-8 and nothing else), and the offset after it; else None."""
    size = buf[pos + 7]
    end = pos + 8 + size
    if size > ID_ONLY_MAX or end > len(buf) or not buf.startswith(ID_ONLY_HEADS[size], pos):
        return None
    try:
        return Properties(buf[pos + 8 : end].decode()), end
    except UnicodeDecodeError:  # the generic decoder reports it
        return None
