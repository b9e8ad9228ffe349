"""The local queue's file, against a model list (hypothesis state machine: append, forward,
acknowledge, compaction, close and reopen, a torn write), and cut by a crash at every
write the scenario makes (the seam every change goes through): what an append or an
acknowledgement returned for survives, a group is stored whole or not at all, nothing
comes twice, and a damaged file is refused with nothing changed."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from amqplink.servicebus.localqueue.errors import LocalQueueCorruptError, LocalQueueInUseError
from amqplink.servicebus.localqueue.records import stored_size
from amqplink.servicebus.localqueue.segments import read_directory
from amqplink.servicebus.localqueue.store import FileIO, LocalQueueFile, Stored
from tests import profiles

ENTITIES = ("orders", "invoices", "topic/Subscriptions/x")


class Crash(BaseException):
    """The process dies here (nothing catches it; nothing more is written)."""


class CrashingIO(FileIO):
    """Crashes at the ``at``-th change; a write it crashes in leaves a prefix of its bytes."""

    def __init__(self, at: int, rng: random.Random) -> None:
        self.at = at
        self.calls = 0
        self.rng = rng

    def _step(self) -> None:
        self.calls += 1
        if self.calls == self.at:
            raise Crash

    def write(self, fd: int, data: bytes) -> None:
        if self.calls + 1 == self.at:
            os.write(fd, data[: self.rng.randrange(len(data) + 1)])  # torn: any prefix, the whole included
        self._step()
        super().write(fd, data)

    def sync(self, fd: int) -> None:
        self._step()
        super().sync(fd)

    def truncate(self, fd: int, size: int) -> None:
        self._step()
        super().truncate(fd, size)

    def replace(self, source: str, target: str) -> None:
        self._step()
        super().replace(source, target)

    def unlink(self, path: str) -> None:
        self._step()
        super().unlink(path)

    def sync_directory(self, directory: str) -> None:
        self._step()
        super().sync_directory(directory)


def contents(f: LocalQueueFile) -> dict[str, list[tuple[int, bytes]]]:
    return {entity: f.batch(entity, 10**9, 10**12) for entity in sorted(f.pending)}


class LocalQueueMachine(RuleBasedStateMachine):
    """The file against a model: per entity, the messages stored and not acknowledged."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="lq-machine-")
        self.max_bytes = 600
        self.compact = 0
        self.file = LocalQueueFile(self.directory, self.max_bytes, compact_min_bytes=self.compact)
        self.model: dict[str, list[tuple[str, bytes]]] = {}
        """Entity -> (ordering key, message) stored and not acknowledged, oldest first."""
        self.in_flight: dict[str, tuple[int, int]] = {}
        """Entity -> (last record id handed out for forwarding, how many)."""

    def teardown(self) -> None:
        self.file.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _reopen(self) -> None:
        self.file.close()
        self.in_flight.clear()  # handed out, never acknowledged: forwarded again
        self.file = LocalQueueFile(self.directory, self.max_bytes, compact_min_bytes=self.compact)

    @rule(
        groups=st.lists(
            st.lists(st.tuples(st.sampled_from(ENTITIES), st.sampled_from(("", "s1")), st.binary(max_size=90)),
                     max_size=4),
            min_size=1, max_size=3,
        )
    )  # fmt: skip
    def append(self, groups: list[list[tuple[str, str, bytes]]]) -> None:
        live = sum(stored_size(e, k, len(m)) for e, ms in self.model.items() for k, m in ms)
        expected = []
        for group in groups:
            size = sum(stored_size(e, k, len(m)) for e, k, m in group)
            fits = live + size <= self.max_bytes
            expected.append(fits or not group)
            if fits:
                live += size
                for entity, key, message in group:
                    self.model.setdefault(entity, []).append((key, message))
        taken = self.file.append([[Stored(e, k, m) for e, k, m in group] for group in groups])
        assert taken == expected

    @rule(entity=st.sampled_from(ENTITIES), count=st.integers(1, 5))
    def forward(self, entity: str, count: int) -> None:
        batch = self.file.batch(entity, count, 10**9)
        assert [m for _, m in batch] == [m for _, m in self.model.get(entity, [])[:count]]
        if batch:
            self.in_flight[entity] = (batch[-1][0], len(batch))

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def acknowledge(self, data: st.DataObject) -> None:
        entity = data.draw(st.sampled_from(sorted(self.in_flight)))
        up_to, count = self.in_flight.pop(entity)
        self.file.ack(entity, up_to)
        del self.model[entity][:count]
        if not self.model[entity]:
            del self.model[entity]

    @rule(compact=st.sampled_from((0, 200, 1 << 20)))
    def reopen(self, compact: int) -> None:
        self.compact = compact
        self._reopen()

    @rule()
    def compact_now(self) -> None:
        self.file.compact()

    @rule(entity=st.sampled_from(ENTITIES), message=st.binary(min_size=1, max_size=60), seed=st.integers(0, 99))
    def crash_in_an_append(self, entity: str, message: bytes, seed: int) -> None:
        """A crash tears the append's write (a strict prefix reaches the file): not stored."""
        rng = random.Random(seed)

        def torn(fd: int, data: bytes) -> None:
            os.write(fd, data[: rng.randrange(len(data))])
            raise Crash

        self.file.io = FileIO()
        self.file.io.write = torn  # type: ignore[method-assign]
        item = Stored(entity, "", message)
        if self.file.live_bytes + item.size > self.max_bytes:
            assert self.file.append([[item]]) == [False]  # full: nothing is written at all
        else:
            with pytest.raises(Crash):
                self.file.append([[item]])
        self._reopen()

    @invariant()
    def matches_the_model(self) -> None:
        assert {e: [m for _, m in ms] for e, ms in contents(self.file).items()} == {
            e: [m for _, m in ms] for e, ms in self.model.items()
        }
        assert self.file.live_bytes <= self.max_bytes
        assert self.file.depth == sum(len(ms) for ms in self.model.values())


