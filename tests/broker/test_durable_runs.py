"""With a store, what one commit covers is settled a run at a time: a producer link's run of
stored transfers waits as one entry (``_settle_run_after_commit``), a consumer's completed
range is completed together (``Entity.complete_all``) and settled as runs between its
refusals. Each must answer exactly as one transfer or one outcome at a time does, and
only once the commit is written: nothing is settled before, a failed write refuses what
it held, and a restart finds what was acknowledged.

The same client bytes go into two durable brokers, one as it runs and one taking each
delivery as a run of one and each outcome on its own (``_on_outcome``); between the chunks the test checks that no
settlement left before the commit, then lets the commit finish.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.durable import Persistence
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.entity import Entity
from amqplink.broker.sbserver import ServiceBusHost
from amqplink.codec.types import Symbol
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import Event
from amqplink.engine.link import RCV_FIRST, RCV_SECOND, SND_UNSETTLED
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Disposition, Rejected, Source, Target
from interop import inprocess
from tests import profiles
from tests.broker.nsutil import commit_outcome as _committed
from tests.broker.nsutil import disposition_rows, per_delivery_outcomes
from tests.broker.test_send_runs import NOW, QUEUES, _client_stream, _namespace, plans

from ..engine.pairs import performatives, received_in

INTERNAL = Symbol("amqp:internal-error")


def _failing(persistence: Persistence) -> None:
    """Every later write fails (a full disk: the journal's seam)."""
    persistence.commits.journal.space = 0


def _broker(
    persistence: Persistence, namespace: Namespace, runs: bool
) -> tuple[Connection, Callable[[list[Event]], None]]:
    host = ServiceBusHost(namespace, clock=lambda: NOW, persistence=persistence)
    server = Connection(ConnectionConfig(container_id="broker", on_excess_transfer="deliver"), server=True)
    handle = inprocess.accept(host, server, runs=runs)
    return server, handle


def _stored(namespace: Namespace) -> list[Any]:
    stored = []
    for name in QUEUES:
        entity = namespace.receiver_source(name)
        for fragment in getattr(entity, "fragments", None) or [entity]:
            stored.append(
                [(m.sequence_number, m.enqueued_at, m.expires_at, m.envelope.encode()) for m in fragment.store]
            )
    return stored


def _answers(chunks: list[bytes]) -> list[Any]:
    """The broker's dispositions as receiver (its answers to the client's transfers)."""
    return [d for d in performatives(chunks, Disposition) if d.role]


async def _serve_sends(
    directory: str, handshake: bytes, stream: bytes, cuts: list[int], runs: bool, fail: bool
) -> tuple[bytes, list[Any], list[Any] | None]:
    """The broker's bytes after each commit, what it stores, and what a restart finds (None
    when the writes failed)."""
    persistence = Persistence(directory, fsync=False)
    namespace = _namespace()
    persistence.attach(namespace)
    server, handle = _broker(persistence, namespace, runs)
    handle(server.receive_data(handshake))
    server.data_to_send()
    assert await _committed(persistence) is None
    if fail:
        _failing(persistence)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    written = bytearray()
    for start, end in pairwise(points):
        handle(server.receive_data(stream[start:end]))
        before = server.data_to_send()
        assert _answers([before]) == [], "a transfer was settled before its commit was written"
        error = await _committed(persistence)
        assert error is None or fail  # (with nothing to write, nothing fails)
        written += before + server.data_to_send()
    stored = _stored(namespace)
    if fail:
        persistence.commits.close_now()
        return bytes(written), stored, None
    await persistence.close()
    again = Persistence(directory, fsync=False)
    recovered = _namespace()
    again.attach(recovered)
    await again.close()
    return bytes(written), stored, _stored(recovered)


def _sends(plan: list[tuple[int, str, bool]], cuts: list[int], runs: bool, fail: bool) -> Any:
    handshake, stream = _client_stream(plan)
    with tempfile.TemporaryDirectory() as directory:
        return asyncio.run(_serve_sends(directory, handshake, stream, cuts, runs, fail))


@settings(profiles.HEAVY, deadline=None)
@given(
    plan=plans,
    cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=6),
    fail=st.booleans(),
)
def test_a_run_of_sends_is_settled_after_its_commit_as_one_at_a_time(
    plan: list[tuple[int, str, bool]], cuts: list[int], fail: bool
) -> None:
    by_runs = _sends(plan, cuts, runs=True, fail=fail)
    one_by_one = _sends(plan, cuts, runs=False, fail=fail)
    assert by_runs == one_by_one  # the same answers, messages and state on disk
    wire, stored, recovered = by_runs
    if fail:  # what the write held is refused, and taken back; what was refused anyway keeps its refusal
        accepted = [d for d in _answers([wire]) if not isinstance(d.state, Rejected)]
        pings = sum(1 for _, shape, _ in plan if shape == "ping")  # (stores nothing: alone, nothing fails)
        assert sum(1 + (int(d.last) - int(d.first) if d.last is not None else 0) for d in accepted) <= pings
        assert stored == [[] for _ in stored]
    else:
        assert recovered == stored  # what was acknowledged is on disk
    unsettled = sum(1 for _, _, settled in plan if not settled)
    answered = sum(1 + (int(d.last) - int(d.first) if d.last is not None else 0) for d in _answers([wire]))
    assert answered == unsettled  # each unsettled transfer answered once


