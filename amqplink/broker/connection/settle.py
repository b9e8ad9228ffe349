"""Settling what the peer sent, now or once the store has written what it caused (commit waits).

With a durable store (``--data-dir``) a transfer is settled only once the commit holding
its effect is on disk: the runs one commit covers wait behind one callback per connection
and are settled together, in arrival order; a failed commit refuses them as not stored.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from amqplink.broker.durable import Persistence
from amqplink.broker.namespace.errors import EntityError
from amqplink.broker.namespace.management import response as status_response
from amqplink.codec.types import Symbol
from amqplink.engine.link import Delivery, ReceiverLink, SenderLink
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Error, Rejected
from amqplink.sbwire.conditions import INTERNAL_ERROR

if TYPE_CHECKING:
    from amqplink.broker.connection.connection import ServiceBusConnection

__all__ = ["ACCEPTED", "Settlement", "error", "refused", "store_failed"]

log = logging.getLogger("amqplink.broker.sbserver")
"""The Service Bus connection's logger (its lines keep the name they had before the split)."""

ACCEPTED = Accepted()


def error(condition: str, description: str) -> Error:
    """An AMQP error as the broker sends it."""
    # info as an empty map, not left out: the SDK reads an error as a 3-item list.
    return Error(condition=Symbol(condition), description=description, info={})


def refused(path: str, exc: EntityError) -> Rejected:
    """The outcome of a settlement the entity refused (a rejected *with* an error: "not applied")."""
    log.info("%s: settlement refused: %s", path, exc.description)
    return Rejected(error=error(exc.condition, exc.description))


def store_failed(exc: BaseException) -> Rejected:
    """The outcome of a transfer whose effect the store could not write (a full disk)."""
    return Rejected(error=error(INTERNAL_ERROR, f"the broker could not store this: {exc}"))


