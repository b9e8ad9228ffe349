"""The socket-free namespace: every Service Bus rule with a fake clock (``now`` passed in)."""

from __future__ import annotations

import uuid

import pytest

from amqplink.broker.config import (
    CorrelationFilter,
    EntityProperties,
    NamespaceConfig,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)
from amqplink.broker.namespace import (
    BATCH_FORMAT,
    Entity,
    EntityError,
    MessageState,
    Namespace,
    StoredMessage,
    entity_path,
)
from amqplink.codec.types import Symbol, Timestamp
from amqplink.message import Message
from tests.broker.nsutil import T0, delivered, payload, send


def ns_with(**props: object) -> Namespace:
    return Namespace(NamespaceConfig(queues=(QueueConfig("q", EntityProperties(**props)),)))  # type: ignore[arg-type]


def one_locked(**props: object) -> tuple[Entity, StoredMessage, uuid.UUID]:
    """A queue ``q`` with ``props``, one message sent and received under a lock at T0."""
    ns = ns_with(**props)
    send(ns, "q")
    q = ns.receiver_source("q")
    msg = q.receive(T0)
    assert msg is not None and msg.lock_token is not None
    return q, msg, msg.lock_token


def test_peek_lock_stamps_service_bus_annotations_and_keeps_the_body() -> None:
    ns = Namespace()
    send(ns, "amqps://127.0.0.1/q", body=b"hello", message_id="m1", application_properties={"a": 1})
    q = ns.receiver_source("q")
    msg = q.receive(T0 + 1)
    assert msg is not None and msg.lock_token is not None
    out = delivered(q, msg)
    ann = out.message_annotations
    assert ann is not None
    assert ann[Symbol("x-opt-sequence-number")] == 1
    assert ann[Symbol("x-opt-enqueued-time")] == Timestamp(int(T0 * 1000))
    assert ann[Symbol("x-opt-locked-until")] == Timestamp(int((T0 + 61) * 1000))
    assert out.delivery_count is None or out.delivery_count == 0
    assert (out.body, out.message_id, out.application_properties) == (b"hello", "m1", {"a": 1})
    assert q.receive(T0 + 1) is None  # locked: not delivered twice
    q.complete(msg.lock_token, T0 + 2)
    assert len(q.store) == 0


def test_lock_expiry_redelivers_with_delivery_count_plus_one_and_old_token_is_lost() -> None:
    q, _, token = one_locked(lock_duration=30.0)
    assert q.receive(T0 + 29.9) is None
    again = q.receive(T0 + 30)
    assert again is not None and again.lock_token != token
    assert delivered(q, again).delivery_count == 1
    with pytest.raises(EntityError) as info:
        q.complete(token, T0 + 31)
    assert (info.value.condition, info.value.status) == ("com.microsoft:message-lock-lost", 410)
    assert again.lock_token is not None
    q.complete(again.lock_token, T0 + 31)


def test_renew_lock_extends_from_now() -> None:
    q, _, token = one_locked(lock_duration=30.0)
    assert q.renew_lock(token, T0 + 20) == T0 + 50
    assert q.receive(T0 + 45) is None  # still locked past the first expiry
    q.complete(token, T0 + 49)


def test_max_delivery_count_dead_letters() -> None:
    ns = ns_with(max_delivery_count=3)
    send(ns, "q", message_id="m")
    q = ns.receiver_source("q")
    for attempt in range(3):
        msg = q.receive(T0)
        assert msg is not None and msg.lock_token is not None
        assert delivered(q, msg).delivery_count in ((None, 0) if attempt == 0 else (attempt,))
        q.abandon(msg.lock_token, T0)
    assert q.receive(T0) is None
    dlq = ns.receiver_source("q/$DeadLetterQueue")
    dead = dlq.receive(T0)
    assert dead is not None
    out = delivered(dlq, dead)
    assert out.message_id == "m"
    assert out.application_properties is not None
    assert out.application_properties["DeadLetterReason"] == "MaxDeliveryCountExceeded"
    assert "3 delivery attempts" in out.application_properties["DeadLetterErrorDescription"]


