"""What the store writes for the messages stored since the last batch: each entity's store
hands the batch the messages it took since then as they are (nothing recorded per message,
nothing at all for one gone before the batch), those with consecutive sequence numbers that
share their fields as one ``B`` record (a batch transfer's: their head encoded once); the
changes of older messages with consecutive sequence numbers go as runs too (``V``: their
states, ``G``: gone). Whatever sends, locks, completions,
abandons, deferrals and commits come in whatever order, a restart finds exactly what the
namespace held; and a run record replays as the records of its messages one at a time would."""

from __future__ import annotations

import asyncio
import math
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig
from amqplink.broker.durable import Persistence
from amqplink.broker.durable.commit import STATE_CODES, GroupCommit, entity_key, messages_records
from amqplink.broker.durable.journal import Journal, StoreError, journal_files
from amqplink.broker.durable.records import (
    GONE,
    K_GONE,
    K_MESSAGE,
    K_RUN,
    K_STATE,
    K_STATE_RUN,
    MESSAGE,
    RUN,
    STATE,
    State,
    _one_run,
    _runs_records,
    delete_record,
    sequence_record,
    stored_message,
)
from amqplink.broker.namespace import MessageState, Namespace
from amqplink.broker.namespace.batches import read_batch
from amqplink.broker.namespace.entity import Entity
from amqplink.broker.namespace.envelope import Envelope, body_only, split_message
from amqplink.broker.namespace.store import StoredMessage
from amqplink.codec.types import Symbol
from amqplink.message import Message
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusMessageBatch
from tests import profiles
from tests.broker.nsutil import send
from tests.broker.test_durable_journal import as_if_crashed

CONFIG = NamespaceConfig(
    queues=(QueueConfig("q"), QueueConfig("p", EntityProperties(enable_partitioning=True, partition_count=2)))
)
NOW = 1_700_000_000.0

# -- records ---------------------------------------------------------------------------------


def _batch_envelopes(keys: str) -> list[Envelope]:
    """The messages of a Service Bus batch transfer, a partition key each from ``keys``: those
    with the same key as the one before share its annotations (the same dict, as the broker's
    batch reader makes them)."""
    batch = ServiceBusMessageBatch(1 << 20)
    for i, key in enumerate(keys):
        batch.add_message(ServiceBusMessage(b"x%d" % i, message_id=f"b{i}", partition_key=key))
    envelopes = read_batch(batch._payload())
    assert envelopes is not None
    return envelopes


BATCHED = _batch_envelopes("kkj")
ENVELOPES = [
    body_only(Message(b"a").encode()),
    body_only(Message(bytes(300)).encode()),
    split_message(Message(b"b", message_id="m", application_properties={"k": 1}).encode()),
    split_message(Message(b"c", ttl=5000, durable=True).encode()),
    *BATCHED,  # (the first two share their annotations, the third's differ)
    _batch_envelopes("k")[0],  # the same annotations as the first two, another dict
    split_message(Message(b"d", delivery_annotations={"x-da": 1}).encode()),  # the sender's delivery-annotations
    split_message(Message(b"e", delivery_annotations={"x-da": 2}).encode()),
]
STATES = list(MessageState)

messages = st.lists(
    st.one_of(
        st.none(),
        st.tuples(
            st.integers(0, 2),  # the gap to the previous sequence number, less one
            st.sampled_from(range(len(ENVELOPES))),
            st.sampled_from(STATES),
            st.integers(0, 2),  # delivery count
            st.booleans(),  # deferred
            st.sampled_from([10.0, 11.5]),  # enqueued at
            st.sampled_from([math.inf, 99.0]),  # expires at
            st.sampled_from([None, 50.0]),  # scheduled at
        ),
    ),
    max_size=30,
)


