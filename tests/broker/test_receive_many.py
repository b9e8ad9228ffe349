"""``receive_many`` (what the broker hands a receiving link per step) gives exactly what as
many single receives would: the same messages in the same order, locked alike."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.entity import Entity
from tests import profiles
from tests.broker.nsutil import T0, send


def _filled(partitioned: bool, sends: list[str | None], down: list[int]) -> Entity:
    ns = Namespace()
    if partitioned:
        ns.default_properties = EntityProperties(enable_partitioning=True, partition_count=4)
    for key in sends:
        friendly = {} if key is None else {"message_annotations": {"x-opt-partition-key": key}}
        send(ns, "q", body=(key or "-").encode(), **friendly)
    entity = ns.receiver_source("q")
    if entity.partitions is not None:
        for index in down:
            entity.partitions.set_down(index)
    return entity


@settings(deadline=None)
@given(
    st.booleans(),
    st.lists(st.one_of(st.none(), st.sampled_from("abcdef")), max_size=80),
    st.lists(st.integers(0, 3), max_size=2),
    # Up to 20 at once: several per fragment (every fragment full, or some short of it).
    st.lists(st.integers(1, 20), min_size=1, max_size=6),
    st.booleans(),
)
def test_receive_many_equals_single_receives(
    partitioned: bool, sends: list[str | None], down: list[int], counts: list[int], lock: bool
) -> None:
    one_by_one, batched = _filled(partitioned, sends, down), _filled(partitioned, sends, down)
    for count in counts:
        singles = []
        for _ in range(count):
            msg = one_by_one.receive(T0, lock=lock)
            if msg is None:
                break
            singles.append(msg)
        batch = batched.receive_many(T0, count, lock=lock)
        assert [m.sequence_number for m in batch] == [m.sequence_number for m in singles]
        for a, b in zip(batch, singles, strict=True):
            assert (a.state, a.delivery_count, a.locked_until) == (b.state, b.delivery_count, b.locked_until)
            assert (a.lock is None) == (b.lock is None) == (not lock)
    for msg in batched.receive_many(T0, 1000, lock=lock) if lock else []:
        assert msg.lock is not None
        batched.complete(msg.lock, T0)  # every token handed out settles


@given(st.integers(8, 30), st.lists(st.integers(1, 30), min_size=2, max_size=5), st.integers(0, 11))
@settings(profiles.HEAVY, deadline=None)
def test_full_turns_over_every_fragment_equal_single_receives(sends: int, counts: list[int], offset: int) -> None:
    """Keyless sends fill the fragments round robin, so a batch often takes a full turn from
    each (the interleaving's fast branch); where the next receive starts must not change."""
    keys: list[str | None] = [None] * sends
    one_by_one, batched = _filled(True, keys, []), _filled(True, keys, [])
    for entity in (one_by_one, batched):  # the search starts part-way round, as after earlier receives
        entity._next_receive = offset % 4  # type: ignore[attr-defined]
    for count in counts:
        singles = [m for m in (one_by_one.receive(T0) for _ in range(count)) if m is not None]
        batch = batched.receive_many(T0, count)
        assert [m.sequence_number for m in batch] == [m.sequence_number for m in singles]
