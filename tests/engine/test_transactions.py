"""Transactions in the engine (AMQP 1.0 part 4), both roles: the control link, declare and
discharge, transactional-state on transfers and dispositions, and the spec's errors."""

from __future__ import annotations

from typing import Any

import pytest

from amqplink.codec.encode import encode
from amqplink.codec.types import Symbol, UInt
from amqplink.engine import errors
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.events import (
    DeliveriesReceived,
    DeliveriesUpdated,
    LinkDetached,
    StatefulDeliveriesReceived,
    TransactionDeclared,
    TransactionEnded,
)
from amqplink.engine.link import RCV_SECOND, SND_UNSETTLED, STATE_ON_TRANSFER, ReceiverLink, SenderLink
from amqplink.engine.states import (
    TRANSACTION_TRANSITIONS,
    IllegalTransition,
    Step,
    TransactionState,
    advance,
)
from amqplink.engine.transactions import (
    TRANSACTION_ROLLBACK,
    TRANSACTION_TIMEOUT,
    UNKNOWN_ID,
    ControllerLink,
    Transaction,
    TransactionTable,
    control_body,
    transactional_state,
    txn_id_of,
)
from amqplink.protocol.definitions import (
    Accepted,
    AmqpValue,
    Coordinator,
    Declare,
    Discharge,
    Error,
    Properties,
    Rejected,
    Source,
    Target,
    TransactionalState,
    Transfer,
    TxnCapability,
)

from .pairs import Pair, frames_in
from .txnpairs import TxnPair

T = TransactionState
_ENDS = {T.COMMITTED, T.ROLLED_BACK, T.REFUSED, T.IN_DOUBT}


# -- the table -------------------------------------------------------------------------------
def test_every_state_has_a_row_and_the_control_link_ending_ends_each() -> None:
    assert set(TRANSACTION_TRANSITIONS) == set(T)
    for state in T:
        after = advance(TRANSACTION_TRANSITIONS, state, Step.ABANDON, "x")
        assert after in _ENDS
        # 4.1: "all such transactions are immediately rolled back"; a discharge under way is in doubt
        expected = {T.UNDECLARED: T.ROLLED_BACK, T.DECLARING: T.ROLLED_BACK, T.ACTIVE: T.ROLLED_BACK,
                    T.DISCHARGING: T.IN_DOUBT}.get(state, state)  # fmt: skip
        assert after is expected


def test_ends_lead_nowhere_else_and_missing_steps_are_refused() -> None:
    for state in _ENDS:
        assert {advance(TRANSACTION_TRANSITIONS, state, step, "x") for step in TRANSACTION_TRANSITIONS[state]} == {
            state
        }
    refused = 0
    for state in T:
        for step in Step:
            if step not in TRANSACTION_TRANSITIONS[state]:
                with pytest.raises(IllegalTransition, match=f"cannot {step.value} in state {state.name}"):
                    advance(TRANSACTION_TRANSITIONS, state, step, "transaction")
                refused += 1
    assert refused > 8 * 10


def test_a_transaction_moves_through_the_table_only() -> None:
    pair = TxnPair()
    txn = Transaction(pair.ctl)
    with pytest.raises(IllegalTransition):
        txn.move(Step.COMMIT)  # not declared
    assert txn.state is T.UNDECLARED


# -- declare and discharge --------------------------------------------------------------------
def _declared(pair: TxnPair) -> Transaction:
    txn = pair.ctl.declare()
    assert txn.state is T.DECLARING
    pair.pump()
    (request,) = pair.requests()
    assert not request.discharge and request.transaction.state is T.DECLARING
    server_txn = request.link.declared(request)
    pair.pump()
    (declared,) = pair.client_events(TransactionDeclared)
    assert declared.transaction is txn and txn.state is T.ACTIVE
    assert txn.txn_id == server_txn.txn_id and txn.txn_id is not None
    assert pair.ctl.transactions[txn.txn_id] is txn
    return txn