TestLocalQueueMachine = LocalQueueMachine.TestCase
TestLocalQueueMachine.settings = settings(profiles.HEAVY, stateful_step_count=30, deadline=None)


# -- a crash at every change a scenario makes ---------------------------------------------
@dataclass
class Returned:
    """What the scenario was told before the crash."""

    stored: list[list[bytes]] = field(default_factory=list)
    """The groups whose append returned."""
    acked: set[bytes] = field(default_factory=set)
    """The messages whose acknowledgement returned."""
    appending: list[bytes] = field(default_factory=list)
    """The group of the last append started (stored whole or not at all)."""
    forwarded: set[bytes] = field(default_factory=set)
    """The messages an acknowledgement was started for (forwarded: they may be gone)."""


def scenario(directory: str, io: FileIO, returned: Returned) -> None:
    """Stores, forwards and acknowledges, compacts, reopens; notes what returned."""
    f = LocalQueueFile(directory, 1 << 20, io=io, compact_min_bytes=300)
    try:
        for round_ in range(3):
            for i in range(4):
                group = [Stored(ENTITIES[i % 2], "", f"r{round_}-{i}-{j}".encode() * 3) for j in range(1 + i % 3)]
                returned.appending = [s.message for s in group]
                f.append([group])
                returned.stored.append(returned.appending)
            for entity in ENTITIES[:2]:
                batch = f.batch(entity, 3, 10**9)
                if batch:
                    returned.forwarded.update(m for _, m in batch)
                    f.ack(entity, batch[-1][0])
                    returned.acked.update(m for _, m in batch)
        f.close()
        f = LocalQueueFile(directory, 1 << 20, io=io, compact_min_bytes=300)
        f.compact()
    finally:
        f.close()


def test_a_crash_at_every_change_loses_nothing_that_returned(tmp_path: Path) -> None:
    counting = CrashingIO(0, random.Random(0))
    scenario(str(tmp_path / "count"), counting, Returned())
    total = counting.calls
    assert total > 40  # appends, syncs, compactions' renames and deletions
    rng = random.Random(32)
    for at in range(1, total + 1):
        directory = tmp_path / f"crash-{at}"
        returned = Returned()
        with pytest.raises(Crash):
            scenario(str(directory), CrashingIO(at, rng), returned)
        with LocalQueueFileOpen(str(directory)) as f:
            found = [m for ms in contents(f).values() for _, m in ms]
        assert len(found) == len(set(found)), f"crash at change {at}: a message twice"
        for group in returned.stored:  # every append that returned is there, unless its ack returned too
            assert all(m in found or m in returned.forwarded for m in group), f"crash at change {at}: lost {group}"
        assert not returned.acked & set(found), f"crash at change {at}: an acknowledged message came back"
        assert len({m in found for m in returned.appending}) <= 1, f"crash at change {at}: half a group stored"


