"""Events emitted by the sans-IO engine from :meth:`Connection.receive_data` and ``tick``."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amqplink.engine.errors import RunOfManyError

if TYPE_CHECKING:
    from amqplink.engine.link import Delivery, Link, ReceiverLink, SenderLink
    from amqplink.engine.session import Session
    from amqplink.engine.transactions import Transaction, TransactionRequest
    from amqplink.protocol.definitions import Error, Open

__all__ = [
    "ConnectionClosed",
    "ConnectionOpened",
    "DeliveriesReceived",
    "DeliveriesUpdated",
    "DeliveryAborted",
    "DeclareRequested",
    "DischargeRequested",
    "Event",
    "LinkAttachRequested",
    "LinkAttached",
    "LinkCreditChanged",
    "LinkDetached",
    "LinkDrained",
    "SaslCompleted",
    "SessionBegun",
    "SessionEnded",
    "StatefulDeliveriesReceived",
    "TransactionDeclared",
    "TransactionEnded",
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

    link: SenderLink
    credit: int
    drain: bool


@dataclass(slots=True)
class LinkDrained(Event):
    """A receiver's drain request completed: the sender used or gave up all credit."""

    link: ReceiverLink


@dataclass(slots=True)
class DeliveriesReceived(Event):
    """Whole messages that arrived on a receiver link, in arrival order: a run. A run goes
    on while the link's deliveries arrive one after another and ends at any other event,
    so events keep their order; a delivery on its own is a run of one."""

    link: ReceiverLink
    deliveries: list[Delivery]

    @property
    def delivery(self) -> Delivery:
        """The delivery of a run of one (what the former ``DeliveryReceived`` held);
        :class:`RunOfManyError` for a longer run, so that code written for one delivery
        per event fails instead of reading the first only."""
        return _only(self.deliveries, self)


@dataclass(slots=True)
class StatefulDeliveriesReceived(DeliveriesReceived):
    """Whole messages whose transfers carried a delivery state (``delivery.remote_state``: a
    ``transactional-state`` posts them in a transaction, part 4, 4.4.1), as a run of their
    own: they never join a :class:`DeliveriesReceived` run, so a receiver that ignores
    states meets none among the usual runs (``type(event) is DeliveriesReceived``), and one
    that takes them handles this event too. The fast reader never makes such a delivery."""


@dataclass(slots=True)
class DeliveryAborted(Event):
    """The sender aborted a multi-frame delivery; its partial payload is dropped."""

    link: ReceiverLink
    delivery: Delivery


@dataclass(slots=True)
class DeliveriesUpdated(Event):
    """One disposition of the peer changed deliveries of a link alike: their remote state
    or settlement, in delivery-id order (a disposition's ``first..last`` range gives one
    event per run of the link's deliveries in it; a delivery on its own is a run of one)."""

    link: Link
    deliveries: list[Delivery]
    state: Any
    settled: bool
    # "the issuer is hinting that there is no need for the peer to urgently communicate
    # updated delivery state" (2.7.6)
    batchable: bool = False

    @property
    def delivery(self) -> Delivery:
        """The delivery of a run of one (what the former ``DeliveryUpdated`` held);
        :class:`RunOfManyError` for a longer run."""
        return _only(self.deliveries, self)


@dataclass(slots=True)
class TransactionDeclared(Event):
    """Controller: the coordinator declared ``transaction``; its ``txn_id`` is set and work
    may name it (part 4, 4.2)."""

    link: Link
    transaction: Transaction


@dataclass(slots=True)
class TransactionEnded(Event):
    """A transaction is over: committed, rolled back, refused or (controller) in doubt, as
    ``transaction.state`` says. ``error`` is the coordinator's reason when it did not do what
    was asked (a refused declare or discharge, a time-out), or the control link's end; None
    when the discharge was done as asked.

    Coordinator: reported only for transactions rolled back because their control link
    ended (4.1: "all such transactions are immediately rolled back"); the application undoes
    their provisional work."""

    link: Link
    transaction: Transaction
    error: Error | None


@dataclass(slots=True)
class DeclareRequested(Event):
    """Coordinator: a controller asks for a transaction. Answer with
    ``request.link.declared(request)`` or ``request.link.refuse(request, error)``."""

    link: Link
    request: TransactionRequest


@dataclass(slots=True)
class DischargeRequested(Event):
    """Coordinator: a controller asks to commit ``request.transaction`` (or, with
    ``request.fail``, to roll it back). Answer with ``request.link.discharged(request)`` once
    its work is applied (or undone), or ``request.link.refuse(request, error)`` when it cannot
    commit (it is then rolled back)."""

    link: Link
    request: TransactionRequest


def _only(deliveries: list[Delivery], event: Event) -> Delivery:
    if len(deliveries) != 1:
        raise RunOfManyError(
            f"{type(event).__name__} holds {len(deliveries)} deliveries, not one: read event.deliveries"
        )
    return deliveries[0]


_FORMER_NAMES = {"DeliveryReceived": DeliveriesReceived, "DeliveryUpdated": DeliveriesUpdated}
"""The one-delivery events' names, kept one release as names of the run classes (a
delivery on its own is a run of one); importing them warns."""


def __getattr__(name: str) -> type[Event]:
    former = _FORMER_NAMES.get(name)
    if former is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"{name} is {former.__name__} (a delivery on its own is a run of one); read"
        " event.deliveries: the name goes in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return former
