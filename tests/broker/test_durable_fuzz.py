"""Recovery fuzzed: damage of every kind over a durable store that acknowledged a few
hundred operations (sends, completions) and stopped cleanly, with the torn write of a batch
that was never acknowledged after it. Whatever the damage (a cut at any offset, a bit
flipped anywhere: header, frame, record, recovery point; a batch duplicated or two swapped;
a stretch filled with 0xff or zeros; a batch of out-of-range fields that checks; a stray
file), the store either refuses to start, naming the file, with every file as it was
(bytes and mtimes), or starts with exactly what was acknowledged: every acknowledged message
once, none whose completion was confirmed. Damage before the recovery point (everything
committed) is always refused; damage only in the torn tail always starts. After a refusal,
``broker-store --salvage`` makes a store that starts, holding nothing that was never sent,
and exactly the acknowledged state where no batch was lost (a flipped header bit, a copy,
a swap, a damaged recovery point). Issue 30, item 3 (issue 23 before it)."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqplink.broker.durable import Persistence, StoreError, checkpoint
from amqplink.broker.durable.journal import Journal
from amqplink.broker.durable.records import KINDS, RUN
from amqplink.broker.durable.recovery import CURRENT, MAGIC, frames
from amqplink.broker.durable.salvage import salvage_directory
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.envelope import split_message
from tests import profiles
from tests.broker.nsutil import send
from tests.broker.test_durable import CONFIG, committed

BATCHES = 90


@dataclass(frozen=True)
class Recorded:
    directory: Path
    acknowledged: Counter[str]
    """The ids acknowledged and not confirmed completed when the store stopped (each once)."""
    sent: frozenset[str]
    batches: list[tuple[int, int]]
    """(offset, length with its head) of each batch of the journal, in order."""
    committed: int
    """The journal's length when it stopped (what its recovery point says)."""
    torn: bytes
    """The first bytes of a batch never acknowledged (a write the crash cut), after ``committed``."""


async def _record(directory: Path) -> Recorded:
    now = time.time()
    store = Persistence(directory, fsync=False)
    ns = Namespace(CONFIG)
    store.attach(ns)
    await committed(store)
    kept: set[str] = set()
    q = ns.receiver_source("q")
    for b in range(BATCHES):
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
    sent = frozenset(f"m{b}-{i}" for b in range(BATCHES) for i in range(1 + b % 4))
    await store.close()
    (path,) = directory.glob("journal-*.log")
    data = path.read_bytes()
    point = checkpoint.read(str(directory))
    assert point is not None and point.length == len(data)  # (a clean stop: everything committed)
    view = memoryview(data)
    found = [(offset, length) for offset, length, _ in frames(view, CURRENT)]
    ends = [(offset, CURRENT.head.size + length) for offset, length in found]
    # Then the write of a batch the crash cut (a copy of the last one's records, as the next batch).
    offset, length = found[-1]
    body = data[offset + CURRENT.head.size : offset + CURRENT.head.size + length]
    frame = CURRENT.frame(body, len(found) + 1) + body
    torn = frame[: len(frame) * 2 // 3]
    with open(path, "ab") as f:
        f.write(torn)
    return Recorded(directory, Counter(kept), sent, ends, len(data), torn)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return asyncio.run(_record(tmp_path_factory.mktemp("recorded")))


def files(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir()) if p.is_file()}


def read_back(directory: Path) -> Counter[str] | StoreError:
    """The ids the store reads back, each as often as it holds it (or its refusal)."""
    try:
        journal = Journal(directory, fsync=False)
    except StoreError as exc:
        return exc
    journal.close()
    return Counter(
        str(split_message(fields[6]).message_id)
        for by_seq in journal.state.messages.values()
        for fields in by_seq.values()
    )


DAMAGE = ("truncate", "flip", "flip point", "duplicate", "swap", "ff fill", "zero fill", "forged", "none")
STRAYS = ("none", "empty newer", "junk newer", "older", "tmp")
KEEPS_EVERY_BATCH = ("(header)", "copied into", "swapped", "recovery point", "checking batch", "nothing")
"""Damage a salvage undoes whole (no batch is lost to it), as :func:`damage` says what it did."""


