"""Forwarding and sessions as Service Bus does them (issue 24, C.3 and C.4), on the
socket-free namespace with a fake clock. The documented behaviour each test follows:

* Service Bus's dead-letter queue overview, "Moving messages to the DLQ" (reason: error
  description): ``Session ID is null.``: "Session enabled entity doesn't allow a message
  whose session identifier is null."; ``MaxTransferHopCountExceeded``: "The maximum number
  of allowed hops when forwarding between queues exceeded. This value is set to 4."
* ``QueueDescription.ForwardTo``: "After you set this property on a queue, messages cannot
  be directly received from that queue." and "if the destination entity has many messages
  accumulated and exceeds the quota ... the source entity adds the messages to its
  dead-letter queue until there is space in the destination".
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.namespace import EntityError, Namespace
from amqplink.codec.types import Timestamp
from amqplink.message import Message
from tests.broker.nsutil import T0, send

SCHEDULED = "x-opt-scheduled-enqueue-time"


def _reasons(ns: Namespace, address: str) -> list[tuple[str | None, str | None]]:
    dlq = ns.resolve(address).target
    out = []
    for msg in dlq.peek(0, 100, T0 + 1000):  # type: ignore[union-attr]
        props = msg.envelope.application_properties or {}
        out.append((props.get("DeadLetterReason"), msg.envelope.message_id))
    return out


def _count(ns: Namespace, address: str) -> int:
    return len(ns.resolve(address).target.store)  # type: ignore[union-attr]


def test_a_topic_send_without_session_id_is_dead_lettered_only_where_sessions_are_required() -> None:
    ns = Namespace(
        NamespaceConfig(
            topics=(
                TopicConfig(
                    "t",
                    subscriptions=(
                        SubscriptionConfig("plain"),
                        SubscriptionConfig("sessions", EntityProperties(requires_session=True)),
                    ),
                ),
            )
        )
    )
    send(ns, "t", message_id="no-session")  # accepted: no error for the sender
    send(ns, "t", message_id="with-session", session_id="s1")
    assert _count(ns, "t/Subscriptions/plain") == 2
    assert _count(ns, "t/Subscriptions/sessions") == 1
    dead = ns.resolve("t/Subscriptions/sessions/$DeadLetterQueue").target.peek(0, 10, T0)  # type: ignore[union-attr]
    assert [m.envelope.message_id for m in dead] == ["no-session"]
    props = dead[0].envelope.application_properties
    assert props == {
        "DeadLetterReason": "Session ID is null.",
        "DeadLetterErrorDescription": (
            "Session enabled entity doesn't allow a message whose session identifier is null."
        ),
    }
    # A direct send to a session entity without a session id is still refused.
    ns2 = Namespace(NamespaceConfig(queues=(QueueConfig("sq", EntityProperties(requires_session=True)),)))
    with pytest.raises(EntityError, match="requires sessions"):
        send(ns2, "sq")


def test_forwarding_into_a_session_queue_dead_letters_a_message_without_session_id() -> None:
    ns = Namespace(
        NamespaceConfig(
            queues=(
                QueueConfig("in", EntityProperties(forward_to="sq")),
                QueueConfig("sq", EntityProperties(requires_session=True)),
            )
        )
    )
    send(ns, "in", message_id="a")
    send(ns, "in", message_id="b", session_id="s")
    assert _count(ns, "sq") == 1
    assert _reasons(ns, "sq/$DeadLetterQueue") == [("Session ID is null.", "a")]


def test_the_fifth_hop_dead_letters_in_the_entity_where_the_limit_is_hit() -> None:
    # a -> b -> a -> b -> a: four forwards; a would forward a fifth time.
    ns = Namespace(
        NamespaceConfig(
            queues=(
                QueueConfig("a", EntityProperties(forward_to="b")),
                QueueConfig("b", EntityProperties(forward_to="a")),
            )
        )
    )
    send(ns, "a", message_id="loop")  # the sender is not refused
    assert _reasons(ns, "a/$DeadLetterQueue") == [("MaxTransferHopCountExceeded", "loop")]
    assert _count(ns, "b/$DeadLetterQueue") == 0
    # Starting at b, the limit is hit at b.
    send(ns, "b", message_id="loop-b")
    assert _reasons(ns, "b/$DeadLetterQueue") == [("MaxTransferHopCountExceeded", "loop-b")]


def test_four_forwards_deliver() -> None:
    names = ["h0", "h1", "h2", "h3", "h4"]
    queues = tuple(
        QueueConfig(name, EntityProperties(forward_to=names[i + 1] if i + 1 < len(names) else None))
        for i, name in enumerate(names)
    )
    ns = Namespace(NamespaceConfig(queues=queues))
    send(ns, "h0", message_id="m")
    assert _count(ns, "h4") == 1
    assert all(_count(ns, f"{n}/$DeadLetterQueue") == 0 for n in names)


def test_a_destination_over_quota_dead_letters_in_the_source_not_the_sender() -> None:
    ns = Namespace(
        NamespaceConfig(
            queues=(
                QueueConfig("src", EntityProperties(forward_to="dst")),
                QueueConfig("dst", EntityProperties(max_messages=1)),
            )
        )
    )
    send(ns, "src", message_id="fits")
    send(ns, "src", message_id="over")  # no error for the sender
    assert _count(ns, "dst") == 1
    assert _reasons(ns, "src/$DeadLetterQueue") == [("QuotaExceeded", "over")]


def test_a_scheduled_message_on_a_forwarding_queue_is_forwarded_when_it_becomes_active() -> None:
    ns = Namespace(NamespaceConfig(queues=(QueueConfig("src", EntityProperties(forward_to="dst")), QueueConfig("dst"))))
    src = ns.resolve("src").target
    # schedule-message on the management link
    from amqplink.broker.namespace.envelope import split_message
    from tests.broker.nsutil import payload

    seq = ns.schedule(src, split_message(payload(b"later", message_id="sched")), T0 + 30, T0)
    assert seq > 0 and _count(ns, "dst") == 0
    ns.tick(T0 + 10)
    assert _count(ns, "dst") == 0  # not yet
    ns.tick(T0 + 31)
    assert _count(ns, "dst") == 1 and _count(ns, "src") == 0
    # A send carrying a scheduled enqueue time is held in the source too, then forwarded.
    send(ns, "src", message_id="sent-later", message_annotations={SCHEDULED: Timestamp(int((T0 + 60) * 1000))})
    assert _count(ns, "src") == 1 and _count(ns, "dst") == 1
    ns.tick(T0 + 61)
    assert _count(ns, "src") == 0 and _count(ns, "dst") == 2


def test_a_receiver_on_a_forwarding_entity_is_refused() -> None:
    ns = Namespace(
        NamespaceConfig(
            queues=(QueueConfig("src", EntityProperties(forward_to="dst")), QueueConfig("dst")),
            topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("fw", EntityProperties(forward_to="dst")),)),),
        )
    )
    for address in ("src", "t/Subscriptions/fw"):
        with pytest.raises(EntityError) as info:
            ns.receiver_source(address)
        assert info.value.condition == "amqp:not-allowed"
        assert "auto-forwarding enabled" in info.value.description
    # Its dead-letter queue stays open.
    assert ns.receiver_source("src/$DeadLetterQueue").is_dead_letter_queue


def test_a_delivery_carries_the_time_to_live_in_force() -> None:
    """Service Bus (``time_to_live``): "When not set explicitly, the assumed value is the
    DefaultTimeToLive for the respective queue or topic. A message-level time-to-live value
    cannot be longer than the entity's time-to-live setting and it is silently adjusted if
    it does." The delivery's header carries it (what the SDKs read as ``time_to_live``),
    on a receive (one or many, the body-only fast path included) and on a peek."""
    from amqplink.broker.namespace.envelope import split_message
    from tests.broker.nsutil import delivered, payload

    ns = Namespace(
        NamespaceConfig(
            queues=(QueueConfig("hourly", EntityProperties(default_message_ttl=3600.0)), QueueConfig("never"))
        )
    )
    hourly = ns.resolve("hourly").target
    hourly.accept(split_message(payload(b"bare")), T0)  # only a body: no header at all
    send(ns, "hourly", message_id="long", ttl=7200)
    send(ns, "hourly", message_id="short", ttl=60)
    send(ns, "never", message_id="none")
    expected = [3600.0, 3600.0, 60.0]  # seconds (the header: ms)
    got = hourly.receive_many(T0 + 1, 10)  # type: ignore[union-attr]
    assert [Message.decode(p).ttl for p in hourly.encode_all(got)] == expected  # type: ignore[union-attr]
    assert [delivered(hourly, m, peek=True).ttl for m in got] == expected  # type: ignore[arg-type]
    never = ns.resolve("never").target
    (kept,) = never.receive_many(T0 + 1, 10)  # type: ignore[union-attr]
    assert delivered(never, kept).ttl is None  # type: ignore[arg-type]


def test_forwarding_loops_that_also_forward_their_dead_letters_end() -> None:
    """What routing dead-letters (hop count, session id, quota) stays in the entity's own
    dead-letter queue, even with ``ForwardDeadLetteredMessagesTo``, so that no loop of
    forwards and dead-letter forwards runs without end."""
    ns = Namespace(
        NamespaceConfig(
            queues=(
                QueueConfig("a", EntityProperties(forward_to="b", forward_dead_lettered_messages_to="a")),
                QueueConfig("b", EntityProperties(forward_to="a", forward_dead_lettered_messages_to="a")),
            )
        )
    )
    send(ns, "a", message_id="m")
    assert _reasons(ns, "a/$DeadLetterQueue") == [("MaxTransferHopCountExceeded", "m")]


@settings(deadline=None)
@given(
    forwards=st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=6, max_size=6),
    dead_forwards=st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=6, max_size=6),
    sessions=st.lists(st.booleans(), min_size=6, max_size=6),
    quotas=st.lists(st.integers(1, 3), min_size=6, max_size=6),
    sends=st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=12),
)
def test_every_forwarded_message_lands_exactly_once(
    forwards: list[int | None],
    dead_forwards: list[int | None],
    sessions: list[bool],
    quotas: list[int],
    sends: list[tuple[int, bool]],
) -> None:
    """Any graph of ``ForwardTo`` and ``ForwardDeadLetteredMessagesTo`` (loops included),
    session queues and small quotas: each message a sender got no refusal for is in exactly
    one queue or dead-letter queue, and a dead-lettered one says why (the hop limit, a
    missing session id, a destination's quota)."""
    names = [f"q{i}" for i in range(6)]
    queues = tuple(
        QueueConfig(
            name,
            EntityProperties(
                forward_to=None if forwards[i] is None or forwards[i] == i else names[forwards[i]],  # type: ignore[index]
                forward_dead_lettered_messages_to=None if dead_forwards[i] is None else names[dead_forwards[i]],  # type: ignore[index]
                requires_session=sessions[i] and forwards[i] is None,
                max_messages=quotas[i],
            ),
        )
        for i, name in enumerate(names)
    )
    ns = Namespace(NamespaceConfig(queues=queues))
    accepted = []
    for n, (target, with_session) in enumerate(sends):
        try:
            send(ns, names[target], message_id=f"m{n}", session_id="s" if with_session else None)
        except EntityError as exc:
            assert exc.condition in ("amqp:not-allowed", "amqp:resource-limit-exceeded")
            continue
        accepted.append(f"m{n}")
    held: list[str] = []
    for name in names:
        for address in (name, f"{name}/$DeadLetterQueue"):
            for msg in ns.resolve(address).target.store:  # type: ignore[union-attr]
                held.append(msg.envelope.message_id)
                reason = (msg.envelope.application_properties or {}).get("DeadLetterReason")
                if address.endswith("Queue"):
                    assert reason in ("MaxTransferHopCountExceeded", "Session ID is null.", "QuotaExceeded")
    assert sorted(held) == sorted(accepted)


def test_a_forwarding_subscription_dead_letters_what_its_destination_has_no_room_for() -> None:
    ns = Namespace(
        NamespaceConfig(
            queues=(QueueConfig("dst", EntityProperties(max_messages=1)),),
            topics=(
                TopicConfig(
                    "t",
                    subscriptions=(
                        SubscriptionConfig("fw", EntityProperties(forward_to="dst")),
                        SubscriptionConfig("all"),
                    ),
                ),
            ),
        )
    )
    send(ns, "t", message_id="first")
    send(ns, "t", message_id="second")  # the topic takes it: the other subscription has it
    assert _count(ns, "dst") == 1 and _count(ns, "t/Subscriptions/all") == 2
    assert _reasons(ns, "t/Subscriptions/fw/$DeadLetterQueue") == [("QuotaExceeded", "second")]
