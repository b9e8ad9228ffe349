"""A committed transaction in the durable store: one journal record (kind ``A``), so a
crash at any byte of its write leaves all of it or none; a roll-back writes nothing; a
commit the disk refuses is refused whole, in memory too (docs/durability.md#transactions)."""

from __future__ import annotations

import asyncio
import struct
from contextlib import closing
from pathlib import Path

import pytest

from amqplink.broker.durable import Persistence, checkpoint, journal_files
from amqplink.broker.durable.journal import Journal
from amqplink.broker.durable.records import K_ATOMIC, RecordError, State
from amqplink.broker.durable.recovery import CURRENT, RecoveryPoint
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.store import MessageState
from amqplink.engine.events import TransactionEnded
from amqplink.engine.link import Delivery
from amqplink.engine.states import TransactionState
from amqplink.engine.transactions import TRANSACTION_ROLLBACK, Transaction
from amqplink.protocol.definitions import Accepted
from interop.inprocess import committed
from tests.broker.nsutil import send
from tests.broker.txnutil import TxnClient

_ATOMIC_HEAD = struct.Struct(">BI")


async def _undischarged(store: Persistence) -> tuple[TxnClient, Transaction, Delivery]:
    """Queue ``a`` holds ``a0`` and ``a1`` (on disk); a transaction completes ``a0`` and sends
    ``b0``, ``b1`` to ``b`` via ``a``, not yet discharged (everything before it written)."""
    c = TxnClient(Namespace(), persistence=store)
    for i in range(2):
        send(c.ns, "a", message_id=f"a{i}")
    receiver = c.receiver("a", credit=1)
    await asyncio.sleep(0)
    await c.pump_stored()
    (delivery,) = c.received(receiver)
    onward = c.sender("b", via="a")
    txn = c.declare()
    c.settle(delivery, Accepted(), txn)
    for i in range(2):
        c.send(onward, txn, message_id=f"b{i}")
    await c.pump_stored()
    await committed(store)
    return c, txn, delivery


async def _committed_transaction(directory: Path) -> tuple[Persistence, TxnClient, int, int]:
    """:func:`_undischarged`, committed; the journal's size before its commit and after."""
    store = Persistence(directory, fsync=False)
    c, txn, delivery = await _undischarged(store)
    before = store.commits.journal.size
    assert await c.discharge_stored(txn) is None
    await committed(store)
    assert txn.state is TransactionState.COMMITTED and delivery.settled
    return store, c, before, store.commits.journal.size


def _ids(state: State, path: str) -> set[str]:
    """The message ids ``state`` holds for the entity ``path``."""
    from amqplink.broker.durable.records import stored_message

    eids = [eid for eid, p in state.entities.items() if p == path]
    found: set[str] = set()
    for eid in eids:
        for seq, fields in state.messages.get(eid, {}).items():
            msg = stored_message(seq, fields)
            assert msg is not None
            found.add(str(msg.envelope.message_id))
    return found


def test_a_commit_is_one_atomic_record_and_reads_back_whole(tmp_path: Path) -> None:
    async def run() -> tuple[int, int]:
        store, _, before, after = await _committed_transaction(tmp_path)
        await store.close()
        return before, after

    before, after = asyncio.run(run())
    ((_, path),) = journal_files(str(tmp_path))
    data = Path(path).read_bytes()
    length, _crc, _number = CURRENT.head.unpack_from(data, before)
    body = data[before + CURRENT.head.size : before + CURRENT.head.size + length]
    assert before + CURRENT.head.size + length == after, "the commit is one batch"
    kind, inner = _ATOMIC_HEAD.unpack_from(body)
    assert kind == K_ATOMIC and inner == len(body) - _ATOMIC_HEAD.size, "the batch is one A record"
    with closing(Journal(tmp_path, fsync=False)) as journal:
        assert _ids(journal.state, "a") == {"a1"} and _ids(journal.state, "b") == {"b0", "b1"}


