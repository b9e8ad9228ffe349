"""The durable store read back: what a namespace kept in its data directory is there after
a restart (sequence numbers, schedules, deferrals, dead letters, session state,
duplicate-detection ids, locks turned back into deliveries with delivery-count + 1)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from amqplink.aio import connect
from amqplink.broker import Broker
from amqplink.broker.config import (
    EntityProperties,
    NamespaceConfig,
    QueueConfig,
    SubscriptionConfig,
    TopicConfig,
)
from amqplink.broker.durable import Persistence, StoreError, commit, journal_files
from amqplink.broker.durable.commit import GroupCommit
from amqplink.broker.namespace import MessageState, Namespace
from amqplink.cli import main
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted
from tests.broker.nsutil import committed, delivered, send

CONFIG = NamespaceConfig(
    queues=(
        QueueConfig("q", EntityProperties(requires_duplicate_detection=True, duplicate_detection_window=600)),
        QueueConfig("s", EntityProperties(requires_session=True)),
    ),
    topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("a"),)),),
)


REAL_COMPACTION_DUE = GroupCommit._compaction_due


@pytest.fixture(autouse=True, params=["append", "compact-every-batch"])
def journal_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: batches appended, and every batch a compaction (the whole live state
    rewritten from memory), so that what a compaction writes is checked as fully as a journal."""
    if request.param == "compact-every-batch":
        monkeypatch.setattr(GroupCommit, "_compaction_due", lambda self: True)
    return str(request.param)


async def opened(directory: Path, config: NamespaceConfig | None = CONFIG) -> tuple[Persistence, Namespace]:
    persistence = Persistence(directory)
    namespace = Namespace(config)
    persistence.attach(namespace)
    return persistence, namespace


async def restart(persistence: Persistence, directory: Path, config: NamespaceConfig | None = CONFIG) -> Any:
    await committed(persistence)
    await persistence.close()
    return await opened(directory, config)


async def test_messages_settlements_and_sequence_numbers_survive(tmp_path: Path) -> None:
    now = time.time()
    store, ns = await opened(tmp_path)
    q = ns.receiver_source("q")
    for i in range(5):
        send(ns, "q", now, body=b"%d" % i, message_id=f"m{i}")
    first = q.receive(now)
    assert first is not None and first.sequence_number == 1
    assert first.lock_token is not None
    q.complete(first.lock_token, now)
    locked = q.receive(now)  # seq 2: locked when the broker goes away
    assert locked is not None
    assert Message.decode(q.encode(locked)).header.delivery_count == 0  # type: ignore[union-attr]
    gone = q.receive(now, lock=False)  # seq 3: received and deleted
    assert gone is not None and gone.sequence_number == 3
    store, ns = await restart(store, tmp_path)
    q = ns.receiver_source("q")
    assert [m.sequence_number for m in q.peek(1, 100, now)] == [2, 4, 5]
    again = q.receive(now)
    assert again is not None and again.sequence_number == 2
    # The lock did not survive, the delivery it was taken for counts: delivery-count + 1.
    assert delivered(q, again).header.delivery_count == 1  # type: ignore[union-attr]
    assert again.delivery_count == 2
    send(ns, "q", now, body=b"new", message_id="m-new")
    assert max(m.sequence_number for m in q.peek(1, 100, now)) == 6
    await store.close()


async def test_sequence_numbers_keep_growing_after_everything_is_completed(tmp_path: Path) -> None:
    now = time.time()
    store, ns = await opened(tmp_path, None)  # auto-created queues come back too
    send(ns, "made-on-use", now)
    send(ns, "made-on-use", now)
    q = ns.receiver_source("made-on-use")
    while q.receive(now, lock=False) is not None:
        pass
    store, ns = await restart(store, tmp_path, None)
    store, ns = await restart(store, tmp_path, None)  # (a compaction in between writes the number too)
    assert "made-on-use" in ns.queues
    send(ns, "made-on-use", now)
    assert [m.sequence_number for m in ns.receiver_source("made-on-use").peek(1, 10, now)] == [3]
    await store.close()