def test_abandon_merges_annotations_and_comes_back_first() -> None:
    ns = Namespace()
    send(ns, "q", message_id="a")
    send(ns, "q", message_id="b")
    q = ns.receiver_source("q")
    a = q.receive(T0)
    assert a is not None and a.lock_token is not None
    q.abandon(a.lock_token, T0, {"x-custom": "v"})
    again = q.receive(T0)
    assert again is a
    out = delivered(q, again)
    assert out.message_id == "a" and out.delivery_count == 1
    assert out.message_annotations is not None and out.message_annotations[Symbol("x-custom")] == "v"


def test_defer_then_receive_by_sequence_number() -> None:
    ns = Namespace()
    send(ns, "q")
    q = ns.receiver_source("q")
    msg = q.receive(T0)
    assert msg is not None and msg.lock_token is not None
    q.defer(msg.lock_token, T0)
    assert q.receive(T0) is None
    with pytest.raises(EntityError) as info:
        q.receive_deferred([99], T0)
    assert (info.value.status, info.value.condition) == (404, "com.microsoft:message-not-found")
    (got,) = q.receive_deferred([msg.sequence_number], T0)
    assert got.state is MessageState.LOCKED and got.lock_token is not None
    q.abandon(got.lock_token, T0)  # abandoned deferred message stays deferred
    assert q.receive(T0) is None
    (got,) = q.receive_deferred([msg.sequence_number], T0)
    assert got.lock_token is not None
    q.complete(got.lock_token, T0)
    assert len(q.store) == 0


def test_dead_letter_keeps_reason_and_description() -> None:
    ns = Namespace()
    send(ns, "q", application_properties={"k": "v"})
    q = ns.receiver_source("q")
    msg = q.receive(T0)
    assert msg is not None and msg.lock_token is not None
    q.dead_letter(msg.lock_token, T0, "bad", "really bad", {"x-opt-note": 1})
    dlq = ns.receiver_source("amqps://h/Q/$deadletterqueue")
    dead = dlq.receive(T0, lock=False)
    assert dead is not None
    out = delivered(dlq, dead)
    assert out.application_properties == {
        "k": "v",
        "DeadLetterReason": "bad",
        "DeadLetterErrorDescription": "really bad",
    }
    assert out.message_annotations is not None and out.message_annotations[Symbol("x-opt-note")] == 1


def test_receive_and_delete_removes_at_once() -> None:
    ns = Namespace()
    send(ns, "q")
    q = ns.receiver_source("q")
    msg = q.receive(T0, lock=False)
    assert msg is not None and msg.lock_token is None
    assert Symbol("x-opt-locked-until") not in (delivered(q, msg).message_annotations or {})
    assert len(q.store) == 0 and q.receive(T0) is None


def test_ttl_expired_messages_are_never_delivered() -> None:
    ns = Namespace()
    send(ns, "q", ttl=10)
    q = ns.receiver_source("q")
    assert q.receive(T0 + 10) is None
    assert len(q.store) == 0
    assert ns.receiver_source("q/$DeadLetterQueue").receive(T0 + 10) is None


def test_ttl_expiry_dead_letters_when_configured_and_entity_default_ttl_applies() -> None:
    ns = ns_with(dead_lettering_on_message_expiration=True, default_message_ttl=5.0)
    send(ns, "q")  # no ttl of its own: the entity's 5 s
    ns.tick(T0 + 4.9)
    assert len(ns.receiver_source("q").store) == 1
    ns.tick(T0 + 5)
    dead = ns.receiver_source("q/$DeadLetterQueue").receive(T0 + 5)
    assert dead is not None
    assert dead.envelope.application_properties == {
        "DeadLetterReason": "TTLExpiredException",
        "DeadLetterErrorDescription": "The message expired and was dead lettered.",
    }


