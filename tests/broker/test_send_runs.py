"""A producer link's transfers reach the broker in runs (one ``DeliveriesReceived`` for the
whole delivery frames of one read): a run is stored, refused and settled exactly as the
same deliveries in runs of one (as when each transfer comes in a read of its own).

The same client byte stream, cut at random points, goes into two in-memory brokers: one
as it runs, one handed each run as runs of one (``inprocess.accept(runs=False)``). Messages of
every shape the broker reads differently are mixed (a bare body, properties, a ttl,
annotations with a partition key, a session id, a ping, one too big for the queue, an
undecodable one, a batch, pre-settled transfers, duplicate message-ids) over a plain, a
partitioned, a duplicate-detecting queue and one that fills up. Both brokers must store
the same messages and write the same bytes (outcomes, ranges of dispositions, flows).
A third broker takes runs but stores their body-only messages one at a time too (no
``Namespace.body_sender``): the entity's run of bodies must not change a thing either.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink import Message
from amqplink.broker.config import EntityProperties, QueueConfig
from amqplink.broker.namespace.namespace import BATCH_FORMAT, Namespace
from amqplink.broker.sbserver import ServiceBusHost
from amqplink.codec.types import Symbol
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import DeliveriesReceived, Event
from amqplink.protocol.definitions import Target
from interop import inprocess
from tests import profiles

from ..engine.pairs import frames_in

QUEUES = ("plain", "parted", "dedup", "small")
SHAPES = ("bare", "id", "ttl", "key", "session", "ping", "big", "garbage", "batch")
NOW = 1_000_000.0


def _namespace() -> Namespace:
    ns = Namespace()
    ns.add_queue(QueueConfig("plain", EntityProperties(max_message_size=2000)))
    ns.add_queue(QueueConfig("parted", EntityProperties(enable_partitioning=True, partition_count=4)))
    ns.add_queue(QueueConfig("dedup", EntityProperties(requires_duplicate_detection=True)))
    ns.add_queue(QueueConfig("small", EntityProperties(max_messages=3, max_bytes=600)))
    return ns


def _payload(shape: str, n: int) -> tuple[bytes, int]:
    body = bytes([n % 251]) * (1 + n % 40)
    if shape == "bare":
        return Message(body).encode(), 0
    if shape == "id":
        return Message(body, message_id=f"m{n % 3}").encode(), 0  # duplicates now and then
    if shape == "ttl":
        return Message(body, ttl=60_000 + n).encode(), 0
    if shape == "key":
        return Message(body, message_annotations={Symbol("x-opt-partition-key"): f"k{n % 2}"}).encode(), 0
    if shape == "session":
        return Message(body, session_id=f"s{n % 2}").encode(), 0
    if shape == "ping":
        return Message(body, content_type="application/vnd.ms-servicebus-ping").encode(), 0
    if shape == "big":
        return Message(bytes(3000)).encode(), 0  # above plain's maximum
    if shape == "garbage":
        return b"\x00\x53\x73\xc0\x05\x02\xff", 0  # properties that cannot be decoded
    key = {Symbol("x-opt-partition-key"): f"k{n % 2}"}  # (one for the batch: read once, its messages share it)
    parts = [Message(body + bytes([i]), message_id=f"b{n}-{i}", message_annotations=key).encode() for i in range(2)]
    return Message(parts, body_type="data").encode(), BATCH_FORMAT


def _broker(runs: bool, bodies: bool = True) -> tuple[Connection, Callable[[list[Event]], None], ServiceBusHost]:
    """A broker's engine, its event handler and its host; ``runs=False``: the handler is
    handed runs of one delivery each (the reference); ``bodies=False``:
    every message is stored one at a time (no run of bodies for the entity)."""
    namespace = _namespace()
    if not bodies:
        namespace.body_sender = lambda target: None  # type: ignore[method-assign]
    host = ServiceBusHost(namespace, clock=lambda: NOW)
    server = Connection(ConnectionConfig(container_id="broker", on_excess_transfer="deliver"), server=True)
    handle = inprocess.accept(host, server, runs=runs)
    return server, handle, host


def _client_stream(plan: list[tuple[int, str, bool]]) -> tuple[bytes, bytes]:
    """The client's bytes: the handshake with one sender per queue, then the planned
    transfers (the broker's first grant covers a plan)."""
    client = Connection(ConnectionConfig(container_id="client"))
    server, handle, _ = _broker(runs=True)
    client.open()
    session = client.begin_session()
    links = [session.attach_sender(name, target=Target(address=name)) for name in QUEUES]
    out = bytearray()
    for _ in range(10):  # handshake, attaches and the broker's grants
        data = client.data_to_send()
        out += data
        handle(server.receive_data(data))
        client.receive_data(server.data_to_send())
    links[0].peer_max_message_size = 0  # a careless client: the broker refuses what is too big
    for n, (queue, shape, settled) in enumerate(plan):
        payload, message_format = _payload(shape, n)
        links[queue].send(payload, settled=settled, message_format=message_format)
    return bytes(out), client.data_to_send()


def _serve(
    handshake: bytes, stream: bytes, cuts: list[int], runs: bool, bodies: bool = True
) -> tuple[bytes, list[Any], list[int]]:
    server, handle, host = _broker(runs, bodies)
    handle(server.receive_data(handshake))
    server.data_to_send()
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    written = bytearray()
    sizes: list[int] = []
    for start, end in pairwise(points):
        events = server.receive_data(stream[start:end])
        sizes += [len(e.deliveries) for e in events if isinstance(e, DeliveriesReceived)]
        handle(events)
        written += server.data_to_send()
    stored = []
    for name in QUEUES:
        entity = host.namespace.receiver_source(name)
        fragments = getattr(entity, "fragments", None) or [entity]
        for fragment in fragments:
            stored.append(
                [
                    (m.sequence_number, m.enqueued_at, m.expires_at, m.envelope.encode(), m.envelope.session_id)
                    for m in fragment.store
                ]
            )
    return bytes(written), stored, sizes


plans = st.lists(
    st.tuples(st.integers(min_value=0, max_value=len(QUEUES) - 1), st.sampled_from(SHAPES), st.booleans()),
    min_size=1,
    max_size=40,
)


@settings(profiles.HEAVY, deadline=None)
@given(plan=plans, cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=6))
def test_runs_store_and_settle_as_one_delivery_at_a_time(plan: list[tuple[int, str, bool]], cuts: list[int]) -> None:
    handshake, stream = _client_stream(plan)
    by_runs = _serve(handshake, stream, cuts, runs=True)
    one_by_one = _serve(handshake, stream, cuts, runs=False, bodies=False)
    assert by_runs[0] == one_by_one[0]  # the same outcomes, dispositions and flows on the wire
    assert by_runs[1] == one_by_one[1]  # the same messages stored, with the same numbers and times
    assert by_runs[2] == one_by_one[2] and all(by_runs[2])  # the engine's runs (none empty), before the split
    assert _serve(handshake, stream, cuts, runs=True, bodies=False) == by_runs  # runs of bodies change nothing


def test_a_read_of_many_transfers_is_one_run_and_one_disposition_range() -> None:
    plan = [(0, "bare", False)] * 30
    handshake, stream = _client_stream(plan)
    server, handle, host = _broker(runs=True)
    handle(server.receive_data(handshake))
    server.data_to_send()
    events = server.receive_data(stream)  # all in one read
    runs = [e for e in events if isinstance(e, DeliveriesReceived)]
    assert [len(r.deliveries) for r in runs] == [30]
    handle(events)
    assert len(host.namespace.receiver_source("plain").store) == 30
    assert all(d.settled for d in runs[0].deliveries)
    dispositions = [p for _, p, _ in frames_in([server.data_to_send()]) if type(p).__name__ == "Disposition"]
    assert [(int(d.first), int(d.last), d.settled) for d in dispositions] == [(0, 29, True)]
