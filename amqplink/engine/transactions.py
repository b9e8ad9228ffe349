"""Transactions (AMQP 1.0 part 4): a control link between a controller and a coordinator.

The *controller* (a client) attaches a sending link whose target is a
:class:`~amqplink.protocol.definitions.Coordinator`, sends a ``declare`` on it to obtain a
txn-id, names that id in the ``transactional-state`` of the transfers and dispositions that
make up its work (on any link of the connection), and ends the transaction with a
``discharge`` (``fail`` set: roll back). The *coordinator* (the transactional resource, a
broker) answers each with an outcome: ``declared``, ``accepted`` or ``rejected``.

:class:`ControllerLink` (the controller's end: :meth:`Session.attach_sender` with
``link_class=ControllerLink``, see :func:`attach_controller`) and :class:`CoordinatorLink`
(the end a session makes for a peer's link to a coordinator) are ordinary sending and
receiving links: the same attach and detach table, credit, session window and settlement
as any other. What they add is the two control messages, read and written here, and each
:class:`Transaction` moving through :data:`~amqplink.engine.states.TRANSACTION_TRANSITIONS`
(both roles, one table). The spec's rules kept here:

* "This message MUST NOT be sent settled ... If the coordinator receives a transfer that
  has been settled by the sender, it should detach with an appropriate error" (4.2);
  "No transactional work is allowed on the control link" (4.1): both detach the link
  with ``amqp:not-allowed``;
* a refusal is "rejected with this outcome carrying the transaction-error" when the
  control link's source supports ``rejected``, else the link is detached with it (4.2,
  4.3); a source that lists no outcomes is taken to support it (the .NET and qpid-proton
  controllers list none);
* "If the control link is closed while there exist non-discharged transactions it
  created, then all such transactions are immediately rolled back" (4.1);
* "It is an error for the controller to attempt to discharge a transaction against which
  a partial delivery has been posted. Should this happen, the control link MUST be
  terminated with the transaction-rollback error" (4.4.1);
* a discharge of an unknown txn-id is refused with ``amqp:transaction:unknown-id``; one
  with ``fail`` of a transaction the coordinator has rolled back already (a time-out) is
  accepted ("the coordinator MUST always be able to complete a discharge where the fail
  flag is set to true", 4.3), one without is refused with the reason it was rolled back;
* a ``declare`` with a ``global-id`` (distributed transactions) is refused with
  ``amqp:not-implemented``: this coordinator offers local transactions;
* "If the link endpoint does not support transactional acquisition, the link MUST be
  terminated with a not-implemented error" (4.4.3): :meth:`SenderLink.on_flow` does so for
  a flow whose properties name a ``txn-id``.

What a transaction's work does (storing, settling) is the application's: the engine tells
it (:class:`~amqplink.engine.events.DeclareRequested`,
:class:`~amqplink.engine.events.DischargeRequested`,
:class:`~amqplink.engine.events.TransactionEnded`) and writes its answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from amqplink.codec.decode import decode_sequence, interpret
from amqplink.codec.encode import encode
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Symbol
from amqplink.engine import errors
from amqplink.engine.events import (
    DeclareRequested,
    DeliveriesReceived,
    DischargeRequested,
    TransactionDeclared,
    TransactionEnded,
)
from amqplink.engine.link import TERMINAL_OUTCOMES, Delivery, Link, ReceiverLink, SenderLink
from amqplink.engine.states import TRANSACTION_TRANSITIONS, Step, TransactionState, advance
from amqplink.protocol.definitions import (
    Accepted,
    AmqpValue,
    Coordinator,
    Declare,
    Declared,
    Discharge,
    Error,
    Rejected,
    Source,
    TransactionalState,
    TransactionErrorCondition,
    TxnCapability,
)

if TYPE_CHECKING:
    from amqplink.engine.connection import Connection
    from amqplink.engine.session import Session

__all__ = [
    "COORDINATOR_CAPABILITIES",
    "MAX_TXN_ID_SIZE",
    "TRANSACTION_ROLLBACK",
    "TRANSACTION_TIMEOUT",
    "TXN_ID",
    "UNKNOWN_ID",
    "ControllerLink",
    "CoordinatorLink",
    "Transaction",
    "TransactionRequest",
    "TransactionTable",
    "attach_controller",
    "control_body",
    "transactional_state",
    "txn_id_of",
    "write_held_work",
]

UNKNOWN_ID = TransactionErrorCondition.UNKNOWN_ID
"""``amqp:transaction:unknown-id``: "The specified txn-id does not exist"."""
TRANSACTION_ROLLBACK = TransactionErrorCondition.TRANSACTION_ROLLBACK
"""``amqp:transaction:rollback``: "The transaction was rolled back for an unspecified reason"."""
TRANSACTION_TIMEOUT = TransactionErrorCondition.TRANSACTION_TIMEOUT
"""``amqp:transaction:timeout``: "The work represented by this transaction took too long"."""
MAX_TXN_ID_SIZE = 32
""""A transaction-id may be up to 32 octets of binary data" (4.5.4)."""
TXN_ID = Symbol("txn-id")
"""The flow properties' key that asks for transactional acquisition (4.4.3)."""
COORDINATOR_CAPABILITIES = (
    TxnCapability.LOCAL_TRANSACTIONS,
    TxnCapability.MULTI_TXNS_PER_SSN,
    TxnCapability.MULTI_SSNS_PER_TXN,
)
"""What a :class:`CoordinatorLink` says it supports in its attach, unless told otherwise:
local transactions, several at once on a session, one used across the sessions of a
connection."""

