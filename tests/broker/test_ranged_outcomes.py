"""Outcomes for a range of deliveries: the broker's consumer links hear of a disposition
range as one event and complete it together (``_on_outcomes``, ``Entity.complete_all``),
with the same settlements, the same refusals and the same entity state as one outcome
at a time (``_on_outcome`` for each delivery, ``Entity.complete`` each)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.entity import Entity
from amqplink.broker.namespace.errors import EntityError
from amqplink.broker.namespace.partitioned import PartitionedEntity
from amqplink.broker.sbserver import ServiceBusHost
from amqplink.codec.types import Symbol
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.link import RCV_SECOND, SND_UNSETTLED
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Disposition, Error, Modified, Rejected, Released, Source, Target
from interop import inprocess
from tests import profiles
from tests.broker.nsutil import T0, disposition_rows, per_delivery_outcomes, send
from tests.engine.pairs import performatives, received_in

OUTCOMES = [
    Accepted(),
    Released(),
    Modified(delivery_failed=True),
    Modified(delivery_failed=True, undeliverable_here=True),
    Rejected(error=Error(condition=Symbol("com.microsoft:dead-letter"), info={})),
]


def _namespace(partitioned: bool) -> Namespace:
    ns = Namespace()
    if partitioned:
        ns.default_properties = EntityProperties(enable_partitioning=True)
    return ns


# -- Entity.complete_all ----------------------------------------------------------------------
_GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""A lock token in a refusal's description (each run's tokens are its own)."""


def _reference_complete(entity: Entity, token: bytes, now: float) -> None:
    """Completing through the general rule alone: the lock as :meth:`Entity.locked` finds it
    (time applied, lock-lost refused; a partitioned entity's fragment by the token)."""
    if isinstance(entity, PartitionedEntity):
        entity = entity._by_token(token, "completing a message")
    msg = entity.locked(token, now)
    entity._release_lock(msg)
    entity._remove(msg.sequence_number)


def _completed(
    partitioned: bool, count: int, picks: list[int], expired: set[int], each: bool | str, down: int | None = None
) -> Any:
    """Complete the tokens ``picks`` names (an index below ``count``: that message's token,
    else an unknown token) in one call, one at a time, or one at a time by the general rule
    (``each="reference"``), with fragment ``down`` down; the refusals and what is left."""
    ns = _namespace(partitioned)
    entity = ns.receiver_source("q")
    duration = entity.properties.lock_duration
    for _ in range(count):
        send(ns, "q")
    tokens: list[bytes] = []
    for i in range(count):  # the expired ones were locked a lock duration early
        msg = entity.receive(T0 - duration if i in expired else T0)
        assert msg is not None and msg.lock is not None
        tokens.append(msg.lock)
    unknown = bytes(16)
    asked = [tokens[p] if p < count else unknown for p in picks]
    if down is not None:
        entity.partitions.set_down(down)
    if each:
        refusals: dict[int, Any] = {}
        for i, token in enumerate(asked):
            try:
                if each == "reference":
                    _reference_complete(entity, token, T0 + 1)
                else:
                    entity.complete(token, T0 + 1)
            except EntityError as exc:
                refusals[i] = exc
    else:
        refusals = entity.complete_all(asked, T0 + 1)
        assert list(refusals) == sorted(refusals)  # in index order, as one at a time
    left = sorted((m.sequence_number, m.state.value, m.delivery_count) for m in entity.store)
    described = {i: (type(e).__name__, e.condition, _GUID.sub("<token>", e.description)) for i, e in refusals.items()}
    return described, left, entity.bytes


@pytest.mark.parametrize("partitioned", [False, True])
@settings(profiles.HEAVY, deadline=None)
@given(data=st.data(), count=st.integers(min_value=1, max_value=40))
def test_complete_all_refuses_and_completes_as_complete_each(
    partitioned: bool, data: st.DataObject, count: int
) -> None:
    picks = data.draw(st.lists(st.integers(min_value=0, max_value=count), max_size=2 * count))  # repeats, unknowns
    expired = set(data.draw(st.lists(st.integers(min_value=0, max_value=count - 1))))
    together = _completed(partitioned, count, picks, expired, each=False)
    assert together == _completed(partitioned, count, picks, expired, each=True)
    assert together == _completed(partitioned, count, picks, expired, each="reference")
    refused = together[0]
    for i, p in enumerate(picks):  # a refusal for each unknown, expired or repeated token, and only those
        assert (i in refused) == (p == count or p in expired or p in picks[:i])


def test_a_token_repeated_in_one_partitioned_call_is_refused_as_complete_after_complete() -> None:
    """The repeat of a token finds no lock, as a second complete does: it is refused without
    sweeping its fragment's expired locks (message 35, round robin, shares fragment 3 with
    message 3, and its lock has expired; one complete after another leaves it locked)."""
    together = _completed(True, 36, [3, 3], {35}, each=False)
    assert together == _completed(True, 36, [3, 3], {35}, each=True)
    assert together == _completed(True, 36, [3, 3], {35}, each="reference")
    assert list(together[0]) == [1]