async def test_duplicate_detection_ids_survive_within_the_window(tmp_path: Path) -> None:
    now = time.time()
    store, ns = await opened(tmp_path)
    send(ns, "q", now, message_id="once")
    store, ns = await restart(store, tmp_path)
    send(ns, "q", now + 1, message_id="once")
    send(ns, "q", now + 1, message_id="twice")
    assert [m.envelope.message_id for m in ns.receiver_source("q").peek(1, 10, now + 1)] == ["once", "twice"]
    await store.close()


async def test_scheduled_deferred_and_dead_lettered_messages_survive(tmp_path: Path) -> None:
    now = time.time()
    store, ns = await opened(tmp_path)
    q = ns.receiver_source("q")
    send(ns, "q", now, body=b"defer me", message_id="d")
    send(ns, "q", now, body=b"dead-letter me", message_id="x")
    scheduled = ns.schedule(q, ns.unpack(Message(b"later").encode(), 0, 1 << 20)[0], now + 60, now)
    t_envelope = ns.unpack(Message(b"t-later").encode(), 0, 1 << 20)[0]
    ns.schedule(ns.sender_target("t"), t_envelope, now + 60, now)
    topic_scheduled = ns.schedule(ns.sender_target("t"), t_envelope, now + 60, now)  # same batch
    d = q.receive(now)
    x = q.receive(now)
    assert d is not None and d.lock_token is not None and x is not None and x.lock_token is not None
    q.defer(d.lock_token, now, {"why": "later"})
    q.dead_letter(x.lock_token, now, "Poisoned", "bad input")
    store, ns = await restart(store, tmp_path)
    q = ns.receiver_source("q")
    assert q.store.get(scheduled) is not None and q.store.get(scheduled).state is MessageState.SCHEDULED  # type: ignore[union-attr]
    assert q.receive(now) is None  # nothing active: one deferred, one scheduled
    (back,) = q.receive_deferred([d.sequence_number], now)
    assert delivered(q, back).body == b"defer me"
    assert delivered(q, back).message_annotations.get("why") == "later"  # type: ignore[union-attr]
    dlq = ns.receiver_source("q/$DeadLetterQueue")
    dead = dlq.receive(now, lock=False)
    assert dead is not None
    assert delivered(dlq, dead).application_properties == {
        "DeadLetterReason": "Poisoned",
        "DeadLetterErrorDescription": "bad input",
    }
    ns.tick(now + 61)
    due = q.receive(now + 61, lock=False)
    assert due is not None and due.sequence_number == scheduled
    sub = ns.receiver_source("t/Subscriptions/a")
    t_due = sub.receive(now + 61, lock=False)
    assert t_due is not None and delivered(sub, t_due).body == b"t-later"
    assert sub.receive(now + 61, lock=False) is not None
    store, ns = await restart(store, tmp_path)
    assert ns.topics["t"]._scheduled == {}  # the delivered schedule is gone from disk too
    assert ns.schedule(ns.sender_target("t"), t_due.envelope, now + 60, now) > topic_scheduled
    await store.close()


async def test_session_state_survives(tmp_path: Path) -> None:
    store, ns = await opened(tmp_path)
    s = ns.receiver_source("s")
    s.sessions.set_state("alpha", b"state-1")
    s.sessions.set_state("beta", b"state-2")
    s.sessions.set_state("beta", None)
    store, ns = await restart(store, tmp_path)
    assert ns.receiver_source("s").sessions.state == {"alpha": b"state-1"}
    await store.close()


async def test_a_message_stored_and_completed_in_one_batch_is_never_written(tmp_path: Path) -> None:
    now = time.time()
    store, ns = await opened(tmp_path)
    q = ns.receiver_source("q")
    send(ns, "q", now, message_id="fleeting")
    m = q.receive(now)
    assert m is not None and m.lock_token is not None
    q.complete(m.lock_token, now)
    assert store.commits.ops == {}  # coalesced away before any write
    store, ns = await restart(store, tmp_path)
    assert ns.receiver_source("q").peek(1, 10, now) == []
    send(ns, "q", now, message_id="next")
    assert ns.receiver_source("q").peek(1, 10, now)[0].sequence_number == 2
    await store.close()


