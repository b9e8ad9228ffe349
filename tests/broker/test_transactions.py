"""Transactions on the Service Bus broker (docs/protocol.md#transactions): what a transaction
did becomes visible together at its commit and not at all at a roll-back, and Service Bus's
rules, each a refusal that names the entity and what to do."""

from __future__ import annotations

import asyncio

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.store import MessageState
from amqplink.broker.transactions import MAX_OPERATIONS, TRANSACTION_TIMEOUT, transaction_entity
from amqplink.codec.types import Symbol
from amqplink.engine.events import DeliveriesReceived, LinkDetached
from amqplink.engine.link import RCV_SECOND, SND_UNSETTLED
from amqplink.engine.states import TransactionState
from amqplink.engine.transactions import TRANSACTION_ROLLBACK, UNKNOWN_ID
from amqplink.engine.transactions import TRANSACTION_TIMEOUT as TIMEOUT_CONDITION
from amqplink.message import Message
from amqplink.protocol.definitions import (
    Accepted,
    Error,
    Modified,
    Rejected,
    Source,
    Target,
    TransactionalState,
)
from amqplink.sbwire.nodes import TRANSFER_DESTINATION_ADDRESS
from tests.broker.nsutil import send
from tests.broker.txnutil import TxnClient, condition_of, outcome_of
from tests.engine.pairs import received_in

NOT_ALLOWED = "amqp:not-allowed"


def _count(ns: Namespace, address: str) -> int:
    return len(ns.receiver_source(address).store)


def _bodies(ns: Namespace, address: str) -> list[bytes]:
    entity = ns.receiver_source(address)
    return [Message.decode(entity.encode(m, peek=True)).body for m in entity.store]  # type: ignore[misc]


# -- sends ---------------------------------------------------------------------------------------
async def test_sends_become_visible_together_at_the_commit() -> None:
    c = TxnClient()
    sender = c.sender("q")
    txn = c.declare()
    deliveries = [c.send(sender, txn, body=b"m%d" % i) for i in range(3)]
    for delivery in deliveries:  # the provisional outcome, in the transaction (4.4.1)
        assert delivery.remote_state == TransactionalState(txn_id=txn.txn_id, outcome=Accepted())
        assert delivery.settled
    assert _count(c.ns, "q") == 0, "nothing is stored before the commit"
    assert c.discharge(txn) is None and txn.state is TransactionState.COMMITTED
    assert _bodies(c.ns, "q") == [b"m0", b"m1", b"m2"]


async def test_a_roll_back_stores_nothing_and_leaves_no_message_id_behind() -> None:
    ns = Namespace(NamespaceConfig(queues=(QueueConfig("dd", EntityProperties(requires_duplicate_detection=True)),)))
    c = TxnClient(ns)
    sender = c.sender("dd")
    txn = c.declare()
    c.send(sender, txn, message_id="once", body=b"rolled back")
    assert c.discharge(txn, fail=True) is None and txn.state is TransactionState.ROLLED_BACK
    assert _count(ns, "dd") == 0
    # the id reached no duplicate detection: sent again, it is stored ...
    c.send(sender, message_id="once", body=b"kept")
    assert _bodies(ns, "dd") == [b"kept"]
    # ... and a committed one is remembered as any send is
    txn = c.declare()
    c.send(sender, txn, message_id="twice", body=b"committed")
    assert c.discharge(txn) is None
    c.send(sender, message_id="twice", body=b"duplicate")
    assert _bodies(ns, "dd") == [b"kept", b"committed"]


async def test_a_message_sent_outside_the_transaction_goes_at_once() -> None:
    c = TxnClient()
    sender = c.sender("q")
    txn = c.declare()
    c.send(sender, txn, body=b"in")
    plain = c.send(sender, body=b"out")
    assert plain.remote_state == Accepted() and _bodies(c.ns, "q") == [b"out"]
    assert c.discharge(txn) is None
    assert _bodies(c.ns, "q") == [b"out", b"in"]