_REJECTED = Symbol("amqp:rejected:list")
_DECLARE_MESSAGE = encode(AmqpValue(Declare()))
_ACCEPTED = Accepted()


def transactional_state(transaction: Transaction, outcome: Any = None) -> TransactionalState:
    """The delivery state that puts a transfer (``outcome`` None: posting) or a disposition
    (``outcome``: the provisional outcome, retirement) in ``transaction`` (4.4). Raises
    :class:`~amqplink.engine.errors.EngineStateError` unless the transaction is declared and
    not yet discharged."""
    if transaction.state is not TransactionState.ACTIVE or transaction.txn_id is None:
        raise errors.EngineStateError(
            f"transaction {transaction.label} is {transaction.state.name.lower()}: work can join it only while it"
            " is declared and not yet discharged"
        )
    return TransactionalState(txn_id=transaction.txn_id, outcome=outcome)


def txn_id_of(state: Any) -> bytes | None:
    """The txn-id a delivery state names (a ``transactional-state``), else None."""
    if type(state) is TransactionalState:
        txn_id = state.txn_id
        return bytes(txn_id) if isinstance(txn_id, bytes | bytearray | memoryview) else b""
    return None


def control_body(payload: bytes | bytearray | memoryview) -> Any:
    """The value of a control message's one ``amqp-value`` section (the ``declare`` or
    ``discharge``); "Other standard message sections such as the header section SHOULD be
    ignored" (4.2). :class:`~amqplink.codec.errors.DecodeError` when there is none. A section's
    value is data to the codec: the one described value here that is a composite is made one
    (:func:`~amqplink.codec.decode.interpret`)."""
    for section in decode_sequence(payload):
        if type(section) is AmqpValue:
            return interpret(section.value)
    raise DecodeError("a control message holds no amqp-value section", 0)


class Transaction:
    """One transaction as one end of its control link sees it. ``txn_id`` is set once
    declared; ``state`` moves through :data:`~.states.TRANSACTION_TRANSITIONS` only;
    ``error`` is why the coordinator did not do what was asked (or why it rolled the
    transaction back itself); ``context`` is the application's."""

    __slots__ = ("context", "error", "fail", "link", "state", "txn_id")

    def __init__(self, link: ControllerLink | CoordinatorLink) -> None:
        self.link = link
        self.txn_id: bytes | None = None
        self.state = TransactionState.UNDECLARED
        self.fail = False
        """Its discharge asks (or asked) for a roll-back."""
        self.error: Error | None = None
        self.context: Any = None

    def move(self, step: Step) -> None:
        """The state after ``step`` (:class:`~.states.IllegalTransition` if the table holds no such step)."""
        self.state = advance(TRANSACTION_TRANSITIONS, self.state, step, f"transaction {self.label}")

    @property
    def label(self) -> str:
        """The txn-id as hex (or "being declared"), for messages and logs."""
        return "(being declared)" if self.txn_id is None else self.txn_id.hex()

    @property
    def is_active(self) -> bool:
        """Declared and not yet discharged: work may join it."""
        return self.state is TransactionState.ACTIVE

    def __repr__(self) -> str:
        return f"Transaction({self.label}, {self.state.name})"


