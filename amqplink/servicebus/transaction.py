"""Service Bus transactions (docs/transactions.md): the operations of one client's connection
that succeed or fail together, as .NET's ``ServiceBusTransactionScope`` groups them.

    async with client.transaction() as txn:                    # committed when the block ends
        message = (await receiver.receive_messages())[0]         # receiving is not part of it
        await sender.send_messages(ServiceBusMessage("next"), transaction=txn)
        await receiver.complete_message(message, transaction=txn)
    # an exception in the block rolls it back: nothing sent, the message still locked

The operations that join a transaction are send, complete, abandon, defer and dead-letter
(Service Bus's); their handlers must be of the client that made the transaction (one
connection: "transactions cannot span more than one connection"). A sender created with
``via=`` sends to its entity through ``via``, so that one transaction that received from
``via`` may send elsewhere (send-via). Service Bus's rules are checked by the broker and
come back as errors: :class:`~amqplink.servicebus.exceptions.TransactionRolledBackError`
when a commit could not be applied (nothing of it was),
:class:`~amqplink.servicebus.exceptions.TransactionTimeoutError` after two minutes,
:class:`~amqplink.servicebus.exceptions.TransactionInDoubtError` when the commit's answer
never came; an operation that cannot join raises the error the broker gave for it.
Operations are not retried inside a transaction: a retry on a new connection would leave it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from amqplink.aio.errors import AMQPError, TransactionError, TransactionInDoubt
from amqplink.aio.transactions import Transaction, outcome_of
from amqplink.engine.states import TransactionState
from amqplink.protocol.definitions import Rejected
from amqplink.servicebus._base import ConnectionHolder, Handler
from amqplink.servicebus.errors import from_amqp_error
from amqplink.servicebus.exceptions import (
    ServiceBusError,
    ServiceBusTransactionError,
    TransactionInDoubtError,
    TransactionRolledBackError,
)
from amqplink.servicebus.management_node import DispositionStatus
from amqplink.servicebus.message import (
    BATCH_MESSAGE_FORMAT,
    SINGLE_MESSAGE_TYPES,
    ServiceBusMessageBatch,
    ServiceBusReceivedMessage,
    TransferBatcher,
    iter_outgoing,
    to_outgoing,
)
from amqplink.servicebus.partitioning import check_partition_key

if TYPE_CHECKING:
    from amqplink.servicebus.receiver import ServiceBusReceiver
    from amqplink.servicebus.sender import ServiceBusSender

__all__ = ["ServiceBusTransaction"]


class ServiceBusTransaction:
    """One transaction of a client's connection. Get it from ``ServiceBusClient.transaction()``;
    use it as ``async with`` (committed when the block ends, rolled back when it raises), or
    :meth:`begin`, then :meth:`commit` or :meth:`rollback`."""

    def __init__(self, holder: ConnectionHolder, timeout: float) -> None:
        self._holder = holder
        self._timeout = timeout
        self._inner: Transaction | None = None
        self._generation = -1
        self._settled: list[tuple[ServiceBusReceiver, ServiceBusReceivedMessage]] = []
        """The messages settled in it: marked settled once it commits."""

    def __repr__(self) -> str:
        return f"<ServiceBusTransaction {self.state.name.lower()} on {self._holder.namespace}>"

    @property
    def state(self) -> TransactionState:
        """Where it is: UNDECLARED (not begun), ACTIVE, COMMITTED, ROLLED_BACK, IN_DOUBT..."""
        return TransactionState.UNDECLARED if self._inner is None else self._inner.state

    @property
    def is_active(self) -> bool:
        """Begun and not yet committed or rolled back: operations may join it."""
        return self._inner is not None and self._inner.state is TransactionState.ACTIVE

    @property
    def transaction_id(self) -> bytes | None:
        """The id the broker gave it (None until begun)."""
        return None if self._inner is None else self._inner.txn_id

    async def begin(self) -> ServiceBusTransaction:
        """Declare it on the client's connection (opened if needed)."""
        if self._inner is not None:
            raise ServiceBusTransactionError("the transaction was begun already: a transaction is used once")
        try:
            connection = await self._holder.connection()
            self._inner = await connection.transaction(timeout=self._timeout)
        except (AMQPError, OSError, TimeoutError) as exc:
            raise _error(exc, "could not begin a transaction") from exc
        self._generation = self._holder.generation
        return self

    async def commit(self) -> None:
        """Apply every operation of it together. :class:`TransactionRolledBackError` (or
        :class:`TransactionTimeoutError`) when Service Bus rolled it back instead: none of
        them took effect; :class:`TransactionInDoubtError` when the answer never came."""
        inner = self._begun("commit")
        try:
            await inner.commit(timeout=self._timeout)
        except TransactionInDoubt as exc:
            raise TransactionInDoubtError(description=str(exc), condition=exc.condition, error=exc) from exc
        except (AMQPError, OSError, TimeoutError) as exc:
            raise _error(exc, "the commit failed", TransactionRolledBackError) from exc
        settled, self._settled = self._settled, []
        for receiver, message in settled:
            receiver._mark_settled(message)

    async def rollback(self) -> None:
        """Undo it: nothing it sent is stored, and the messages it settled are still locked by
        their receivers (settle them again, or let the locks expire)."""
        inner = self._begun("roll back")
        self._settled.clear()
        try:
            await inner.rollback(timeout=self._timeout)
        except (AMQPError, OSError, TimeoutError) as exc:
            why = "the roll-back could not be sent (the broker rolls it back when the connection ends)"
            raise _error(exc, why) from exc

    async def __aenter__(self) -> ServiceBusTransaction:
        return await self.begin()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            await self.commit()
            return
        if self.is_active and self._generation == self._holder.generation:
            with contextlib.suppress(ServiceBusError):  # (the caller's exception is the one to see)
                await self.rollback()

    # -- what the handlers call ------------------------------------------------------------
    def _begun(self, action: str) -> Transaction:
        inner = self._inner
        if inner is None:
            why = f"cannot {action}: the transaction is not begun (use it as async with, or call begin())"
            raise ServiceBusTransactionError(why)
        return inner

    def _joinable(self, handler: Handler, action: str) -> Transaction:
        """The transaction, if an operation of ``handler`` may join it now."""
        inner = self._begun(action)
        if handler._holder is not self._holder:
            raise ServiceBusTransactionError(
                f"cannot {action} in this transaction: the {handler._kind} is of another client (another"
                " connection); a transaction's operations are on the connection of the client that made it",
                entity=handler.entity_name,
            )
        if self._generation != self._holder.generation:
            raise TransactionRolledBackError(
                description=f"cannot {action}: the connection the transaction was declared on closed, which rolled"
                " it back; begin another",
                entity=handler.entity_name,
            )
        if not inner._engine.is_active:
            raise ServiceBusTransactionError(
                f"cannot {action}: the transaction is {inner.state.name.lower()}", entity=handler.entity_name
            )
        return inner

    async def _send(
        self,
        sender: ServiceBusSender,
        message: Any,
        timeout: float | None,
    ) -> None:
        """``send_messages(message, transaction=self)``: a message or batch one transfer in it, a list in batches."""
        inner = self._joinable(sender, "send")
        if isinstance(message, AsyncIterable):
            message = [m async for m in message]
        await sender._open()
        link = sender._link
        assert link is not None
        if self._generation != self._holder.generation:
            self._joinable(sender, "send")  # (raises: the sender reconnected meanwhile)
        transfers: list[tuple[bytes, int]] = []
        if isinstance(message, ServiceBusMessageBatch):
            if len(message):
                transfers.append((message._payload(), BATCH_MESSAGE_FORMAT))
        elif isinstance(message, SINGLE_MESSAGE_TYPES):
            outgoing = to_outgoing(message)
            check_partition_key(outgoing)
            transfers.append((outgoing._message.encode(), 0))
        else:  # a list: in batches, as outside a transaction (and as .NET sends a list in one)
            batcher = TransferBatcher(sender.max_message_size)
            for outgoing in iter_outgoing(message):
                transfers += batcher.add(outgoing)
            transfers += batcher.rest()
        futures = []
        try:
            for payload, message_format in transfers:
                futures.append(await inner.send_payload_nowait(link, payload, message_format=message_format))
            gathered = asyncio.gather(*futures)
            results = await (gathered if timeout is None else asyncio.wait_for(gathered, timeout))
        except (AMQPError, OSError, TimeoutError) as exc:
            raise _error(exc, "a send in the transaction failed", entity=sender.entity_name) from exc
        for state in results:
            outcome = outcome_of(state)
            if type(outcome) is Rejected:
                raise _rejection(outcome, sender.entity_name)

    async def _settle(
        self,
        receiver: ServiceBusReceiver,
        message: ServiceBusReceivedMessage,
        action: str,
        status: DispositionStatus,
        reason: str | None,
        description: str | None,
    ) -> None:
        """A settle method with ``transaction=self``: the disposition in it, its provisional
        answer awaited; the message counts as settled once the transaction commits."""
        from amqplink.servicebus.receiver import link_outcome  # (receiver imports this module's name only to type)

        receiver._check_message_alive(message, action)
        inner = self._joinable(receiver, action)
        if message._delivery is None or message._is_deferred_message:
            raise ServiceBusTransactionError(
                f"cannot {action} in a transaction: a deferred message is settled over $management, and management"
                " operations cannot join a transaction (Service Bus); settle it outside the transaction",
                entity=receiver.entity_name,
            )
        lost = receiver._lock_lost(message, action)
        if lost is not None:
            raise lost
        link = receiver._link
        assert link is not None
        outcome, _verb = link_outcome(status, reason, description)
        try:
            await inner.settle(link, message._delivery, outcome)
        except (AMQPError, OSError) as exc:
            raise receiver._link_error(exc) from exc
        self._settled.append((receiver, message))


def _rejection(outcome: Rejected, entity: str) -> ServiceBusError:
    """The Service Bus error for a message the broker would not take in the transaction."""
    error = outcome.error
    condition = None if error is None else str(error.condition)
    description = None if error is None else error.description
    refused = AMQPError(f"{entity}: the message was refused", condition=condition, description=description)
    return _error(refused, "a send in the transaction was refused", entity=entity)


def _error(
    exc: BaseException, what: str, cls: type[ServiceBusError] = ServiceBusTransactionError, *, entity: str | None = None
) -> ServiceBusError:
    """The Service Bus error for ``exc``: the error table's class for its condition (a rolled-back
    transaction's is :class:`TransactionRolledBackError`), else ``cls``; one that ended a
    commit is always a transaction error (a rolled-back one, unless ``cls`` says otherwise)."""
    bare = isinstance(exc, TransactionError) and exc.condition is None
    failure = None if bare else from_amqp_error(exc, entity=entity)
    if isinstance(failure, ServiceBusError) and (
        isinstance(failure, ServiceBusTransactionError) or cls is ServiceBusTransactionError
    ):
        return failure
    condition = getattr(exc, "condition", None)
    return cls(description=f"{what}: {exc}", condition=condition, entity=entity, error=exc)