def damage(recorded: Recorded, directory: Path, how: str, rng: random.Random) -> tuple[str, bool]:
    """Damage the copy ``directory`` of the recorded store: (what was done, whether the store
    must refuse it; else it must start with what was acknowledged)."""
    (journal,) = directory.glob("journal-*.log")
    data = bytearray(journal.read_bytes())
    size, committed, batches = len(data), recorded.committed, recorded.batches
    if how == "truncate":
        offset = rng.randrange(size)
        del data[offset:]
        what, must = f"cut at {offset}", offset < committed
    elif how == "flip":
        offset = rng.randrange(size)
        data[offset] ^= 1 << rng.randrange(8)
        what, must = f"bit flipped at {offset}" + (" (header)" if offset < len(MAGIC) else ""), offset < committed
    elif how == "flip point":
        point = directory / checkpoint.NAME
        raw = bytearray(point.read_bytes())
        at = rng.randrange(len(raw))
        raw[at] ^= 1 << rng.randrange(8)
        point.write_bytes(bytes(raw))
        return f"recovery point bit flipped at {at}", True
    elif how == "duplicate":  # a batch's bytes copied into the file at a batch boundary, or over a batch
        source = batches[rng.randrange(len(batches))]
        copy = data[source[0] : source[0] + source[1]]
        over = rng.randrange(len(batches))
        if rng.random() < 0.5:
            at = rng.choice([*(o for o, _ in batches), committed])
            data[at:at] = copy
            what = f"batch at {source[0]} copied into {at}"
        else:
            at = batches[over][0]
            data[at : at + len(copy)] = copy
            what = f"batch at {source[0]} copied over {at}"
        must = True
    elif how == "swap":
        i = rng.randrange(len(batches) - 1)
        j = rng.randrange(i + 1, len(batches))
        (a, la), (b, lb) = batches[i], batches[j]
        data[a : b + lb] = data[b : b + lb] + data[a + la : b] + data[a : a + la]
        what, must = f"batches {i + 1} and {j + 1} swapped", True
    elif how in ("ff fill", "zero fill"):
        start = rng.randrange(size)
        end = min(size, start + rng.choice([1, 8, 64, 512, 4096]))
        data[start:end] = (b"\xff" if how == "ff fill" else b"\x00") * (end - start)
        what, must = f"{how} {start}..{end}", start < committed
    elif how == "forged":  # a batch that checks, as the next one, its record of 0xff fields
        kind = KINDS[rng.randrange(len(KINDS) - 1)]  # (not R: a reset has no fields)
        body = bytes([kind]) + b"\xff" * (RUN.size - 1)
        del data[committed:]
        data += CURRENT.frame(body, len(batches) + 1) + body
        what, must = f"a checking batch of a {chr(kind)} record of 0xff fields at {committed}", True
    else:
        what, must = "nothing", False
    if data == journal.read_bytes():  # (zeros over zeros, a batch copied over itself)
        return what + " (no change)", False
    journal.write_bytes(bytes(data))
    return what, must


def stray(directory: Path, kind: str) -> bool:
    """Leave a stray file beside the journal; whether the store must refuse it."""
    if kind == "empty newer":
        (directory / "journal-00000099.log").write_bytes(b"")
    elif kind == "junk newer":
        (directory / "journal-00000099.log").write_bytes(b"junk" * 100)
    elif kind == "older":
        (directory / "journal-00000000.log").write_bytes(MAGIC)
    elif kind == "tmp":
        (directory / "journal-00000099.log.tmp").write_bytes(MAGIC + b"partial")
    return kind in ("empty newer", "junk newer")


