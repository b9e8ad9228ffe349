"""Transactions on the asyncio client (AMQP 1.0 part 4), over the engine's control link
(:mod:`amqplink.engine.transactions`).

    async with await connection.transaction() as txn:   # declared; committed on exit
        await txn.send(sender, Message(b"out"))
        await txn.settle(receiver, message)              # accepted when it commits
    # an exception in the block rolls it back instead

A transaction is the connection's (one control link per connection, on a session of its
own): its work may be on any link of that connection. What joins it:

* :meth:`Transaction.send`: the transfer carries ``transactional-state(txn-id)``; the
  peer's answer is the provisional outcome (``transactional-state(txn-id, accepted)``) and
  the message takes effect only if the transaction commits;
* :meth:`Transaction.settle`: the disposition carries ``transactional-state(txn-id,
  outcome)``; with a peer that confirms settlements (a ``peek-lock`` receiver, rcv-settle-mode
  second) the call returns with the peer's provisional answer and the delivery stays
  unsettled until the transaction commits (then the peer settles it); after a roll-back
  it is unsettled and may be settled again.

:meth:`Transaction.commit` raises :class:`~amqplink.aio.errors.TransactionError` when the
coordinator rolled the transaction back instead (its ``condition`` says why), and
:class:`~amqplink.aio.errors.TransactionInDoubt` when the answer never came.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Any

from amqplink.aio.errors import AMQPError, TransactionError, TransactionInDoubt
from amqplink.aio.link import LinkBase
from amqplink.aio.sender import rejection
from amqplink.engine.events import Event, TransactionDeclared, TransactionEnded
from amqplink.engine.session import Session
from amqplink.engine.states import TransactionState
from amqplink.engine.transactions import ControllerLink, attach_controller, transactional_state
from amqplink.engine.transactions import Transaction as EngineTransaction
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Error, Rejected, TransactionalState

if TYPE_CHECKING:
    from amqplink.aio.connection import Connection
    from amqplink.aio.receiver import ReceivedMessage, Receiver
    from amqplink.aio.sender import Sendable, Sender

__all__ = ["Controller", "Transaction", "outcome_of"]


def outcome_of(state: Any) -> Any:
    """The outcome a delivery state carries: a ``transactional-state``'s provisional one, or the state itself."""
    return state.outcome if type(state) is TransactionalState else state


class Controller(LinkBase):
    """The connection's control link to the peer's coordinator (made on its first
    :meth:`Connection.transaction`): declares and discharges, each answered by an engine
    event it waits for."""

    kind = "controller"
    link: ControllerLink

    def __init__(self, connection: Connection, session: Session, name: str) -> None:
        super().__init__(connection, session, "coordinator")
        self._answers: dict[EngineTransaction, asyncio.Future[Error | None]] = {}
        self._start(attach_controller(session, name))

    def _what(self) -> str:
        return f"the transaction controller on {self.connection.endpoint.url}"

    def _refused(self) -> bool:
        remote = self.link.remote_attach
        return remote is not None and remote.target is None

    async def declare(self, timeout: float) -> Transaction:
        """A new transaction, once the coordinator has declared it."""
        self.check_usable()
        engine_txn = self.link.declare()
        error = await self._answer(engine_txn, timeout, "declare")
        if engine_txn.state is not TransactionState.ACTIVE:
            raise _failure(f"{self._what()}: the coordinator refused to declare a transaction", error)
        return Transaction(self, engine_txn)

    async def discharge(self, engine_txn: EngineTransaction, *, fail: bool, timeout: float) -> Error | None:
        """Commit (or with ``fail`` roll back) and wait for the answer; the coordinator's error if
        it did not do as asked."""
        self.check_usable()
        self.link.discharge(engine_txn, fail=fail)
        return await self._answer(engine_txn, timeout, "rollback" if fail else "commit")

    async def _answer(self, engine_txn: EngineTransaction, timeout: float, what: str) -> Error | None:
        answer = self._answers[engine_txn] = self._loop.create_future()
        self._protocol.schedule_flush()
        try:
            return await asyncio.wait_for(asyncio.shield(answer), timeout)
        except TimeoutError:
            raise TransactionInDoubt(
                f"{self._what()}: no answer to the {what} within {timeout} s; whether it was applied is unknown",
                condition="amqp:transaction:rollback" if what == "declare" else None,
            ) from None
        finally:
            self._answers.pop(engine_txn, None)

    def _on_event(self, event: Event) -> None:
        if type(event) is TransactionDeclared:  # per branch: exact, and narrowed for mypy
            self._resolve(event.transaction, None)
        elif type(event) is TransactionEnded:
            self._resolve(event.transaction, event.error)
        else:
            super()._on_event(event)

    def _resolve(self, engine_txn: EngineTransaction, error: Error | None) -> None:
        answer = self._answers.get(engine_txn)
        if answer is not None and not answer.done():
            answer.set_result(error)

    def _on_failed(self, failure: AMQPError) -> None:
        for answer in self._answers.values():
            if not answer.done():
                answer.set_exception(failure)
                answer.exception()


