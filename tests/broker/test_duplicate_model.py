"""Duplicate detection as a model (issue 30, item 1): hypothesis state machines of sends
(fresh and repeated ids, alone, in batches, scheduled), refusals (quota, message size, a
batch of distinct keys, a fragment down, a full disk), drains, restarts of a durable store
and the window running out (time passed in: the namespace's clock), against a plain model:
the ids stored within the window.

Asserted after every step: a send is accepted and stored iff its id is not in the model and
nothing refuses it; a refused send changes nothing (neither the messages nor the history);
the entities' histories are the model's (after a restart too) and hold what they stored.
Namespace objects without sockets; the durable machine drives a :class:`Persistence` on an
event loop of its own (each example a store and a loop: ``profiles.HEAVY``)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections import Counter
from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig
from amqplink.broker.durable import Persistence
from amqplink.broker.namespace import BATCH_FORMAT, EntityError, Namespace
from amqplink.broker.namespace.envelope import split_message
from amqplink.broker.namespace.partitioned import fragment_of
from amqplink.message import Message
from tests import profiles
from tests.broker.nsutil import T0

WINDOW = 20.0
MAX_MESSAGES = 3
"""Messages a queue (a partitioned queue's fragment) holds at most."""
MAX_SIZE = 1200
IDS = st.sampled_from([f"id{i}" for i in range(6)])
PATHS = st.sampled_from(["q", "p"])
"""``q`` a queue, ``p`` a partitioned queue of two fragments (the message id is the key)."""

PROPS = EntityProperties(
    requires_duplicate_detection=True,
    duplicate_detection_window=WINDOW,
    max_messages=MAX_MESSAGES,
    max_message_size=MAX_SIZE,
)
CONFIG = NamespaceConfig(
    queues=(
        QueueConfig("q", PROPS),
        QueueConfig("p", EntityProperties(**{**PROPS.__dict__, "enable_partitioning": True, "partition_count": 2})),
    )
)

STORED = "stored"
DUPLICATE = "duplicate"
SIZE = "amqp:link:message-size-exceeded"
QUOTA = "amqp:resource-limit-exceeded"
DOWN = "amqp:internal-error"
KEYS = "com.microsoft:argument-error"


def message(mid: str, big: bool = False) -> bytes:
    return Message(bytes(2000 if big else 10), message_id=mid).encode()


def batch_of(ids: list[str]) -> bytes:
    return Message([message(mid) for mid in ids], body_type="data").encode()


class DuplicatesMachine(RuleBasedStateMachine):
    """The namespace in memory, and the model it must agree with."""

    def __init__(self) -> None:
        super().__init__()
        self.now = self.start_time()
        self.ns = self.open()
        self.history: dict[str, dict[str, float]] = {"q": {}, "p": {}}
        """The model: per entity, each id stored and when (only those within the window count)."""
        self.stored: dict[str, list[tuple[str, float]]] = {"q": [], "p": []}
        """The model's messages: (id, when it is due), in the order stored."""
        self.down: set[int] = set()

    # -- what a durable machine changes -------------------------------------------------
    def start_time(self) -> float:
        return T0

    def open(self) -> Namespace:
        return Namespace(CONFIG)

    def apply(self, operation: Any) -> Any:
        """Run ``operation`` (a send, a schedule, a drain); its result (a refusal raised)."""
        return operation()

    # -- the model ----------------------------------------------------------------------
    def fragment(self, mid: str) -> int:
        partitions = self.ns.queue("p").partitions
        assert partitions is not None
        return partitions.index(mid)

    def in_window(self, path: str, mid: str) -> bool:
        at = self.history[path].get(mid)
        return at is not None and self.now - at < WINDOW

    def full(self, path: str, mid: str, adding: int = 1) -> bool:
        held = self.stored[path]
        if path == "p":
            held = [entry for entry in held if self.fragment(entry[0]) == self.fragment(mid)]
        return len(held) + adding > MAX_MESSAGES

    def expect(self, path: str, mids: list[str], *, big: bool = False) -> tuple[str, list[str]]:
        """What a send of ``mids`` (one transfer) must do: its outcome and the ids it stores."""
        if big:
            return SIZE, []
        if path == "p":
            if len(set(mids)) > 1:
                return KEYS, []
            if self.fragment(mids[0]) in self.down:
                return DOWN, []
        fresh: list[str] = []
        for mid in mids:
            if not self.in_window(path, mid) and mid not in fresh:
                fresh.append(mid)
        if not fresh:
            return DUPLICATE, []
        if self.full(path, fresh[0], len(fresh)):
            return QUOTA, []
        return STORED, fresh

    def outcome(self, operation: Any) -> str:
        try:
            self.apply(operation)
        except EntityError as exc:
            return str(exc.condition)
        return STORED

    def check_send(self, path: str, mids: list[str], operation: Any, *, big: bool = False, due: float = 0.0) -> None:
        expected, fresh = self.expect(path, mids, big=big)
        event(f"{path}: {expected}")  # (--hypothesis-show-statistics: how often each outcome was met)
        got = self.outcome(operation)
        if expected in (STORED, DUPLICATE):
            assert got == STORED, f"{path}: {mids} refused with {got}, the model expected {expected}"
            for mid in fresh:
                self.history[path][mid] = self.now
                self.stored[path].append((mid, due))
        else:
            assert got == expected, f"{path}: {mids} gave {got}, the model expected {expected}"

    # -- rules --------------------------------------------------------------------------
    @rule(path=PATHS, mid=IDS, big=st.booleans())
    def send(self, path: str, mid: str, big: bool) -> None:
        entity = self.ns.sender_target(path)
        self.check_send(path, [mid], lambda: self.ns.send(entity, message(mid, big), self.now), big=big)

    @rule(path=PATHS, mids=st.lists(IDS, min_size=1, max_size=4))
    def send_batch(self, path: str, mids: list[str]) -> None:
        entity = self.ns.sender_target(path)
        self.check_send(path, mids, lambda: self.ns.send(entity, batch_of(mids), self.now, BATCH_FORMAT))

    @rule(path=PATHS, mid=IDS, delay=st.sampled_from([0.0, 5.0, 30.0]))
    def schedule(self, path: str, mid: str, delay: float) -> None:
        entity = self.ns.sender_target(path)
        envelope = split_message(message(mid), check=True)
        at = self.now + delay
        self.check_send(path, [mid], lambda: self.ns.schedule(entity, envelope, at, self.now), due=at)

    @rule(path=PATHS)
    def drain(self, path: str) -> None:
        entity = self.ns.receiver_source(path)
        got = self.apply(lambda: entity.receive_many(self.now, 100, lock=False))
        taken = [
            entry
            for entry in self.stored[path]
            if entry[1] <= self.now and (path == "q" or self.fragment(entry[0]) not in self.down)
        ]
        assert Counter(m.envelope.message_id for m in got) == Counter(mid for mid, _ in taken)
        for entry in taken:
            self.stored[path].remove(entry)

    @rule(seconds=st.sampled_from([1.0, 5.0, WINDOW - 1, WINDOW, WINDOW + 1]))
    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.apply(lambda: self.ns.tick(self.now))

    @rule(index=st.sampled_from([0, 1]), down=st.booleans())
    def fragment_down(self, index: int, down: bool) -> None:
        self.ns.set_fragment_down("p", index, down)
        if down:
            self.down.add(index)
        else:
            self.down.discard(index)

    # -- invariants ---------------------------------------------------------------------
    def live(self, path: str) -> set[str]:
        return {mid for mid in self.history[path] if self.in_window(path, mid)}

    @invariant()
    def histories_are_the_model(self) -> None:
        q = self.ns.queue("q")
        assert q.duplicates is not None
        assert set(q.duplicates.ids(self.now)) == self.live("q")
        partitions = self.ns.queue("p").partitions
        assert partitions is not None and partitions.duplicates is not None
        got: set[str] = set()
        for index, detector in enumerate(partitions.duplicates):
            ids = set(detector.ids(self.now))
            assert all(self.fragment(mid) == index for mid in ids), "an id in another fragment's history"
            got |= ids
        assert got == self.live("p")

    @invariant()
    def messages_are_the_model(self) -> None:
        for path in ("q", "p"):
            entity = self.ns.receiver_source(path)
            held = Counter(m.envelope.message_id for m in entity.store)
            assert held == Counter(mid for mid, _ in self.stored[path]), path
            if path == "p":
                for m in entity.store:
                    assert fragment_of(m.sequence_number) == self.fragment(m.envelope.message_id)


class DurableDuplicatesMachine(DuplicatesMachine):
    """The same, kept in a data directory: every step waits for its commit; a restart reads the
    store back (the histories must be the model's), and a send while the disk is full is
    refused after its write fails and leaves nothing."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.directory = tempfile.mkdtemp(prefix="amqplink-dedup-")
        self.store: Persistence | None = None
        super().__init__()

    def start_time(self) -> float:
        # Ahead of the wall clock: what the store drops on start as out of its window
        # (``time.time()``) is then never something the model still counts.
        return time.time() + 3600

    def open(self) -> Namespace:
        async def opened() -> Namespace:
            self.store = Persistence(self.directory, fsync=False)
            ns = Namespace(CONFIG)
            self.store.attach(ns)
            return ns

        return self.loop.run_until_complete(opened())

    def apply(self, operation: Any) -> Any:
        store = self.store
        assert store is not None

        async def applied() -> Any:
            try:
                result = operation()
            finally:
                done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
                store.after_commit(done.set_result)
                error = await asyncio.wait_for(done, 10)
            if error is not None:
                raise EntityError(DOWN, f"the store's write failed: {error}")
            return result

        return self.loop.run_until_complete(applied())

    @rule()
    def restart(self) -> None:
        store = self.store
        assert store is not None
        self.loop.run_until_complete(store.close())
        self.ns = self.open()
        self.down.clear()  # a fragment down is not kept

    @rule(path=PATHS, mid=IDS)
    def send_while_the_disk_is_full(self, path: str, mid: str) -> None:
        store = self.store
        assert store is not None
        journal = store.commits.journal
        expected, _ = self.expect(path, [mid])
        event(f"{path}, disk full: {expected}")
        entity = self.ns.sender_target(path)
        journal.space = 0
        try:
            got = self.outcome(lambda: self.ns.send(entity, message(mid), self.now))
        finally:
            journal.space = None
        if expected == STORED:
            assert got == DOWN, f"{path}: {mid} sent while the disk is full gave {got}"
        elif expected == DUPLICATE:
            assert got == STORED  # nothing to write: acknowledged
        else:
            assert got == expected

    def teardown(self) -> None:
        if self.store is not None:
            self.loop.run_until_complete(self.store.close())
        self.loop.close()
        shutil.rmtree(self.directory, ignore_errors=True)


TestDuplicates = DuplicatesMachine.TestCase
TestDuplicates.settings = settings(stateful_step_count=30, deadline=None)
TestDurableDuplicates = DurableDuplicatesMachine.TestCase
TestDurableDuplicates.settings = settings(profiles.HEAVY, stateful_step_count=30, deadline=None)