def _built(plan: list[Any]) -> list[StoredMessage | None]:
    out: list[StoredMessage | None] = []
    seq = 1 << 20
    for item in plan:
        if item is None:
            out.append(None)
            continue
        gap, envelope, state, count, deferred, enqueued, expires, scheduled = item
        seq += gap + 1
        msg = StoredMessage(seq, ENVELOPES[envelope], enqueued, expires, state, count, deferred)  # type: ignore[arg-type]
        msg.scheduled_at = scheduled
        out.append(msg)
    return out


def _one_at_a_time(entity: int, msgs: list[StoredMessage | None]) -> list[bytes]:
    """The general form: one ``M`` record per message, its payload the envelope's encoding."""
    out = []
    for m in msgs:
        if m is None:
            continue
        payload = m.envelope.encode()
        out += [MESSAGE.pack(K_MESSAGE, entity, m.sequence_number, *_fields(m), len(payload)), payload]
    return out


def _fields(m: StoredMessage) -> tuple[Any, ...]:
    at = math.nan if m.scheduled_at is None else m.scheduled_at
    return (STATE_CODES[m.state], m.delivery_count, m.deferred, m.enqueued_at, m.expires_at, at)


def _replayed(records: list[bytes]) -> State:
    state = State()
    state.apply(b"".join(records))
    return state


runs = st.lists(
    st.one_of(
        st.none(),
        st.tuples(
            st.sampled_from([0, 0, 0, 1]),  # mostly consecutive
            st.one_of(st.sampled_from(range(len(ENVELOPES))), st.sampled_from([4, 5])),  # (4, 5: one head)
            st.just(MessageState.AVAILABLE),
            st.just(0),
            st.just(False),
            st.sampled_from([10.0, 10.0, 11.5]),
            st.just(math.inf),
            st.just(None),
        ),
    ),
    max_size=30,
)
"""Mostly runs (what a batch transfer stores): stretches that :func:`_one_run` writes at once."""


@settings(deadline=None)
@given(plan=st.one_of(messages, runs))
def test_messages_records_replay_as_one_message_record_each(plan: list[Any]) -> None:
    msgs = _built(plan)
    records: list[bytes] = []
    messages_records(records, 7, msgs)
    assert _replayed(records) == _replayed(_one_at_a_time(7, msgs))
    one_by_one: list[bytes] = []
    _runs_records(one_by_one, 7, msgs)  # (the stretches written at once: exactly the same records)
    assert b"".join(records) == b"".join(one_by_one)


def test_a_stretch_of_a_batch_transfers_messages_is_written_at_once() -> None:
    shared = _batch_envelopes("k" * 5)
    msgs: list[StoredMessage | None] = [StoredMessage(seq, e, 10.0, math.inf) for seq, e in enumerate(shared, 5)]
    records: list[bytes] = []
    assert _one_run(records, 3, msgs)
    assert not _one_run([], 3, [*msgs[:2], StoredMessage(7, BATCHED[2], 10.0, math.inf)])  # (another head)
    assert not _one_run([], 3, msgs[:2] + msgs[3:])  # (not consecutive)
    assert [r[0] for r in records if len(r) == RUN.size] == [K_RUN]
    assert _replayed(records).messages[3] == {
        seq: (0, 0, 0, 10.0, math.inf, None, e.encode()) for seq, e in enumerate(shared, 5)
    }


def test_a_run_keeps_each_messages_delivery_annotations() -> None:
    """Messages stored together (one run's fields, no header nor message-annotations) whose
    sender's delivery-annotations differ: each record holds its own, read back after a restart."""
    envelopes = [split_message(Message(b"x", delivery_annotations={"x-da": i}).encode()) for i in range(3)]
    msgs: list[StoredMessage | None] = [StoredMessage(seq, e, 10.0, math.inf) for seq, e in enumerate(envelopes, 5)]
    records: list[bytes] = []
    messages_records(records, 3, msgs)
    replayed = _replayed(records).messages[3]
    back = [stored_message(seq, replayed[seq]) for seq in (5, 6, 7)]
    assert [m.envelope.delivery_annotations for m in back if m is not None] == [{Symbol("x-da"): i} for i in range(3)]