class TransactionTable:
    """The transactions a connection's coordinators declared, by txn-id: one table per
    connection, since work may name a txn-id on any link of it ("or, if permitted by the
    capabilities of the controller, any link on the controlling Connection", 4.1). Ids are
    made from a counter: the same bytes in give the same ids."""

    __slots__ = ("_count", "by_id")

    def __init__(self) -> None:
        self.by_id: dict[bytes, Transaction] = {}
        self._count = 0

    @classmethod
    def of(cls, connection: Connection) -> TransactionTable:
        """The connection's table, made on first use."""
        table = connection.transactions
        if table is None:
            table = connection.transactions = cls()
        return table

    def new_id(self) -> bytes:
        """A txn-id no transaction of this connection had (the coordinator's choice, 4.5)."""
        self._count += 1
        return b"txn:%d" % self._count

    def get(self, state: Any) -> Transaction | None:
        """The live transaction a delivery state names (None: it names none, or one this
        connection's coordinators do not know)."""
        txn_id = txn_id_of(state)
        return None if txn_id is None else self.by_id.get(txn_id)


def attach_controller(
    session: Session, name: str, *, source: Source | None = None, capabilities: Iterable[Symbol] = ()
) -> ControllerLink:
    """Attach a control link to the peer's coordinator (4.2): a sending link whose target
    is a ``coordinator`` asking for ``capabilities`` (none by default, as the .NET client
    asks; "it is the responsibility of the transaction controller to verify that the
    capabilities of the controller meet its requirements": :attr:`ControllerLink.coordinator_capabilities`).
    Declares wait for the coordinator's credit as any transfer does."""
    target = Coordinator(capabilities=list(capabilities) or None)
    link = session.attach_sender(name, source=source or Source(), target=target, link_class=ControllerLink)
    assert isinstance(link, ControllerLink)
    return link


class _ControlLink(Link):
    """What both ends of a control link do when it ends, however it ends (this side's
    detach, the peer's, or its session or connection ending): ``_end_all`` (each end's
    own) ends the transactions still open on it, once. A ``Link`` (so that ``super()``
    is typed); the end's own kind comes after it in each subclass's bases, so the MRO
    is the one it had as a mixin."""

    here: str = "this side"
    there: str = "the peer"

    def _end_all(self, error: Error | None, why: str) -> None:
        raise NotImplementedError

    def detach(self, error: Error | None = None, *, closed: bool = True) -> None:
        """Detach the control link: the transactions still open on it end (a coordinator rolls them back)."""
        super().detach(error, closed=closed)
        self._end_all(error, f"{self.here} detached the control link")

    def on_detach(self, detach: Any) -> bool:
        """The peer detached the control link: its open transactions end; whether it was the peer's own detach."""
        by_peer: bool = super().on_detach(detach)
        self._end_all(detach.error, f"{self.there} detached the control link")
        return by_peer

    def abandon(self, reason: str) -> None:
        """The link is gone without a detach (its session or connection ended): every transaction on it ends too."""
        super().abandon(reason)
        self._end_all(None, reason)


def write_held_work(connection: Connection) -> None:
    """Write what each session of ``connection`` holds back for the next ``data_to_send``
    (batched transfers, coalesced dispositions): frames on other sessions than a control
    link's would otherwise follow a discharge written now ("the transactional work ...
    before the discharge", 4.3, is what the coordinator has read before it)."""
    for session in connection.sessions.values():
        session.flush_writes()


