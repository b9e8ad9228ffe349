"""Events emitted by the sans-IO engine from :meth:`Connection.receive_data` and ``tick``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from amqplink.engine.link import Delivery, Link
    from amqplink.engine.session import Session
    from amqplink.protocol.definitions import Error, Open

__all__ = [
    "ConnectionClosed",
    "ConnectionOpened",
    "DeliveriesReceived",
    "DeliveriesUpdated",
    "DeliveryAborted",
    "DeliveryReceived",
    "DeliveryUpdated",
    "Event",
    "LinkAttachRequested",
    "LinkAttached",
    "LinkCreditChanged",
    "LinkDetached",
    "LinkDrained",
    "SaslCompleted",
    "SessionBegun",
    "SessionEnded",
]


class Event:
    """Base class of all engine events."""

    __slots__ = ()


@dataclass(slots=True)
class SaslCompleted(Event):
    """The SASL exchange ended with outcome ``ok`` (5.3.3.6); the AMQP layer starts."""

    mechanism: str
    identity: str | None
    """Server role: the authenticated user name (PLAIN), or ``None``."""


@dataclass(slots=True)
class ConnectionOpened(Event):
    """Both open frames have been exchanged; ``remote`` is the peer's open."""

    remote: Open


@dataclass(slots=True)
class ConnectionClosed(Event):
    """The connection ended: the peer closed it, or this side closed it on an error.

    ``error`` is the condition the connection ended with (``None`` for a clean close);
    ``by_peer`` tells who sent it.
    """

    error: Error | None
    by_peer: bool


@dataclass(slots=True)
class SessionBegun(Event):
    """A session is mapped in both directions (begin sent and received)."""

    session: Session


@dataclass(slots=True)
class SessionEnded(Event):
    """A session ended; ``error`` is the condition, ``by_peer`` who ended it."""

    session: Session
    error: Error | None
    by_peer: bool


@dataclass(slots=True)
class LinkAttachRequested(Event):
    """The peer attached a link this side did not ask for.

    Answer with ``link.attach(...)`` (accept, possibly with a null terminus and then
    ``link.detach(error)`` to refuse) - the spec's server side of 2.6.3.
    """

    link: Link


@dataclass(slots=True)
class LinkAttached(Event):
    """Both attach frames have been exchanged for ``link``."""

    link: Link


@dataclass(slots=True)
class LinkDetached(Event):
    """The peer detached ``link`` (or this side did on an error)."""

    link: Link
    error: Error | None
    closed: bool
    by_peer: bool


@dataclass(slots=True)
class LinkCreditChanged(Event):
    """A flow frame changed a sender's credit, or asked it to drain."""

    link: Link
    credit: int
    drain: bool


@dataclass(slots=True)
class LinkDrained(Event):
    """A receiver's drain request completed: the sender used or gave up all credit."""

    link: Link


@dataclass(slots=True)
class DeliveryReceived(Event):
    """A whole message arrived on a receiver link (all frames of a multi-frame transfer)."""

    link: Link
    delivery: Delivery


@dataclass(slots=True)
class DeliveriesReceived(Event):
    """Whole messages that arrived one after another on a receiver link that takes them in
    runs (:attr:`~amqplink.engine.link.ReceiverLink.deliver_in_runs`): what a
    :class:`DeliveryReceived` each would say, in arrival order, in one event. A run ends
    at any other event, so events keep their order."""

    link: Link
    deliveries: list[Delivery]


@dataclass(slots=True)
class DeliveryAborted(Event):
    """The sender aborted a multi-frame delivery; its partial payload is dropped."""

    link: Link
    delivery: Delivery


@dataclass(slots=True)
class DeliveryUpdated(Event):
    """The peer's disposition changed a delivery's remote state or settled it."""

    link: Link
    delivery: Delivery
    state: Any
    settled: bool
    # "the issuer is hinting that there is no need for the peer to urgently communicate
    # updated delivery state" (2.7.6)
    batchable: bool = False


@dataclass(slots=True)
class DeliveriesUpdated(Event):
    """One disposition of the peer changed several deliveries of a link alike (a
    ``first..last`` range): what a :class:`DeliveryUpdated` each would tell, in
    delivery-id order. Only a link that asks for it gets it
    (:attr:`~amqplink.engine.link.Link.ranged_updates`)."""

    link: Link
    deliveries: list[Delivery]
    state: Any
    settled: bool
    batchable: bool = False
