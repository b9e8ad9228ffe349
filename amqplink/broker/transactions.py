"""Transactions on a Service Bus connection: what each holds until it is discharged, and
the rules Service Bus keeps (docs/protocol.md#transactions).

The engine keeps the protocol (:mod:`amqplink.engine.transactions`: the control link,
declare and discharge, txn-ids); this module the resource's side, one
:class:`ConnectionTransactions` per connection that attached a coordinator:

* a message sent in a transaction (*posted*) is checked as a send would be (size, decode,
  sessions, the partition rules, room in its entity) and held, answered with its
  provisional outcome ``transactional-state(txn-id, accepted)``; nothing is stored;
* a settlement in a transaction (*retired*: complete, dead-letter, defer, abandon) is
  checked (the lock is held) and held, answered with an unsettled disposition echoing its
  provisional outcome; the delivery stays unsettled and the message locked;
* a commit checks every operation again (each lock still held; its messages planned as
  the sends of one, :meth:`~amqplink.broker.namespace.Namespace.plan_store`: the checks
  of a plain send, duplicates dropped, all of them fitting together), then applies them
  all in one go (with a data directory, one journal record:
  :meth:`~amqplink.broker.durable.commit.GroupCommit.atomic`), settles the retired
  deliveries with their outcomes, and answers ``accepted`` once that is written; any
  check failing rolls the whole transaction back (``amqp:transaction:rollback`` naming why);
* a roll-back (asked, a time-out, the control link or connection closing) drops what was
  held: no message was stored, so no message id reached duplicate detection; the retired
  deliveries are still unsettled and their messages still locked by their receiver, which
  may settle them again, until the lock expires.

Service Bus's limits, each a refusal that names the entity and what to do: at most
:data:`MAX_OPERATIONS` operations; rolled back :data:`TRANSACTION_TIMEOUT` seconds after
the first operation; every operation on one entity, the first one touched (sending to
another needs send-via through it); a message sent in a transaction to a partitioned
entity needs a partition key, one for the whole transaction (seed 002: on a session entity,
one session); at most :data:`MAX_OPEN_TRANSACTIONS` open on one connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from amqplink.broker.namespace.entity import KEY_UNKNOWN
from amqplink.broker.namespace.errors import NOT_ALLOWED, RESOURCE_LIMIT_EXCEEDED, EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.namespace import DEAD_LETTER_SUFFIX, Namespace, Topic
from amqplink.broker.namespace.plan import SendPlan
from amqplink.broker.outcomes import apply_outcome, check_outcome, echo_of, is_outcome
from amqplink.codec.types import Symbol
from amqplink.engine import transactions as protocol
from amqplink.engine.link import Delivery, SenderLink
from amqplink.engine.states import TransactionState
from amqplink.engine.transactions import (
    TRANSACTION_ROLLBACK,
    UNKNOWN_ID,
    CoordinatorLink,
    Transaction,
    TransactionRequest,
    TransactionTable,
)
from amqplink.protocol.definitions import Accepted, Error, Rejected, TransactionalState
from amqplink.sbwire.annotations import VIA_PARTITION_KEY

if TYPE_CHECKING:
    from amqplink.broker.durable import Persistence
    from amqplink.engine.connection import Connection

__all__ = [
    "MAX_OPEN_TRANSACTIONS",
    "MAX_OPERATIONS",
    "TRANSACTION_TIMEOUT",
    "ConnectionTransactions",
    "Holder",
    "transaction_entity",
]

log = logging.getLogger(__name__)

MAX_OPERATIONS = 100
"""Operations (messages sent, messages settled) one transaction holds at most (Service Bus's quota)."""
TRANSACTION_TIMEOUT = 120.0
"""Seconds from a transaction's first operation after which it is rolled back (Service Bus: two minutes)."""
MAX_OPEN_TRANSACTIONS = 100
"""Transactions one connection may have declared and not yet discharged (the broker's bound:
what they hold is in memory until then)."""

_ACCEPTED = Accepted()


class Holder(Protocol):
    """A receiving link's record on the broker (the consumer): its link, entity, path, and
    the deliveries it holds unsettled by lock token."""

    link: SenderLink
    entity: MessagingEntity
    path: str
    held: dict[bytes, Delivery]


Settle = Callable[[SenderLink, Delivery, Any], None]
"""Settle a consumer's delivery with an outcome (once what caused it is stored)."""


def transaction_entity(path: str) -> str:
    """The entity a transaction works on when it touches ``path`` (lower case): a queue or
    topic itself; a subscription's topic ("If you need to receive from a topic subscription
    and then send to a queue or topic in the same transaction, the transfer entity must be a
    topic"); a dead-letter queue's queue or subscription, then the same rule."""
    parts = path.lower().strip("/").split("/")
    if len(parts) > 1 and parts[-1] == DEAD_LETTER_SUFFIX:
        parts = parts[:-1]
    if len(parts) == 3 and parts[1] == "subscriptions":
        parts = parts[:1]
    return "/".join(parts)


@dataclass(eq=False)
class _Posting:
    """A message sent in a transaction: stored in ``target`` at the commit."""

    target: MessagingEntity | Topic
    payload: bytes
    message_format: int
    envelopes: list[Any]


@dataclass(eq=False)
class _Retirement:
    """A settlement in a transaction: applied at the commit."""

    holder: Holder
    delivery: Delivery
    outcome: Any


@dataclass(eq=False)
class _Open:
    """One transaction's broker side."""

    engine: Transaction
    entity: str | None = None
    """The entity it works on (:func:`transaction_entity`), fixed by its first operation."""
    key: Any = KEY_UNKNOWN
    """The partition key of its messages in a partitioned entity, fixed by the first."""
    started: float | None = None
    """When its first operation came (its time-out counts from there)."""
    postings: list[_Posting] = field(default_factory=list)
    retirements: dict[Delivery, _Retirement] = field(default_factory=dict)
    doomed: Error | None = None
    """Why it cannot commit (a message sent settled that it could not take)."""

    sent: int = 0
    """The messages of its postings (each of a batch)."""

    @property
    def operations(self) -> int:
        """Its messages sent (each of a batch) and settled."""
        return self.sent + len(self.retirements)

    @property
    def label(self) -> str:
        return self.engine.label


class ConnectionTransactions:
    """The transactions of one Service Bus connection, declared on its control links."""

    def __init__(
        self,
        namespace: Namespace,
        connection: Connection,
        persistence: Persistence | None,
        settle: Settle,
        flush: Callable[[], None],
    ) -> None:
        self.namespace = namespace
        self.connection = connection
        self.persistence = persistence
        self.settle = settle
        self.flush = flush
        """Have the connection's engine write what it has (an answer given outside its events)."""
        self.open: dict[bytes, _Open] = {}
        """The declared transactions not yet discharged (nor rolled back), by txn-id."""
        self._retired: dict[Delivery, _Open] = {}
        """Which open transaction settles each delivery held by one."""

    # -- declare and discharge ---------------------------------------------------------
    def declare(self, request: TransactionRequest) -> None:
        """Declare a transaction, unless the connection has :data:`MAX_OPEN_TRANSACTIONS` open."""
        if len(self.open) >= MAX_OPEN_TRANSACTIONS:
            why = (
                f"this connection has {MAX_OPEN_TRANSACTIONS} transactions declared and not discharged,"
                " the broker's limit: commit or roll back one first"
            )
            request.link.refuse(request, _error(RESOURCE_LIMIT_EXCEEDED, why))
            return
        transaction = request.link.declared(request)
        assert transaction.txn_id is not None
        self.open[transaction.txn_id] = _Open(transaction)

    def discharge(self, request: TransactionRequest, now: float, check: Callable[[str], None] | None = None) -> None:
        """Commit the transaction (all of it, checked first), or roll it back with ``fail``.
        ``check(path)``: raises the :class:`EntityError` a plain send to ``path`` would get now
        (an injected fault), which rolls the commit back."""
        txn_id = request.transaction.txn_id
        opened = self.open.pop(txn_id, None) if txn_id is not None else None
        if opened is None:  # (the engine knows it: it is ours)
            request.link.refuse(request, _error(UNKNOWN_ID, f"transaction {request.transaction.label} is not open"))
            return
        self._forget(opened)
        if request.fail:
            log.info("transaction %s rolled back (%d operations dropped)", opened.label, opened.operations)
            request.link.discharged(request)
            return
        plan = self._commit_plan(opened, now, check)
        if isinstance(plan, Error):
            log.info("transaction %s could not commit: %s", opened.label, plan.description)
            request.link.refuse(request, plan)
            return
        stored = self.persistence
        if stored is None:
            self._apply(opened, plan, now)
            request.link.discharged(request)
            return
        stored.commits.atomic(lambda: self._apply(opened, plan, now))  # one journal record: all of it or none
        stored.after_commit(lambda error: self._answer(request, error))

    def _answer(self, request: TransactionRequest, error: BaseException | None) -> None:
        """The commit is written (or the write failed and was taken back whole)."""
        if request.transaction.state is not TransactionState.DISCHARGING:
            return
        if error is None:
            request.link.discharged(request)
        else:
            why = f"the broker could not store the commit ({error}); nothing of it was kept: run it again"
            request.link.refuse(request, _error(TRANSACTION_ROLLBACK, why))
        self.flush()

    def ended(self, transaction: Transaction) -> None:
        """Its control link (or the connection) ended: it is rolled back (AMQP 1.0 4.1)."""
        txn_id = transaction.txn_id
        opened = self.open.pop(txn_id, None) if txn_id is not None else None
        if opened is not None:
            log.info("transaction %s rolled back: its control link ended", opened.label)
            self._forget(opened)

    def tick(self, now: float) -> None:
        """Roll back each transaction :data:`TRANSACTION_TIMEOUT` seconds after its first operation."""
        for txn_id, opened in list(self.open.items()):
            if opened.started is not None and now - opened.started >= TRANSACTION_TIMEOUT:
                del self.open[txn_id]
                self._forget(opened)
                why = (
                    f"transaction {opened.label} was not discharged within {TRANSACTION_TIMEOUT:g} s of its first"
                    " operation (Service Bus's time-out) and was rolled back: nothing it did took effect"
                )
                log.info("%s", why)
                link = opened.engine.link
                assert isinstance(link, CoordinatorLink)
                link.roll_back(opened.engine, _error(protocol.TRANSACTION_TIMEOUT, why))

    # -- transactional work ------------------------------------------------------------
    def post(
        self,
        state: TransactionalState,
        delivery: Delivery,
        target: MessagingEntity | Topic,
        via: MessagingEntity | Topic,
        via_path: str,
        now: float,
        check: Callable[[], None] | None = None,
    ) -> Any:
        """A message sent in a transaction to ``target`` (through ``via``, the link's own
        target: the same entity unless it sends via): checked and held; the outcome to settle
        the transfer with. ``check``: raises the :class:`EntityError` a plain send to the
        target would get now (an injected fault), which refuses this one the same way."""
        opened, refusal = self._live(state)
        if opened is None:
            return Rejected(error=refusal)
        payload = delivery.payload
        payload = payload if type(payload) is bytes else bytes(payload)
        try:
            if check is not None:
                check()
            unpacked = self.namespace.unpack(payload, delivery.message_format, target.properties.max_message_size)
            envelopes = [e for e in unpacked if not e.is_ping]
            self._joins(opened, via_path, now, max(1, len(envelopes)))
            key = self._key(opened, via, envelopes, sending_via=via is not target)
            if envelopes:
                self.namespace.check_send(target, envelopes)
        except EntityError as exc:
            log.info("%s: a message sent in transaction %s was refused: %s", via_path, opened.label, exc.description)
            error = _error(exc.condition, exc.description)
            if delivery.settled:  # nothing to answer: the transaction must not commit without it
                why = f"a message sent settled in it was refused: {exc.description}"
                opened.doomed = opened.doomed or _error(TRANSACTION_ROLLBACK, why)
            return TransactionalState(txn_id=state.txn_id, outcome=Rejected(error=error))
        if key is not None:
            opened.key = key
        if opened.started is None:
            opened.started = now
        opened.postings.append(_Posting(target, payload, delivery.message_format, envelopes))
        opened.sent += max(1, len(envelopes))
        return TransactionalState(txn_id=state.txn_id, outcome=_ACCEPTED)

    def retire(self, holder: Holder, delivery: Delivery, state: TransactionalState, now: float) -> Any:
        """A settlement in a transaction of a delivery ``holder`` holds: checked and held (the
        delivery stays unsettled, the message locked); the state to tell the receiver."""
        opened, refusal = self._live(state)
        if opened is None:
            return Rejected(error=refusal)
        outcome = state.outcome
        other = self._retired.get(delivery)
        if other is not None and other is not opened:
            # "the delivery MUST NOT be associated with a different non discharged transaction
            # than the outcome. If this happens then the control link MUST be terminated with a
            # transaction-rollback error." (AMQP 1.0 4.4.2)
            why = (
                f"a message settled in transaction {other.label} was settled again in {opened.label}"
                " (AMQP 1.0 4.4.2): the control link ends and its transactions are rolled back"
            )
            opened.engine.link.detach(_error(TRANSACTION_ROLLBACK, why))
            return None
        try:
            if not is_outcome(outcome):
                what = f"a settlement in a transaction carries an outcome (accepted, rejected, modified): {outcome!r}"
                raise EntityError(NOT_ALLOWED, what)
            if delivery not in opened.retirements:
                self._joins(opened, holder.path, now)
            check_outcome(holder.entity, delivery.tag, outcome, now)
        except EntityError as exc:
            log.info("%s: a settlement in transaction %s was refused: %s", holder.path, opened.label, exc.description)
            refused = Rejected(error=_error(exc.condition, exc.description))
            return TransactionalState(txn_id=state.txn_id, outcome=refused)
        if opened.started is None:
            opened.started = now
        opened.retirements[delivery] = _Retirement(holder, delivery, outcome)
        self._retired[delivery] = opened
        return TransactionalState(txn_id=state.txn_id, outcome=echo_of(outcome))

    def _live(self, state: TransactionalState) -> tuple[_Open | None, Error | None]:
        """The open transaction ``state`` names, or why work cannot join it."""
        transaction = TransactionTable.of(self.connection).get(state)
        if transaction is None:
            why = f"no transaction {_label(state)} is open on this connection: declare one first"
            return None, _error(UNKNOWN_ID, why)
        # Still open here: work that came before its discharge joins it, though the engine has
        # read the discharge already (the events of one read come in the order they arrived).
        opened = self.open.get(transaction.txn_id) if transaction.txn_id is not None else None
        if opened is None:
            if transaction.error is not None and transaction.state is TransactionState.ROLLED_BACK:
                return None, transaction.error
            return None, _error(NOT_ALLOWED, f"transaction {transaction.label} is being discharged: declare another")
        return opened, None

    def _joins(self, opened: _Open, path: str, now: float, adding: int = 1) -> None:
        """Raise unless ``adding`` more operations on ``path`` may join ``opened`` (a batch's
        messages count one each): the entity rule, the count."""
        entity = transaction_entity(path)
        if opened.entity is not None and opened.entity != entity:
            raise EntityError(
                NOT_ALLOWED,
                f"transaction {opened.label} works on {opened.entity!r}: an operation on {entity!r} cannot join it;"
                f" send to {entity!r} via {opened.entity!r} (a sender created via={opened.entity!r}), or use another"
                " transaction",
            )
        held = opened.operations
        if held + adding > MAX_OPERATIONS:
            raise EntityError(
                RESOURCE_LIMIT_EXCEEDED,
                f"transaction {opened.label} holds {held} operations and {adding} more would pass {MAX_OPERATIONS},"
                " Service Bus's limit (each message of a batch counts): commit it and start another",
            )
        opened.entity = entity

    def _key(self, opened: _Open, via: MessagingEntity | Topic, envelopes: list[Any], *, sending_via: bool) -> Any:
        """The transaction's partition key after these messages, or None when ``via`` (the
        entity they land in first) is not partitioned. "Messages sent as part of a transaction
        must specify a partition key ... the same partition key" (seed 002); a message sent
        via another entity is keyed there by its ``x-opt-via-partition-key`` when it has one."""
        partitions = via.partitions
        if partitions is None:
            return None
        key = opened.key
        for envelope in envelopes:
            own = envelope.annotations.get(VIA_PARTITION_KEY) if sending_via else None
            if own is None:
                own = partitions.key(envelope)  # (a PartitionKey differing from the SessionId: refused there)
            if own is None:
                raise EntityError(
                    NOT_ALLOWED,
                    f"{via.path!r} is partitioned: a message sent in a transaction needs a partition key (set its"
                    " session_id, its partition_key, or, with duplicate detection, its message_id)",
                )
            if key is not KEY_UNKNOWN and own != key:
                if envelope.session_id is not None:
                    what = f"one transaction cannot send to two sessions of the partitioned {via.path!r}"
                else:
                    what = f"the messages of one transaction need one partition key in the partitioned {via.path!r}"
                raise EntityError(NOT_ALLOWED, f"{what} ({key!r}, then {own!r}): use one transaction per key")
            key = own
        return key

    # -- commit ------------------------------------------------------------------------
    def _commit_plan(self, opened: _Open, now: float, check: Callable[[str], None] | None) -> SendPlan | Error:
        """The plan that stores its messages (:meth:`_checked`), or why its commit cannot be
        applied in full: then it is rolled back whole."""
        if opened.doomed is not None:
            return opened.doomed
        try:
            return self._checked(opened, now, check)
        except EntityError as exc:
            why = f"transaction {opened.label} was rolled back, nothing of it applied: {exc.description}"
            return _error(TRANSACTION_ROLLBACK, why)

    def _checked(self, opened: _Open, now: float, check: Callable[[str], None] | None) -> SendPlan:
        """The plan that stores its messages, made once each retired message was found still
        locked; raises why the commit cannot be applied in full. Its messages are planned as
        the sends of one (:meth:`Namespace.plan_store`: plain sends' checks, duplicates
        dropped, copies counted together), so nothing is stored and no id recorded unless all
        of it can be."""
        for retirement in opened.retirements.values():
            holder = retirement.holder
            if holder.held.get(retirement.delivery.tag) is not retirement.delivery:
                raise EntityError(
                    NOT_ALLOWED,
                    f"a message of {holder.path!r} settled in the transaction is no longer held by its receiver"
                    " (its link or connection closed, or it was settled outside the transaction)",
                )
            check_outcome(holder.entity, retirement.delivery.tag, retirement.outcome, now)
        sends = [(posting.target, posting.envelopes) for posting in opened.postings if posting.envelopes]
        if check is not None:
            for path in dict.fromkeys(target.path.lower() for target, _ in sends):
                check(path)
        return self.namespace.plan_store(sends, now)

    def _apply(self, opened: _Open, plan: SendPlan, now: float) -> None:
        """Store its messages (``plan``) and apply its settlements (checked by :meth:`_checked`
        just before, in the same turn of the loop: nothing can change in between)."""
        plan.apply()
        for retirement in opened.retirements.values():
            holder, delivery = retirement.holder, retirement.delivery
            holder.held.pop(delivery.tag, None)
            try:
                answer = apply_outcome(holder.entity, delivery.tag, retirement.outcome, now)
            except EntityError as exc:  # (checked: a defect if it comes)
                log.error("transaction %s: a settlement checked for its commit was refused: %s", opened.label, exc)
                answer = Rejected(error=_error(exc.condition, exc.description))
            self.settle(holder.link, delivery, answer)
        log.info(
            "transaction %s committed: %d messages sent, %d settled",
            opened.label, opened.sent, len(opened.retirements),
        )  # fmt: skip

    def _forget(self, opened: _Open) -> None:
        for delivery in opened.retirements:
            if self._retired.get(delivery) is opened:
                del self._retired[delivery]


def _label(state: TransactionalState) -> str:
    txn_id = state.txn_id
    return txn_id.hex() if isinstance(txn_id, bytes) else repr(txn_id)


def _error(condition: str | Symbol, description: str) -> Error:
    # info as an empty map, not left out: the SDK reads an error as a 3-item list.
    return Error(condition=Symbol(condition), description=description, info={})