class ControllerLink(_ControlLink, SenderLink):
    """The controller's end of a control link: :meth:`declare` and :meth:`discharge`, each a
    control message whose outcome ends in :class:`~.events.TransactionDeclared` or
    :class:`~.events.TransactionEnded`; the engine settles each answer."""

    here = "the controller"
    there = "the coordinator"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.transactions: dict[bytes, Transaction] = {}
        """The declared transactions not yet discharged, by txn-id."""
        self._requests: dict[Delivery, Transaction] = {}
        """The declares and discharges waiting for their outcome."""

    @property
    def coordinator_capabilities(self) -> list[Symbol]:
        """What the coordinator's attach says it supports (empty until it is answered)."""
        remote = self.remote_attach
        target = None if remote is None else remote.target
        return list(target.capabilities or ()) if type(target) is Coordinator else []

    def declare(self, context: Any = None) -> Transaction:
        """Ask the coordinator for a transaction (4.2); it is declared with the coordinator's
        answer (:class:`~.events.TransactionDeclared`), or refused (:class:`~.events.TransactionEnded`)."""
        delivery = self.send(_DECLARE_MESSAGE, settled=False)
        transaction = Transaction(self)
        transaction.context = context
        transaction.move(Step.DECLARE)
        self._requests[delivery] = transaction
        return transaction

    def unwritten(self, transaction: Transaction) -> list[Delivery]:
        """The messages posted in ``transaction`` that are not written yet (their link short
        of credit or of session window), once what the sessions hold back for the next
        ``data_to_send`` is written: a discharge written before them would leave them out of
        it (they would come after it, naming a transaction no longer open). A controller
        that wants them in waits for them (their outcome) before it discharges."""
        write_held_work(self.session.connection)
        txn_id = transaction.txn_id
        held = []
        for session in self.session.connection.sessions.values():
            for link in session.links.values():
                if isinstance(link, SenderLink):
                    for delivery in link.queue:
                        state = delivery.state
                        if type(state) is TransactionalState and state.txn_id == txn_id:
                            held.append(delivery)
        return held

    def discharge(self, transaction: Transaction, *, fail: bool = False) -> None:
        """Commit ``transaction`` (``fail=True``: roll it back, 4.3); it ends with the
        coordinator's answer (:class:`~.events.TransactionEnded`). What the connection's
        sessions hold back for the next ``data_to_send`` (batched transfers, coalesced
        dispositions) is written first, so that work done before the discharge reaches the
        coordinator before it; messages still waiting for credit are not (:meth:`unwritten`)."""
        if transaction.link is not self:
            raise errors.EngineStateError(f"transaction {transaction.label} was declared on another control link")
        if transaction.state is not TransactionState.ACTIVE or transaction.txn_id is None:
            raise errors.EngineStateError(
                f"cannot discharge transaction {transaction.label}: it is {transaction.state.name.lower()}"
            )
        write_held_work(self.session.connection)
        delivery = self.send(encode(AmqpValue(Discharge(txn_id=transaction.txn_id, fail=fail))), settled=False)
        transaction.fail = fail
        transaction.move(Step.DISCHARGE)
        self._requests[delivery] = transaction

    def on_dispositions(self, deliveries: list[Delivery], settled: bool, state: Any, batchable: bool) -> None:
        """The coordinator's outcomes: each declare or discharge answered is settled here (if
        the coordinator has not) and its transaction moves on; an interim state (not an
        outcome) waits for the outcome."""
        for delivery in deliveries:
            transaction = self._requests.get(delivery)
            if transaction is None or (not settled and not _is_outcome(state)):
                super().on_dispositions([delivery], settled, state, batchable)
                continue
            del self._requests[delivery]
            if settled:
                self._settled_by_peer((delivery,), state)
            else:
                self.settle(delivery, state)
            self._answered(transaction, state)

    def _answered(self, transaction: Transaction, state: Any) -> None:
        events = self.session.connection.event_queue
        if transaction.state is TransactionState.DECLARING:
            txn_id = state.txn_id if type(state) is Declared else None
            if isinstance(txn_id, bytes) and 0 < len(txn_id) <= MAX_TXN_ID_SIZE:
                transaction.txn_id = txn_id
                transaction.move(Step.DECLARED)
                self.transactions[txn_id] = transaction
                events.append(TransactionDeclared(self, transaction))
                return
            transaction.error = _refusal(state, "declare")
            transaction.move(Step.DECLARE_REFUSED)
        elif type(state) is Accepted:
            transaction.move(Step.ROLL_BACK if transaction.fail else Step.COMMIT)
        elif type(state) is Rejected:
            transaction.error = _refusal(state, "discharge")
            transaction.move(Step.ROLL_BACK)
        else:  # neither done nor refused: the coordinator did not say whether it committed
            transaction.error = _refusal(state, "discharge")
            transaction.move(Step.ABANDON)
        if transaction.txn_id is not None:
            self.transactions.pop(transaction.txn_id, None)
        events.append(TransactionEnded(self, transaction, transaction.error))

    # -- the control link ending -----------------------------------------------------------
    def _end_all(self, error: Error | None, why: str) -> None:
        """The control link is over: the transactions still open on it are rolled back (a
        discharge under way: in doubt), each reported once."""
        open_ones = [*self._requests.values(), *self.transactions.values()]
        if not open_ones:
            return
        self._requests.clear()
        self.transactions.clear()
        reason = error or Error(condition=TRANSACTION_ROLLBACK, description=why)
        events = self.session.connection.event_queue
        for transaction in dict.fromkeys(open_ones):
            transaction.error = reason
            transaction.move(Step.ABANDON)
            events.append(TransactionEnded(self, transaction, reason))