def test_a_run_of_messages_that_are_only_a_body_is_one_record() -> None:
    envelope = ENVELOPES[0]
    assert envelope is not None
    msgs: list[StoredMessage | None] = [StoredMessage(seq, envelope, 10.0, math.inf) for seq in (5, 6, 7, 9)]
    records: list[bytes] = []
    messages_records(records, 3, msgs)
    assert [r[0] for r in records if len(r) in (MESSAGE.size, RUN.size)] == [K_RUN, K_MESSAGE]  # 5-7, then 9
    assert RUN.unpack_from(records[0]) == (
        K_RUN,
        3,
        5,
        3,
        0,
        0,
        0,
        10.0,
        math.inf,
        pytest.approx(math.nan, nan_ok=True),
    )
    assert _replayed(records).messages == {
        3: {seq: (0, 0, 0, 10.0, math.inf, None, envelope.encode()) for seq in (5, 6, 7, 9)}
    }


def test_the_messages_of_a_batch_transfer_are_one_record_their_shared_head_encoded_once() -> None:
    msgs: list[StoredMessage | None] = [
        StoredMessage(seq, envelope, 10.0, math.inf) for seq, envelope in enumerate(BATCHED, 5)
    ]
    heads = []
    original = Envelope.head

    def head(self: Envelope) -> bytes:
        heads.append(self)
        return original(self)

    records: list[bytes] = []
    Envelope.head = head  # type: ignore[method-assign]
    try:
        messages_records(records, 3, msgs)
    finally:
        Envelope.head = original  # type: ignore[method-assign]
    assert heads == [BATCHED[0], BATCHED[2]]  # once per distinct annotations
    assert [r[0] for r in records if len(r) == RUN.size] == [K_RUN]
    assert RUN.unpack_from(records[0])[:4] == (K_RUN, 3, 5, 3)
    assert _replayed(records).messages == {
        3: {seq: (0, 0, 0, 10.0, math.inf, None, envelope.encode()) for seq, envelope in enumerate(BATCHED, 5)}
    }


BASE_FIELDS = (0, 0, MessageState.LOCKED, 1, False, 10.0, math.inf, None)
"""(gap, envelope, state, delivery count, deferred, enqueued at, expires at, scheduled at)"""
OTHER_FIELDS = (1, 1, MessageState.AVAILABLE, 2, True, 11.5, 99.0, 50.0)


@st.composite
def message_fields(draw: Any) -> tuple[Any, ...]:
    """:data:`BASE_FIELDS`, but for at most one field (a run holds messages equal in all but the gap)."""
    fields = list(BASE_FIELDS)
    which = draw(st.integers(-1, len(fields) - 1))
    if which >= 0:
        fields[which] = OTHER_FIELDS[which]
    return tuple(fields)


changes = st.lists(st.tuples(st.sampled_from(["gone", "changed", "stored"]), message_fields()), max_size=30)


@settings(deadline=None)
@given(plan=changes)
def test_the_changes_of_a_batch_replay_as_one_record_each(tmp_path_factory: Any, plan: list[Any]) -> None:
    """``GroupCommit``'s changes of messages some batch wrote (its runs of ``V`` and ``G``)
    against one ``U``, ``D`` or ``M`` record per change, on the same stored messages."""
    entity = 5
    msgs = [m for m in _built([fields for _, fields in plan]) if m is not None]
    commits = GroupCommit(Journal(tmp_path_factory.mktemp("j"), fsync=False))
    try:
        one_each: list[bytes] = []
        for (change, _), msg in zip(plan, msgs, strict=True):
            key = entity_key(entity) | msg.sequence_number
            if change == "gone":
                commits.delete(key)
                one_each.append(delete_record(entity, msg.sequence_number))
            elif change == "changed":
                commits.update(key, msg, False)
                one_each.append(STATE.pack(K_STATE, entity, msg.sequence_number, *_fields(msg)))
            else:
                commits.insert(key, msg)
                one_each += _one_at_a_time(entity, [msg])
        stored = _one_at_a_time(entity, [StoredMessage(m.sequence_number, m.envelope, 1.0, 2.0) for m in msgs])
        assert _replayed([*stored, *commits._take()]) == _replayed([*stored, *one_each])
    finally:
        commits.close_now()