def test_the_coordinator_answers_the_attach_with_its_capabilities() -> None:
    pair = TxnPair()
    assert pair.ctl.is_attached and pair.coordinator.is_attached
    assert TxnCapability.LOCAL_TRANSACTIONS in pair.ctl.coordinator_capabilities
    # the control link's attach carries a coordinator target (4.5.1)
    attaches = [f for _, f, _ in frames_in(pair.pair.wire_c2s) if type(f).__name__ == "Attach" and f.name == "ctl"]
    assert type(attaches[0].target) is Coordinator


@pytest.mark.parametrize("fail", [False, True])
def test_declare_then_discharge_commits_or_rolls_back(fail: bool) -> None:
    pair = TxnPair()
    txn = _declared(pair)
    server_txn = pair.coordinator.table.by_id[txn.txn_id]  # type: ignore[index]
    pair.ctl.discharge(txn, fail=fail)
    assert txn.state is T.DISCHARGING
    pair.pump()
    (request,) = pair.requests()
    assert request.discharge and request.fail is fail and request.transaction is server_txn
    request.link.discharged(request)
    pair.pump()
    (ended,) = pair.client_events(TransactionEnded)
    outcome = T.ROLLED_BACK if fail else T.COMMITTED
    assert ended.transaction is txn and ended.error is None
    assert txn.state is outcome and server_txn.state is outcome
    assert pair.ctl.transactions == {} and pair.coordinator.table.by_id == {}
    # the answers were settled: nothing stays unsettled on the control link
    assert not pair.ctl.unsettled and not pair.coordinator.unsettled


def test_ids_are_unique_on_a_connection_and_several_transactions_run_at_once() -> None:
    pair = TxnPair()
    txns = [_declared(pair) for _ in range(5)]
    assert len({t.txn_id for t in txns}) == 5
    assert all(t.is_active for t in txns)


def test_a_refused_declare_leaves_no_transaction() -> None:
    pair = TxnPair()
    txn = pair.ctl.declare()
    pair.pump()
    (request,) = pair.requests()
    why = Error(condition=Symbol("amqp:resource-limit-exceeded"), description="too many")
    request.link.refuse(request, why)
    pair.pump()
    (ended,) = pair.client_events(TransactionEnded)
    assert ended.transaction is txn and txn.state is T.REFUSED and ended.error == why
    assert txn.txn_id is None and pair.coordinator.open_transactions == {}


def _discharging(pair: TxnPair) -> tuple[Transaction, Any]:
    """A declared transaction whose commit the coordinator is asked for, and the request."""
    txn = _declared(pair)
    pair.ctl.discharge(txn)
    pair.pump()
    (request,) = pair.requests()
    assert request.discharge and txn.state is T.DISCHARGING
    return txn, request


def test_a_refused_discharge_leaves_the_transaction_rolled_back_with_the_reason() -> None:
    pair = TxnPair()
    txn, request = _discharging(pair)
    why = Error(condition=TRANSACTION_ROLLBACK, description="a lock was lost")
    request.link.refuse(request, why)
    pair.pump()
    (ended,) = pair.client_events(TransactionEnded)
    assert txn.state is T.ROLLED_BACK and ended.error == why
    assert request.transaction.state is T.ROLLED_BACK


def test_an_answer_is_given_once() -> None:
    pair = TxnPair()
    pair.ctl.declare()
    pair.pump()
    (request,) = pair.requests()
    request.link.declared(request)
    with pytest.raises(errors.EngineStateError):
        request.link.declared(request)
    with pytest.raises(errors.EngineStateError):
        request.link.refuse(request, Error(condition=TRANSACTION_ROLLBACK))


def test_the_controller_cannot_discharge_what_is_not_active() -> None:
    pair = TxnPair()
    txn = pair.ctl.declare()
    with pytest.raises(errors.EngineStateError, match="declaring"):
        pair.ctl.discharge(txn)
    with pytest.raises(errors.EngineStateError, match="declaring"):
        transactional_state(txn)


# -- the spec's refusals ----------------------------------------------------------------------
def _raw_control(pair: TxnPair, body: Any, *, settled: bool = False, state: Any = None) -> None:
    """A control message the engine's controller would not send, on the control link."""
    payload = encode(Properties(message_id="x")) + encode(AmqpValue(body))  # other sections are ignored (4.2)
    if state is not None:
        pair.ctl.send_with_state(payload, state, settled=settled)
    else:
        pair.ctl.send(payload, settled=settled)
    pair.pump()


