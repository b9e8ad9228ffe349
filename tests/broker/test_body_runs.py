"""``Namespace.body_sender`` (the entity storing a run of body-only messages in one call,
:meth:`Entity.accept_bodies` and :meth:`PartitionedQueue.accept_bodies`) stores exactly
what ``Namespace.sender``'s function stores message by message: it stops at the first
message it does not take, which the general path then stores or refuses with its own
error, and the state of every entity (sequence numbers, expiry, bytes, the round robin
of a partitioned queue) is the same as after the general path alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties
from amqplink.broker.namespace import EntityError, Namespace
from tests.broker.nsutil import SENT_PAYLOADS, T0, namespace_of, payload

QUEUES = {
    "plain": EntityProperties(),
    "small": EntityProperties(max_message_size=1500, max_messages=4, default_message_ttl=60.0),
    "few-bytes": EntityProperties(max_bytes=2200),
    "ttl": EntityProperties(default_message_ttl=60.0),
    "partitioned-ttl": EntityProperties(enable_partitioning=True, partition_count=2, default_message_ttl=60.0),
    "sessions": EntityProperties(requires_session=True),
    "dedup": EntityProperties(requires_duplicate_detection=True),
    "forwards": EntityProperties(forward_to="plain"),
    "partitioned": EntityProperties(enable_partitioning=True, partition_count=3, max_messages=2),
    "partitioned-small": EntityProperties(enable_partitioning=True, partition_count=2, max_message_size=1500),
    "partitioned-sessions": EntityProperties(enable_partitioning=True, requires_session=True),
}
TARGETS = [*QUEUES, "topic"]


@dataclass
class Sent:
    """A transfer as the broker hands it on (an engine ``Delivery`` has these two)."""

    payload: Any
    message_format: int


def _namespace(down: int | None) -> Namespace:
    ns = namespace_of(QUEUES)
    if down is not None:
        ns.receiver_source("partitioned").partitions.set_down(down)  # type: ignore[union-attr]
    return ns


def _one_at_a_time(ns: Namespace, path: str, run: list[Sent]) -> list[Any]:
    store = ns.sender(ns.sender_target(path))
    outcomes: list[Any] = []
    for sent in run:
        try:
            store(bytes(sent.payload), T0, sent.message_format)
        except EntityError as exc:
            outcomes.append((exc.condition, exc.description))
        else:
            outcomes.append("stored")
    return outcomes


def _state(ns: Namespace) -> list[Any]:
    held: list[Any] = []
    for path in [*QUEUES, "topic/subscriptions/all"]:
        entity = ns.resolve(path).entity  # (resolve: a forwarding queue takes no receiver)
        assert entity is not None
        partitions = entity.partitions
        if partitions is not None:
            held.append((path, "round robin at", partitions._next))
        for fragment in getattr(entity, "fragments", [entity]):
            held.append((path, fragment.bytes, fragment._next_sequence, dict(fragment._available)))
            # each message's expiry, whether it came alone or in a run (one entry for the run)
            expiry = sorted((at, seq) for at, first, end in fragment._expiry for seq in range(first, end))
            held.append((path, "expiry", expiry))
            for msg in fragment.store:
                e = msg.envelope
                expires = "never" if msg.expires_at == math.inf else msg.expires_at
                held.append((msg.sequence_number, msg.state, msg.enqueued_at, expires, e.body, e.props_raw, e.size))
        held.append((path, "timed", entity in ns._timed))
    return held


@settings(deadline=None)
@given(
    runs=st.lists(
        st.tuples(
            st.sampled_from(TARGETS),
            st.lists(st.tuples(st.integers(0, len(SENT_PAYLOADS) - 1), st.booleans()), min_size=1, max_size=8),
        ),
        max_size=8,
    ),
    down=st.sampled_from([None, 0, 1]),
)
def test_a_run_of_bodies_is_stored_as_one_message_at_a_time(
    runs: list[tuple[str, list[tuple[int, bool]]]], down: int | None
) -> None:
    general, by_runs = _namespace(down), _namespace(down)
    for path, picks in runs:
        # payloads as the engine hands them (a memoryview into the read) or as bytes
        chosen = [(SENT_PAYLOADS[i], view) for i, view in picks]
        run = [Sent(memoryview(body) if view else body, message_format) for (body, message_format), view in chosen]
        expected = _one_at_a_time(general, path, run)
        store_bodies = by_runs.body_sender(by_runs.sender_target(path))
        stored = 0 if store_bodies is None else store_bodies(run, T0)
        assert 0 <= stored <= len(run)
        outcomes = ["stored"] * stored + _one_at_a_time(by_runs, path, run[stored:])
        assert outcomes == expected, path
        if stored < len(run) and store_bodies is not None:
            # it stops only at a message it does not take: not only a body, or one the entity
            # would not store in the same state (the general path stores it elsewhere or refuses it)
            again = store_bodies(run[stored : stored + 1], T0) if expected[stored] != "stored" else 0
            assert again == 0
    assert _state(general) == _state(by_runs)
    for ns in (general, by_runs):
        ns.tick(T0 + 60.0)  # the messages of "ttl" and "partitioned-ttl" expire, alone or by runs
    assert _state(general) == _state(by_runs)


def test_body_sender_is_for_plain_and_partitioned_queues_only() -> None:
    ns = _namespace(None)
    for path in ("plain", "small", "ttl", "partitioned", "partitioned-ttl", "sessions"):
        assert ns.body_sender(ns.sender_target(path)) is not None
    for path in ("dedup", "forwards", "topic"):
        assert ns.body_sender(ns.sender_target(path)) is None


def test_stops_at_the_message_that_breaks_a_limit() -> None:
    ns = _namespace(None)
    small = ns.sender_target("small")
    store_bodies = ns.body_sender(small)
    assert store_bodies is not None
    run = [Sent(payload(bytes([n])), 0) for n in range(6)]
    assert store_bodies(run, T0) == 4  # max_messages 4
    assert [m.sequence_number for m in small.store] == [1, 2, 3, 4]  # type: ignore[union-attr]
    assert store_bodies(run[4:], T0) == 0
    assert _one_at_a_time(ns, "small", run[4:5])[0][0] == "amqp:resource-limit-exceeded"


def test_stops_before_a_message_that_is_not_only_a_body() -> None:
    ns = _namespace(None)
    store_bodies = ns.body_sender(ns.sender_target("plain"))
    assert store_bodies is not None
    run = [Sent(payload(b"a"), 0), Sent(payload(b"b"), 7), Sent(payload(b"c"), 0)]
    assert store_bodies(run, T0) == 1  # message-format 7: the general path unpacks it
    run = [Sent(payload(b"a"), 0), Sent(payload(b"b", message_id="m"), 0)]
    assert store_bodies(run, T0) == 1  # properties to split
    assert store_bodies([], T0) == 0


def test_a_partitioned_queue_goes_round_robin_and_leaves_a_full_fragment_to_the_general_path() -> None:
    ns = _namespace(None)
    queue: Any = ns.sender_target("partitioned")  # three fragments of at most two messages
    store_bodies = ns.body_sender(queue)
    assert store_bodies is not None
    assert store_bodies([Sent(payload(bytes([n])), 0) for n in range(7)], T0) == 6
    assert [len(f.store) for f in queue.fragments] == [2, 2, 2]
    assert queue.partitions._next == 0  # where the seventh would have gone
    outcome = _one_at_a_time(ns, "partitioned", [Sent(payload(b"7"), 0)])
    assert outcome[0][0] == "amqp:resource-limit-exceeded"


def test_a_partitioned_queue_with_a_fragment_down_takes_the_general_path() -> None:
    ns = _namespace(1)
    store_bodies = ns.body_sender(ns.sender_target("partitioned"))
    assert store_bodies is not None
    assert store_bodies([Sent(payload(b"x"), 0)], T0) == 0


def test_a_run_is_stored_in_one_go_and_the_listeners_are_told_once_after_it() -> None:
    for path in ("ttl", "partitioned-ttl"):
        ns = _namespace(None)
        entity: Any = ns.receiver_source(path)
        told: list[int] = []
        entity.listeners.append(lambda entity=entity, told=told: told.append(len(entity.store)))
        store_bodies = ns.body_sender(ns.sender_target(path))
        assert store_bodies is not None
        assert store_bodies([Sent(payload(bytes([n])), 0) for n in range(5)], T0) == 5
        assert told == [5], path  # once, with every message of the run in
        for fragment in getattr(entity, "fragments", [entity]):
            # one expiry entry for the fragment's share of the run, its sequence numbers consecutive
            seqs = [m.sequence_number for m in fragment.store]
            assert fragment._expiry == [(T0 + fragment.properties.default_message_ttl, seqs[0], seqs[-1] + 1)]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
            assert fragment._available[None] == seqs


def test_stops_at_the_message_that_breaks_the_byte_limit() -> None:
    ns = _namespace(None)
    target: Any = ns.sender_target("few-bytes")  # max_bytes 2200
    store_bodies = ns.body_sender(target)
    assert store_bodies is not None
    run = [Sent(payload(bytes(n)), 0) for n in (700, 700, 1000, 10)]  # the last would fit
    sizes = [len(s.payload) for s in run]
    expected = next(k for k in range(len(run)) if sum(sizes[: k + 1]) > 2200)
    assert store_bodies(run, T0) == expected == 2
    assert target.bytes == sum(sizes[:2])
    assert _one_at_a_time(ns, "few-bytes", run[2:3])[0][0] == "amqp:resource-limit-exceeded"


def test_a_partitioned_run_stops_where_the_first_fragment_refuses() -> None:
    ns = _namespace(None)
    queue: Any = ns.sender_target("partitioned")  # three fragments of at most two messages
    store_bodies = ns.body_sender(queue)
    assert store_bodies is not None
    queue.partitions._next = 1
    assert store_bodies([Sent(payload(bytes([n])), 0) for n in range(2)], T0) == 2  # to fragments 1 and 2
    assert queue.partitions._next == 0
    # fragments 0, 1, 2, 0, 1 (refused: full), 2 (would be refused too), 0 (would be taken)
    assert store_bodies([Sent(payload(bytes([n])), 0) for n in range(7)], T0) == 4
    assert [len(f.store) for f in queue.fragments] == [2, 2, 2]
    assert queue.partitions._next == 1  # the refused one's fragment: the general path goes on from there
    assert _one_at_a_time(ns, "partitioned", [Sent(payload(b"4"), 0)])[0][0] == "amqp:resource-limit-exceeded"


def test_a_durable_store_takes_a_run_through_its_own_append() -> None:
    from amqplink.broker.namespace.store import MemoryStore, StoredMessage

    appended: list[int] = []

    class Recording(MemoryStore):
        def append(self, message: StoredMessage) -> None:
            appended.append(message.sequence_number)
            super().append(message)

    ns = _namespace(None)
    target: Any = ns.sender_target("plain")
    target.store = Recording()
    store_bodies = ns.body_sender(target)
    assert store_bodies is not None
    assert store_bodies([Sent(payload(bytes([n])), 0) for n in range(3)], T0) == 3
    assert appended == [1, 2, 3]
    assert [m.sequence_number for m in target.store] == [1, 2, 3]
