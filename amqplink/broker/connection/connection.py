"""One Service Bus connection of the broker: its events handed to the collaborator for each
concern, and the tables of its links (what every concern reads and :meth:`drop` forgets).

* :mod:`.attach`: answering attaches (entities, sessions, send via, ``$cbs``,
  ``$management``, ``$control``, the transaction coordinator);
* :mod:`.access`: tokens, rights, the first-token deadline and token expiry;
* :mod:`.ingest`: the peer's transfers (stored or answered) and transaction requests;
* :mod:`.answers`: ``$cbs``, ``$control`` and ``$management`` requests;
* :mod:`.dispatch`: sending an entity's messages on a receiver's credit;
* :mod:`.dispositions`: the peer's outcomes for them;
* :mod:`.settle`: settling transfers, at once or once the store's commit is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from amqplink.aio.transport import EngineProtocol
from amqplink.broker.connection.access import Access
from amqplink.broker.connection.answers import Answers
from amqplink.broker.connection.attach import Attacher
from amqplink.broker.connection.consumer import Consumer
from amqplink.broker.connection.dispatch import dispatch
from amqplink.broker.connection.dispositions import Dispositions
from amqplink.broker.connection.ingest import TRANSACTION_EVENTS, Ingest
from amqplink.broker.connection.settle import Settlement
from amqplink.broker.connection.settle import error as broker_error
from amqplink.broker.control import CONTROL_NODE
from amqplink.broker.faults import Fault, under
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.nodes import Topic
from amqplink.broker.session_wait import SessionWaits
from amqplink.broker.transactions import ConnectionTransactions
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import (
    ConnectionClosed,
    ConnectionOpened,
    DeliveriesReceived,
    DeliveriesUpdated,
    Event,
    LinkAttachRequested,
    LinkCreditChanged,
    LinkDetached,
    SessionEnded,
    StatefulDeliveriesReceived,
)
from amqplink.engine.link import Link, SenderLink
from amqplink.protocol.definitions import Error
from amqplink.sbwire.conditions import INTERNAL_ERROR
from amqplink.sbwire.decimals import reads_servicebus_decimals

if TYPE_CHECKING:
    from amqplink.broker.sbserver import ServiceBusHost

__all__ = ["ServiceBusConnection"]

log = logging.getLogger("amqplink.broker.sbserver")


class ServiceBusConnection:
    """The broker's side of one client connection to a Service Bus namespace."""

    def __init__(self, host: ServiceBusHost, engine: EngineConnection, protocol: EngineProtocol) -> None:
        self.host = host
        self.engine = engine
        self.protocol = protocol
        # The tables of links are keyed by ``Link``, the type an event's link and ``drop``
        # look them up by (each holds one kind only: senders, or receivers).
        self.consumers: dict[Link, Consumer] = {}
        self.producers: dict[Link, tuple[MessagingEntity | Topic, str]] = {}
        self.via: dict[Link, tuple[MessagingEntity | Topic, str]] = {}
        """The producer links that send via their target to another entity (send via): the via
        entity and its path; the producer's own entry names the destination."""
        self.requests: dict[Link, str] = {}
        self.replies: dict[str, SenderLink] = {}
        self.access = Access(self)
        self.settlement = Settlement(self)
        self.attacher = Attacher(self)
        self.ingest = Ingest(self)
        self.answers = Answers(self)
        self.dispositions = Dispositions(self)
        self.waits = SessionWaits(self.attacher.start_waiter, self.attacher.refuse_waiter, host.clock)
        """Receivers waiting for the next available session (attach not answered yet)."""
        self.opened_at = host.clock()
        self.refused_by: Fault | None = None
        """The refuse-connections fault active when it opened: its first link that is not
        to ``$control`` closes it (so that a controller can still undo the fault)."""
        self.transactions: ConnectionTransactions | None = None
        """Its transactions (:mod:`amqplink.broker.transactions`), once it attached a coordinator."""
        self.on_closed: Callable[[], None] | None = None
        """Called once the connection has closed (the server forgets its protocol)."""
        if hasattr(protocol, "on_writable"):
            protocol.on_writable = self._on_writable

    # -- events ---------------------------------------------------------------------
    def on_events(self, events: list[Event]) -> None:
        """Handle a batch of the engine's events (a defect closes this connection only)."""
        try:
            self._handle(events)
        except Exception:
            # A defect here must cost this connection only, never the broker.
            log.exception("closing a Service Bus connection after an internal error")
            if not self.engine.close_sent:
                self.engine.close(broker_error(INTERNAL_ERROR, "the broker failed handling this connection"))
                self.protocol.schedule_flush()
            if any(type(e) is ConnectionClosed for e in events):
                self._closed()  # the batch's close may not have been reached

    def _closed(self) -> None:
        self.host.connections.discard(self)
        if self.on_closed is not None:
            self.on_closed()

    def _handle(self, events: list[Event]) -> None:
        now = self.host.clock()  # one read per batch of events: they arrived together
        moved = False
        for event in events:
            # One exact-type test per branch (``type(x) is C`` narrows for mypy), the
            # frequent events first: no subclass is taken for its base (a
            # StatefulDeliveriesReceived is not a DeliveriesReceived here).
            if type(event) is DeliveriesReceived:
                self.ingest.on_received(event.link, event.deliveries, now)
                moved = True
            elif type(event) is DeliveriesUpdated:
                consumer = self.consumers.get(event.link)
                if consumer is not None:
                    self.dispositions.on_outcomes(consumer, event.deliveries, event.state, now)
                    moved = True
            elif type(event) is LinkCreditChanged:
                link = event.link
                consumer = self.consumers.get(link)
                if consumer is not None:
                    dispatch(consumer, self.host.clock, self.drop)
                if link.hold_drain:
                    link.drained()
            elif type(event) is LinkAttachRequested:
                self.attacher.on_attach(event.link)
            elif type(event) is LinkDetached:
                detached = event.link
                if not detached.detach_sent:
                    detached.detach()
                self.drop(detached)
            elif type(event) is ConnectionOpened:
                self._choose_namespace()
                self.refused_by = self.host.faults.refusing
            elif type(event) is SessionEnded:
                # "a link lives within its session" (2.6.1): its locks and its waits end with it.
                for ended in self._links():
                    if ended.session is event.session:
                        self.drop(ended)
            elif type(event) is ConnectionClosed:
                for closed in self._links():
                    self.drop(closed)
                self._closed()
            elif type(event) is StatefulDeliveriesReceived:
                self.ingest.on_posted(event.link, event.deliveries, now)
                moved = True
            elif type(event) in TRANSACTION_EVENTS:
                self.ingest.on_transaction_event(event, now)
                moved = True
        if moved:
            self.protocol.schedule_flush()  # once for the batch: settlements, credit, answers

    def _choose_namespace(self) -> None:
        """Serve the namespace the client's open names (:meth:`ServiceBusHost.route`): the
        connection moves to its host before any link is attached."""
        remote = self.engine.remote_open
        chosen = self.host.route(None if remote is None else remote.hostname)
        if chosen is not self.host:
            self.host.connections.discard(self)
            chosen.connections.add(self)
            log.info("connection for host %r: namespace %r", remote and remote.hostname, chosen.namespace.name)
            self.host = chosen

    def tick(self, now: float) -> None:
        """Apply time: session waits, transaction timeouts, token deadlines and expiry."""
        if self.waits.waiters and self.waits.expire(now):
            self.protocol.schedule_flush()
        if self.transactions is not None and self.transactions.open:
            self.transactions.tick(now)
        if self.host.require_auth:
            self.access.tick(now)

    def _on_writable(self) -> None:
        for consumer in list(self.consumers.values()):
            dispatch(consumer, self.host.clock, self.drop)

    @property
    def local(self) -> object:
        """The socket address the client reached (one of the namespace's names)."""
        transport = getattr(self.protocol, "transport", None)
        return None if transport is None else transport.get_extra_info("sockname")

    def reads_servicebus_decimals(self) -> bool:
        """Whether the peer reads decimals only as Service Bus writes them (the Python SDK)."""
        remote = self.engine.remote_open
        return reads_servicebus_decimals(None if remote is None else remote.properties)

    # -- its links --------------------------------------------------------------------
    def _links(self) -> list[Link]:
        """Every link of the connection the broker keeps something for."""
        return [*self.consumers, *self.producers, *self.requests, *self.replies.values(), *self.waits.waiters]

    def entity_links(self) -> list[tuple[Link, str]]:
        """Its senders, receivers and waiting receivers, each with its entity path (lower case)."""
        return [
            *((c.link, c.path) for c in self.consumers.values()),
            *((p, path) for p, (_, path) in self.producers.items()),
            *((w.link, w.path.lower()) for w in self.waits.waiters.values()),
        ]

    def entity_paths(self) -> list[str]:
        """The entity paths its senders and receivers are attached to (lower case)."""
        return [path for _, path in self.entity_links()]

    # -- faults -----------------------------------------------------------------------
    @property
    def controls(self) -> bool:
        """Whether it has a ``$control`` link (faults on connections spare it)."""
        return CONTROL_NODE in self.requests.values()

    def force_close(self, error: Error) -> None:
        """Close the connection with ``error`` (its links' locks come back when it ends)."""
        self.engine.close(error)
        self.protocol.schedule_flush()

    def detach_links(self, path: str | None, error: Error) -> list[str]:
        """Detach the links to entity ``path`` (None: every entity and management link) with
        ``error``; the names of those detached."""
        management = "/$management"
        links: list[tuple[Link, str]] = [
            *self.entity_links(),
            *((r, node.lower()) for r, node in self.requests.items() if node.lower().endswith(management)),
            *((s, node) for node, s in self.replies.items() if node.endswith(management)),
        ]
        names: list[str] = []
        for link, where in links:
            if link.is_detached or link.detach_sent:
                continue
            if path is None or under(where, path):
                link.detach(error)
                self.drop(link)
                names.append(link.name)
        if names:
            self.protocol.schedule_flush()
        return names

    # -- links going away -------------------------------------------------------------
    def detach_entity_links(self, nodes: set[object], error: Error) -> None:
        """Detach the senders and receivers attached to any of ``nodes`` (deleted entities)."""
        links: list[Link] = [link for link, c in self.consumers.items() if c.entity in nodes]
        links += [link for link, (target, _) in self.producers.items() if target in nodes]
        links += [link for link, w in self.waits.waiters.items() if w.entity in nodes]
        for link in links:
            if not link.detach_sent:
                link.detach(error)
            self.drop(link)
        if links:
            self.protocol.schedule_flush()

    def drop(self, link: Link) -> None:
        """Forget ``link`` in every table (a session receiver's session and messages come back)."""
        now = self.host.clock()
        self.waits.drop(link)
        consumer = self.consumers.pop(link, None)
        if consumer is not None:
            if link.context in consumer.entity.listeners:
                consumer.entity.listeners.remove(link.context)
            if consumer.session_id is not None:  # the session's lock ends: its messages come back, uncounted
                consumer.entity.release(list(consumer.held), now, counted=False)
                consumer.entity.close_session(consumer.session_id, link, now)
            # else, as Service Bus: the message locks are held until they expire (then counted as
            # any expired lock), and their tokens still settle or renew them over $management
            consumer.held.clear()
        self.producers.pop(link, None)
        self.via.pop(link, None)
        self.requests.pop(link, None)
        for key in [k for k, v in self.replies.items() if v is link]:
            del self.replies[key]