def _rejection(pair: TxnPair) -> Any:
    updates = [e for e in pair.pair.take("client") if isinstance(e, DeliveriesUpdated)]
    assert updates, "the control message was not answered"
    state = updates[-1].state
    assert type(state) is Rejected
    return state.error


def test_a_discharge_of_an_unknown_id_is_refused_with_unknown_id() -> None:
    pair = TxnPair()
    _raw_control(pair, Discharge(txn_id=b"never-declared"))
    assert _rejection(pair).condition == UNKNOWN_ID
    assert pair.requests() == []  # the engine answered: the application was not asked


def test_a_declare_with_a_global_id_is_refused_as_not_implemented() -> None:
    pair = TxnPair()
    _raw_control(pair, Declare(global_id=b"xid"))
    assert _rejection(pair).condition == errors.NOT_IMPLEMENTED
    assert pair.requests() == []


def test_a_body_that_is_no_control_message_is_refused() -> None:
    pair = TxnPair()
    _raw_control(pair, "hello")
    assert _rejection(pair).condition == errors.DECODE_ERROR
    pair.ctl.send(b"\xff\x00", settled=False)  # not AMQP at all
    pair.pump()
    assert _rejection(pair).condition == errors.DECODE_ERROR


def test_control_body_ignores_other_sections() -> None:
    payload = encode(Properties(message_id="x")) + encode(AmqpValue(Declare()))
    assert control_body(payload) == Declare()


@pytest.mark.parametrize("how", ["settled", "transactional"])
def test_a_settled_or_transactional_control_message_detaches_the_control_link(how: str) -> None:
    pair = TxnPair()
    txn = _declared(pair)
    server_txn = pair.coordinator.table.by_id[txn.txn_id]  # type: ignore[index]
    if how == "settled":
        _raw_control(pair, Declare(), settled=True)  # "This message MUST NOT be sent settled" (4.2)
    else:
        _raw_control(pair, Declare(), state=transactional_state(txn))  # no work on the control link (4.1)
    detached = [e for e in pair.pair.take("client") if isinstance(e, LinkDetached)]
    assert detached and detached[0].link is pair.ctl and detached[0].error.condition == errors.NOT_ALLOWED
    # 4.1: the transactions it created are rolled back, on both sides, each told once
    assert txn.state is T.ROLLED_BACK and server_txn.state is T.ROLLED_BACK
    ended = [e for e in pair.pair.take("server") if isinstance(e, TransactionEnded)]
    assert [e.transaction for e in ended] == [server_txn]
    assert pair.coordinator.table.by_id == {}


def test_a_source_without_the_rejected_outcome_gets_a_detach_instead() -> None:
    pair = TxnPair(source=Source(outcomes=[Symbol("amqp:accepted:list")]))
    _raw_control(pair, Discharge(txn_id=b"nope"))
    detached = [e for e in pair.pair.take("client") if isinstance(e, LinkDetached)]
    assert detached and detached[0].error.condition == UNKNOWN_ID


@pytest.mark.parametrize("fail", [False, True])
def test_a_transaction_the_coordinator_rolled_back_is_discharged_with_its_reason(fail: bool) -> None:
    pair = TxnPair()
    txn = _declared(pair)
    server_txn = pair.coordinator.table.by_id[txn.txn_id]  # type: ignore[index]
    timeout = Error(condition=TRANSACTION_TIMEOUT, description="2 minutes")
    pair.coordinator.roll_back(server_txn, timeout)
    assert server_txn.state is T.ROLLED_BACK
    pair.ctl.discharge(txn, fail=fail)
    pair.pump()
    assert pair.requests() == []  # answered by the engine
    (ended,) = pair.client_events(TransactionEnded)
    assert txn.state is T.ROLLED_BACK
    # "the coordinator MUST always be able to complete a discharge where the fail flag is set" (4.3)
    assert ended.error == (None if fail else timeout)
    assert pair.coordinator.table.by_id == {}


def test_a_second_discharge_while_the_first_is_under_way_is_refused() -> None:
    pair = TxnPair()
    txn, request = _discharging(pair)
    _raw_control(pair, Discharge(txn_id=txn.txn_id))
    assert _rejection(pair).condition == errors.ILLEGAL_STATE
    request.link.discharged(request)
    pair.pump()
    assert txn.state is T.COMMITTED