async def test_a_message_it_could_not_take_is_refused_in_the_transaction_and_has_no_effect() -> None:
    ns = Namespace(NamespaceConfig(queues=(QueueConfig("small", EntityProperties(max_message_size=1024)),)))
    c = TxnClient(ns)
    sender = c.sender("small")
    sender.peer_max_message_size = 0  # (the client would refuse it itself: let the broker see it)
    txn = c.declare()
    big = c.send(sender, txn, body=bytes(2000))
    assert type(big.remote_state) is TransactionalState
    assert condition_of(big.remote_state) == "amqp:link:message-size-exceeded"
    c.send(sender, txn, body=b"fits")
    assert c.discharge(txn) is None
    assert _bodies(ns, "small") == [b"fits"]


async def test_work_naming_an_unknown_transaction_is_refused_with_unknown_id() -> None:
    c = TxnClient()
    sender = c.sender("q")
    delivery = sender.send_with_state(Message(b"x").encode(), TransactionalState(txn_id=b"never"))
    c.pump()
    assert type(delivery.remote_state) is Rejected and delivery.remote_state.error.condition == UNKNOWN_ID
    assert _count(c.ns, "q") == 0


# -- settlements ---------------------------------------------------------------------------------
async def _locked(c: TxnClient, address: str, count: int = 1) -> list[object]:
    for i in range(count):
        send(c.ns, address, body=b"in%d" % i)
    receiver = c.receiver(address)
    await asyncio.sleep(0)  # the broker's dispatch runs on the next loop pass
    c.pump()
    got = c.received(receiver)
    assert len(got) == count
    return got  # type: ignore[return-value]


async def test_receive_complete_and_send_via_commit_together() -> None:
    c = TxnClient()
    (delivery,) = await _locked(c, "a")
    onward = c.sender("b", via="a")
    txn = c.declare()
    answer = c.settle(delivery, Accepted(), txn)  # type: ignore[arg-type]
    assert answer == TransactionalState(txn_id=txn.txn_id, outcome=Accepted())  # provisional, unsettled
    assert not delivery.settled  # type: ignore[attr-defined]
    c.send(onward, txn, body=b"out")
    entity = c.ns.receiver_source("a")
    assert [m.state for m in entity.store] == [MessageState.LOCKED] and _count(c.ns, "b") == 0
    assert c.discharge(txn) is None
    assert _count(c.ns, "a") == 0 and _bodies(c.ns, "b") == [b"out"]
    assert delivery.settled and delivery.remote_state == Accepted()  # type: ignore[attr-defined]


async def test_a_roll_back_leaves_the_message_locked_by_its_receiver_who_may_settle_it_again() -> None:
    c = TxnClient()
    (delivery,) = await _locked(c, "a")
    txn = c.declare()
    c.settle(delivery, Accepted(), txn)  # type: ignore[arg-type]
    assert c.discharge(txn, fail=True) is None
    entity = c.ns.receiver_source("a")
    (msg,) = list(entity.store)
    assert msg.state is MessageState.LOCKED, "still locked by its receiver"
    assert not delivery.settled  # type: ignore[attr-defined]
    assert c.settle(delivery, Accepted()) == Accepted()  # type: ignore[arg-type]  # outside any transaction now
    assert _count(c.ns, "a") == 0


async def test_a_rolled_back_settlement_comes_back_when_its_lock_expires() -> None:
    c = TxnClient()
    (delivery,) = await _locked(c, "a")
    txn = c.declare()
    c.settle(delivery, Accepted(), txn)  # type: ignore[arg-type]
    assert c.discharge(txn, fail=True) is None
    c.tick(c.ns.receiver_source("a").properties.lock_duration + 1)
    (msg,) = list(c.ns.receiver_source("a").store)
    assert msg.state is MessageState.AVAILABLE and msg.delivery_count == 1


async def test_dead_letter_and_defer_apply_at_the_commit() -> None:
    c = TxnClient()
    first, second = await _locked(c, "a", 2)
    txn = c.declare()
    dead = Rejected(error=Error(condition=Symbol("com.microsoft:dead-letter"), info={"DeadLetterReason": "bad"}))
    c.settle(first, dead, txn)  # type: ignore[arg-type]
    c.settle(second, Modified(delivery_failed=True, undeliverable_here=True), txn)  # type: ignore[arg-type]
    assert _count(c.ns, "a/$DeadLetterQueue") == 0
    assert c.discharge(txn) is None
    assert _count(c.ns, "a/$DeadLetterQueue") == 1
    (left,) = list(c.ns.receiver_source("a").store)
    assert left.state is MessageState.DEFERRED
    assert first.settled and second.settled  # type: ignore[attr-defined]


