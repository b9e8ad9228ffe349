"""``Entity.accept_all`` stores a run of messages that need nothing each (no header, not
scheduled, no session) in one go; what it stores, and what time later does to it (expiry,
receiving), is what storing them one at a time does, for any mix of messages."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties
from amqplink.broker.namespace import Entity, Envelope
from amqplink.broker.namespace.envelope import split_message
from amqplink.message import Message
from tests.broker.nsutil import T0

envelopes = st.lists(
    st.builds(
        lambda ttl, at, key: split_message(
            Message(
                b"m",
                ttl=ttl,
                message_id="m",
                partition_key=key,
                message_annotations=None if at is None else {"x-opt-scheduled-enqueue-time": at},
            ).encode()
        ),
        st.one_of(st.none(), st.sampled_from([1.0, 100.0])),
        st.one_of(st.none(), st.sampled_from([T0 - 5, T0 + 5])).map(lambda t: None if t is None else _at(t)),
        st.one_of(st.none(), st.just("k")),
    ),
    min_size=2,
    max_size=6,
)


def _at(seconds: float) -> Any:
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def _held(entity: Entity) -> list[tuple[Any, ...]]:
    return [(m.sequence_number, m.state, m.enqueued_at, m.expires_at, m.envelope) for m in entity.store]


@settings(deadline=None)
@given(envelopes, st.sampled_from([30.0, float("inf")]), st.booleans())
def test_accept_all_stores_what_one_at_a_time_stores(
    sent: list[Envelope], default_ttl: float, dead_letter_queue: bool
) -> None:
    properties = EntityProperties(default_message_ttl=default_ttl)
    together = Entity("q", properties, is_dead_letter_queue=dead_letter_queue)
    alone = Entity("q", properties, is_dead_letter_queue=dead_letter_queue)
    told: list[str] = []
    together.listeners.append(lambda: told.append("together"))
    alone.listeners.append(lambda: told.append("alone"))
    together.accept_all(sent, T0)
    for envelope in sent:
        alone._store(envelope, T0)
    assert _held(together) == _held(alone)
    assert ("together" in told) == ("alone" in told)  # a receiver waiting is told of what it can take
    for later in (T0 + 2, T0 + 10, T0 + 50, T0 + 200):
        assert together.next_deadline() == alone.next_deadline()
        together.tick(later)
        alone.tick(later)
        assert _held(together) == _held(alone)  # expired, scheduled made available
        got = [m.sequence_number for m in together.receive_many(later, 1, lock=False)]
        assert got == [m.sequence_number for m in alone.receive_many(later, 1, lock=False)]