def test_a_run_refused_by_a_failed_write_keeps_the_refusals_of_its_own() -> None:
    plan = [(0, "bare", False), (0, "big", False), (0, "bare", False), (0, "bare", False)]
    wire, _, _ = _sends(plan, [], runs=True, fail=True)
    answers = [
        (int(d.first), None if d.last is None else int(d.last), d.state.error.condition) for d in _answers([wire])
    ]
    too_big = Symbol("amqp:link:message-size-exceeded")
    assert answers == [(0, None, INTERNAL), (1, None, too_big), (2, 3, INTERNAL)]


# -- a consumer's completed range ------------------------------------------------------------


async def _consume(
    directory: str, ranged: bool, settles_first: bool, count: int, lost: list[int], chosen: list[int], fail: bool
) -> tuple[list[Any], list[Any], list[Any], int]:
    """A peek-lock consumer takes ``count`` messages; the locks of ``lost`` go; it completes
    ``chosen`` in one go (``fail``: the commit of the completions fails). The broker's
    answers, what is left, what a restart finds, and how many outcomes went one at a time."""
    persistence = Persistence(directory, fsync=False)
    namespace = Namespace()
    persistence.attach(namespace)
    host = ServiceBusHost(namespace, clock=lambda: NOW, persistence=persistence)
    server = Connection(ConnectionConfig(container_id="broker"), server=True)
    handler = inprocess.accept(host, server)
    client = Connection(ConnectionConfig(container_id="consumer"))
    target = namespace.sender_target("q")
    for i in range(count):
        namespace.send(target, Message(f"m{i}".encode()).encode(), NOW)
    assert await _committed(persistence) is None

    def pump() -> tuple[list[Any], list[bytes]]:
        got: list[Any] = []
        wire: list[bytes] = []
        while True:
            c2s = client.data_to_send()
            if c2s:
                handler(server.receive_data(c2s))
            s2c = server.data_to_send()
            if not c2s and not s2c:
                return got, wire
            if s2c:
                wire.append(s2c)
                got += client.receive_data(s2c)

    client.open()
    receiver = client.begin_session().attach_receiver(
        "r", source=Source(address="q"), target=Target(address="r"), snd_settle_mode=SND_UNSETTLED,
        rcv_settle_mode=RCV_FIRST if settles_first else RCV_SECOND,
    )  # fmt: skip
    pump()
    receiver.flow(count)
    deliveries = received_in(pump()[0])
    assert len(deliveries) == count
    entity: Entity = namespace.receiver_source("q")
    for i in lost:
        entity.complete(bytes(deliveries[i].tag), NOW)
    assert await _committed(persistence) is None
    if fail:
        _failing(persistence)
    with per_delivery_outcomes(each=not ranged) as one_at_a_time:
        for i in chosen:
            receiver.settle(deliveries[i], Accepted())
        _, before = pump()
    single = len(one_at_a_time)
    assert performatives(before, Disposition) == [], "an outcome was settled before its commit was written"
    assert (await _committed(persistence) is not None) == fail
    _, after = pump()
    frames = disposition_rows(performatives(after, Disposition))
    left = sorted((m.sequence_number, m.state.value) for m in entity.store)
    await persistence.close()
    again = Persistence(directory, fsync=False)
    recovered = Namespace()
    again.attach(recovered)
    on_disk = sorted(m.sequence_number for m in recovered.receiver_source("q").store)
    await again.close()
    return frames, left, on_disk, single