async def test_a_commit_whose_lock_was_lost_rolls_back_all_of_it() -> None:
    """All or nothing: the send in it is not stored when the settlement cannot be applied."""
    c = TxnClient()
    (delivery,) = await _locked(c, "a")
    onward = c.sender("b", via="a")
    txn = c.declare()
    c.settle(delivery, Accepted(), txn)  # type: ignore[arg-type]
    c.send(onward, txn, body=b"out")
    c.clock.now += c.ns.receiver_source("a").properties.lock_duration + 1  # the lock runs out
    error = c.discharge(txn)
    assert error is not None and error.condition == TRANSACTION_ROLLBACK and "lock" in error.description
    assert txn.state is TransactionState.ROLLED_BACK
    assert _count(c.ns, "b") == 0
    (msg,) = list(c.ns.receiver_source("a").store)
    assert msg.state is MessageState.AVAILABLE


async def test_a_commit_that_no_longer_fits_its_entity_rolls_back_all_of_it() -> None:
    ns = Namespace(NamespaceConfig(queues=(QueueConfig("full", EntityProperties(max_messages=3)),)), auto_create=True)
    c = TxnClient(ns)
    (delivery,) = await _locked(c, "a")
    sender = c.sender("full")
    txn = c.declare()
    c.settle(delivery, Accepted(), txn)  # type: ignore[arg-type]
    # (the settlement is on "a": sending to "full" directly would break the one-entity rule, so via)
    onward = c.sender("full", via="a")
    for i in range(2):
        c.send(onward, txn, body=b"t%d" % i)
    for i in range(2):  # meanwhile the queue fills up outside the transaction
        c.send(sender, body=b"o%d" % i)
    error = c.discharge(txn)
    assert error is not None and error.condition == TRANSACTION_ROLLBACK and "full" in error.description
    assert _bodies(ns, "full") == [b"o0", b"o1"]
    (msg,) = list(ns.receiver_source("a").store)
    assert msg.state is MessageState.LOCKED  # not completed: nothing of it applied


def _over_quota() -> Namespace:
    """``q``: duplicate detection, ``MaxSizeInMegabytes`` 1 (room for five messages of :data:`_KIB_200`)."""
    small = EntityProperties(requires_duplicate_detection=True, max_bytes=1 << 20)
    return Namespace(NamespaceConfig(queues=(QueueConfig("q", small),)))


_KIB_200 = bytes(200 * 1024)


async def test_a_commit_over_quota_rolls_back_whole_and_records_no_message_id() -> None:
    c = TxnClient(_over_quota())
    sender = c.sender("q")
    txn = c.declare()
    for i in range(6):  # each fits alone; together they pass the quota
        assert outcome_of(c.send(sender, txn, message_id=f"m{i}", body=_KIB_200).remote_state) == Accepted()
    error = c.discharge(txn)
    assert error is not None and error.condition == TRANSACTION_ROLLBACK
    assert "nothing of it applied" in error.description and "limit" in error.description
    assert _count(c.ns, "q") == 0
    for i in range(4):  # the same ids sent plainly: stored, no duplicates of the rolled-back ones
        assert c.send(sender, message_id=f"m{i}", body=_KIB_200).remote_state == Accepted()
    assert _count(c.ns, "q") == 4


async def test_a_commit_counts_against_the_quota_only_what_it_stores() -> None:
    """As a plain send: the duplicates it would drop take no room."""
    c = TxnClient(_over_quota())
    sender = c.sender("q")
    for i in range(4):
        c.send(sender, message_id=f"m{i}", body=_KIB_200)
    txn = c.declare()
    for i in range(5):  # four repeats (dropped) and one new message: room for it
        c.send(sender, txn, message_id=f"m{i}", body=_KIB_200)
    assert c.discharge(txn) is None
    assert _count(c.ns, "q") == 5
    assert c.ns.queue("q").duplicates.dropped == 4  # type: ignore[union-attr]


