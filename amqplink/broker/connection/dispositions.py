"""The peer's outcomes for the messages the broker sent it (docs/protocol.md#settlement-mapping):
applied to the entity, then echoed (or refused) in the broker's settlement."""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, Any

from amqplink.broker.connection.consumer import Consumer
from amqplink.broker.connection.settle import error, refused
from amqplink.broker.durable import Persistence
from amqplink.broker.namespace.errors import EntityError
from amqplink.broker.outcomes import apply_outcome
from amqplink.engine.link import Delivery
from amqplink.engine.transactions import UNKNOWN_ID
from amqplink.protocol.definitions import Accepted, Rejected, TransactionalState

if TYPE_CHECKING:
    from amqplink.broker.connection.connection import ServiceBusConnection

__all__ = ["Dispositions", "no_transaction"]


def no_transaction(txn_id: object) -> Rejected:
    """The answer to a transfer or settlement in a transaction this connection has not declared."""
    name = txn_id.hex() if isinstance(txn_id, bytes) else repr(txn_id)
    return Rejected(error=error(UNKNOWN_ID, f"no transaction {name} is open on this connection: declare one first"))


class Dispositions:
    """Applies one connection's peer outcomes (complete, abandon, defer, dead-letter)."""

    def __init__(self, conn: ServiceBusConnection) -> None:
        self.conn = conn

    def on_outcomes(self, consumer: Consumer, deliveries: list[Delivery], state: Any, now: float) -> None:
        """One outcome for several of the consumer's deliveries (a disposition's range): what
        :meth:`on_outcome` does for each, with ``accepted`` (complete) taken together when
        no delay is injected (with a store, settled as runs once the commit is written)."""
        host = self.conn.host
        if type(state) is not Accepted or host.faults.delays:
            for delivery in deliveries:
                self.on_outcome(consumer, delivery, state, now)
            return
        tokens: list[bytes] = [delivery.tag for delivery in deliveries]  # the lock tokens, while held
        released = list(map(consumer.held.pop, tokens, repeat(None)))  # in order: a repeat finds None
        completing = deliveries
        if None in released:  # those no longer held (settled already) are not completed
            kept = [i for i, was in enumerate(released) if was is not None]
            tokens, completing = [tokens[i] for i in kept], [deliveries[i] for i in kept]
        link = consumer.link
        refusals = consumer.entity.complete_all(tokens, now)
        stored = host.persistence
        if stored is not None:
            self._completed_after_commit(stored, consumer, completing, state, refusals)
            return
        for i, exc in refusals.items():
            link.settle(completing[i], refused(consumer.path, exc))
        # Echo the outcome applied (as on_outcome does); those refused are settled already.
        link.settle_all(completing, state)

    def _completed_after_commit(
        self,
        stored: Persistence,
        consumer: Consumer,
        completing: list[Delivery],
        state: Accepted,
        refusals: dict[int, EntityError],
    ) -> None:
        """Settle a completed range once the commit is written, as :meth:`on_outcome` would
        one at a time: in order, the completed ones in runs echoing ``state``, each refused
        one with its refusal; those the consumer settled itself are not answered."""
        link = consumer.link
        run_after_commit = self.conn.settlement.run_after_commit
        if not refusals:
            if not all(delivery.settled for delivery in completing):  # (all settled: nothing to answer)
                run_after_commit(stored, link, completing, state)
            return
        run: list[Delivery] = []
        for i, delivery in enumerate(completing):
            exc = refusals.get(i)
            if exc is None:
                run.append(delivery)
                continue
            answer = refused(consumer.path, exc)
            if delivery.settled:
                continue
            if run:
                run_after_commit(stored, link, run, state)
                run = []
            run_after_commit(stored, link, [delivery], answer)
        if run:
            run_after_commit(stored, link, run, state)

    def on_outcome(self, consumer: Consumer, delivery: Delivery, state: Any, now: float) -> None:
        """One delivery's outcome applied to its entity and answered (a refusal: rejected with
        why; with a store, once the commit is written; later under a delay fault)."""
        if type(state) is TransactionalState:  # a settlement in a transaction: applied at its commit
            self.retire(consumer, delivery, state, now)
            return
        token = delivery.tag  # the lock token, while held
        if consumer.held.pop(token, None) is None:
            return
        try:
            answer = apply_outcome(consumer.entity, token, state, now)
        except EntityError as exc:
            answer = refused(consumer.path, exc)
        if delivery.settled:
            return
        host = self.conn.host
        faults = host.faults
        delay = faults.delay_for(consumer.path) if faults.delays else 0.0
        stored = host.persistence
        if stored is not None:
            self.conn.settlement.after_commit(stored, consumer.link, delivery, answer, delay)
            return
        if delay:
            self.conn.settlement.stored(consumer.link, delivery, answer, None, delay)
            return
        consumer.link.settle(delivery, answer)

    def retire(self, consumer: Consumer, delivery: Delivery, state: TransactionalState, now: float) -> None:
        """A settlement in a transaction: held by it, the delivery left unsettled and the
        receiver told the provisional outcome (or why it cannot join)."""
        if consumer.held.get(delivery.tag) is not delivery:
            return  # settled already
        transactions = self.conn.transactions
        if transactions is None:
            answer: Any = no_transaction(state.txn_id)
        else:
            answer = transactions.retire(consumer, delivery, state, now)
        if answer is not None:
            consumer.link.update(delivery, answer)
