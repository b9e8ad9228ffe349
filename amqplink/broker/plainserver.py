"""The plain queue broker's connections: links routed to in-memory queues.

A peer's sending link delivers into the queue named by its target address; a peer's
receiving link consumes from the queue named by its source address (a dynamic source
gets a fresh queue). Incoming messages are accepted once stored; each producer link
gets ``credit_window`` credit, topped up as messages arrive. A message larger than
``max_message_size`` is refused with ``amqp:link:message-size-exceeded``; one that does
not fit its queue (``max_queue_bytes``) is rejected with ``amqp:resource-limit-exceeded``,
and from half of it producers get no credit. Incoming links are answered with
rcv-settle-mode ``first``: the broker settles each message once it stores it (as
Service Bus does).

:class:`~amqplink.broker.server.Broker` is the facade that serves these (or a Service
Bus namespace, :mod:`amqplink.broker.sbserver`) on a socket.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from amqplink.aio.server import ServerProtocol
from amqplink.aio.transport import EngineProtocol
from amqplink.broker.entities import DEFAULT_MAX_QUEUE_BYTES, Consumer, PlainQueue
from amqplink.codec.types import Symbol
from amqplink.engine import errors as engine_errors
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import (
    ConnectionClosed,
    DeliveriesReceived,
    DeliveriesUpdated,
    Event,
    LinkAttachRequested,
    LinkCreditChanged,
    LinkDetached,
    StatefulDeliveriesReceived,
)
from amqplink.engine.link import RCV_FIRST, TERMINAL_OUTCOMES, Delivery, Link, ReceiverLink, SenderLink
from amqplink.engine.transactions import UNKNOWN_ID, CoordinatorLink
from amqplink.protocol.definitions import Accepted, Error, Rejected, Source, TransactionalState

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "PlainHost"]

log = logging.getLogger(__name__)

_ACCEPTED = Accepted()

DEFAULT_MAX_MESSAGE_SIZE = 16 << 20
"""Largest message the broker takes, in bytes (the max-message-size of its receiving links)."""


class PlainHost:
    """The plain queue broker without its socket: the queues, and the handler of each
    connection's events (:meth:`accept`)."""

    def __init__(
        self,
        *,
        credit_window: int = 1000,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
    ) -> None:
        self.credit_window = credit_window
        self.max_message_size = max_message_size
        self.max_queue_bytes = max_queue_bytes
        self.queues: dict[str, PlainQueue] = {}

    def queue(self, name: str) -> PlainQueue:
        """The queue called ``name``, created on first use."""
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = PlainQueue(name, max_bytes=self.max_queue_bytes)
        return queue

    def accept(
        self, engine: EngineConnection, protocol: EngineProtocol, on_closed: Callable[[], None] | None = None
    ) -> Callable[[list[Event]], None]:
        """The event handler of one new connection; ``on_closed`` is called once it has closed."""
        return _PlainConnection(self, protocol, on_closed).on_events


