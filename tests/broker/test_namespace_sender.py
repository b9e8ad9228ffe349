"""``Namespace.sender`` (what the broker stores a run of transfers with) does what
``Namespace.send`` does, message by message: the same refusals and the same stored
messages, for every kind of target and every kind of payload, including the plain
queues and partitioned queues whose body-only messages it takes straight to the entity.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties
from amqplink.broker.namespace import EntityError, Namespace
from tests.broker.nsutil import SENT_PAYLOADS, T0, namespace_of, payload

QUEUES = {
    "plain": EntityProperties(),
    "small": EntityProperties(max_message_size=1500, max_messages=4, default_message_ttl=60.0),
    "dedup": EntityProperties(requires_duplicate_detection=True),
    "sessions": EntityProperties(requires_session=True),
    "forwards": EntityProperties(forward_to="plain"),
    "partitioned": EntityProperties(enable_partitioning=True, max_messages=6),
    "partitioned-small": EntityProperties(enable_partitioning=True, max_message_size=1500),
}
TARGETS = [*QUEUES, "topic"]



def _namespace() -> Namespace:
    return namespace_of(QUEUES)


def _outcome(store: Callable[..., None], *args: Any) -> Any:
    try:
        store(*args)
    except EntityError as exc:
        return (exc.condition, exc.description)
    return "stored"


def _contents(ns: Namespace) -> list[Any]:
    held = []
    for path in [*QUEUES, "topic/subscriptions/all"]:
        entity = ns.resolve(path).entity  # (resolve: a forwarding queue takes no receiver)
        assert entity is not None
        fragments = getattr(entity, "fragments", [entity])
        for fragment in fragments:
            for msg in fragment.store:
                e = msg.envelope
                expires = "never" if msg.expires_at == math.inf else msg.expires_at
                held.append((path, msg.sequence_number, msg.state, expires, e.body, e.props_raw, e.header))
    return held


@settings(deadline=None)
@given(
    sends=st.lists(
        st.tuples(st.sampled_from(TARGETS), st.integers(0, len(SENT_PAYLOADS) - 1), st.integers(0, 3)),
        max_size=25,
    )
)
def test_sender_does_what_send_does(sends: list[tuple[str, int, int]]) -> None:
    one, other = _namespace(), _namespace()
    runs: dict[str, Callable[[bytes, float, int], None]] = {}
    for path, which, later in sends:
        body, message_format = SENT_PAYLOADS[which]
        now = T0 + later
        sent = _outcome(one.send, one.sender_target(path), body, now, message_format)
        store = runs.setdefault(path, other.sender(other.sender_target(path)))  # one per run of a link
        stored = _outcome(store, body, now, message_format)
        assert sent == stored, (path, which)
    assert _contents(one) == _contents(other)


def test_a_body_only_message_to_a_plain_queue_goes_straight_to_the_entity() -> None:
    ns = _namespace()
    queue = ns.sender_target("plain")
    ns.send = lambda *a: (_ for _ in ()).throw(AssertionError("send was called"))  # type: ignore[method-assign]
    ns.sender(queue)(payload(b"body only"), T0, 0)
    ns.sender(ns.sender_target("partitioned"))(payload(b"body only"), T0, 0)
    assert len(queue.store) == 1
    assert sum(len(f.store) for f in ns.receiver_source("partitioned").fragments) == 1  # type: ignore[attr-defined]