class TransactionRequest:
    """A declare or discharge that arrived at a coordinator, answered once through its
    link (:meth:`CoordinatorLink.declared`, :meth:`~CoordinatorLink.discharged`,
    :meth:`~CoordinatorLink.refuse`). ``transaction`` is the one being declared or discharged;
    ``fail``: the discharge asks for a roll-back; ``global_id``: the declare's (always None
    here: one with a global id is refused by the engine)."""

    __slots__ = ("answered", "delivery", "discharge", "fail", "global_id", "link", "transaction")

    def __init__(
        self, link: CoordinatorLink, delivery: Delivery, transaction: Transaction, *, discharge: bool, fail: bool
    ) -> None:
        self.link = link
        self.delivery = delivery
        self.transaction = transaction
        self.discharge = discharge
        self.fail = fail
        self.global_id: Any = None
        self.answered = False

    def __repr__(self) -> str:
        kind = ("roll back" if self.fail else "commit") if self.discharge else "declare"
        return f"TransactionRequest({kind}, {self.transaction!r})"


class CoordinatorLink(_ControlLink, ReceiverLink):
    """The coordinator's end of a control link, which a session makes for a peer's sending
    link whose target is a ``coordinator``: each control message becomes a
    :class:`~.events.DeclareRequested` or :class:`~.events.DischargeRequested` for the
    application to answer, or is refused here by the spec's rules (module docstring).
    Answer the attach with :meth:`accept_attach` (it says :attr:`capabilities`)."""

    capabilities: tuple[Symbol, ...] = COORDINATOR_CAPABILITIES
    here = "the coordinator"
    there = "the controller"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_transactions: dict[Transaction, None] = {}
        """The transactions declared (or being declared) on this link and not yet ended."""

    @property
    def table(self) -> TransactionTable:
        """The connection's :class:`TransactionTable`."""
        return TransactionTable.of(self.session.connection)

    def accept_attach(self) -> None:
        """Answer the controller's attach: its source, this coordinator's :attr:`capabilities`."""
        self.attach(target=Coordinator(capabilities=list(self.capabilities)))

    def _report(self, deliveries: list[Delivery], kind: type[DeliveriesReceived] = DeliveriesReceived) -> None:
        """Whole control messages (the link's deliveries): each one a request, or refused."""
        for delivery in deliveries:
            self._request(delivery)

    def _request(self, delivery: Delivery) -> None:
        if delivery.remote_settled:
            raise self._link_error(
                errors.NOT_ALLOWED,
                "a control message was sent settled: \"This message MUST NOT be sent settled\" (AMQP 1.0 4.2)",
            )
        if type(delivery.remote_state) is TransactionalState:
            raise self._link_error(
                errors.NOT_ALLOWED, "\"No transactional work is allowed on the control link\" (AMQP 1.0 4.1)"
            )
        try:
            body = control_body(delivery.payload)
        except DecodeError as exc:
            why = f"a control message that is not valid AMQP: {exc}"
            self._refuse_delivery(delivery, _error(errors.DECODE_ERROR, why))
            return
        if type(body) is Declare:
            self._declare_request(delivery, body)
        elif type(body) is Discharge:
            self._discharge_request(delivery, body)
        else:
            what = f"a {type(body).__name__}, not a declare or a discharge"
            self._refuse_delivery(delivery, _error(errors.DECODE_ERROR, f"a control message holds {what}"))

    def _declare_request(self, delivery: Delivery, body: Declare) -> None:
        transaction = Transaction(self)
        transaction.move(Step.DECLARE)
        self.open_transactions[transaction] = None
        request = TransactionRequest(self, delivery, transaction, discharge=False, fail=False)
        request.global_id = body.global_id
        if body.global_id is not None:
            why = "distributed transactions (a declare with a global-id) are not supported; declare a local one"
            self.refuse(request, _error(errors.NOT_IMPLEMENTED, why))
            return
        self.session.connection.event_queue.append(DeclareRequested(self, request))

    def _discharge_request(self, delivery: Delivery, body: Discharge) -> None:
        txn_id = body.txn_id if isinstance(body.txn_id, bytes) else None
        transaction = None if txn_id is None else self.table.by_id.get(txn_id)
        if txn_id is None or transaction is None:
            label = repr(body.txn_id) if txn_id is None else txn_id.hex()
            why = f"no transaction {label} is open on this connection (never declared, or discharged already)"
            self._refuse_delivery(delivery, _error(UNKNOWN_ID, why))
            return
        fail = bool(body.fail)
        request = TransactionRequest(self, delivery, transaction, discharge=True, fail=fail)
        if transaction.state is TransactionState.ROLLED_BACK:  # the coordinator rolled it back (a time-out)
            transaction.move(Step.DISCHARGE)
            self._forget(transaction)
            request.answered = True
            if fail:
                self.settle(delivery, _ACCEPTED)
            else:
                self._refuse_delivery(delivery, transaction.error or _error(TRANSACTION_ROLLBACK, "it was rolled back"))
            return
        if transaction.state is not TransactionState.ACTIVE:
            why = f"transaction {transaction.label} is {transaction.state.name.lower()}: discharge it once"
            self._refuse_delivery(delivery, _error(errors.ILLEGAL_STATE, why))
            return
        if self._partially_posted(txn_id):
            raise self._link_error(
                TRANSACTION_ROLLBACK,
                f"transaction {transaction.label} was discharged while a delivery posted in it is partly sent"
                " (AMQP 1.0 4.4.1): its control link ends and its transactions are rolled back",
            )
        transaction.fail = fail
        transaction.move(Step.DISCHARGE)
        self.session.connection.event_queue.append(DischargeRequested(self, request))

    def _partially_posted(self, txn_id: bytes) -> bool:
        """Whether a delivery naming ``txn_id`` is part-way in on any link of the connection."""
        for session in self.session.connection.sessions.values():
            for link in session.links.values():
                partial = link.partial_delivery
                if partial is not None and txn_id_of(partial.remote_state) == txn_id:
                    return True
        return False

    # -- answers -----------------------------------------------------------------------------
    def declared(self, request: TransactionRequest, txn_id: bytes | None = None) -> Transaction:
        """Declare the requested transaction, with ``txn_id`` (default: one the connection's
        table makes); the controller gets ``declared`` with it (4.2)."""
        transaction = request.transaction
        if request.discharge or transaction.state is not TransactionState.DECLARING:
            raise errors.EngineStateError(f"cannot declare {request!r}: it is not a declare waiting for its answer")
        table = self.table
        txn_id = table.new_id() if txn_id is None else bytes(txn_id)
        if not 0 < len(txn_id) <= MAX_TXN_ID_SIZE or txn_id in table.by_id:
            raise ValueError(f"txn-id {txn_id.hex()}: 1 to {MAX_TXN_ID_SIZE} bytes, not in use on the connection")
        transaction.txn_id = txn_id
        transaction.move(Step.DECLARED)
        table.by_id[txn_id] = transaction
        self._answer(request, Declared(txn_id=txn_id))
        return transaction

    def discharged(self, request: TransactionRequest) -> None:
        """The requested discharge is done (its work applied, or undone with ``fail``): the
        controller gets ``accepted`` (4.3)."""
        transaction = request.transaction
        if not request.discharge or transaction.state is not TransactionState.DISCHARGING:
            raise errors.EngineStateError(f"cannot discharge {request!r}: it is not a discharge waiting for its answer")
        transaction.move(Step.ROLL_BACK if request.fail else Step.COMMIT)
        self._forget(transaction)
        self._answer(request, _ACCEPTED)

    def refuse(self, request: TransactionRequest, error: Error) -> None:
        """Refuse the request with ``error`` (a transaction-error): a declare leaves no
        transaction, a refused discharge leaves it rolled back. The controller gets
        ``rejected`` with the error, or the link is detached with it when its source does not
        take ``rejected`` (4.2, 4.3)."""
        transaction = request.transaction
        if request.discharge:
            if transaction.state is not TransactionState.DISCHARGING:
                raise errors.EngineStateError(f"cannot refuse {request!r}: it is not waiting for its answer")
            transaction.move(Step.ROLL_BACK)
        else:
            if transaction.state is not TransactionState.DECLARING:
                raise errors.EngineStateError(f"cannot refuse {request!r}: it is not waiting for its answer")
            transaction.move(Step.DECLARE_REFUSED)
        transaction.error = error
        self._forget(transaction)
        if request.answered:
            return
        request.answered = True
        self._refuse_delivery(request.delivery, error)

    def roll_back(self, transaction: Transaction, error: Error) -> None:
        """Roll back a declared transaction on the coordinator's own account (a time-out):
        work naming it is refused from now on (the application's), and its discharge is
        answered with ``error`` (or accepted, when it asks for a roll-back)."""
        if transaction.state is TransactionState.ACTIVE:
            transaction.error = error
            transaction.move(Step.ROLL_BACK)

    def _answer(self, request: TransactionRequest, outcome: Any) -> None:
        if request.answered:
            raise errors.EngineStateError(f"{request!r} is answered already")
        request.answered = True
        if not self.is_detached:
            self.settle(request.delivery, outcome)

    def _refuse_delivery(self, delivery: Delivery, error: Error) -> None:
        if self.is_detached:
            return
        if self._takes_rejected():
            self.settle(delivery, Rejected(error=error))
        else:
            self.detach(error)

    def _takes_rejected(self) -> bool:
        """Whether the controller's source supports the rejected outcome (4.2); one that lists
        no outcomes is taken to."""
        remote = self.remote_attach
        source = None if remote is None else remote.source
        outcomes = None if not isinstance(source, Source) else source.outcomes
        return not outcomes or _REJECTED in outcomes

    def _forget(self, transaction: Transaction) -> None:
        self.open_transactions.pop(transaction, None)
        if transaction.txn_id is not None:
            table = self.session.connection.transactions
            if table is not None and table.by_id.get(transaction.txn_id) is transaction:
                del table.by_id[transaction.txn_id]

    # -- the control link ending -----------------------------------------------------------
    def _end_all(self, error: Error | None, why: str) -> None:
        """"If the control link is closed while there exist non-discharged transactions it
        created, then all such transactions are immediately rolled back" (4.1): those declared
        or being declared end rolled back, each reported once (the application undoes their
        work); a discharge under way is left for the application to answer."""
        ending = [t for t in self.open_transactions if t.state is not TransactionState.DISCHARGING]
        if not ending:
            return
        if error is not None:
            why = f"{why}: {error.description or error.condition}"
        reason = _error(TRANSACTION_ROLLBACK, why)
        events = self.session.connection.event_queue
        for transaction in ending:
            rolled_back_before = transaction.state is TransactionState.ROLLED_BACK
            if not rolled_back_before:
                transaction.error = reason
                transaction.move(Step.ABANDON)
            self._forget(transaction)
            if not rolled_back_before:
                events.append(TransactionEnded(self, transaction, reason))


def _is_outcome(state: Any) -> bool:
    return isinstance(state, TERMINAL_OUTCOMES) or type(state) is Declared


def _refusal(state: Any, what: str) -> Error:
    """The coordinator's reason in a rejected outcome, or one saying what came instead."""
    if type(state) is Rejected and state.error is not None:
        return state.error
    if type(state) is Rejected:
        return _error(TRANSACTION_ROLLBACK, f"the coordinator rejected the {what} and gave no reason")
    return _error(errors.NOT_ALLOWED, f"the coordinator answered the {what} with {state!r}")


def _error(condition: Symbol, description: str) -> Error:
    return Error(condition=condition, description=description)