def test_discharging_with_a_partial_delivery_posted_ends_the_control_link_with_rollback() -> None:
    pair = TxnPair()
    txn = _declared(pair)
    state = transactional_state(txn)
    # the first frame of a two-frame delivery, posted in the transaction (4.4.1)
    first = Transfer(handle=UInt(pair.out.handle), delivery_id=UInt(50), delivery_tag=b"p", more=True, state=state)
    out = bytearray()
    from amqplink.engine.frames import FRAME_TYPE_AMQP, write_frame

    write_frame(out, FRAME_TYPE_AMQP, 0, first, b"half")
    pair.pair.server_events += pair.pair.server.receive_data(bytes(out))
    assert pair.received.partial_delivery is not None
    pair.ctl.discharge(txn)
    pair.pump()
    detached = [e for e in pair.pair.take("client") if isinstance(e, LinkDetached) and e.link is pair.ctl]
    assert detached and detached[0].error.condition == TRANSACTION_ROLLBACK
    assert pair.requests() == []
    assert txn.state is T.IN_DOUBT or txn.state is T.ROLLED_BACK


def test_transactional_acquisition_is_refused_as_not_implemented() -> None:
    pair = TxnPair()
    txn = _declared(pair)
    flow = pair.inbox._flow_frame()  # the receiver's flow, asking acquisition in the transaction (4.4.3)
    flow.properties = {Symbol("txn-id"): txn.txn_id}
    pair.session.send_frame(flow)
    pair.pump()
    detached = [e for e in pair.pair.take("client") if isinstance(e, LinkDetached) and e.link is pair.inbox]
    assert detached and detached[0].error.condition == errors.NOT_IMPLEMENTED
    assert pair.into.is_detached


# -- the control link ending ------------------------------------------------------------------
def test_detaching_the_control_link_rolls_back_its_transactions_on_both_sides() -> None:
    pair = TxnPair()
    active = _declared(pair)
    declaring = pair.ctl.declare()
    pair.pump()
    (pending,) = pair.requests()
    pair.ctl.detach()
    pair.pump()
    assert active.state is T.ROLLED_BACK and declaring.state is T.ROLLED_BACK
    ended = [e.transaction for e in pair.pair.take("server") if isinstance(e, TransactionEnded)]
    server_active = next(t for t in ended if t.txn_id == active.txn_id)
    assert sorted(map(id, ended)) == sorted(map(id, [server_active, pending.transaction]))  # each once
    assert all(t.state is T.ROLLED_BACK for t in ended)
    assert pair.coordinator.table.by_id == {} and pair.coordinator.open_transactions == {}
    with pytest.raises(errors.EngineStateError):
        pending.link.declared(pending)  # too late: it was rolled back


def test_a_discharge_whose_answer_never_comes_is_in_doubt() -> None:
    pair = TxnPair()
    txn, request = _discharging(pair)
    pair.session.end()
    pair.pump()
    (ended,) = pair.client_events(TransactionEnded)
    assert txn.state is T.IN_DOUBT and ended.error is not None
    # the coordinator still answers (it may have committed): no error, nothing written
    request.link.discharged(request)
    assert request.transaction.state is T.COMMITTED


# -- transactional work -----------------------------------------------------------------------
def _posted(pair: TxnPair) -> list[Any]:
    return [d for e in pair.pair.take("server") if isinstance(e, DeliveriesReceived) for d in e.deliveries]


@pytest.mark.parametrize("fast_paths", [True, False])
@pytest.mark.parametrize("size", [0, 10, 3000])
def test_a_posted_transfer_carries_its_transaction_on_every_frame(size: int, fast_paths: bool) -> None:
    pair = TxnPair(fast_paths=fast_paths)
    txn = _declared(pair)
    state = transactional_state(txn)
    before = len(frames_in(pair.pair.wire_c2s))
    delivery = pair.out.send_with_state(b"x" * size, state)
    assert delivery.offset == STATE_ON_TRANSFER
    pair.pump()
    (got,) = _posted(pair)
    assert got.remote_state == state and bytes(got.payload) == b"x" * size
    transfers = [f for _, f, _ in frames_in(pair.pair.wire_c2s)[before:] if type(f) is Transfer]
    assert transfers and all(f.state == state for f in transfers)