async def test_a_commit_to_an_unavailable_entity_rolls_back_whole() -> None:
    c = TxnClient(_over_quota())
    sender = c.sender("q")
    txn = c.declare()
    c.send(sender, txn, message_id="m0", body=b"in the transaction")
    fault = c.host.faults.entity_unavailable("q", condition="amqp:internal-error")  # after the send, before the commit
    error = c.discharge(txn)
    assert error is not None and error.condition == TRANSACTION_ROLLBACK and "unavailable" in error.description
    assert _count(c.ns, "q") == 0
    c.host.faults.clear(fault)
    assert c.send(sender, message_id="m0", body=b"plain").remote_state == Accepted()
    assert _bodies(c.ns, "q") == [b"plain"]


async def test_a_commit_whose_second_destination_refuses_stores_nothing_in_the_first() -> None:
    """Two destinations through one entity: the commit is planned whole, as one send to a topic is."""
    forwards = EntityProperties(forward_to="gone")
    queues = (QueueConfig("a"), QueueConfig("b"), QueueConfig("gone"), QueueConfig("fwd", forwards))
    ns = Namespace(NamespaceConfig(queues=queues), auto_create=False)
    c = TxnClient(ns)
    (delivery,) = await _locked(c, "a")
    first, second = c.sender("b", via="a"), c.sender("fwd", via="a")
    txn = c.declare()
    c.send(first, txn, body=b"to b")
    c.send(second, txn, body=b"to fwd, forwarded")
    c.settle(delivery, Accepted(), txn)  # type: ignore[arg-type]
    ns.delete_queue("gone")  # the forward's destination: a send to fwd is refused now
    error = c.discharge(txn)
    assert error is not None and error.condition == TRANSACTION_ROLLBACK and "gone" in error.description
    assert _count(ns, "b") == 0 and len(ns.queue("fwd").store) == 0
    (msg,) = list(ns.receiver_source("a").store)
    assert msg.state is MessageState.LOCKED


# -- Service Bus's rules -------------------------------------------------------------------------
async def test_every_operation_is_on_the_entity_it_first_touched_unless_sent_via_it() -> None:
    c = TxnClient()
    (delivery,) = await _locked(c, "a")
    direct = c.sender("b")
    txn = c.declare()
    c.settle(delivery, Accepted(), txn)  # type: ignore[arg-type]
    refused = c.send(direct, txn, body=b"direct")
    assert condition_of(refused.remote_state) == NOT_ALLOWED
    described = outcome_of(refused.remote_state).error.description
    assert "'a'" in described and "'b'" in described and "via" in described
    assert c.discharge(txn) is None  # the rest of it commits
    assert _count(c.ns, "b") == 0 and _count(c.ns, "a") == 0


def test_the_entity_of_a_subscription_is_its_topic_and_of_a_dead_letter_queue_its_entity() -> None:
    assert transaction_entity("Orders/Subscriptions/All") == "orders"
    assert transaction_entity("q/$DeadLetterQueue") == "q"
    assert transaction_entity("t/subscriptions/s/$deadletterqueue") == "t"
    assert transaction_entity("contoso/x-servicebus-transfer/0") == "contoso/x-servicebus-transfer/0"


async def test_at_most_100_operations_per_transaction() -> None:
    c = TxnClient()
    sender = c.sender("q")
    txn = c.declare()
    for i in range(MAX_OPERATIONS):
        assert outcome_of(c.send(sender, txn, body=b"%d" % i).remote_state) == Accepted()
    over = c.send(sender, txn, body=b"one too many")
    assert condition_of(over.remote_state) == "amqp:resource-limit-exceeded"
    assert "100" in outcome_of(over.remote_state).error.description
    assert c.discharge(txn) is None
    assert _count(c.ns, "q") == MAX_OPERATIONS


async def test_a_transaction_times_out_two_minutes_after_its_first_operation() -> None:
    c = TxnClient()
    sender = c.sender("q")
    txn = c.declare()
    c.tick(TRANSACTION_TIMEOUT * 2)  # no operation yet: the clock has not started
    c.send(sender, txn, body=b"slow")
    c.tick(TRANSACTION_TIMEOUT - 1)
    c.send(sender, txn, body=b"still in time")
    c.tick(2)
    late = c.send(sender, txn, body=b"too late")
    assert condition_of(late) is None and late.remote_state.error.condition == TIMEOUT_CONDITION
    error = c.discharge(txn)
    assert error is not None and error.condition == TIMEOUT_CONDITION
    assert txn.state is TransactionState.ROLLED_BACK and _count(c.ns, "q") == 0