class Settlement:
    """How one connection settles the transfers it has handled, and tops up their credit."""

    def __init__(self, conn: ServiceBusConnection) -> None:
        self.conn = conn
        self._to_settle: list[Any] | None = None
        """Runs of transfers (link, deliveries, outcome, ... flat) settled once the store's batch number
        :attr:`_to_settle_batch` is written."""
        self._to_settle_batch = -1

    def top_up(self, link: ReceiverLink) -> None:
        """Grant a producer or request link its credit window again once half of it is used."""
        window = self.conn.host.credit_window
        if link.link_credit < window // 2:
            link.flow(window)

    def top_up_link(self, link: object) -> None:
        """:meth:`top_up` for an event's link, when it is a receiving link still attached."""
        if isinstance(link, ReceiverLink) and not link.is_detached:
            self.top_up(link)

    def accepted(self, link: ReceiverLink, deliveries: list[Delivery]) -> bool:
        """Settle a run of stored transfers with ``accepted`` (with a store, once they are
        written: one entry for the run); False when the store's commit settles them and tops
        the credit up then."""
        stored = self.conn.host.persistence
        if stored is None:
            link.settle_all(deliveries, ACCEPTED)
            return True
        self.run_after_commit(stored, link, deliveries, ACCEPTED)
        return False

    def received(self, link: ReceiverLink, delivery: Delivery, outcome: Any, delay: float) -> bool:
        """Settle a transfer the broker has handled with ``outcome`` (``delay`` seconds later
        when a delay-dispositions fault holds it; with a store, once what it caused is
        written). False when the store's commit settles it and tops the credit up then."""
        if delivery.settled:
            return True  # the sender settled it: nothing to answer
        stored = self.conn.host.persistence
        if stored is not None:
            # Settled (and credit topped up) once the message is on disk.
            self.after_commit(stored, link, delivery, outcome, delay)
            return False
        if delay:
            self.stored(link, delivery, outcome, None, delay)
        else:
            link.settle(delivery, outcome)
        return True

    def retired(self, link: SenderLink, delivery: Delivery, answer: Any) -> None:
        """A transaction's commit applied a settlement: the delivery is settled with it (with a
        store, once the commit is written)."""
        if delivery.settled or link.is_detached:
            return
        stored = self.conn.host.persistence
        if stored is not None:
            self.after_commit(stored, link, delivery, answer, 0.0)
        else:
            link.settle(delivery, answer)

    # -- after a store commit -----------------------------------------------------------
    def after_commit(
        self, stored: Persistence, link: SenderLink | ReceiverLink, delivery: Delivery, outcome: Any, delay: float
    ) -> None:
        """Settle a transfer once what it caused is on disk (``delay`` seconds later when a
        delay-dispositions fault holds it)."""
        if delay:
            stored.after_commit(lambda exc: self.stored(link, delivery, outcome, exc, delay))
            return
        self.run_after_commit(stored, link, [delivery], outcome)

    def run_after_commit(
        self, stored: Persistence, link: SenderLink | ReceiverLink, deliveries: list[Delivery], outcome: Any
    ) -> None:
        """Settle ``deliveries`` (of ``link``, in order) with ``outcome`` once what they caused
        is on disk: the runs of one commit wait behind one callback per connection (not one
        each), settled together in arrival order."""
        commits = stored.commits
        waiting = self._to_settle
        if waiting is None or self._to_settle_batch != commits.taken:
            waiting = self._to_settle = []
            self._to_settle_batch = commits.taken
            commits.after_commit(lambda exc: self._settle_all(waiting, exc))
        waiting += (link, deliveries, outcome)  # flat: no tuple per run kept for the collector

    def _settle_all(self, waiting: list[Any], exc: BaseException | None) -> None:
        """Settle the runs one commit covered (``waiting``: link, deliveries, outcome, ... flat);
        when the commit failed, whatever was not refused already is refused as not stored."""
        if waiting is self._to_settle:
            self._to_settle = None
        conn = self.conn
        if conn.engine.close_sent:
            return
        refusal = None if exc is None else store_failed(exc)
        # Settled in arrival order, consecutive runs of one link and one outcome together
        # (consecutive delivery-ids: one disposition range). A run whose transfers were all
        # settled meanwhile does not cut the one before from the one after.
        run: list[Delivery] = []
        run_link: Any = None
        run_outcome: Any = None
        items = iter(waiting)
        for link, deliveries, outcome in zip(items, items, items, strict=True):
            if link.is_detached:
                continue
            # (a rejected with an error is a refusal already; the dead-letter echo, a rejected
            # without one, was applied and is refused like any other outcome)
            if refusal is not None and (type(outcome) is not Rejected or outcome.error is None):
                outcome = refusal
            if link is not run_link or outcome is not run_outcome:
                if all(delivery.settled for delivery in deliveries):
                    continue
                if run:
                    self.run(run_link, run, run_outcome)
                run, run_link, run_outcome = [], link, outcome
            run += deliveries
        if run:
            self.run(run_link, run, run_outcome)
        conn.protocol.schedule_flush()

    def run(self, link: SenderLink | ReceiverLink, deliveries: list[Delivery], outcome: Any) -> None:
        """Settle ``deliveries`` of ``link`` with ``outcome``; a producer or request link gets
        its credit window again once half of it is used."""
        link.settle_all(deliveries, outcome)
        if isinstance(link, ReceiverLink):
            self.top_up(link)

    def stored(
        self,
        link: SenderLink | ReceiverLink,
        delivery: Delivery,
        outcome: Any,
        exc: BaseException | None,
        delay: float = 0.0,
    ) -> None:
        """Settle a transfer whose effect is now on disk (or, when the write failed, refuse it),
        ``delay`` seconds from now when a delay-dispositions fault holds it."""
        if delay:
            asyncio.get_running_loop().call_later(delay, self.stored, link, delivery, outcome, exc)
            return
        if link.is_detached or delivery.settled or self.conn.engine.close_sent:
            return
        if exc is not None and not isinstance(outcome, Rejected):
            outcome = store_failed(exc)
        self.run(link, [delivery], outcome)
        self.conn.protocol.schedule_flush()

    def reply_stored(self, link: SenderLink, request: Message, answer: Message, exc: BaseException | None) -> None:
        """Send a ``$management`` answer once what the request changed is on disk (or a 500)."""
        if link.is_detached:
            return
        if exc is not None:
            description = f"the broker could not store this: {exc}"
            answer = status_response(request, 500, description=description, condition=INTERNAL_ERROR)
        link.send(answer.encode())
        self.conn.protocol.schedule_flush()