def test_duplicate_detection_within_window() -> None:
    ns = ns_with(requires_duplicate_detection=True, duplicate_detection_window=60.0)
    send(ns, "q", T0, message_id="m")
    send(ns, "q", T0 + 59, message_id="m")  # accepted and dropped
    send(ns, "q", T0 + 59, message_id="n")
    q = ns.receiver_source("q")
    assert len(q.store) == 2
    send(ns, "q", T0 + 61, message_id="m")  # window passed
    assert len(q.store) == 3
    assert ns.queues["q"].duplicates is not None and ns.queues["q"].duplicates.dropped == 1  # what the demo reads


def test_scheduled_message_appears_on_time_and_cancel() -> None:
    ns = Namespace()
    q = ns.receiver_source("q")
    at = Timestamp(int((T0 + 30) * 1000))
    send(ns, "q", message_annotations={"x-opt-scheduled-enqueue-time": at})
    seq = q.schedule(ns.unpack(payload(b"y"), 0, 1 << 20)[0], T0 + 40, T0)
    assert q.receive(T0 + 29) is None
    assert [m.state for m in q.peek(1, 10, T0)] == [MessageState.SCHEDULED, MessageState.SCHEDULED]
    q.cancel_scheduled([seq])
    with pytest.raises(EntityError, match="no scheduled message"):
        q.cancel_scheduled([seq])
    msg = q.receive(T0 + 30)
    assert msg is not None and msg.enqueued_at == T0 + 30 and msg.lock_token is not None
    q.complete(msg.lock_token, T0 + 31)
    assert q.receive(T0 + 100) is None  # the cancelled one never comes


def test_topic_fans_out_by_correlation_filter() -> None:
    rules = (RuleConfig("r", "Correlation", CorrelationFilter(subject="red", properties=(("n", 1),))),)
    cfg = NamespaceConfig(
        topics=(
            TopicConfig(
                "t",
                subscriptions=(
                    SubscriptionConfig("all"),
                    SubscriptionConfig("red", rules=rules),
                    SubscriptionConfig("none", rules=(RuleConfig("f", "False"),)),
                    SubscriptionConfig(
                        "sess", rules=(RuleConfig("c", "Correlation", CorrelationFilter(session_id="s1")),)
                    ),
                ),
            ),
        )
    )
    ns = Namespace(cfg)
    send(ns, "t", subject="red", application_properties={"n": 1})
    send(ns, "t", subject="red", application_properties={"n": 2})
    send(ns, "t", subject="blue", session_id="s1")
    counts = {name: len(ns.receiver_source(f"t/Subscriptions/{name}").store) for name in ("all", "red", "none", "sess")}
    assert counts == {"all": 3, "red": 1, "none": 0, "sess": 1}
    with pytest.raises(EntityError) as info:
        ns.receiver_source("t")
    assert info.value.condition == "amqp:not-allowed"
    with pytest.raises(EntityError) as info:
        ns.sender_target("t/Subscriptions/all")
    assert info.value.condition == "amqp:not-allowed"
    with pytest.raises(EntityError) as info:
        ns.receiver_source("t/Subscriptions/missing")
    assert (info.value.condition, info.value.status) == ("amqp:not-found", 404)


def test_forward_to_and_forward_dead_letters() -> None:
    cfg = NamespaceConfig(
        queues=(
            QueueConfig("in", EntityProperties(forward_to="out")),
            QueueConfig("out", EntityProperties(forward_dead_lettered_messages_to="graveyard")),
            QueueConfig("graveyard"),
        )
    )
    ns = Namespace(cfg)
    send(ns, "in", message_id="m")
    assert len(ns.resolve("in").target.store) == 0  # type: ignore[union-attr]
    out = ns.receiver_source("out")
    msg = out.receive(T0)
    assert msg is not None and msg.lock_token is not None
    out.dead_letter(msg.lock_token, T0, "r", "d")
    assert len(ns.receiver_source("out/$DeadLetterQueue").store) == 0
    grave = ns.receiver_source("graveyard")
    dead = grave.receive(T0)
    assert dead is not None
    assert dead.envelope.annotations[Symbol("x-opt-deadletter-source")] == "out"
    assert dead.envelope.application_properties == {"DeadLetterReason": "r", "DeadLetterErrorDescription": "d"}
    with pytest.raises(EntityError, match="not be found"):
        ns.resolve("nope")