@settings(profiles.HEAVY, deadline=None)
@given(data=st.data(), count=st.integers(min_value=1, max_value=40), down=st.integers(min_value=0, max_value=15))
def test_partitioned_complete_all_with_a_fragment_down_refuses_as_the_general_rule(
    data: st.DataObject, count: int, down: int
) -> None:
    """A token whose fragment is down is refused (retryable) as completing it alone is; the
    others complete."""
    picks = data.draw(st.lists(st.integers(min_value=0, max_value=count), max_size=2 * count))
    together = _completed(True, count, picks, set(), each=False, down=down)
    assert together == _completed(True, count, picks, set(), each="reference", down=down)
    assert together == _completed(True, count, picks, set(), each=True, down=down)


# -- the broker's consumer link ----------------------------------------------------------------


async def _consume(
    partitioned: bool, ranged: bool, count: int, lost: list[int], chosen: list[int], outcome: int
) -> tuple[list[Any], list[Any], int]:
    """A peek-lock consumer takes ``count`` messages; the locks of ``lost`` go (completed
    behind its back); it settles ``chosen`` with one outcome, all in one go. The broker's
    dispositions, the entity's messages and how many outcomes went one at a time."""
    ns = _namespace(partitioned)
    host = ServiceBusHost(ns, clock=lambda: T0)
    server = Connection(ConnectionConfig(container_id="broker"), server=True)
    handler = inprocess.accept(host, server)
    client = Connection(ConnectionConfig(container_id="consumer"))
    target = ns.sender_target("q")
    for i in range(count):
        ns.send(target, Message(f"m{i}".encode()).encode(), T0)
    wire: list[bytes] = []

    def pump() -> list[Any]:
        got: list[Any] = []
        while True:
            c2s = client.data_to_send()
            if c2s:
                handler(server.receive_data(c2s))
            s2c = server.data_to_send()
            if not c2s and not s2c:
                return got
            if s2c:
                wire.append(s2c)
                got += client.receive_data(s2c)

    client.open()
    receiver = client.begin_session().attach_receiver(
        "r", source=Source(address="q"), target=Target(address="r"), snd_settle_mode=SND_UNSETTLED,
        rcv_settle_mode=RCV_SECOND,
    )  # fmt: skip
    pump()
    receiver.flow(count)
    deliveries = received_in(pump())
    assert len(deliveries) == count
    entity: Entity = ns.receiver_source("q")
    for i in lost:
        entity.complete(bytes(deliveries[i].tag), T0)
    with per_delivery_outcomes(each=not ranged) as one_at_a_time:
        before = len(wire)
        for i in chosen:
            receiver.settle(deliveries[i], OUTCOMES[outcome])
        pump()
    single = len(one_at_a_time)
    frames = disposition_rows(performatives(wire[before:], Disposition))
    assert all(deliveries[i].remote_settled for i in chosen)  # each settlement was confirmed
    left = sorted((m.sequence_number, m.state.value, m.delivery_count, m.deferred) for m in entity.store)
    dead = sorted(m.sequence_number for m in ns.receiver_source("q/$DeadLetterQueue").store)
    return frames, [left, dead], single


@pytest.mark.parametrize("partitioned", [False, True])
@settings(profiles.HEAVY, deadline=None)
@given(data=st.data(), count=st.integers(min_value=1, max_value=30))
def test_a_range_of_outcomes_settles_as_one_outcome_at_a_time(
    partitioned: bool, data: st.DataObject, count: int
) -> None:
    lost = data.draw(st.lists(st.sampled_from(range(count)), unique=True))
    chosen = data.draw(st.permutations(range(count)))[: data.draw(st.integers(min_value=1, max_value=count))]
    outcome = data.draw(st.integers(min_value=0, max_value=len(OUTCOMES) - 1))
    frames, state, single = asyncio.run(_consume(partitioned, True, count, lost, chosen, outcome))
    reference = asyncio.run(_consume(partitioned, False, count, lost, chosen, outcome))
    assert (frames, state) == reference[:2]
    assert reference[2] == len(chosen)
    # accepted (complete) goes together; other outcomes one at a time, as before.
    assert single == (0 if outcome == 0 else len(chosen))


def test_a_completed_range_leaves_as_one_settling_disposition() -> None:
    frames, (left, _), single = asyncio.run(_consume(False, True, 20, [], list(range(20)), 0))
    assert frames == [(0, 19, True, "Accepted", None)]
    assert left == [] and single == 0