def test_a_write_torn_at_any_byte_of_the_commit_leaves_all_of_it_or_none(tmp_path: Path) -> None:
    """kill -9 at any point of the commit's write: the journal read back holds the state before
    the transaction (``a0`` still there, nothing in ``b``) or the state after it, never a mix."""

    async def run() -> tuple[int, int]:
        store, _, before, after = await _committed_transaction(tmp_path / "data")
        await store.close()
        return before, after

    before, after = asyncio.run(run())
    ((_, path),) = journal_files(str(tmp_path / "data"))
    data = Path(path).read_bytes()
    assert after == len(data)
    point = checkpoint.read(str(tmp_path / "data"))  # a clean stop's: every batch, the commit's last
    assert point is not None and point.length == after
    # What a crash during the commit's write leaves: the batches before it known committed.
    before_commit = RecoveryPoint(point.generation, before, point.batch - 1)
    seen = set()
    for cut in range(before, after + 1):
        directory = tmp_path / f"cut{cut}"
        directory.mkdir()
        (directory / Path(path).name).write_bytes(data[:cut])
        checkpoint.write(str(directory), before_commit, sync=False)
        with closing(Journal(directory, fsync=False)) as journal:
            a, b = _ids(journal.state, "a"), _ids(journal.state, "b")
        outcome = (frozenset(a), frozenset(b))
        assert outcome in {
            (frozenset({"a0", "a1"}), frozenset()),  # before the commit
            (frozenset({"a1"}), frozenset({"b0", "b1"})),  # after it
        }, f"cut at {cut}: {outcome}"
        seen.add(outcome)
    assert len(seen) == 2  # both: the cut before the last byte, and the whole write


def test_a_commit_survives_a_restart(tmp_path: Path) -> None:
    async def run() -> None:
        store, _, _, _ = await _committed_transaction(tmp_path)
        await store.close()
        again = Persistence(tmp_path, fsync=False)
        ns = Namespace()
        again.attach(ns)
        try:
            a = ns.receiver_source("a")
            assert [m.envelope.message_id for m in a.store] == ["a1"]
            assert [m.state for m in a.store] == [MessageState.AVAILABLE]
            assert sorted(m.envelope.message_id for m in ns.receiver_source("b").store) == ["b0", "b1"]
        finally:
            await again.close()

    asyncio.run(run())


async def test_a_roll_back_writes_nothing(tmp_path: Path) -> None:
    store = Persistence(tmp_path, fsync=False)
    c = TxnClient(Namespace(), persistence=store)
    try:
        sender = c.sender("q")
        await c.pump_stored()
        txn = c.declare()
        for i in range(5):
            c.send(sender, txn, message_id=f"r{i}")
        await c.pump_stored()
        await committed(store)
        size = store.commits.journal.size
        assert await c.discharge_stored(txn, fail=True) is None
        await committed(store)
        assert store.commits.journal.size == size
        assert len(c.ns.receiver_source("q").store) == 0
    finally:
        await store.close()


async def test_a_commit_the_disk_refuses_is_refused_whole(tmp_path: Path) -> None:
    store = Persistence(tmp_path, fsync=False)
    c, txn, _ = await _undischarged(store)
    try:
        store.commits.journal.space = 0  # the disk is full
        c.ctl.discharge(txn)
        c.pump()
        written: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        store.after_commit(written.set_result)
        assert isinstance(await written, OSError)
        ended = [e for e in c.pump() if isinstance(e, TransactionEnded)]
        assert [e.transaction for e in ended] == [txn] and txn.state is TransactionState.ROLLED_BACK
        error = ended[0].error
        assert error is not None and error.condition == TRANSACTION_ROLLBACK and "could not store" in error.description
        # in memory as on disk: the message is not in b, a0 not completed
        assert len(c.ns.receiver_source("b").store) == 0
        assert sorted(m.envelope.message_id for m in c.ns.receiver_source("a").store) == ["a0", "a1"]
    finally:
        store.commits.journal.space = None
        await store.close()


def test_an_atomic_record_that_runs_past_its_batch_does_not_parse() -> None:
    state = State()
    try:
        state.apply(_ATOMIC_HEAD.pack(K_ATOMIC, 100) + b"D")
    except RecordError:
        return
    raise AssertionError("a truncated atomic record was read")





def test_an_atomic_record_inside_another_is_refused_not_recursed() -> None:
    """A damaged (or forged, CRC-valid) batch of atomic records nested deep is a RecordError
    naming it, not a RecursionError: the writer never nests them."""
    inner = b""
    for _ in range(5000):
        inner = _ATOMIC_HEAD.pack(K_ATOMIC, len(inner)) + inner
    with pytest.raises(RecordError, match="inside another"):
        State().apply(inner)