def test_forward_loop_is_bounded() -> None:
    cfg = NamespaceConfig(
        queues=(QueueConfig("a", EntityProperties(forward_to="b")), QueueConfig("b", EntityProperties(forward_to="a")))
    )
    ns = Namespace(cfg)
    send(ns, "a")  # dead-lettered at the fifth hop (tests/broker/test_forwarding_semantics.py)
    assert len(ns.receiver_source("a/$DeadLetterQueue").store) == 1


def test_batch_is_unpacked_atomically() -> None:
    ns = ns_with(max_messages=3)
    inner = [Message(f"m{i}".encode(), message_id=f"id{i}").encode() for i in range(3)]
    batch = Message(inner, body_type="data").encode()
    q = ns.receiver_source("q")
    ns.send(q, batch, T0, BATCH_FORMAT)
    assert [m.envelope.message_id for m in q.peek(0, 10, T0)] == ["id0", "id1", "id2"]
    with pytest.raises(EntityError) as info:
        ns.send(q, Message(inner[:1], body_type="data").encode(), T0, BATCH_FORMAT)
    assert info.value.condition == "amqp:resource-limit-exceeded"
    ns2 = ns_with(max_messages=2)
    q2 = ns2.receiver_source("q")
    with pytest.raises(EntityError):
        ns2.send(q2, batch, T0, BATCH_FORMAT)
    assert len(q2.store) == 0  # all or nothing


def test_ping_is_accepted_and_never_delivered() -> None:
    ns = Namespace()
    send(ns, "q", content_type="application/vnd.ms-servicebus-ping")
    assert len(ns.receiver_source("q").store) == 0


def test_message_size_limit() -> None:
    ns = ns_with(max_message_size=1024)
    q = ns.receiver_source("q")
    ns.send(q, payload(b"x" * 900), T0)
    with pytest.raises(EntityError) as info:
        ns.send(q, payload(b"x" * 1100), T0)
    assert info.value.condition == "amqp:link:message-size-exceeded"


def test_undecodable_message_is_a_decode_error() -> None:
    ns = Namespace()
    with pytest.raises(EntityError) as info:
        ns.send(ns.sender_target("q"), b"\x00\x53\x70\xc0\xff", T0)
    assert info.value.condition == "amqp:decode-error"


def test_release_on_detach_brings_messages_back() -> None:
    ns = Namespace()
    send(ns, "q")
    q = ns.receiver_source("q")
    msg = q.receive(T0)
    assert msg is not None and msg.lock_token is not None
    q.release([msg.lock_token, uuid.uuid4()], T0)
    again = q.receive(T0)
    assert again is msg and delivered(q, again).delivery_count == 1


def test_listeners_hear_of_new_and_returned_messages() -> None:
    ns = Namespace()
    q = ns.receiver_source("q")
    calls: list[int] = []
    q.listeners.append(lambda: calls.append(len(q.store)))
    send(ns, "q")
    msg = q.receive(T0)
    assert msg is not None and msg.lock_token is not None
    q.abandon(msg.lock_token, T0)
    assert calls == [1, 1]


def test_peek_from_sequence_number() -> None:
    ns = Namespace()
    for i in range(5):
        send(ns, "q", message_id=str(i))
    q = ns.receiver_source("q")
    locked = q.receive(T0)
    assert locked is not None
    peeked = q.peek(2, 2, T0)
    assert [m.sequence_number for m in peeked] == [2, 3]
    out = delivered(q, peeked[0], peek=True)
    assert out.message_annotations is not None and out.message_annotations[Symbol("x-opt-sequence-number")] == 2
    assert [m.sequence_number for m in q.peek(1, 10, T0)] == [1, 2, 3, 4, 5]  # the locked one too


def test_address_forms() -> None:
    assert entity_path("amqps://host.servicebus.windows.net/q/$management") == "q/$management"
    assert (
        entity_path("amqp://127.0.0.1:5672/t/Subscriptions/s/$DeadLetterQueue") == "t/Subscriptions/s/$DeadLetterQueue"
    )
    assert entity_path("/q") == "q"
    ns = Namespace()
    assert ns.resolve("amqps://h/q/$management").management
    assert ns.resolve("q/$DeadLetterQueue").entity is ns.queues["q"].dead_letter_queue