class Transaction:
    """One declared transaction of a connection: :meth:`send` and :meth:`settle` join it,
    :meth:`commit` or :meth:`rollback` end it; as ``async with``, it commits when the block
    ends normally and rolls back when it raises."""

    def __init__(self, controller: Controller, engine_txn: EngineTransaction) -> None:
        self.controller = controller
        self.connection = controller.connection
        self._engine = engine_txn
        self._retired: list[Any] = []
        """The deliveries settled in it, reset for settling again if it does not commit."""

    def __repr__(self) -> str:
        return f"<amqplink transaction {self._engine.label} {self.state.name.lower()}>"

    @property
    def txn_id(self) -> bytes:
        """The coordinator's id for it (set once it is declared)."""
        assert self._engine.txn_id is not None
        return self._engine.txn_id

    @property
    def state(self) -> TransactionState:
        """Where it is: being declared, declared, being discharged, committed, rolled back..."""
        return self._engine.state

    @property
    def engine_transaction(self) -> EngineTransaction:
        """The engine's view of it (what a transactional state names)."""
        return self._engine

    def delivery_state(self, outcome: Any = None) -> TransactionalState:
        """``transactional-state(txn-id, outcome)``; :class:`TransactionError` once it is over."""
        if not self._engine.is_active:
            raise TransactionError(
                f"transaction {self._engine.label} is {self.state.name.lower()}: work can join it only until it"
                " is committed or rolled back"
            )
        return transactional_state(self._engine, outcome)

    def _check_connection(self, link: LinkBase) -> None:
        if link.connection is not self.connection:
            raise TransactionError(
                f"{link._what()} is on another connection: a transaction's work is on the connection it was"
                " declared on"
            )

    # -- work ------------------------------------------------------------------------------
    async def send_nowait(self, sender: Sender, message: Sendable) -> asyncio.Future[Any]:
        """Post ``message`` in the transaction (4.4.1); a future for the peer's provisional
        outcome (``transactional-state``: :func:`outcome_of` reads it)."""
        if not isinstance(message, Message):
            message = Message(message)
        return await self.send_payload_nowait(sender, message.encode())

    async def send_payload_nowait(
        self, sender: Sender, payload: bytes, *, message_format: int = 0
    ) -> asyncio.Future[Any]:
        """:meth:`send_nowait` for a payload already encoded (a Service Bus batch, with its ``message_format``)."""
        self._check_connection(sender)
        return await sender.send_payload_with_state(payload, self.delivery_state(), message_format=message_format)

    async def send(self, sender: Sender, message: Sendable, *, timeout: float | None = None) -> Any:
        """Post ``message`` in the transaction and wait for the provisional outcome;
        :class:`~amqplink.aio.errors.MessageRejected` if the peer would not take it."""
        future = await self.send_nowait(sender, message)
        state = await (future if timeout is None else asyncio.wait_for(asyncio.shield(future), timeout))
        outcome = outcome_of(state)
        if type(outcome) is Rejected:
            raise rejection(f"{sender._what()} (in transaction {self._engine.label})", outcome)
        return state

    async def settle(self, receiver: Receiver, message: ReceivedMessage, outcome: Any = None) -> Any:
        """Settle ``message`` with ``outcome`` (default ``accepted``) in the transaction (4.4.2);
        the peer's provisional answer (a confirming receiver), or None (a receiver that
        settles first: nothing is answered). :class:`~amqplink.aio.errors.SettlementError`
        if the peer refused it (the message may then be settled again)."""
        self._check_connection(receiver)
        state = self.delivery_state(Accepted() if outcome is None else outcome)
        delivery = message._delivery
        answer = await receiver.settle_with_state(message, state)
        if delivery is not None:
            self._retired.append(delivery)
        return answer

    # -- the end ---------------------------------------------------------------------------
    async def commit(self, *, timeout: float | None = None) -> None:
        """Commit: its work takes effect, all of it. :class:`TransactionError` if the
        coordinator rolled it back instead (nothing of it took effect; ``condition`` says
        why), :class:`TransactionInDoubt` if its answer never came."""
        if self.state is TransactionState.ROLLED_BACK:  # (its control link ended: 4.1)
            self._undo()
            raise _failure(f"transaction {self._engine.label} was rolled back before its commit", self._engine.error)
        await self._posted(timeout)
        try:
            error = await self._discharge(False, timeout)
        except AMQPError as exc:  # the control link or the connection failed under it
            self._undo()
            if self.state is TransactionState.IN_DOUBT or self.state is TransactionState.DISCHARGING:
                raise TransactionInDoubt(
                    f"transaction {self._engine.label}: the commit's answer never came ({exc})", condition=exc.condition
                ) from exc
            raise
        if self.state is TransactionState.COMMITTED:
            return
        self._undo()
        if self.state is TransactionState.IN_DOUBT:
            what = f"transaction {self._engine.label}: the commit's answer never came"
            raise _failure(what, error, TransactionInDoubt)
        raise _failure(f"transaction {self._engine.label} was rolled back instead of committed", error)

    async def _posted(self, timeout: float | None) -> None:
        """Wait until each message posted in it has been written: a sender short of credit
        holds some back, and a commit written before them would not include them (they
        would come after it). :class:`TransactionError` if they are still held at the
        time-out (the transaction stays open: roll it back, or commit again)."""
        link = self.controller.link
        held = link.unwritten(self._engine)
        if not held:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.connection.timeout if timeout is None else timeout)
        while held:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TransactionError(
                    f"transaction {self._engine.label}: {len(held)} messages posted in it were not sent within the"
                    " time-out (their links had no credit), so it was not committed: roll it back or commit again"
                )
            waiting = [d.context for d in held if isinstance(d.context, asyncio.Future) and not d.context.done()]
            if waiting:
                await asyncio.wait(waiting, timeout=remaining)
            else:  # (pre-settled: nothing answers them)
                await asyncio.sleep(min(0.01, remaining))
            held = link.unwritten(self._engine)

    async def rollback(self, *, timeout: float | None = None) -> None:
        """Roll back: none of its work takes effect; the messages settled in it are unsettled
        again (a peer that confirms settlements still holds them). Always possible (4.3)."""
        if not self._engine.is_active:
            self._undo()
            return
        await self._discharge(True, timeout)
        self._undo()

    async def _discharge(self, fail: bool, timeout: float | None) -> Error | None:
        return await self.controller.discharge(
            self._engine, fail=fail, timeout=self.connection.timeout if timeout is None else timeout
        )

    def _undo(self) -> None:
        """Not committed: what it settled was not applied, so its deliveries may be settled again."""
        retired, self._retired = self._retired, []
        for delivery in retired:
            if not delivery.settled:
                delivery.state = None

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            await self.commit()
        elif self._engine.is_active and not self.controller.closed:
            await self.rollback()
        else:
            self._undo()


def _failure(what: str, error: Error | None, cls: type[TransactionError] = TransactionError) -> TransactionError:
    failure = cls.from_error(what, error)
    assert isinstance(failure, TransactionError)
    return failure