def _consumed(
    ranged: bool, settles_first: bool, count: int, lost: list[int], chosen: list[int], fail: bool = False
) -> Any:
    with tempfile.TemporaryDirectory() as directory:
        return asyncio.run(_consume(directory, ranged, settles_first, count, lost, chosen, fail))


@pytest.mark.parametrize("settles_first", [False, True])
@settings(profiles.HEAVY, deadline=None)
@given(data=st.data(), count=st.integers(min_value=1, max_value=30))
def test_a_completed_range_is_settled_after_its_commit_as_one_outcome_at_a_time(
    settles_first: bool, data: st.DataObject, count: int
) -> None:
    lost = data.draw(st.lists(st.sampled_from(range(count)), unique=True))
    chosen = data.draw(st.permutations(range(count)))[: data.draw(st.integers(min_value=1, max_value=count))]
    frames, left, on_disk, single = _consumed(True, settles_first, count, lost, chosen)
    reference = _consumed(False, settles_first, count, lost, chosen)
    assert (frames, left, on_disk) == reference[:3]
    assert single == 0 and reference[3] == len(chosen)  # the range went together
    completed = set(chosen) - set(lost)
    assert on_disk == [m for m, _ in left]  # a restart finds what memory holds
    assert len(on_disk) == count - len(set(lost) | completed)
    if settles_first:
        assert frames == []  # the consumer settled: nothing to answer


def test_lost_locks_split_a_durable_completed_range_into_runs() -> None:
    frames, left, on_disk, single = _consumed(True, False, 10, [3, 4, 8], list(range(10)))
    lock_lost = Symbol("com.microsoft:message-lock-lost")
    assert frames == [
        (0, 2, True, "Accepted", None),
        (3, None, True, "Rejected", lock_lost),
        (4, None, True, "Rejected", lock_lost),
        (5, 7, True, "Accepted", None),
        (8, None, True, "Rejected", lock_lost),
        (9, None, True, "Accepted", None),
    ]
    assert left == [] and on_disk == [] and single == 0


def test_a_completed_range_whose_commit_fails_is_refused_and_comes_back_after_a_restart() -> None:
    frames, left, on_disk, _ = _consumed(True, False, 10, [3], list(range(10)), fail=True)
    assert frames == _consumed(False, False, 10, [3], list(range(10)), fail=True)[0]
    assert frames == [
        (0, 2, True, "Rejected", INTERNAL),  # not stored: refused as such
        (3, None, True, "Rejected", Symbol("com.microsoft:message-lock-lost")),
        (4, 9, True, "Rejected", INTERNAL),
    ]
    # The refused completions were taken back: the messages are available again, in memory and on disk.
    assert left == [(m, "available") for m in range(1, 11) if m != 4]
    assert on_disk == [m for m in range(1, 11) if m != 4]