# -- sessions ----------------------------------------------------------------------------
def session_ns(lock: float = 30.0) -> Namespace:
    return Namespace(
        NamespaceConfig(queues=(QueueConfig("s", EntityProperties(requires_session=True, lock_duration=lock)),))
    )


def test_session_entity_requires_a_session_id() -> None:
    ns = session_ns()
    with pytest.raises(EntityError) as info:
        send(ns, "s")
    assert info.value.condition == "amqp:not-allowed"


def test_session_lock_is_exclusive_and_ordered() -> None:
    ns = session_ns()
    for i in range(3):
        send(ns, "s", session_id="A", message_id=f"a{i}")
    send(ns, "s", session_id="B", message_id="b0")
    q = ns.receiver_source("s")
    me, other = object(), object()
    assert q.accept_session("A", me, T0) == ("A", T0 + 30)
    with pytest.raises(EntityError) as info:
        q.accept_session("A", other, T0 + 1)
    assert info.value.condition == "com.microsoft:session-cannot-be-locked"
    assert q.accept_session(None, other, T0 + 1) == ("B", T0 + 31)  # next available: not A
    got = [q.receive(T0 + 2, session_id="A") for _ in range(3)]
    assert [delivered(q, m).message_id for m in got if m is not None] == ["a0", "a1", "a2"]
    assert got[0] is not None and got[0].locked_until == T0 + 30
    assert q.receive(T0 + 2, session_id="A") is None
    assert got[1] is not None and got[1].lock_token is not None
    q.complete(got[1].lock_token, T0 + 3)
    assert q.accept_session(None, object(), T0 + 3) is None  # A and B are both locked


def test_session_lock_expiry_and_renew_and_state() -> None:
    ns = session_ns(lock=10.0)
    send(ns, "s", session_id="A")
    q = ns.receiver_source("s")
    me = object()
    q.accept_session("A", me, T0)
    msg = q.receive(T0, session_id="A")
    assert msg is not None and msg.lock_token is not None
    assert q.sessions.renew("A", T0 + 5, me) == T0 + 15
    q.sessions.state["A"] = b"state"
    ns.tick(T0 + 14)
    assert msg.state is MessageState.LOCKED
    ns.tick(T0 + 15)  # session lock ran out: its message comes back
    with pytest.raises(EntityError) as info:
        q.complete(msg.lock_token, T0 + 15)
    assert info.value.condition == "com.microsoft:message-lock-lost"
    with pytest.raises(EntityError) as info:
        q.sessions.renew("A", T0 + 15, me)
    assert info.value.condition == "com.microsoft:session-lock-lost"
    other = object()
    assert q.accept_session(None, other, T0 + 16) == ("A", T0 + 26)
    again = q.receive(T0 + 16, session_id="A")
    assert again is msg and delivered(q, again).delivery_count == 1
    assert q.sessions.state["A"] == b"state"
    q.close_session("A", other, T0 + 17)
    assert msg.state is MessageState.AVAILABLE


def test_queues_made_on_first_use_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from amqplink.broker.namespace import namespace as module

    monkeypatch.setattr(module, "MAX_ENTITIES", 3)
    ns = Namespace()
    for name in ("a", "b", "c"):
        ns.resolve(name)
    with pytest.raises(EntityError) as info:
        ns.resolve("d")
    assert info.value.condition == "amqp:resource-limit-exceeded"
    assert ns.resolve("A").entity is ns.queues["a"]  # existing ones still resolve


def test_topic_schedule_is_bounded() -> None:
    ns = Namespace(NamespaceConfig(topics=(TopicConfig("t", EntityProperties(max_messages=1)),)))
    topic = ns.topics["t"]
    envelope = ns.unpack(payload(), 0, 1 << 20)[0]
    topic.schedule(envelope, T0 + 10)
    with pytest.raises(EntityError) as info:
        topic.schedule(envelope, T0 + 10)
    assert info.value.condition == "amqp:resource-limit-exceeded"
    assert topic.scheduled_bytes == envelope.size
    ns.tick(T0 + 10)
    assert topic.scheduled_bytes == 0


