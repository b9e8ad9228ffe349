"""The recovery point beside the journal, and what it lets the store refuse (issue 30,
item 3): a journal cut short of what was committed is refused naming the file, the length
expected and the one found, and ``--salvage``; a torn write after it stays recoverable.
The point is written by the writer thread, at most once a second while batches are written
and within a second after the last, at a clean stop, and naming the new file after a
compaction; a damaged one is refused, a missing one is refused unless the journal is of
the earlier format (an upgraded data directory), which is read, then rewritten in the
current format with the first batch."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path

import pytest

from amqplink.broker.durable import Persistence, StoreError, checkpoint
from amqplink.broker.durable.journal import Journal
from amqplink.broker.durable.records import entity_record, sequence_record
from amqplink.broker.durable.recovery import CURRENT, MAGIC_V1, V1, CutShort, RecoveryPoint
from amqplink.broker.namespace import Namespace
from amqplink.cli import main
from amqplink.message import Message
from tests.broker.nsutil import send
from tests.broker.test_durable import CONFIG, committed
from tests.broker.test_durable_damage import refused_then_salvaged, snapshot
from tests.broker.test_durable_journal import message, only_file, reopened


async def _stored(directory: Path, count: int, per_batch: int) -> list[str]:
    now = time.time()
    store = Persistence(directory, fsync=False)
    ns = Namespace(CONFIG)
    store.attach(ns)
    ids = [f"m{i}" for i in range(count)]
    for start in range(0, count, per_batch):
        for mid in ids[start : start + per_batch]:
            send(ns, "q", now, body=b"x" * 100, message_id=mid)
        await committed(store)
    await store.close()
    return ids


def stored(directory: Path, count: int, per_batch: int = 100) -> list[str]:
    """A store of ``count`` acknowledged sends (``per_batch`` a commit), stopped cleanly: their ids."""
    return asyncio.run(_stored(directory, count, per_batch))


async def _ids_in(directory: Path) -> list[str]:
    store = Persistence(directory, fsync=False)
    ns = Namespace(CONFIG)
    store.attach(ns)
    found = [str(m.envelope.message_id) for m in ns.receiver_source("q").peek(1, 1 << 20, time.time())]
    await store.close()
    return found


def ids_in(directory: Path) -> list[str]:
    """The message ids of queue ``q`` as a broker reads the directory back (and stops)."""
    return asyncio.run(_ids_in(directory))


def test_a_journal_cut_at_a_quarter_after_a_clean_stop_is_refused_and_salvage_keeps_what_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's repro: 1,800 acknowledged sends, a clean stop, the journal cut at 25 %.
    It started with 1,500 of them missing; now it is refused, naming the file, the lengths
    and --salvage, and nothing is changed; salvage keeps the quarter and says what was cut."""
    ids = stored(tmp_path, 1800)
    path = only_file(tmp_path)
    size = path.stat().st_size
    cut = size // 4
    with open(path, "r+b") as f:
        f.truncate(cut)
    before = snapshot(tmp_path)
    with pytest.raises(CutShort) as refused:
        Persistence(tmp_path, fsync=False)
    text = str(refused.value)
    assert path.name in text and f"is {cut} bytes long" in text and f"says {size} bytes were committed" in text
    assert checkpoint.NAME in text and f"amqplink broker-store {tmp_path} --salvage" in text
    assert snapshot(tmp_path) == before
    assert main(["broker-store", str(tmp_path)]) == 2  # (the report refuses it the same way)
    assert "cut short" in capsys.readouterr().err

    assert main(["broker-store", str(tmp_path), "--salvage"]) == 0
    salvaged = json.loads(capsys.readouterr().out)["salvaged"]
    assert salvaged["cut_short"] == {"expected_bytes": size, "found_bytes": cut}
    assert salvaged["lost"] != "nothing" and salvaged["batches_missing"]
    left = ids_in(tmp_path)
    assert 0 < len(left) < 1800 // 4 and left == ids[: len(left)]  # a prefix: the batches before the cut