async def test_a_timed_out_transaction_can_still_be_rolled_back() -> None:
    c = TxnClient()
    sender = c.sender("q")
    txn = c.declare()
    c.send(sender, txn)
    c.tick(TRANSACTION_TIMEOUT + 1)
    assert c.discharge(txn, fail=True) is None


async def test_closing_the_control_link_rolls_its_transactions_back() -> None:
    c = TxnClient()
    sender = c.sender("q")
    txn = c.declare()
    c.send(sender, txn)
    c.ctl.detach()
    c.pump()
    assert txn.state is TransactionState.ROLLED_BACK
    assert _count(c.ns, "q") == 0
    conn = next(iter(c.host.connections))
    assert conn.transactions is not None and conn.transactions.open == {}


async def test_management_operations_cannot_join_a_transaction() -> None:
    c = TxnClient()
    requests = c.session.attach_sender("mgmt-req", target=Target(address="q/$management"))
    replies = c.session.attach_receiver(
        "mgmt-rsp", source=Source(address="q/$management"), target=Target(address="client-replies")
    )
    replies.flow(10)
    c.pump()
    txn = c.declare()
    request = Message(
        {"lock-tokens": []},
        message_id="r1",
        reply_to="client-replies",
        application_properties={"operation": "com.microsoft:renew-lock"},
    )
    requests.send_with_state(request.encode(), TransactionalState(txn_id=txn.txn_id))
    got = c.pump()
    (response,) = [Message.decode(d.payload) for d in received_in(got)]
    props = response.application_properties or {}
    assert props["statusCode"] == 400 and props["errorCondition"] == NOT_ALLOWED
    assert "transaction" in props["statusDescription"]


async def test_a_send_via_link_is_answered_with_its_destination_and_sends_there() -> None:
    c = TxnClient()
    onward = c.sender("b", via="a")
    assert onward.remote_attach is not None
    assert (onward.remote_attach.properties or {}).get(TRANSFER_DESTINATION_ADDRESS) == "b"
    c.send(onward, body=b"plain")  # outside a transaction: straight to the destination
    assert _bodies(c.ns, "b") == [b"plain"] and _count(c.ns, "a") == 0


async def test_a_settlement_in_a_second_transaction_ends_the_control_link() -> None:
    """ "the delivery MUST NOT be associated with a different non discharged transaction than
    the outcome. If this happens then the control link MUST be terminated with a
    transaction-rollback error" (AMQP 1.0 4.4.2)."""
    c = TxnClient()
    (delivery,) = await _locked(c, "a")
    first, second = c.declare(), c.declare()
    c.settle(delivery, Accepted(), first)  # type: ignore[arg-type]
    c.settle(delivery, Accepted(), second)  # type: ignore[arg-type]
    detached = [e for e in c.events if isinstance(e, LinkDetached) and e.link is c.ctl]
    assert detached and detached[0].error.condition == TRANSACTION_ROLLBACK
    assert first.state is TransactionState.ROLLED_BACK and second.state is TransactionState.ROLLED_BACK
    (msg,) = list(c.ns.receiver_source("a").store)
    assert msg.state is MessageState.LOCKED and not delivery.settled  # type: ignore[attr-defined]


# -- partitioned entities (seed 002) -------------------------------------------------------------
def _partitioned(**more: object) -> Namespace:
    props = EntityProperties(enable_partitioning=True, **more)  # type: ignore[arg-type]
    return Namespace(NamespaceConfig(queues=(QueueConfig("p", props),)), auto_create=True)


async def test_a_partitioned_entity_needs_one_partition_key_per_transaction() -> None:
    c = TxnClient(_partitioned())
    sender = c.sender("p")
    txn = c.declare()
    keyless = c.send(sender, txn, body=b"no key")
    assert condition_of(keyless.remote_state) == NOT_ALLOWED
    assert "partition key" in outcome_of(keyless.remote_state).error.description
    assert outcome_of(c.send(sender, txn, partition_key="k1").remote_state) == Accepted()
    assert outcome_of(c.send(sender, txn, partition_key="k1").remote_state) == Accepted()
    other = c.send(sender, txn, partition_key="k2")
    assert condition_of(other.remote_state) == NOT_ALLOWED
    assert "one partition key" in outcome_of(other.remote_state).error.description
    assert c.discharge(txn) is None
    assert _count(c.ns, "p") == 2


