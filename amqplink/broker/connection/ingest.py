"""What the peer sends the broker: messages on producer links (stored, then settled) and
requests on ``$cbs``, ``$management`` and ``$control`` links (answered), in or out of a
transaction; and the transaction coordinator's declares and discharges."""

from __future__ import annotations

import functools
import logging
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from amqplink.broker.connection.dispositions import no_transaction
from amqplink.broker.connection.settle import ACCEPTED, error
from amqplink.broker.namespace.errors import EntityError
from amqplink.engine.events import DeclareRequested, DischargeRequested, Event, TransactionEnded
from amqplink.engine.link import Delivery, ReceiverLink
from amqplink.protocol.definitions import Rejected, TransactionalState

if TYPE_CHECKING:
    from amqplink.broker.connection.connection import ServiceBusConnection

__all__ = ["TRANSACTION_EVENTS", "Ingest"]

log = logging.getLogger("amqplink.broker.sbserver")

_SETTLED = attrgetter("settled")
"""Whether a delivery is settled (a run of them checked with no Python code per delivery)."""

TRANSACTION_EVENTS: frozenset[type[Event]] = frozenset((DeclareRequested, DischargeRequested, TransactionEnded))
"""The coordinator's events (:meth:`Ingest.on_transaction_event`), by exact type."""


class Ingest:
    """Takes in one connection's transfers and coordinator requests."""

    def __init__(self, conn: ServiceBusConnection) -> None:
        self.conn = conn

    def on_received(self, link: ReceiverLink, deliveries: list[Delivery], now: float) -> None:
        """A run of transfers: a producer link's are stored (:meth:`on_sent`), a request
        link's (``$cbs``, ``$management``, ``$control``) answered one by one."""
        node = self.conn.requests.get(link)
        if node is None:
            self.on_sent(link, deliveries, now)
            return
        for delivery in deliveries:
            if not self._on_request_delivery(link, node, delivery, now):
                return

    def _on_request_delivery(self, link: ReceiverLink, node: str, delivery: Delivery, now: float) -> bool:
        """A request on ``node``'s link answered and settled; False when the link is
        detached for too many replies waiting (the rest of its run goes unanswered)."""
        conn = self.conn
        payload = delivery.payload
        if not conn.answers.on_request(node, payload if type(payload) is bytes else bytes(payload), now):
            link.detach(
                error(
                    "amqp:resource-limit-exceeded",
                    f"more than {conn.host.max_pending_replies} responses wait for credit on the reply link;"
                    " grant credit to read them",
                )
            )
            conn.requests.pop(link, None)
            return False
        if conn.settlement.received(link, delivery, ACCEPTED, 0.0):
            conn.settlement.top_up(link)
        return True

    def on_sent(self, link: ReceiverLink, deliveries: list[Delivery], now: float) -> None:
        """Transfers on a producer link, in arrival order (a run of them: one
        ``DeliveriesReceived``). Each message is stored or refused on its own, with its own
        fault checks; the link's entity is looked up once, and the accepted ones are settled
        together (consecutive delivery-ids: one disposition range) before the credit is topped up.
        While no fault is in force, the messages that are only a body are stored by the
        entity in one call (:meth:`Router.body_sender`) up to the first it does not take,
        which goes with the rest one at a time."""
        conn = self.conn
        producer = conn.producers.get(link)
        if producer is None:
            return
        target, path = producer
        host = conn.host
        faults = host.faults
        router = host.namespace.router  # (called directly: no call through the namespace per run)
        settlement = conn.settlement
        unavailable, delays = faults.unavailable, faults.delays  # the fault tables (emptied in place)
        accepted: list[Delivery] = []
        top_up = False
        if not unavailable and not delays:  # no fault to check for each: the messages only a body stored together
            store_bodies = router.body_sender(target)
            stored = 0 if store_bodies is None else store_bodies(deliveries, now)
            if stored:
                # settle_all passes over those the sender settled (nothing to answer) ...
                accepted = deliveries if stored == len(deliveries) else deliveries[:stored]
                if host.persistence is not None and any(map(_SETTLED, accepted)):
                    top_up = True  # ... and those top the credit up at once (Settlement.received)
                deliveries = deliveries[stored:]  # the rest one at a time, after those
        if deliveries:  # (none left when the entity stored them all)
            store = router.sender(target)  # the target's kind looked at once for the run
            for delivery in deliveries:
                outcome: Any = ACCEPTED
                payload = delivery.payload
                try:
                    if unavailable:
                        faults.check_send(path)
                    store(payload if type(payload) is bytes else bytes(payload), now, delivery.message_format)
                except EntityError as exc:
                    log.info("%s: message refused: %s", path, exc.description)
                    outcome = Rejected(error=error(exc.condition, exc.description))
                else:
                    if not delays and not delivery.settled:
                        accepted.append(delivery)  # the common case: settled below, with the others
                        continue
                delay = faults.delay_for(path) if delays else 0.0
                if outcome is ACCEPTED and not delay and not delivery.settled:
                    accepted.append(delivery)
                    continue
                if accepted:  # settle in arrival order
                    top_up = settlement.accepted(link, accepted) or top_up
                    accepted = []
                if settlement.received(link, delivery, outcome, delay):
                    top_up = True
        if accepted:
            top_up = settlement.accepted(link, accepted) or top_up
        if top_up:
            settlement.top_up(link)

    # -- in a transaction (amqplink.broker.transactions) ---------------------------------
    def on_posted(self, link: ReceiverLink, deliveries: list[Delivery], now: float) -> None:
        """Transfers that carried a delivery state: a message sent in a transaction is held
        by it (:meth:`ConnectionTransactions.post`); a request in one refused (``$management``
        and ``$cbs`` operations cannot join a transaction); any other state taken as none."""
        conn = self.conn
        node = conn.requests.get(link)
        producer = conn.producers.get(link)
        for delivery in deliveries:
            state = delivery.remote_state
            if type(state) is not TransactionalState:
                self.on_received(link, [delivery], now)
            elif node is not None:
                payload = delivery.payload
                conn.answers.on_request(
                    node, payload if type(payload) is bytes else bytes(payload), now, transactional=True
                )
                if conn.settlement.received(link, delivery, ACCEPTED, 0.0):
                    conn.settlement.top_up(link)
            elif producer is not None:
                target, path = producer
                via, via_path = conn.via.get(link, producer)
                transactions = conn.transactions
                if transactions is None:
                    outcome: Any = no_transaction(state.txn_id)
                else:
                    faults = conn.host.faults  # an unavailable entity refuses it as it refuses a plain send
                    check = functools.partial(faults.check_send, path) if faults.unavailable else None
                    outcome = transactions.post(state, delivery, target, via, via_path, now, check)
                if not delivery.settled:
                    link.settle(delivery, outcome)
                conn.settlement.top_up(link)

    def on_transaction_event(self, event: Event, now: float) -> None:
        """A coordinator's declare, discharge, or a transaction's end (with its link's credit topped up)."""
        conn = self.conn
        transactions = conn.transactions
        if transactions is None:  # (made with the first coordinator, whose events these are)
            return
        if type(event) is DeclareRequested:
            transactions.declare(event.request)
        elif type(event) is DischargeRequested:
            faults = conn.host.faults  # an unavailable entity refuses the commit as it refuses a plain send
            transactions.discharge(event.request, now, faults.check_send if faults.unavailable else None)
        elif type(event) is TransactionEnded:
            transactions.ended(event.transaction)
        conn.settlement.top_up_link(getattr(event, "link", None))