def test_a_torn_write_after_the_recovery_point_is_dropped_and_every_acknowledged_send_kept(tmp_path: Path) -> None:
    ids = stored(tmp_path, 300)
    path = only_file(tmp_path)
    whole = path.read_bytes()
    with open(path, "ab") as f:  # a batch the crash cut: its head and part of its body
        body = b"M" + bytes(200)
        f.write((CURRENT.frame(body, 99) + body)[:120])
    assert ids_in(tmp_path) == ids
    assert path.read_bytes() == whole  # cut back to the recovery point


async def test_the_recovery_point_is_written_by_the_writer_thread_within_a_second_and_at_the_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While batches are written the event loop never writes it; idle after a batch, it
    comes within the interval; a clean stop writes the whole file's length."""
    monkeypatch.setattr(checkpoint, "INTERVAL", 0.2)
    real = checkpoint.write
    writes: list[tuple[str, RecoveryPoint]] = []
    written = threading.Event()

    def recorded_write(directory: str, point: RecoveryPoint, **how: bool) -> None:
        real(directory, point, **how)
        writes.append((threading.current_thread().name, point))
        written.set()

    monkeypatch.setattr(checkpoint, "write", recorded_write)
    now = time.time()
    store = Persistence(tmp_path, fsync=False)
    ns = Namespace(CONFIG)
    store.attach(ns)
    await committed(store)
    journal = store.commits.journal
    written.clear()
    send(ns, "q", now, message_id="one")
    await committed(store)
    at = time.monotonic()
    assert await asyncio.to_thread(written.wait, 10)
    assert time.monotonic() - at < 2.0
    assert writes[-1] == ("amqplink-store-writer", RecoveryPoint(1, journal.size, journal.batches))
    assert checkpoint.read(str(tmp_path)) == writes[-1][1]
    loop_thread = threading.current_thread().name
    send(ns, "q", now, message_id="two")
    await committed(store)
    await store.close()
    assert all(name != loop_thread for name, _ in writes[1:])  # (the first: opening, before the loop ran)
    assert checkpoint.read(str(tmp_path)) == RecoveryPoint(1, only_file(tmp_path).stat().st_size, journal.batches)


def test_the_recovery_point_is_written_at_most_once_an_interval_while_batches_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal(tmp_path, fsync=False)
    now = [0.0]
    journal.clock = lambda: now[0]
    journal.checkpoint()  # (as at the start: the clock starts here)
    real = checkpoint.write
    points: list[RecoveryPoint] = []
    monkeypatch.setattr(checkpoint, "write", lambda d, p, **how: (points.append(p), real(d, p, **how)))
    for seq in range(1, 81):  # 80 batches over 10 seconds
        now[0] += 0.125
        journal.append(message(1, seq, b"x"))
    assert [p.batch for p in points] == list(range(8, 81, 8))  # one a second, after the batch that ends it
    assert journal.checkpoint_wait() is None  # (the last append ended an interval)
    now[0] += 0.125
    journal.append(message(1, 81, b"x"))
    assert journal.checkpoint_wait() == 0.875
    journal.close()
    assert points[-1] == RecoveryPoint(1, journal.size, 81)  # (and the clean stop)


def test_a_compaction_names_the_new_file_and_one_stopped_before_its_point_is_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"completed"))
    journal.append(message(1, 2, b"live"))
    journal.compact(message(1, 2, b"live"))
    assert checkpoint.read(str(tmp_path)) == RecoveryPoint(2, journal.size, 1)
    journal.append(message(1, 3, b"after"))
    journal.close()
    # A crash between a compaction's rename and its recovery point: the point names the older file.
    checkpoint.write(str(tmp_path), RecoveryPoint(1, 999, 2), sync=False)
    with caplog.at_level(logging.WARNING):
        state = reopened(tmp_path).state
    assert sorted(state.messages[1]) == [2, 3]
    assert "a compaction stopped before it wrote its recovery point" in caplog.text
    assert checkpoint.read(str(tmp_path)) == RecoveryPoint(2, only_file(tmp_path).stat().st_size, 2)