async def test_a_message_id_is_the_key_with_duplicate_detection() -> None:
    c = TxnClient(_partitioned(requires_duplicate_detection=True))
    sender = c.sender("p")
    txn = c.declare()
    assert outcome_of(c.send(sender, txn, message_id="m1").remote_state) == Accepted()
    assert condition_of(c.send(sender, txn, message_id="m2").remote_state) == NOT_ALLOWED


async def test_one_transaction_cannot_send_to_two_sessions_of_a_partitioned_entity() -> None:
    c = TxnClient(_partitioned(requires_session=True))
    sender = c.sender("p")
    txn = c.declare()
    assert outcome_of(c.send(sender, txn, session_id="s1").remote_state) == Accepted()
    other = c.send(sender, txn, session_id="s2")
    assert condition_of(other.remote_state) == NOT_ALLOWED
    assert "two sessions" in outcome_of(other.remote_state).error.description
    mismatch = c.send(sender, txn, session_id="s1", partition_key="s9")
    assert condition_of(mismatch.remote_state) == "com.microsoft:argument-error"


async def test_a_via_partition_key_keys_the_message_in_the_via_entity() -> None:
    ns = _partitioned()
    c = TxnClient(ns)
    onward = c.sender("elsewhere", via="p")
    txn = c.declare()
    from amqplink.sbwire.annotations import VIA_PARTITION_KEY

    payload = Message(b"x", message_annotations={VIA_PARTITION_KEY: "v"}).encode()
    delivery = onward.send_with_state(payload, TransactionalState(txn_id=txn.txn_id))
    c.pump()
    assert outcome_of(delivery.remote_state) == Accepted()
    assert c.discharge(txn) is None
    assert _count(ns, "elsewhere") == 1


# -- the wire ------------------------------------------------------------------------------------
async def test_the_coordinator_answers_with_its_capabilities() -> None:
    c = TxnClient()
    assert Symbol("amqp:local-transactions") in c.ctl.coordinator_capabilities


async def test_a_plain_receiver_is_not_disturbed_by_transactional_traffic() -> None:
    """A consumer whose messages are settled outside any transaction meets nothing new."""
    c = TxnClient()
    for i in range(3):
        send(c.ns, "a", body=b"%d" % i)
    receiver = c.session.attach_receiver(
        "plain", source=Source(address="a"), snd_settle_mode=SND_UNSETTLED, rcv_settle_mode=RCV_SECOND
    )
    receiver.flow(10)
    c.pump()
    await asyncio.sleep(0)
    c.pump()
    runs = [e for e in c.events if isinstance(e, DeliveriesReceived)]
    assert [type(e) for e in runs] == [DeliveriesReceived]
    for d in runs[0].deliveries:
        assert c.settle(d, Accepted()) == Accepted()
    assert _count(c.ns, "a") == 0


async def test_a_settlement_whose_receiver_went_away_rolls_the_commit_back() -> None:
    c = TxnClient()
    (delivery,) = await _locked(c, "a")
    txn = c.declare()
    c.settle(delivery, Accepted(), txn)  # type: ignore[arg-type]
    delivery.link.detach()  # type: ignore[attr-defined]
    c.pump()
    error = c.discharge(txn)
    assert error is not None and error.condition == TRANSACTION_ROLLBACK
    assert "no longer held" in error.description and "'a'" in error.description
    assert _count(c.ns, "a") == 1  # not completed (its lock is held until it expires, as for any link gone)


async def test_a_connection_holds_a_bounded_number_of_open_transactions() -> None:
    from amqplink.broker.transactions import MAX_OPEN_TRANSACTIONS
    from amqplink.engine.events import TransactionEnded

    c = TxnClient()
    for _ in range(MAX_OPEN_TRANSACTIONS):
        c.declare()
    refused = c.ctl.declare()
    got = c.pump()
    (ended,) = [e for e in got if isinstance(e, TransactionEnded)]
    assert ended.transaction is refused and refused.state is TransactionState.REFUSED
    assert ended.error.condition == "amqp:resource-limit-exceeded"
    assert str(MAX_OPEN_TRANSACTIONS) in ended.error.description