def test_a_second_broker_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    first = Persistence(tmp_path)
    try:
        with pytest.raises(StoreError, match="in use by another broker"):
            Persistence(tmp_path)
    finally:
        first.commits.close_now()
    Persistence(tmp_path).commits.close_now()  # free again once the first is closed


def test_a_damaged_store_file_is_refused_naming_it(tmp_path: Path) -> None:
    Persistence(tmp_path).commits.close_now()
    ((_, path),) = journal_files(str(tmp_path))
    Path(path).write_bytes(b"not a database" * 1000)
    with pytest.raises(StoreError, match=f"{Path(path).name}.*move the directory away"):
        Persistence(tmp_path)


class HeldWriter:
    """Holds the store's writer thread inside each commit until released."""

    def __init__(self, broker: Broker) -> None:
        assert broker.servicebus is not None and broker.servicebus.persistence is not None
        journal = broker.servicebus.persistence.commits.journal
        self._append, self._compact = journal.append, journal.compact
        journal.append = lambda records: self._held(self._append, records)  # type: ignore[method-assign]
        journal.compact = lambda records: self._held(self._compact, records)  # type: ignore[method-assign]
        self.entered = threading.Event()
        self.gate = threading.Event()

    def _held(self, write: Any, records: Any) -> None:
        self.entered.set()
        self.gate.wait(30)
        write(records)

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 30)

    def hold(self) -> None:
        self.entered.clear()
        self.gate.clear()


async def test_transfers_and_dispositions_are_settled_only_after_their_commit(tmp_path: Path) -> None:
    async with Broker(servicebus=True, data_dir=tmp_path) as broker:
        writer = HeldWriter(broker)
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            writer.gate.set()
            assert isinstance(await sender.send(Message(b"x"), timeout=10), Accepted)
            writer.hold()
            second = await sender.send_nowait(Message(b"y"))
            await writer.wait_entered()
            # A round trip the broker answers after reading the transfer: had it settled the
            # transfer before writing it, the disposition would have come first.
            await conn.create_sender("q")
            assert not second.done()
            writer.gate.set()
            assert isinstance(await asyncio.wait_for(second, 10), Accepted)
            receiver = await conn.create_receiver("q", prefetch=2)
            got = await receiver.receive(2, timeout=10)
            writer.hold()
            completing = asyncio.ensure_future(receiver.accept(*got))
            await writer.wait_entered()
            await conn.create_sender("q")
            assert not completing.done()
            writer.gate.set()
            await asyncio.wait_for(completing, 10)
            # A $management reply waits for the commits before it (here: a send's).
            requests = await conn.create_sender("q/$management")
            replies = await conn.create_receiver("q/$management", prefetch=10)
            writer.hold()
            sent = await sender.send_nowait(Message(b"z"))
            await writer.wait_entered()
            app = {"operation": "com.microsoft:peek-message"}
            body = {"from-sequence-number": 1, "message-count": 1}
            await requests.send_nowait(
                Message(body, application_properties=app, message_id="p", reply_to="q/$management")
            )
            await conn.create_sender("q")
            assert replies.buffered == 0 and not sent.done()
            writer.gate.set()
            (reply,) = await replies.receive(1, timeout=10)
            assert reply.application_properties["statusCode"] == 200  # type: ignore[index]
            assert isinstance(await asyncio.wait_for(sent, 10), Accepted)
        finally:
            writer.gate.set()
            await conn.close()


PARTITIONED = NamespaceConfig(
    queues=(
        QueueConfig(
            "pq",
            EntityProperties(
                enable_partitioning=True,
                partition_count=4,
                requires_duplicate_detection=True,
                duplicate_detection_window=600,
            ),
        ),
        QueueConfig("ps", EntityProperties(enable_partitioning=True, partition_count=4, requires_session=True)),
    ),
)