def test_a_recovery_point_naming_a_journal_that_is_missing_is_refused(tmp_path: Path) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"one"))
    journal.compact(message(1, 1, b"one"))
    journal.close()
    (tmp_path / "journal-00000001.log").write_bytes(MAGIC_V1)  # an older journal ...
    only = tmp_path / "journal-00000002.log"
    only.unlink()  # ... and the newest gone
    before = snapshot(tmp_path)
    with pytest.raises(StoreError, match=r"names journal-00000002\.log .* which is missing.*--salvage"):
        Journal(tmp_path, fsync=False)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("damage", ["flipped", "empty", "garbage"])
def test_a_damaged_recovery_point_is_refused_naming_it_and_salvage_writes_it_again(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"one"))
    journal.close()
    point = tmp_path / checkpoint.NAME
    raw = bytearray(point.read_bytes())
    if damage == "flipped":
        raw[raw.index(b"length ") + 8] ^= 0x01  # a digit of the length: still a number
    original = bytes(raw) if damage == "flipped" else b"" if damage == "empty" else b"\x00" * 40
    point.write_bytes(original)
    match = rf"recovery point .*{checkpoint.NAME}.* is damaged.*--salvage"
    report = refused_then_salvaged(tmp_path, StoreError, match, capsys)
    assert report["recovery_point"].startswith("damaged (kept as") and report["lost"] == "nothing"
    assert (tmp_path / (checkpoint.NAME + ".damaged")).read_bytes() == original
    assert sorted(reopened(tmp_path).state.messages[1]) == [1]


def test_a_missing_recovery_point_of_a_current_journal_is_refused_and_salvage_writes_it(tmp_path: Path) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"one"))
    journal.close()
    (tmp_path / checkpoint.NAME).unlink()
    with pytest.raises(StoreError, match=r"recovery point .* is missing.*--salvage"):
        Journal(tmp_path, fsync=False)
    main(["broker-store", str(tmp_path), "--salvage"])
    assert sorted(reopened(tmp_path).state.messages[1]) == [1]


def v1_journal(directory: Path, batches: list[list[bytes]]) -> Path:
    """A data directory as amqplink wrote it before the recovery point (format 1, no point)."""
    directory.mkdir(exist_ok=True)
    path = directory / "journal-00000001.log"
    pieces = [MAGIC_V1]
    for records in batches:
        body = b"".join(records)
        pieces += [V1.frame(body, 0), body]
    path.write_bytes(b"".join(pieces))
    return path