def test_receive_after_the_session_lock_ran_out_loses_nothing() -> None:
    ns = session_ns(lock=10.0)
    send(ns, "s", session_id="A")
    q = ns.receiver_source("s")
    q.accept_session("A", object(), T0)
    with pytest.raises(EntityError) as info:
        q.receive(T0 + 10, session_id="A")
    assert info.value.condition == "com.microsoft:session-lock-lost"
    other = object()
    q.accept_session("A", other, T0 + 11)
    msg = q.receive(T0 + 11, session_id="A")  # still there, first attempt
    assert msg is not None and msg.delivery_count == 1


def test_message_that_expires_while_locked_is_expired_when_the_lock_ends() -> None:
    ns = ns_with(dead_lettering_on_message_expiration=True, lock_duration=30.0)
    send(ns, "q", ttl=5)
    q = ns.receiver_source("q")
    msg = q.receive(T0)
    assert msg is not None and msg.lock_token is not None
    q.abandon(msg.lock_token, T0 + 6)
    assert len(q.store) == 0
    dead = ns.receiver_source("q/$DeadLetterQueue").receive(T0 + 6)
    assert dead is not None and dead.envelope.application_properties is not None
    assert dead.envelope.application_properties["DeadLetterReason"] == "TTLExpiredException"


def test_topic_default_ttl_bounds_its_subscriptions() -> None:
    topic = TopicConfig("t", EntityProperties(default_message_ttl=5.0), subscriptions=(SubscriptionConfig("s"),))
    ns = Namespace(NamespaceConfig(topics=(topic,)))
    send(ns, "t")
    sub = ns.receiver_source("t/Subscriptions/s")
    assert sub.receive(T0 + 5) is None and len(sub.store) == 0


def test_restore_undoes_a_receive_in_both_modes() -> None:
    ns = Namespace()
    send(ns, "q", message_id="a")
    send(ns, "q", message_id="b")
    q = ns.receiver_source("q")
    taken = q.receive(T0, lock=False)
    assert taken is not None and len(q.store) == 1
    q.restore(taken)
    assert [m.envelope.message_id for m in q.peek(0, 10, T0)] == ["a", "b"]  # back in sequence order
    locked = q.receive(T0)
    assert locked is taken and locked.delivery_count == 1
    q.restore(locked)
    assert locked.lock_token is None and locked.delivery_count == 0 and locked.state is MessageState.AVAILABLE
    assert q.receive(T0) is locked


def test_clock_visits_only_entities_with_deadlines() -> None:
    ns = Namespace()
    for i in range(50):
        send(ns, f"idle{i}")
    send(ns, "busy")
    busy = ns.receiver_source("busy")
    msg = busy.receive(T0)
    assert msg is not None
    assert ns._timed == {busy}  # fifty idle queues cost the clock nothing
    ns.tick(T0 + 60)  # the lock expires: the message is available again
    assert busy.receive(T0 + 60) is msg
    assert msg.lock_token is not None
    busy.complete(msg.lock_token, T0 + 61)
    ns.tick(T0 + 200)
    assert ns._timed == set()


def test_entity_bytes_are_bounded_and_counted_back() -> None:
    ns = ns_with(max_bytes=10_000)
    q = ns.receiver_source("q")
    for _ in range(3):
        send(ns, "q", body=b"x" * 3000)
    with pytest.raises(EntityError) as info:
        send(ns, "q", body=b"x" * 3000)
    assert info.value.condition == "amqp:resource-limit-exceeded" and "bytes" in info.value.description
    msg = q.receive(T0, lock=False)
    assert msg is not None
    send(ns, "q", body=b"x" * 3000)  # room again
    while (m := q.receive(T0, lock=False)) is not None:
        assert m.envelope.size >= 3000
    assert q.bytes == 0