async def test_a_partitioned_entity_keeps_each_fragment_across_a_restart(tmp_path: Path) -> None:
    now = time.time()
    store, ns = await opened(tmp_path, PARTITIONED)
    for i in range(8):
        send(ns, "pq", now, body=b"%d" % i, message_id=f"m{i}", partition_key=f"k{i}")
    q = ns.receiver_source("pq")
    before = sorted(m.sequence_number for m in q.store)
    assert len({seq >> 48 for seq in before}) > 1  # spread over several fragments
    taken = q.receive(now)
    assert taken is not None and taken.lock_token is not None
    q.complete(taken.lock_token, now)
    ns.receiver_source("ps").sessions.set_state("alpha", b"state-a")
    store, ns = await restart(store, tmp_path, PARTITIONED)
    q = ns.receiver_source("pq")
    # Every message but the completed one is back, in its fragment, under its number.
    assert sorted(m.sequence_number for m in q.store) == [s for s in before if s != taken.sequence_number]
    for fragment_index, fragment in enumerate(q.fragments):  # type: ignore[attr-defined]
        assert all(m.sequence_number >> 48 == fragment_index for m in fragment.store)
    # Duplicate detection per fragment remembers the ids it saw.
    send(ns, "pq", now + 1, message_id="m3", partition_key="k3")
    assert len(q.store) == 7
    # New numbers keep the fragment bits and grow past the stored ones.
    send(ns, "pq", now + 1, message_id="new", partition_key="k0")
    newest = max(q.store, key=lambda m: m.sequence_number & ((1 << 48) - 1))
    assert newest.envelope.message_id == "new"
    assert ns.receiver_source("ps").sessions.state["alpha"] == b"state-a"
    await store.close()


async def test_the_journal_stays_small_while_messages_come_and_go(tmp_path: Path) -> None:
    now = time.time()
    persistence = Persistence(tmp_path, fsync=False, compact_min_bytes=256 << 10)
    ns = Namespace(CONFIG)
    persistence.attach(ns)
    q = ns.receiver_source("q")
    for round_ in range(40):
        for i in range(50):
            send(ns, "q", now, body=bytes(1000), message_id=f"r{round_}-{i}")
        await committed(persistence)
        for _ in range(50 if round_ < 39 else 49):  # one message stays
            m = q.receive(now)
            assert m is not None and m.lock_token is not None
            q.complete(m.lock_token, now)
        await committed(persistence)
    journal = persistence.commits.journal
    assert journal.number > 2, "2 MB went through a journal compacted from 256 KiB on"
    assert journal.size < 512 << 10
    persistence, ns = await restart(persistence, tmp_path)
    (left,) = ns.receiver_source("q").peek(1, 10, now)
    assert left.envelope.message_id == "r39-49"
    await persistence.close()