def check(recorded: Recorded, how: str, seed: int, kind: str = "none") -> None:
    """Damage a copy of the recorded store as ``how`` and ``seed`` say, with a stray file of
    ``kind``, and check what the store makes of it (and, refused, what salvage does)."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "data"
        shutil.copytree(recorded.directory, directory)
        what, must = damage(recorded, directory, how, rng)
        if stray(directory, kind):
            must = True
        before = files(directory)
        got = read_back(directory)
        case = f"{what}, stray {kind}"
        if isinstance(got, StoreError):
            assert must, f"refused to start on damage in the torn tail only ({case}): {got}"
            assert any(name in str(got) for name in os.listdir(directory) if name != "LOCK"), (
                f"the refusal names no file ({case}): {got}"
            )
            assert "--salvage" in str(got) or "move it out of the directory" in str(got), got
            assert files(directory) == before, f"a refused start changed a file ({case})"
            salvaged(recorded, directory, what, case)
            return
        assert not must, f"started on a damaged store ({case})"
        assert got == recorded.acknowledged, f"what was acknowledged is not what was read back ({case})"
        journal = next(directory.glob("journal-*.log"))
        assert journal.stat().st_size == recorded.committed, "the torn tail was not cut"
        assert {p.name for p in directory.iterdir()} == {"LOCK", checkpoint.NAME, journal.name}


def salvaged(recorded: Recorded, directory: Path, what: str, case: str) -> None:
    """After a refusal: salvage makes a store that starts, holding nothing never sent and no
    message twice; all that was acknowledged where no batch was lost."""
    report = salvage_directory(str(directory))
    got = read_back(directory)
    assert not isinstance(got, StoreError), f"the salvaged store does not start ({case}): {got}"
    assert set(got) <= recorded.sent and max(got.values(), default=1) == 1, case
    if any(kind in what for kind in KEEPS_EVERY_BATCH):
        assert got == recorded.acknowledged, f"salvage lost what it could keep ({case})"
    if any(kind in what for kind in ("(header)", "copied into", "swapped")):
        assert report["lost"] == "nothing", f"salvage reports a loss where there is none ({case}): {report}"
    elif got != recorded.acknowledged:
        assert report["lost"] != "nothing", f"salvage lost batches and says nothing ({case})"


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=st.sampled_from(DAMAGE), seed=st.integers(0, 2**32), kind=st.sampled_from(STRAYS))
def test_recovery_refuses_damage_or_reads_back_what_was_acknowledged(
    recorded: Recorded, how: str, seed: int, kind: str
) -> None:
    check(recorded, how, seed, kind)


@pytest.mark.fuzz
@settings(profiles.FUZZ, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=st.sampled_from(DAMAGE), seed=st.integers(0, 2**32), kind=st.sampled_from(STRAYS))
def test_damage_fuzz(recorded: Recorded, how: str, seed: int, kind: str) -> None:
    check(recorded, how, seed, kind)


@pytest.mark.parametrize("how", ["truncate", "flip", "ff fill", "zero fill"])
def test_damage_in_the_torn_tail_alone_starts_with_what_was_acknowledged(recorded: Recorded, how: str) -> None:
    """The torn write after the recovery point: cut, flipped or filled anywhere in it, the
    store starts with every acknowledged message (the torn batch dropped)."""
    for seed in range(15):
        rng = random.Random(seed)
        offset = recorded.committed + rng.randrange(len(recorded.torn))
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp) / "data"
            shutil.copytree(recorded.directory, directory)
            (journal,) = directory.glob("journal-*.log")
            data = bytearray(journal.read_bytes())
            if how == "truncate":
                del data[offset:]
            elif how == "flip":
                data[offset] ^= 1 << rng.randrange(8)
            else:
                data[offset:] = (b"\xff" if how == "ff fill" else b"\x00") * (len(data) - offset)
            journal.write_bytes(bytes(data))
            assert read_back(directory) == recorded.acknowledged, f"{how} at {offset}"


def header_flips(recorded: Recorded, bits: range) -> None:
    """Each of ``bits`` of the journal's header flipped: refused naming the file and the
    damaged header, and salvaged with every batch."""
    for bit in bits:
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp) / "data"
            shutil.copytree(recorded.directory, directory)
            (journal,) = directory.glob("journal-*.log")
            data = bytearray(journal.read_bytes())
            data[bit // 8] ^= 1 << (bit % 8)
            journal.write_bytes(bytes(data))
            got = read_back(directory)
            assert isinstance(got, StoreError) and journal.name in str(got), bit
            assert "header is damaged" in str(got) and "--salvage" in str(got), got
            salvage_directory(str(directory))
            assert read_back(directory) == recorded.acknowledged, bit


def committed_flips(recorded: Recorded, stride: int, last: int, last_stride: int) -> None:
    """A bit flipped every ``stride`` bytes of the committed journal, every ``last_stride``
    in its ``last`` batches (the last committed one included: the recovery point covers it):
    each refused."""
    start = recorded.batches[-last][0]
    for offset in [*range(len(MAGIC), start, stride), *range(start, recorded.committed, last_stride)]:
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp) / "data"
            shutil.copytree(recorded.directory, directory)
            (journal,) = directory.glob("journal-*.log")
            data = bytearray(journal.read_bytes())
            data[offset] ^= 0x10
            journal.write_bytes(bytes(data))
            assert isinstance(read_back(directory), StoreError), offset


def test_a_bit_of_each_header_byte_flipped_is_refused_and_salvaged_whole(recorded: Recorded) -> None:
    header_flips(recorded, range(0, len(MAGIC) * 8, 9))


def test_flips_of_committed_bytes_are_refused(recorded: Recorded) -> None:
    committed_flips(recorded, 1999, 2, 13)


@pytest.mark.fuzz
def test_every_bit_of_the_header_flipped_is_refused_and_salvaged_whole(recorded: Recorded) -> None:
    header_flips(recorded, range(len(MAGIC) * 8))


@pytest.mark.fuzz
def test_every_flip_of_every_committed_byte_is_refused(recorded: Recorded) -> None:
    committed_flips(recorded, 97, 5, 3)


def test_the_recorded_store_is_what_the_fuzz_needs(recorded: Recorded) -> None:
    """(The fixture itself: a few hundred acknowledged operations, a torn tail after them.)"""
    assert len(recorded.sent) > 200 and len(recorded.batches) >= BATCHES
    assert os.path.getsize(next(recorded.directory.glob("journal-*.log"))) == recorded.committed + len(recorded.torn)
    assert read_back(recorded.directory) == recorded.acknowledged