def test_large_transfers_split_and_each_frame_carries_the_state() -> None:
    pair = Pair(server_config=ConnectionConfig(container_id="server", max_frame_size=512))
    session = pair.open()
    sender = session.attach_sender("s", target=Target(address="q"))
    pair.pump()
    pair.server_link("s", sender=False).flow(10)  # type: ignore[union-attr]
    pair.pump()
    state = TransactionalState(txn_id=b"t1")
    sender.send_with_state(b"y" * 2000, state)
    pair.pump()
    transfers = [f for _, f, _ in frames_in(pair.wire_c2s) if type(f) is Transfer]
    assert len(transfers) > 3 and all(f.state == state for f in transfers)
    (got,) = pair.deliveries("server")
    assert got.remote_state == state and bytes(got.payload) == b"y" * 2000


def _send_plan(pair: TxnPair, plan: list[Any]) -> None:
    """Send message ``i`` with ``plan[i]`` as its transfer state (None: a plain send), then pump."""
    for i, each in enumerate(plan):
        if each is None:
            pair.out.send(bytes([i]))
        else:
            pair.out.send_with_state(bytes([i]), each)
    pair.pump()


@pytest.mark.parametrize("fast_paths", [True, False])
def test_stateful_and_plain_sends_keep_their_order_and_their_states(fast_paths: bool) -> None:
    pair = TxnPair(fast_paths=fast_paths)
    txn = _declared(pair)
    state = transactional_state(txn)
    plan = [None, state, None, None, state, state, None]
    _send_plan(pair, plan)
    got = _posted(pair)
    assert [bytes(d.payload) for d in got] == [bytes([i]) for i in range(len(plan))]
    assert [d.remote_state for d in got] == plan
    ids = [d.delivery_id for d in got]
    assert ids == sorted(ids)


def test_a_provisional_outcome_settles_an_auto_settling_sender() -> None:
    """rcv-settle-mode second: the resource's unsettled transactional-state(accepted) is a
    terminal outcome to come; the sender settles on it (4.4.1)."""
    pair = TxnPair()
    txn = _declared(pair)
    pair.received.rcv_settle_mode = 1  # second: the resource answers without settling
    delivery = pair.out.send_with_state(b"m", transactional_state(txn))
    pair.pump()
    (got,) = _posted(pair)
    provisional = TransactionalState(txn_id=txn.txn_id, outcome=Accepted())
    got.link.settle(got, provisional)
    pair.pump()
    assert delivery.remote_state == provisional and delivery.settled
    assert not pair.out.unsettled
    assert got.settled  # the sender's settlement ended it on the resource too


def test_a_retirement_names_its_transaction_in_the_disposition() -> None:
    pair = TxnPair()
    txn = _declared(pair)
    pair.into.send(b"to be completed")
    pair.pump()
    (delivery,) = pair.pair.deliveries("client")
    outcome = TransactionalState(txn_id=txn.txn_id, outcome=Accepted())
    pair.inbox.settle(delivery, outcome)
    pair.pump()
    updated = [e for e in pair.pair.take("server") if isinstance(e, DeliveriesUpdated)]
    assert updated and updated[-1].state == outcome and not updated[-1].settled
    assert pair.coordinator.table.get(updated[-1].state) is pair.coordinator.table.by_id[txn.txn_id]  # type: ignore[index]


def test_txn_id_of_and_the_table_lookup() -> None:
    assert txn_id_of(TransactionalState(txn_id=b"a")) == b"a"
    assert txn_id_of(Accepted()) is None and txn_id_of(None) is None
    assert TransactionTable().get(TransactionalState(txn_id=b"a")) is None


def test_the_controller_link_is_a_sender_with_the_same_credit_rules() -> None:
    """Declares wait for the coordinator's credit as any transfer does (2.6.7)."""
    pair = TxnPair(credit=0)
    txn = pair.ctl.declare()
    pair.pump()
    assert pair.requests() == [] and txn.state is T.DECLARING and pair.ctl.queue
    pair.coordinator.flow(1)
    pair.pump()
    (request,) = pair.requests()
    request.link.declared(request)
    pair.pump()
    assert txn.is_active