async def test_broker_store_shows_what_a_data_dir_holds_while_the_broker_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = time.time()
    store, ns = await opened(tmp_path)
    for i in range(3):
        send(ns, "q", now, body=b"12345", message_id=f"m{i}")
    locked = ns.receiver_source("q").receive(now)
    assert locked is not None
    ns.receiver_source("s").sessions.set_state("alpha", b"state")
    await committed(store)
    # (in a thread: the command runs its own event loop; the broker still holds the directory)
    assert await asyncio.to_thread(main, ["broker-store", str(tmp_path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["entities"]["q"]["messages"] == 3
    assert shown["entities"]["q"]["available"] == 2 and shown["entities"]["q"]["locked"] == 1
    assert shown["entities"]["s"]["session_states"] == 1
    assert shown["duplicate_ids"] == 3
    assert shown["defined"] == {"queues": ["q", "s"], "topics": {"t": ["a"]}}
    await store.close()
    (tmp_path / "empty").mkdir()
    assert await asyncio.to_thread(main, ["broker-store", str(tmp_path / "empty")]) == 2
    assert "holds no amqplink journal" in capsys.readouterr().err


async def test_a_compaction_keeps_as_many_duplicate_ids_as_the_detector_remembers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(GroupCommit, "_compaction_due", lambda self: True)
    now = time.time()
    store, ns = await opened(tmp_path)
    detector = ns.queues["q"].duplicates
    assert detector is not None
    detector.limit = 3
    for i in range(5):
        send(ns, "q", now + i, message_id=f"id{i}")
    store, ns = await restart(store, tmp_path)  # (its last batch a compaction)
    for i in range(5):  # the two oldest were forgotten: sent again, they are new messages
        send(ns, "q", now + 10, message_id=f"id{i}")
    ids = [m.envelope.message_id for m in ns.receiver_source("q").peek(1, 20, now + 10)]
    assert ids == [f"id{i}" for i in range(5)] + ["id0", "id1"]
    await store.close()


async def test_a_send_refused_by_a_full_disk_has_no_effect_and_the_next_one_that_fits_is_written(
    tmp_path: Path,
) -> None:
    now = time.time()
    store, ns = await opened(tmp_path)
    journal = store.commits.journal
    journal.space = 0  # the disk is full
    send(ns, "q", now, message_id="refused")
    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    store.after_commit(done.set_result)
    assert isinstance(await asyncio.wait_for(done, 10), OSError)  # its sender is told
    assert ns.receiver_source("q").peek(1, 10, now) == []  # taken back in memory ...
    journal.space = 4096  # some room again: no more than the next batch needs
    send(ns, "q", now, message_id="refused")  # (its duplicate id was forgotten with it)
    await committed(store)
    store, ns = await restart(store, tmp_path)
    ids = [m.envelope.message_id for m in ns.receiver_source("q").peek(1, 10, now)]
    assert ids == ["refused"]  # ... and on disk: only the retry
    await store.close()


async def test_batches_are_handed_over_while_one_is_written_and_refused_behind_a_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(GroupCommit, "_compaction_due", REAL_COMPACTION_DUE)  # (the first batches append)
    now = time.time()
    store, ns = await opened(tmp_path)
    await committed(store)
    commits = store.commits
    journal = commits.journal
    real_append = journal.append
    entered, gate = threading.Event(), threading.Event()
    appended: list[int] = []

    def first_fails(records: Any) -> None:
        appended.append(len(records))
        if len(appended) == 1:
            entered.set()
            gate.wait(30)
            raise OSError(28, "No space left on device")
        real_append(records)

    monkeypatch.setattr(journal, "append", first_fails)
    outcomes: list[asyncio.Future[BaseException | None]] = []

    def batch(message_id: str) -> None:
        send(ns, "q", now, message_id=message_id)
        outcomes.append(asyncio.get_running_loop().create_future())
        store.after_commit(outcomes[-1].set_result)

    batch("m1")
    assert await asyncio.to_thread(entered.wait, 30)
    taken = commits.taken
    batch("m2")
    for _ in range(100):  # a few loop turns: the batch goes to the writer's queue at once
        if commits.taken != taken:
            break
        await asyncio.sleep(0)
    assert commits.taken == taken + 1, "a batch waited for the write in progress to be handed over"
    gate.set()
    assert isinstance(await asyncio.wait_for(outcomes[0], 10), OSError)
    # m2's batch followed the failed one: appended, it would come after a gap; it is refused.
    assert isinstance(await asyncio.wait_for(outcomes[1], 10), OSError)
    assert len(appended) == 1
    # Both were taken back: in memory as on disk, neither is there.
    assert ns.receiver_source("q").peek(1, 10, now) == []
    batch("m3")  # the next batch is appended after the last one written
    assert await asyncio.wait_for(outcomes[2], 10) is None
    store, ns = await restart(store, tmp_path)
    ids = [m.envelope.message_id for m in ns.receiver_source("q").peek(1, 10, now)]
    assert ids == ["m3"]
    await store.close()


async def backlog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, now: float) -> tuple[Persistence, Namespace]:
    """A store with the real compaction rule, measuring the live state at every batch, and a
    backlog built up in queue ``q``: 300 messages of 1 KB, all of it live."""
    monkeypatch.setattr(GroupCommit, "_compaction_due", REAL_COMPACTION_DUE)  # (whatever the fixture set)
    monkeypatch.setattr(commit, "LIVE_CHECK_BYTES", 0)
    persistence = Persistence(tmp_path, fsync=False, compact_min_bytes=64 << 10)
    ns = Namespace(CONFIG)
    persistence.attach(ns)
    for i in range(300):
        send(ns, "q", now, body=bytes(1000), message_id=f"m{i}")
        if i % 20 == 0:
            await committed(persistence)
    await committed(persistence)
    return persistence, ns


async def test_a_journal_whose_backlog_is_being_drained_is_rewritten_once_little_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    persistence, ns = await backlog(tmp_path, monkeypatch, now)
    journal = persistence.commits.journal
    q = ns.receiver_source("q")

    async def settle(count: int) -> None:
        for _ in range(count):
            m = q.receive(now)
            assert m is not None and m.lock_token is not None
            q.complete(m.lock_token, now)
            await committed(persistence)

    await settle(200)  # a third live, shrinking: rewriting it now would be wasted
    assert journal.number == 1
    await settle(70)  # a tenth live, still shrinking: rewritten once the journal is 8 times that
    assert journal.number == 2 and journal.size < 60_000  # (it held over 300 KB)
    persistence, ns = await restart(persistence, tmp_path)
    assert len(ns.receiver_source("q").peek(1, 100, now)) == 30
    await persistence.close()


async def test_a_journal_that_is_mostly_live_is_not_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    persistence, ns = await backlog(tmp_path, monkeypatch, now)
    journal = persistence.commits.journal
    assert journal.number == 1 and journal.size > 300_000
    q = ns.receiver_source("q")
    for _ in range(290):  # now mostly settled: the next batch rewrites the ten left
        m = q.receive(now)
        assert m is not None and m.lock_token is not None
        q.complete(m.lock_token, now)
    await committed(persistence)
    send(ns, "q", now, message_id="after")
    await committed(persistence)
    assert journal.number == 2 and journal.size < 40_000  # (it held 300 KB)
    persistence, ns = await restart(persistence, tmp_path)
    assert len(ns.receiver_source("q").peek(1, 100, now)) == 11
    await persistence.close()


async def test_transfers_one_commit_settles_are_answered_in_one_disposition_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What one commit settles goes back as runs (consecutive delivery-ids, one outcome:
    one first..last disposition), not one disposition per transfer."""
    from amqplink.engine.session import Session

    answered: list[tuple[int, int]] = []
    on_disposition = Session.on_disposition

    def recorded(session: Session, disposition: Any) -> None:
        if disposition.role:  # the broker, as receiver, about the client's transfers
            first = int(disposition.first)
            answered.append((first, first if disposition.last is None else int(disposition.last)))
        on_disposition(session, disposition)

    monkeypatch.setattr(Session, "on_disposition", recorded)
    async with Broker(servicebus=True, data_dir=tmp_path) as broker:
        writer = HeldWriter(broker)
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            writer.gate.set()  # what the attach wrote (the queue made on first use) goes through
            assert isinstance(await sender.send(Message(b"warm"), timeout=10), Accepted)  # (behind it)
            answered.clear()
            writer.hold()
            first = await sender.send_nowait(Message(b"first"))
            await writer.wait_entered()  # the first transfer's commit is being written, held
            rest = [await sender.send_nowait(Message(bytes([i]))) for i in range(20)]
            await conn.create_sender("q")  # a round trip: the broker has read the 20 transfers
            writer.gate.set()
            outcomes = await asyncio.wait_for(asyncio.gather(first, *rest), 10)
            assert all(isinstance(o, Accepted) for o in outcomes)
        finally:
            writer.gate.set()
            await conn.close()
    covered = sorted(n for a, b in answered for n in range(a, b + 1))
    assert covered == list(range(1, 22))  # each transfer answered once
    # the first commit's answer, then the 20 written behind it together: at most two more
    assert len(answered) <= 3, answered
