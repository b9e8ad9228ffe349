"""A peer's receiving link on an entity, as the connection keeps it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.engine.link import Delivery, SenderLink

__all__ = ["Consumer"]


@dataclass(eq=False)
class Consumer:
    """A peer's receiving link on an entity."""

    link: SenderLink
    entity: MessagingEntity
    path: str
    lock: bool
    session_id: str | None
    flush: Callable[[], None]
    writable: Callable[[], bool]
    encode_all: Callable[[list[Any], list[bytes] | None], list[bytes]]
    """The payloads of a batch of the entity's messages for this receiver (the entity's
    ``encode_all``, or with decimals as Service Bus writes them: :mod:`..namespace.decimals`)."""
    held: dict[bytes, Delivery] = field(default_factory=dict)
    """The unsettled deliveries by lock token (the delivery tag)."""
    busy: bool = False
    again: bool = False
    woken: bool = False
    """A dispatch is scheduled on the event loop (wakes coalesce into it)."""
