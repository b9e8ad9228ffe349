"""Transactions in any order: declares, transactional sends, transactional settlements,
discharges (commit or roll back), the coordinator's answers and refusals, its own
roll-backs, and the control link ending, with the bytes moved one way at a time between
any two steps, so requests and answers cross on the wire.

Invariants after every step: a transaction the controller sees committed is committed at
the coordinator, one it sees rolled back or refused is not; the coordinator commits only
what the controller asked to commit; every posted transfer reaches the coordinator naming
the transaction it was sent in, and every transactional disposition names its own; the
coordinator's table holds only its live transactions; no protocol error. At the end, once
every request is answered and the bytes have settled, no transaction is left half way
(declaring or discharging) on either side.

The steps are a list drawn whole (each a step name and a number that picks among what the
step can act on), so every run takes as many steps as drawn and shrinks to the few that fail.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from amqplink.engine.events import (
    ConnectionClosed,
    DeclareRequested,
    DeliveriesReceived,
    DeliveriesUpdated,
    DischargeRequested,
    SessionEnded,
    TransactionEnded,
)
from amqplink.engine.link import Delivery
from amqplink.engine.states import TransactionState
from amqplink.engine.transactions import (
    TRANSACTION_TIMEOUT,
    ControllerLink,
    CoordinatorLink,
    Transaction,
    TransactionRequest,
    attach_controller,
    transactional_state,
)
from amqplink.protocol.definitions import Accepted, Error, TransactionalState

from .txnpairs import TxnPair

T = TransactionState
_LIVE = {T.DECLARING, T.ACTIVE, T.DISCHARGING}
_TIMEOUT = Error(condition=TRANSACTION_TIMEOUT, description="took too long")


class TransactionModel:
    """The two engines, the coordinator's application, and what each side should see."""

    def __init__(self, *, fast: bool, frame: int, eager: bool) -> None:
        self.pair = TxnPair(fast_paths=fast, credit=10_000, max_frame_size=frame)
        self.eager = eager
        """The coordinator answers each request as it arrives (else: when a step says)."""
        self.ctl: ControllerLink = self.pair.ctl
        self.controllers = 1
        self.txns: list[Transaction] = []
        """Every transaction the controller asked for."""
        self.asked_commit: set[bytes] = set()
        self.requests: list[TransactionRequest] = []
        self.server_txns: dict[bytes, Transaction] = {}
        self.sent: dict[bytes, Any] = {}
        """Posted payload -> the state it was sent with (None: outside any transaction)."""
        self.to_settle: list[Delivery] = []
        """The server's messages the client holds unsettled."""
        self.settled_with: dict[bytes, Any] = {}
        self.count = 0

    def step(self, name: str, pick: int) -> None:
        getattr(self, name)(pick)
        self.check()

    # -- the controller ----------------------------------------------------------------------
    def _usable(self) -> bool:
        return self.ctl.attach_sent and not self.ctl.detach_sent

    def _active(self) -> list[Transaction]:
        return [t for t in self.txns if t.is_active and t.link is self.ctl]

    def declare(self, pick: int) -> None:
        if self._usable():
            self.txns.append(self.ctl.declare())

    def _maybe_in_a_transaction(self, pick: int) -> Transaction | None:
        """``pick`` chooses: outside any transaction, or in one of the active ones."""
        choices: list[Transaction | None] = [None, *self._active()]
        return choices[pick % len(choices)]

    def post(self, pick: int) -> None:
        txn = self._maybe_in_a_transaction(pick)
        self.count += 1
        size = (1, 40, 1500)[pick % 3]
        payload = self.count.to_bytes(4, "big") * (size // 4 + 1)
        if txn is None:
            self.pair.out.send(payload)
            self.sent[payload] = None
        else:
            state = transactional_state(txn)
            self.pair.out.send_with_state(payload, state)
            self.sent[payload] = state

    def offer(self, pick: int) -> None:
        """The server sends the client a message, to settle later (in a transaction or not)."""
        self.count += 1
        self.pair.into.send(self.count.to_bytes(4, "big"))

    def retire(self, pick: int) -> None:
        if not self.to_settle:
            return
        delivery = self.to_settle.pop(pick % len(self.to_settle))
        txn = self._maybe_in_a_transaction(pick // 7)
        state = Accepted() if txn is None else transactional_state(txn, Accepted())
        self.pair.inbox.settle(delivery, state)
        self.settled_with[bytes(delivery.payload)] = state

    def _discharge(self, pick: int, fail: bool) -> None:
        active = self._active()
        if not active or not self._usable():
            return
        txn = active[pick % len(active)]
        self.ctl.discharge(txn, fail=fail)
        if not fail:
            assert txn.txn_id is not None
            self.asked_commit.add(txn.txn_id)

    def commit(self, pick: int) -> None:
        self._discharge(pick, fail=False)

    def roll_back(self, pick: int) -> None:
        self._discharge(pick, fail=True)

    def end_control_link(self, pick: int) -> None:
        """Either side detaches the control link (one time in eight: it ends every transaction
        on it); once ended, the next one attaches another."""
        if self._usable() and pick % 8 == 0:
            (self.pair.coordinator if pick % 2 else self.ctl).detach()
        elif self.controllers < 3:
            self.controllers += 1
            self.ctl = attach_controller(self.pair.session, f"ctl{self.controllers}")
            self.pair.pump()
            self.pair.coordinator = self.pair.server_link(f"ctl{self.controllers}", CoordinatorLink)
            self._collect()

    # -- the coordinator ---------------------------------------------------------------------
    def answer(self, pick: int) -> None:
        if self.requests:
            self._answer(self.requests.pop(pick % len(self.requests)), refuse=False)

    def refuse(self, pick: int) -> None:
        if self.requests:
            self._answer(self.requests.pop(pick % len(self.requests)), refuse=True)

    def _answer(self, request: TransactionRequest, refuse: bool) -> None:
        if request.transaction.state is not (T.DISCHARGING if request.discharge else T.DECLARING):
            return  # rolled back meanwhile (its control link ended)
        if refuse:
            request.link.refuse(request, _TIMEOUT)
        elif request.discharge:
            request.link.discharged(request)
        else:
            txn = request.link.declared(request)
            assert txn.txn_id is not None and txn.txn_id not in self.server_txns
            self.server_txns[txn.txn_id] = txn

    def coordinator_rolls_back(self, pick: int) -> None:
        """The coordinator rolls a transaction back on its own (a time-out), one time in four."""
        active = [t for t in self.server_txns.values() if t.is_active]
        if active and pick % 4 == 0:
            txn = active[pick % len(active)]
            assert isinstance(txn.link, CoordinatorLink)
            txn.link.roll_back(txn, _TIMEOUT)

    # -- the wire ----------------------------------------------------------------------------
    def to_server(self, pick: int) -> None:
        data = self.pair.pair.client.data_to_send()
        if data:
            self.pair.pair.server_events += self.pair.pair.server.receive_data(data)
        self._collect()

    def to_client(self, pick: int) -> None:
        data = self.pair.pair.server.data_to_send()
        if data:
            self.pair.pair.client_events += self.pair.pair.client.receive_data(data)
        self._collect()

    def quiet(self, pick: int) -> None:
        self.pair.pump()
        self._collect()

    def _collect(self) -> None:
        """Take both sides' events: requests for the coordinator, deliveries checked."""
        for event_ in self.pair.pair.take("server"):
            assert not isinstance(event_, ConnectionClosed | SessionEnded), event_
            if isinstance(event_, DeclareRequested | DischargeRequested):
                if self.eager:
                    self._answer(event_.request, refuse=False)
                else:
                    self.requests.append(event_.request)
            elif isinstance(event_, DeliveriesReceived):
                for delivery in event_.deliveries:
                    assert delivery.remote_state == self.sent[bytes(delivery.payload)], "a posting lost its transaction"
                    delivery.link.settle(delivery, _provisional(delivery.remote_state))  # type: ignore[attr-defined]
            elif isinstance(event_, DeliveriesUpdated):
                for delivery in event_.deliveries:
                    assert event_.state == self.settled_with[bytes(delivery.payload)]
                    if not delivery.settled:
                        delivery.link.settle(delivery, event_.state)  # type: ignore[attr-defined]
            elif isinstance(event_, TransactionEnded):
                assert event_.transaction.state is T.ROLLED_BACK  # only the control link's end is reported
        for event_ in self.pair.pair.take("client"):
            assert not isinstance(event_, ConnectionClosed | SessionEnded), event_
            if isinstance(event_, DeliveriesReceived):
                self.to_settle += event_.deliveries

    # -- invariants --------------------------------------------------------------------------
    def check(self) -> None:
        for txn in self.txns:
            server = self.server_txns.get(txn.txn_id) if txn.txn_id is not None else None
            if txn.state is T.COMMITTED:
                assert server is not None and server.state is T.COMMITTED
            elif txn.state in (T.ROLLED_BACK, T.REFUSED) and server is not None:
                assert server.state is not T.COMMITTED
        for txn_id, server in self.server_txns.items():
            if server.state is T.COMMITTED:
                assert txn_id in self.asked_commit, "the coordinator committed what was not asked"
            if server.link.is_detached or server.link.detach_sent:  # 4.1: its control link ended
                assert server.state is not T.ACTIVE, "a transaction outlived its control link"
        table = self.pair.pair.server.transactions
        for txn in table.by_id.values() if table is not None else ():
            assert txn.state in _LIVE or txn.state is T.ROLLED_BACK  # rolled back by the coordinator, to discharge

    def finish(self) -> None:
        """Answer every request and let the bytes settle: nothing is left half way."""
        for _ in range(5):
            self.quiet(0)
            while self.requests:
                self._answer(self.requests.pop(0), refuse=False)
        self.quiet(0)
        self.check()
        for txn in self.txns:
            event(f"controller: {txn.state.name}")
            assert txn.state not in (T.DECLARING, T.DISCHARGING), txn
        for txn in self.server_txns.values():
            assert txn.state is not T.DISCHARGING, txn


def _provisional(state: Any) -> Any:
    """The resource's answer to a posted transfer: accepted, in its transaction if it has one."""
    if type(state) is TransactionalState:
        return TransactionalState(txn_id=state.txn_id, outcome=Accepted())
    return Accepted()


_STEPS = st.sampled_from(
    ["declare", "declare", "post", "post", "offer", "retire", "commit", "commit", "roll_back", "answer", "answer",
     "refuse", "coordinator_rolls_back", "end_control_link", "to_server", "to_server", "to_client", "to_client",
     "quiet", "quiet"],
)  # fmt: skip


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # long step lists, drawn whole
@given(
    fast=st.booleans(),
    frame=st.sampled_from([512, 65536]),
    eager=st.booleans(),
    steps=st.lists(st.tuples(_STEPS, st.integers(0, 1000)), min_size=40, max_size=120),
)
def test_transactions_in_any_order(fast: bool, frame: int, eager: bool, steps: list[tuple[str, int]]) -> None:
    model = TransactionModel(fast=fast, frame=frame, eager=eager)
    for name, pick in steps:
        model.step(name, pick)
    model.finish()