def test_link_class_makes_a_controller() -> None:
    pair = Pair()
    session = pair.open()
    link = session.attach_sender("c", target=Coordinator(), link_class=ControllerLink)
    assert isinstance(link, ControllerLink)
    pair.pump()
    # a peer that takes any link (the pair's auto-accept) answers with a plain receiver: the
    # coordinator link is the engine's own choice for a coordinator target
    server = pair.server_link("c", sender=False)
    assert type(server).__name__ == "CoordinatorLink"



@pytest.mark.parametrize("fast_paths", [True, False])
def test_stateful_deliveries_come_as_runs_of_their_own_kind(fast_paths: bool) -> None:
    """A receiver that reads ``type(event) is DeliveriesReceived`` never meets a posted
    transfer among the usual ones; the ones with a state come as ``StatefulDeliveriesReceived``."""
    pair = TxnPair(fast_paths=fast_paths)
    txn = _declared(pair)
    state = transactional_state(txn)
    plan = [None, state, state, None, None]
    _send_plan(pair, plan)
    runs = [e for e in pair.pair.take("server") if isinstance(e, DeliveriesReceived)]
    shape = [(type(e).__name__, [bytes(d.payload)[0] for d in e.deliveries]) for e in runs]
    assert shape == [
        ("DeliveriesReceived", [0]),
        ("StatefulDeliveriesReceived", [1, 2]),
        ("DeliveriesReceived", [3, 4]),
    ]
    assert all(isinstance(e, StatefulDeliveriesReceived) == (e.deliveries[0].remote_state is not None) for e in runs)


# -- work before the discharge, on other sessions ----------------------------------------------
def _on_another_session(pair: TxnPair) -> tuple[SenderLink, ReceiverLink]:
    """A sender and a peek-lock receiver on a client session of their own (not the control link's)."""
    other = pair.pair.client.begin_session()
    pair.pump()
    sender = other.attach_sender("out2", target=Target(address="q"))
    receiver = other.attach_receiver(
        "in2", source=Source(address="q"), snd_settle_mode=SND_UNSETTLED, rcv_settle_mode=RCV_SECOND
    )
    pair.pump()
    receiver.flow(10)
    pair.pump()
    return sender, receiver


def test_work_held_for_the_next_write_on_another_session_goes_before_the_discharge() -> None:
    """A posted transfer (queued as a batched send) and a retirement (a coalesced disposition)
    on another session than the control link's, then the discharge at once: the coordinator
    reads both before the discharge (else they would name a transaction no longer open)."""
    pair = TxnPair()
    sender, receiver = _on_another_session(pair)
    server_sender = pair.server_link("in2", SenderLink)
    server_sender.auto_settle = False
    txn = _declared(pair)
    server_sender.send(b"to be completed")
    pair.pump()
    (delivery,) = [d for d in pair.pair.deliveries("client") if d.link is receiver]
    pair.pair.take("server")
    sender.send_with_state(b"posted", transactional_state(txn))
    receiver.settle(delivery, transactional_state(txn, Accepted()))
    pair.ctl.discharge(txn)  # nothing pumped in between
    pair.pump()
    kinds = [type(e).__name__ for e in pair.pair.server_events]
    assert "StatefulDeliveriesReceived" in kinds and "DeliveriesUpdated" in kinds and "DischargeRequested" in kinds
    assert kinds.index("DischargeRequested") > max(
        kinds.index("StatefulDeliveriesReceived"), kinds.index("DeliveriesUpdated")
    )


def test_unwritten_names_the_messages_posted_that_wait_for_credit() -> None:
    pair = TxnPair(credit=1)
    txn = _declared(pair)
    first = pair.out.send_with_state(b"one", transactional_state(txn))
    second = pair.out.send_with_state(b"two", transactional_state(txn))
    plain = pair.out.send(b"not in it")
    assert pair.ctl.unwritten(txn) == [second]  # the first took the only credit
    assert first not in pair.out.queue and plain in pair.out.queue
    pair.pump()
    pair.received.flow(10)
    pair.pump()
    assert pair.ctl.unwritten(txn) == []