class _PlainConnection:
    """One connection's links: the consumers (the broker's senders) and the producers (its
    receivers), each with its queue."""

    def __init__(self, host: PlainHost, protocol: EngineProtocol, on_closed: Callable[[], None] | None) -> None:
        self.host = host
        self.protocol = protocol
        self.on_closed = on_closed
        self.consumers: dict[Link, PlainQueue] = {}
        """Each consumer's queue, by its sender link (keyed by ``Link``: a disposition's event names either kind)."""
        self.producers: dict[ReceiverLink, PlainQueue] = {}
        if isinstance(protocol, ServerProtocol):
            protocol.on_writable = self._on_writable

    def _on_writable(self) -> None:
        for queue in set(self.consumers.values()):
            queue.dispatch()

    def on_events(self, events: list[Event]) -> None:
        handlers = _HANDLERS
        for event in events:
            handler = handlers.get(type(event))
            if handler is not None:
                handler(self, event)

    def _on_received(self, event: DeliveriesReceived) -> None:
        link = event.link
        queue = self.producers.get(link)
        if queue is not None:
            for delivery in event.deliveries:
                self._on_message(link, delivery, queue)

    def _on_stateful(self, event: StatefulDeliveriesReceived) -> None:
        """Transfers that carried a delivery state: one in a transaction names none open here
        (no coordinator is offered) and is rejected with ``amqp:transaction:unknown-id``; any
        other state is taken as a plain transfer."""
        link = event.link
        queue = self.producers.get(link)
        for delivery in event.deliveries:
            if type(delivery.remote_state) is TransactionalState:
                if not delivery.settled:
                    why = "this broker's plain queues do not support transactions: no transaction is open here"
                    link.settle(delivery, Rejected(error=Error(condition=UNKNOWN_ID, description=why)))
            elif queue is not None:
                self._on_message(link, delivery, queue)

    def _on_updated(self, event: DeliveriesUpdated) -> None:
        queue = self.consumers.get(event.link)
        state = event.state
        if queue is not None and (event.settled or isinstance(state, TERMINAL_OUTCOMES)):
            for delivery in event.deliveries:
                queue.on_outcome(delivery, state)

    def _on_credit(self, event: LinkCreditChanged) -> None:
        link = event.link
        queue = self.consumers.get(link)
        if queue is not None:
            queue.dispatch()
            # "drain: ... use all the available credit" first (2.6.7), then answer.
            link.drained()

    def _on_attach_requested(self, event: LinkAttachRequested) -> None:
        self._on_attach(event.link)

    def _on_detached(self, event: LinkDetached) -> None:
        link = event.link
        if not link.detach_sent:
            link.detach()
        self._drop(link)

    def _on_closed(self, event: ConnectionClosed) -> None:
        for link in [*self.consumers, *self.producers]:
            self._drop(link)
        if self.on_closed is not None:
            self.on_closed()

    def _on_attach(self, link: Link) -> None:
        remote = link.remote_attach
        assert remote is not None
        if link.is_detached:
            return  # the engine refused it already (a transfer before any credit, ...)
        protocol = self.protocol
        if isinstance(link, SenderLink):
            source = remote.source
            if source is not None and source.dynamic:
                address = f"dynamic-{uuid.uuid4()}"
                link.attach(Source(address=address, dynamic=True), remote.target)
            elif source is None or not source.address:
                _refuse(link, "a receiving link needs a source address")
                return
            else:
                address = str(source.address)
                link.attach()
            queue = self.host.queue(address)
            self.consumers[link] = queue
            link.hold_drain = True

            def writable() -> bool:
                return not protocol.write_paused

            write_now = protocol.write_now if isinstance(protocol, ServerProtocol) else protocol.schedule_flush
            queue.add_consumer(Consumer(link, protocol.schedule_flush, write_now, writable))
        else:
            assert isinstance(link, ReceiverLink)
            target = remote.target
            if isinstance(link, CoordinatorLink):
                # A transaction controller (AMQP 1.0 part 4): plain queues are not a transactional
                # resource; the Service Bus namespace is (Broker(servicebus=True)).
                _refuse(
                    link,
                    "this broker's plain queues do not support transactions: serve a Service Bus namespace"
                    " (Broker(servicebus=True)) to use them",
                    engine_errors.NOT_IMPLEMENTED,
                )
                return
            if target is None or not target.address:
                _refuse(link, "a sending link needs a target address")
                return
            link.max_message_size = self.host.max_message_size
            link.answer_rcv_settle_mode = RCV_FIRST
            link.attach()
            self.producers[link] = self.host.queue(str(target.address))
            link.flow(self.host.credit_window)

    def _on_message(self, link: ReceiverLink, delivery: Delivery, queue: PlainQueue) -> None:
        if link.excess_transfers or link.detach_sent:
            # "the receiver MAY ... detach the link with a transfer-limit-exceeded error code" (2.6.7)
            if not link.detach_sent:
                log.warning("detaching link %r: a message arrived without link credit", link.name)
                link.detach(
                    Error(
                        condition=engine_errors.TRANSFER_LIMIT_EXCEEDED,
                        description="a message arrived without link credit: wait for the broker's flow",
                    )
                )
            return
        payload = delivery.payload
        data = payload if type(payload) is bytes else bytes(payload)
        if not queue.put(data):
            _refuse_message(link, delivery, queue, len(data))
        elif not delivery.settled:
            link.settle(delivery, _ACCEPTED)
        credit_window = self.host.credit_window
        if queue.above_high_water:
            if link.link_credit > 0:
                link.flow(0)  # "the receiver ... can reduce link-credit" (2.6.7): stop the producer
            flush = self.protocol.schedule_flush

            def resume() -> None:
                if not link.is_detached:
                    link.flow(credit_window)
                    flush()

            queue.wait_for_space(link, resume)
        elif link.link_credit < credit_window // 2:
            link.flow(credit_window)

    def _drop(self, link: Link) -> None:
        if isinstance(link, SenderLink):
            queue = self.consumers.pop(link, None)
            if queue is not None:
                queue.remove_consumer(link)
        elif isinstance(link, ReceiverLink):
            queue = self.producers.pop(link, None)
            if queue is not None:
                queue.forget_producer(link)


_HANDLERS: dict[type[Event], Callable[[_PlainConnection, Any], None]] = {
    DeliveriesReceived: _PlainConnection._on_received,
    StatefulDeliveriesReceived: _PlainConnection._on_stateful,
    DeliveriesUpdated: _PlainConnection._on_updated,
    LinkCreditChanged: _PlainConnection._on_credit,
    LinkAttachRequested: _PlainConnection._on_attach_requested,
    LinkDetached: _PlainConnection._on_detached,
    ConnectionClosed: _PlainConnection._on_closed,
}
"""What a connection does on each kind of event (the others need nothing of it)."""


def _refuse(link: Link, why: str, condition: Symbol = engine_errors.NOT_FOUND) -> None:
    link.attach(None, None, keep=False)
    link.detach(Error(condition=condition, description=why))


def _refuse_message(link: ReceiverLink, delivery: Delivery, queue: PlainQueue, size: int) -> None:
    error = Error(condition=engine_errors.RESOURCE_LIMIT_EXCEEDED, description=queue.refusal(size))
    if delivery.settled or delivery.remote_settled:
        # A pre-settled message cannot be rejected: the link is the only way to say so.
        log.warning("detaching link %r: %s", link.name, error.description)
        link.detach(error)
    else:
        log.debug("rejecting a message on link %r: %s", link.name, error.description)
        link.settle(delivery, Rejected(error=error))