def test_a_data_directory_of_the_earlier_format_is_read_and_rewritten_in_the_current_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Not checked the first time (logged once), its recovery point written from then on, and
    the first batch compacts it into the current format; what it held is all there after."""
    payloads = [Message(b"x", message_id=f"old{i}").encode() for i in range(3)]
    v1_journal(
        tmp_path,
        [
            [entity_record(1, "q"), *message(1, 1, payloads[0]), sequence_record(1, 2)],
            [*message(1, 2, payloads[1]), *message(1, 3, payloads[2]), sequence_record(1, 4)],
        ],
    )
    with caplog.at_level(logging.WARNING):
        asyncio.run(_upgraded(tmp_path))
    assert caplog.text.count("a journal of an earlier amqplink (format 1), with no recovery point") == 1
    assert only_file(tmp_path).read_bytes().startswith(CURRENT.magic)
    assert only_file(tmp_path).name == "journal-00000002.log"
    assert ids_in(tmp_path) == ["old0", "old1", "old2", "new"]


async def _upgraded(directory: Path) -> None:
    store = Persistence(directory, fsync=False)
    assert checkpoint.read(str(directory)) == RecoveryPoint(1, only_file(directory).stat().st_size, 2)
    assert store.commits.journal.layout is V1
    ns = Namespace(CONFIG)
    store.attach(ns)
    send(ns, "q", time.time(), message_id="new")
    await committed(store)
    assert store.commits.journal.layout is CURRENT
    await store.close()


def test_a_damaged_journal_of_the_earlier_format_is_salvaged_into_the_current_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = v1_journal(tmp_path, [message(1, seq, b"payload %d" % seq * 10) for seq in range(1, 6)])
    data = bytearray(path.read_bytes())
    data[len(MAGIC_V1) + 40] ^= 0x04  # in the first batch: valid ones follow
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="damaged at offset 16"):
        Journal(tmp_path, fsync=False)
    assert main(["broker-store", str(tmp_path), "--salvage"]) == 0
    report = json.loads(capsys.readouterr().out)["salvaged"]
    assert report["format"] == "1 (written as 2)" and report["batches_kept"] == 4
    assert report["batches_missing"] == []  # (format 1 numbers no batch: the bytes lost say it)
    assert report["lost_bytes"][0]["offset"] == 16
    assert path.read_bytes().startswith(CURRENT.magic)
    assert checkpoint.read(str(tmp_path)) == RecoveryPoint(1, path.stat().st_size, 4)
    assert sorted(reopened(tmp_path).state.messages[1]) == [2, 3, 4, 5]


def test_salvage_of_a_directory_whose_newest_journal_is_missing_reads_the_older_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"one"))
    journal.compact([*message(1, 1, b"one"), *message(1, 2, b"two")])
    journal.close()
    older = tmp_path / "journal-00000001.log"
    older.write_bytes(CURRENT.magic)  # (left by the compaction, as a crash leaves it)
    (tmp_path / "journal-00000002.log").unlink()
    assert main(["broker-store", str(tmp_path), "--salvage"]) == 0
    report = json.loads(capsys.readouterr().out)["salvaged"]
    assert report["missing_journal"].startswith("journal-00000002.log") and report["lost"] != "nothing"
    assert checkpoint.read(str(tmp_path)) == RecoveryPoint(1, len(CURRENT.magic), 0)
    assert reopened(tmp_path).state.messages == {}


def test_a_journal_of_the_earlier_format_whose_upgrade_is_put_off_is_appended_to_in_its_own(tmp_path: Path) -> None:
    """No room for the copy the upgrade writes: the batch is appended as format 1 has it, and
    read back with the rest (and its recovery point checked from then on)."""
    path = v1_journal(tmp_path, [message(1, 1, b"old")])
    journal = Journal(tmp_path, fsync=False)
    assert journal.upgrade_due and journal.layout is V1
    journal.space = 10
    assert not journal.compact([*message(1, 1, b"old"), *message(1, 2, b"new")])
    assert not journal.upgrade_due  # (tried once: then by size, as any compaction)
    journal.space = None
    journal.append(message(1, 2, b"new"))
    journal.close()
    assert path.read_bytes().startswith(MAGIC_V1)
    assert checkpoint.read(str(tmp_path)) == RecoveryPoint(1, path.stat().st_size, 2)
    assert {seq: f[6] for seq, f in reopened(tmp_path).state.messages[1].items()} == {1: b"old", 2: b"new"}


def test_the_directory_is_flushed_for_a_first_point_and_a_new_journal_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A point renamed over one naming the same journal needs no directory flush (undone by
    a power cut, the point before claims less); a first one, or one naming a new file, does."""
    flushed: list[RecoveryPoint | None] = []
    real = checkpoint.write

    def write(directory: str, point: RecoveryPoint, *, sync: bool = True, rename_lasts: bool = True) -> None:
        flushed.append(point if rename_lasts else None)
        real(directory, point, sync=False, rename_lasts=rename_lasts)

    monkeypatch.setattr(checkpoint, "write", write)
    journal = Journal(tmp_path, fsync=False)
    now = [0.0]
    journal.clock = lambda: now[0]
    journal.checkpoint()  # (the same point: nothing written; the clock starts here)
    for seq in range(1, 4):
        now[0] += 1.0
        journal.append(message(1, seq, b"x"))
    journal.compact(message(1, 3, b"x"))
    journal.close()  # (the same point as after the compaction: nothing written)
    assert [p is not None for p in flushed] == [True, False, False, False, True]
    assert flushed[0] == RecoveryPoint(1, len(CURRENT.magic), 0) and flushed[4] == RecoveryPoint(2, journal.size, 1)