class LocalQueueFileOpen:
    def __init__(self, directory: str) -> None:
        self.file = LocalQueueFile(directory, 1 << 20)

    def __enter__(self) -> LocalQueueFile:
        return self.file

    def __exit__(self, *exc: object) -> None:
        self.file.close()


def test_one_writer_per_directory(tmp_path: Path) -> None:
    first = LocalQueueFile(str(tmp_path), 1000)
    try:
        with pytest.raises(LocalQueueInUseError, match=f"process {os.getpid()}"):
            LocalQueueFile(str(tmp_path), 1000)
    finally:
        first.close()
    LocalQueueFile(str(tmp_path), 1000).close()  # released by close (and by a process's death)


def test_a_full_queue_stores_nothing_of_a_group(tmp_path: Path) -> None:
    f = LocalQueueFile(str(tmp_path), 200)
    try:
        small = Stored("orders", "", b"x" * 50)
        assert f.append([[small], [small, small, small]]) == [True, False]
        assert f.depth == 1 and f.live_bytes == small.size
    finally:
        f.close()


# -- damaged files -----------------------------------------------------------------------
def written(directory: Path) -> dict[int, bytes]:
    """A directory with stored, acknowledged and compacted records; record id -> message."""
    f = LocalQueueFile(str(directory), 1 << 20, compact_min_bytes=1 << 30)
    messages: dict[int, bytes] = {}
    try:
        for i in range(12):
            f.append([[Stored(ENTITIES[i % 3], "k" if i % 2 else "", f"message-{i}".encode() * (1 + i % 4))]])
        for entity in ENTITIES:
            for record_id, message in f.batch(entity, 100, 10**9):
                messages[record_id] = message
        f.ack(ENTITIES[0], f.batch(ENTITIES[0], 2, 10**9)[-1][0])
    finally:
        f.close()
    return messages


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name != "lock"}


Damage = Callable[[bytes, random.Random], bytes]


def _flip(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]


def _cut(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def _garbage(data: bytes, rng: random.Random) -> bytes:
    return data + rng.randbytes(rng.randrange(1, 40))


def _insert(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + rng.randbytes(rng.randrange(1, 9)) + data[at:]


def _zeros(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + bytes(rng.randrange(1, 64)) + data[at + 64 :]


@pytest.mark.fuzz
@settings(profiles.FUZZ, deadline=None)
@given(damage=st.sampled_from((_flip, _cut, _garbage, _insert, _zeros)), seed=st.integers(0, 2**32))
def test_a_damaged_segment_is_refused_or_read_in_order_never_changed(damage: Damage, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="lq-fuzz-") as name:
        directory = Path(name)
        messages = written(directory)
        segment = next(p for p in directory.iterdir() if p.suffix == ".log")
        segment.write_bytes(damage(segment.read_bytes(), random.Random(seed)))
        before = snapshot(directory)
        try:
            found = read_directory(str(directory))
        except LocalQueueCorruptError as exc:
            assert exc.path == str(segment) and str(exc.offset) in str(exc)
            with pytest.raises(LocalQueueCorruptError):
                LocalQueueFile(str(directory), 1 << 20)
            assert snapshot(directory) == before  # refused: nothing changed
            return
        with LocalQueueFileOpen(str(directory)) as f:
            for entity, stored in contents(f).items():
                ids = [record_id for record_id, _ in stored]
                assert ids == sorted(set(ids)), entity  # in order, once each
                for record_id, message in stored:
                    assert messages.get(record_id) == message  # what was written under that id
        assert found.torn >= 0
        assert segment.read_bytes() == before[segment.name]  # read, never truncated