def test_lost_locks_in_a_completed_range_are_refused_with_lock_lost() -> None:
    frames, (left, _), _ = asyncio.run(_consume(True, True, 10, [3, 4, 8], list(range(10)), 0))
    lock_lost = Symbol("com.microsoft:message-lock-lost")
    assert frames == [
        (0, 2, True, "Accepted", None),
        (3, None, True, "Rejected", lock_lost),  # each refusal names its own lock: no range
        (4, None, True, "Rejected", lock_lost),
        (5, 7, True, "Accepted", None),
        (8, None, True, "Rejected", lock_lost),
        (9, None, True, "Accepted", None),
    ]
    assert left == []


# -- a receiver's batch encoded together ---------------------------------------------------------
@pytest.mark.parametrize("partitioned", [False, True])
def test_encode_all_stamps_each_message_as_delivered(partitioned: bool) -> None:
    ns = _namespace(partitioned)
    entity = ns.receiver_source("q")
    for i in range(6):
        send(ns, "q", body=f"m{i}".encode())
    first = entity.receive_many(T0, 3)
    for msg in first[:2]:  # delivered once before: the next delivery's header counts it
        assert msg.lock is not None
        entity.abandon(msg.lock, T0)
    batch = entity.receive_many(T0 + 1, 6)
    assert len(batch) == 5
    tags = [msg.lock for msg in batch]  # a peek-lock batch: its lock tokens are its delivery-tags
    decoded = [Message.decode(p) for p in entity.encode_all(batch, tags)]
    for msg, got in zip(batch, decoded, strict=True):
        prior = int(got.header.delivery_count or 0) if got.header is not None else 0
        assert prior == msg.delivery_count - 1 == (1 if got.body in (b"m0", b"m1") else 0)
        annotations = got.message_annotations or {}
        assert annotations[Symbol("x-opt-sequence-number")] == msg.sequence_number
        assert Symbol("x-opt-locked-until") in annotations
    assert sorted(got.body for got in decoded) == [b"m0", b"m1", b"m3", b"m4", b"m5"]  # m2 is still locked
    assert entity.encode_all(batch, tags) == [entity.encode(m) for m in batch]


def _completed_seeing_held(count: int, picks: list[int], expired: set[int]) -> tuple[Any, list[Any]]:
    """:func:`_completed` together on a partitioned entity, and what _held_groups answered."""
    held: list[Any] = []
    original = PartitionedEntity._held_groups

    def spy(self: PartitionedEntity, tokens: Any) -> Any:
        held.append(original(self, tokens))
        return held[-1]

    PartitionedEntity._held_groups = spy  # type: ignore[method-assign]
    try:
        return _completed(True, count, picks, expired, each=False), held
    finally:
        PartitionedEntity._held_groups = original  # type: ignore[method-assign]


@settings(profiles.HEAVY, deadline=None)
@given(data=st.data(), count=st.integers(min_value=1, max_value=40))
def test_distinct_held_tokens_complete_by_fragment_as_one_at_a_time(data: st.DataObject, count: int) -> None:
    """Distinct tokens each held by a fragment that is up (the usual range, in any order) are
    grouped at once (PartitionedEntity._held_groups), with the result of one at a time."""
    picks = data.draw(st.permutations(range(count)))
    picks = picks[: data.draw(st.integers(min_value=1, max_value=count))]
    together, held = _completed_seeing_held(count, picks, set())
    assert held and held[0] is not None  # the grouped path took them
    assert together == _completed(True, count, picks, set(), each=True)
    assert together == _completed(True, count, picks, set(), each="reference")
    assert together[0] == {}


@pytest.mark.parametrize("count", [1, 17, 40])
def test_an_expired_lock_in_a_held_group_is_refused_at_its_own_index(count: int) -> None:
    """The last lock taken has expired but is still held (nothing ticked since): grouped with
    the others, its fragment refuses it, at its index in the call, as one at a time does."""
    picks = list(range(count))[::-1]
    together, held = _completed_seeing_held(count, picks, {count - 1})
    assert held and held[0] is not None
    assert together == _completed(True, count, picks, {count - 1}, each=True)
    assert together == _completed(True, count, picks, {count - 1}, each="reference")
    assert list(together[0]) == [0]


@pytest.mark.parametrize(
    "spoiler", ["repeat", "unknown", "down", "uuid"], ids=["a repeat", "no fragment's", "fragment down", "a GUID"]
)
def test_held_groups_declines_a_token_for_the_one_at_a_time_rules(spoiler: str) -> None:
    ns = _namespace(True)
    entity = ns.receiver_source("q")
    for _ in range(20):
        send(ns, "q")
    msgs = entity.receive_many(T0, 20)
    tokens: list[Any] = [m.lock for m in msgs]
    assert entity._held_groups(tokens) is not None
    if spoiler == "repeat":
        tokens.append(tokens[3])
    elif spoiler == "unknown":
        tokens.append(bytes(16))
    elif spoiler == "down":
        entity.partitions.set_down(msgs[5].sequence_number >> 48)
    else:
        tokens[2] = msgs[2].lock_token
    assert entity._held_groups(tokens) is None
