"""Recovery fuzzed: random truncations, byte flips and stray files over a journal recorded
by a broker's store. Whatever the damage, the store either reads back exactly what was
acknowledged up to the last batch the damage leaves whole (a torn tail: every message
acknowledged before it, none whose completion was confirmed) or refuses to start with
every file as it was (bytes and mtimes): never a silent loss (issue 23, "Proof")."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqplink.broker.durable import Persistence, StoreError
from amqplink.broker.durable.journal import Journal
from amqplink.broker.durable.recovery import MAGIC
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.envelope import split_message
from tests.broker.nsutil import send
from tests.broker.test_durable import CONFIG, committed


@dataclass(frozen=True)
class Recorded:
    directory: Path
    ends: list[int]
    """The journal's size after each commit (the first: the file's head alone)."""
    live: list[frozenset[str]]
    """The ids acknowledged and not confirmed completed at each of ``ends``."""


async def _record(directory: Path, batches: int) -> Recorded:
    now = time.time()
    store = Persistence(directory, fsync=False)
    ns = Namespace(CONFIG)
    store.attach(ns)
    await committed(store)
    journal = store.commits.journal
    ends, live = [len(MAGIC), journal.size], [frozenset[str](), frozenset[str]()]
    kept: set[str] = set()
    q = ns.receiver_source("q")
    for b in range(batches):
        for i in range(1 + b % 4):
            send(ns, "q", now, body=b"body %d" % b, message_id=f"m{b}-{i}")
            kept.add(f"m{b}-{i}")
        if b % 3 == 2:  # complete the oldest two
            for _ in range(2):
                msg = q.receive(now)
                assert msg is not None and msg.lock_token is not None
                q.complete(msg.lock_token, now)
                kept.discard(str(msg.envelope.message_id))
        await committed(store)
        ends.append(journal.size)
        live.append(frozenset(kept))
    await store.close()
    return Recorded(directory, ends, live)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return asyncio.run(_record(tmp_path_factory.mktemp("recorded"), 24))


def files(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir()) if p.is_file()}


def read_back(directory: Path) -> frozenset[str] | None:
    """The ids the store reads back (None: it refused to start)."""
    try:
        journal = Journal(directory, fsync=False)
    except StoreError:
        return None
    journal.close()
    return frozenset(
        str(split_message(fields[6]).message_id)
        for by_seq in journal.state.messages.values()
        for fields in by_seq.values()
    )


damage = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.floats(0, 1)),
    st.tuples(st.just("none"), st.just(0.0)),
)
strays = st.sampled_from(["none", "empty newer", "junk newer", "older", "tmp"])


def check(recorded: Recorded, how: str, where: float, stray: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "data"
        shutil.copytree(recorded.directory, directory)
        (journal,) = directory.glob("journal-*.log")
        size = journal.stat().st_size
        assert size == recorded.ends[-1]
        offset = min(int(where * size), size - 1)
        whole = len(recorded.ends) - 1  # the last batch the damage leaves whole
        must_refuse = False
        if how == "truncate":
            os.truncate(journal, offset)
            whole = max(i for i, end in enumerate(recorded.ends) if end <= offset) if offset >= len(MAGIC) else -1
            must_refuse = offset < len(MAGIC)
        elif how == "flip":
            data = bytearray(journal.read_bytes())
            data[offset] ^= 1 << (offset % 8)
            journal.write_bytes(bytes(data))
            batch = next(i for i, end in enumerate(recorded.ends) if offset < end)  # the batch the flip is in
            if offset < len(MAGIC):
                must_refuse = True
            elif batch == len(recorded.ends) - 1:
                whole = batch - 1  # damage in the last batch: a torn write, as far as anyone can tell
            else:
                must_refuse = True  # valid batches follow it
        if stray == "empty newer":
            (directory / "journal-00000002.log").write_bytes(b"")
            must_refuse = True
        elif stray == "junk newer":
            (directory / "journal-00000002.log").write_bytes(b"junk" * 100)
            must_refuse = True
        elif stray == "older":
            (directory / "journal-00000000.log").write_bytes(MAGIC + b"\0" * 8)
        elif stray == "tmp":
            (directory / "journal-00000002.log.tmp").write_bytes(MAGIC + b"partial")
        before = files(directory)
        got = read_back(directory)
        if got is None:
            assert must_refuse, f"refused to start on a torn tail ({how} at {offset})"
            assert files(directory) == before, "a refused start changed a file"
            return
        assert not must_refuse, f"started on a damaged store ({how} at {offset}, {stray})"
        assert got == recorded.live[whole], "what was acknowledged is not what was read back"
        left = {p.name for p in directory.iterdir()}
        assert left == {"LOCK", journal.name}  # what a compaction leaves is removed once read back


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=damage, stray=strays)
def test_recovery_never_loses_silently(recorded: Recorded, damage: tuple[str, float], stray: str) -> None:
    check(recorded, damage[0], damage[1], stray)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=damage, stray=strays)
def test_recovery_never_loses_silently_at_length(recorded: Recorded, damage: tuple[str, float], stray: str) -> None:
    check(recorded, damage[0], damage[1], stray)


def test_every_flip_of_every_byte_is_refused_or_a_torn_last_batch(recorded: Recorded) -> None:
    """Exhaustive over the offsets of a small journal's last four batches and the one before."""
    size = recorded.ends[-1]
    start = recorded.ends[-6]
    for offset in range(start, size, 7):
        check(recorded, "flip", offset / size + 1e-12, "none")