def test_consecutive_changes_are_one_record_each_kind(tmp_path: Path) -> None:
    envelope = ENVELOPES[0]
    assert envelope is not None
    msgs = [StoredMessage(seq, envelope, 10.0, math.inf, MessageState.LOCKED, 1) for seq in range(1, 8)]
    commits = GroupCommit(Journal(tmp_path, fsync=False))
    try:
        for msg in msgs[:3]:
            commits.update(entity_key(2) | msg.sequence_number, msg, False)
        for msg in msgs[3:6]:
            commits.delete(entity_key(2) | msg.sequence_number)
        msgs[6].delivery_count = 2  # (its fields differ from the run's: a record of its own)
        commits.update(entity_key(2) | 7, msgs[6], False)
        records = commits._take()
    finally:
        commits.close_now()
    assert records == [
        RUN.pack(K_STATE_RUN, 2, 1, 3, 1, 1, False, 10.0, math.inf, math.nan),
        GONE.pack(K_GONE, 2, 4, 3),
        STATE.pack(K_STATE, 2, 7, 1, 2, False, 10.0, math.inf, math.nan),
    ]


def _journal_with_a_run(directory: Path) -> tuple[Journal, int]:
    """A journal of one ``M`` batch (written as before runs existed) and one with a run; the size after the first."""
    envelope = ENVELOPES[0]
    assert envelope is not None
    journal = Journal(directory, fsync=False)
    journal.append(_one_at_a_time(1, [StoredMessage(1, envelope, 10.0, math.inf)]))
    whole = journal.size
    run: list[bytes] = []
    messages_records(run, 1, [StoredMessage(seq, envelope, 10.0, math.inf) for seq in (2, 3, 4)])
    journal.append([*run, sequence_record(1, 5)])
    return journal, whole


def test_a_run_with_heads_torn_at_any_byte_is_dropped_with_its_batch(tmp_path: Path) -> None:
    """A batch transfer's messages (annotations, properties and body each) written as one run:
    a write of it cut at any byte reads back as the batch before it alone, and is cut off."""
    envelope = ENVELOPES[0]
    assert envelope is not None
    with closing(Journal(tmp_path / "whole", fsync=False)) as journal:
        journal.append(_one_at_a_time(1, [StoredMessage(1, envelope, 10.0, math.inf)]))
        whole = journal.size
        run: list[bytes] = []
        messages_records(run, 1, [StoredMessage(seq, e, 10.0, math.inf) for seq, e in enumerate(BATCHED, 2)])
        assert sum(1 for r in run if len(r) == RUN.size and r[0] == K_RUN) == 1
        journal.append([*run, sequence_record(1, 5)])
        ((_, path),) = journal_files(journal.directory)
    data = Path(path).read_bytes()
    with closing(Journal(tmp_path / "whole", fsync=False)) as again:
        assert {seq: fields[6] for seq, fields in again.state.messages[1].items()} == {
            1: envelope.encode(),
            **{seq: e.encode() for seq, e in enumerate(BATCHED, 2)},
        }
    for cut in range(whole, len(data)):
        directory = tmp_path / f"cut{cut}"
        directory.mkdir()
        (directory / Path(path).name).write_bytes(data[:cut])
        as_if_crashed(directory, whole, 1)  # (the run's batch written within the second before a crash)
        with closing(Journal(directory, fsync=False)) as torn:
            assert list(torn.state.messages[1]) == [1]
        assert (directory / Path(path).name).stat().st_size == whole


def test_old_message_records_and_runs_are_read_back_together(tmp_path: Path) -> None:
    journal, _ = _journal_with_a_run(tmp_path)
    journal.close()
    again = Journal(tmp_path, fsync=False)
    again.close()
    assert list(again.state.messages[1]) == [1, 2, 3, 4]
    assert again.state.next_sequence == {1: 5}


@pytest.mark.parametrize("cut", [1, 4, 9])
def test_a_torn_run_is_dropped_with_its_batch(tmp_path: Path, cut: int) -> None:
    journal, whole = _journal_with_a_run(tmp_path)
    journal.close()
    as_if_crashed(tmp_path, whole, 1)
    ((_, path),) = journal_files(str(tmp_path))
    with open(path, "r+b") as f:
        f.truncate(Path(path).stat().st_size - cut)
    again = Journal(tmp_path, fsync=False)
    again.close()
    assert list(again.state.messages[1]) == [1]
    assert Path(path).stat().st_size == whole


def test_a_run_whose_messages_run_past_its_batch_is_refused(tmp_path: Path) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append([RUN.pack(K_RUN, 1, 1, 2, 0, 0, 0, 1.0, 2.0, math.nan), (5).to_bytes(4, "big") * 2, b"12345"])
    journal.close()
    with pytest.raises(StoreError, match="runs past the batch's end"):
        Journal(tmp_path, fsync=False)


# -- the namespace's stores ------------------------------------------------------------------

steps = st.lists(
    st.tuples(
        st.sampled_from(["send", "send", "lock", "complete", "abandon", "defer", "take", "commit"]),
        st.sampled_from(["q", "p"]),
        st.integers(0, 5),
    ),
    max_size=40,
)


def _kept(namespace: Namespace) -> dict[str, list[tuple[int, bytes, int, bool]]]:
    """Each queue's messages as a restart would find them (a lock does not survive)."""
    kept = {}
    for name in ("q", "p"):
        entity = namespace.receiver_source(name)
        assert isinstance(entity, Entity) or hasattr(entity, "fragments")
        kept[name] = [
            (m.sequence_number, m.envelope.encode(), m.delivery_count, m.deferred)
            for m in entity.peek(0, 1000, NOW)  # type: ignore[union-attr]
        ]
    return kept


async def _run(directory: str, plan: list[tuple[str, str, int]]) -> None:
    persistence = Persistence(directory, fsync=False)
    namespace = Namespace(CONFIG)
    persistence.attach(namespace)
    locked: dict[str, list[Any]] = {"q": [], "p": []}
    sent = 0
    for action, name, n in plan:
        entity: Any = namespace.receiver_source(name)
        if action == "send":
            for _ in range(n + 1):
                sent += 1
                send(namespace, name, NOW, body=b"%d" % sent)
        elif action == "lock":
            locked[name] += entity.receive_many(NOW, n + 1)
        elif action == "take":
            entity.receive_many(NOW, n + 1, lock=False)
        elif action == "commit":
            done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
            persistence.after_commit(done.set_result)
            assert await asyncio.wait_for(done, 10) is None
        elif locked[name]:
            msg = locked[name].pop(n % len(locked[name]))
            getattr(entity, action)(msg.lock_token, NOW)
    before = _kept(namespace)
    await persistence.close()
    again = Persistence(directory, fsync=False)
    recovered = Namespace(CONFIG)
    again.attach(recovered)
    await again.close()
    assert _kept(recovered) == before


@pytest.mark.parametrize("compact", [False, True])
@settings(profiles.HEAVY, deadline=None)
@given(plan=steps)
def test_a_restart_finds_what_the_namespace_held(compact: bool, plan: list[tuple[str, str, int]]) -> None:
    original = GroupCommit._compaction_due
    if compact:  # every batch a compaction: the whole state rewritten from memory
        GroupCommit._compaction_due = lambda self: True  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as directory:
            asyncio.run(_run(directory, plan))
    finally:
        GroupCommit._compaction_due = original  # type: ignore[method-assign]
