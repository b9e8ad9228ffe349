"""The journal file on its own: records replayed, torn and corrupt tails, compaction and
the states a crash can leave a compaction in, one broker per directory."""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path

import pytest

from amqplink.broker.durable import checkpoint
from amqplink.broker.durable.journal import MAGIC, Journal, StoreError, journal_files
from amqplink.broker.durable.records import (
    K_MESSAGE,
    K_STATE,
    MESSAGE,
    RESET_RECORD,
    STATE,
    definitions_record,
    delete_record,
    duplicate_record,
    entity_record,
    purge_record,
    sequence_record,
    session_record,
)
from amqplink.broker.durable.recovery import CorruptJournal, CutShort, RecoveryPoint


def message(entity: int, seq: int, payload: bytes, count: int = 0, scheduled: float = math.nan) -> list[bytes]:
    return [MESSAGE.pack(K_MESSAGE, entity, seq, 0, count, 0, 10.0, math.inf, scheduled, len(payload)), payload]


def reopened(directory: Path) -> Journal:
    journal = Journal(directory, fsync=False)
    journal.close()
    return journal


def only_file(directory: Path) -> Path:
    ((_, path),) = journal_files(str(directory))
    return Path(path)


def as_if_crashed(directory: Path, length: int, batches: int) -> None:
    """Make the recovery point what a crash within a second of the batches after ``length``
    leaves: only the first ``batches`` (ending at ``length``) known committed, so that damage
    after them is a torn write, as far as anyone can tell."""
    ((number, _),) = journal_files(str(directory))
    checkpoint.write(str(directory), RecoveryPoint(number, length, batches), sync=False)


def test_every_kind_of_record_is_replayed(tmp_path: Path) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(
        [
            entity_record(1, "q"),
            entity_record(2, "q#0"),
            *message(1, 1, b"one"),
            *message(1, 2, b"two", scheduled=99.0),
            *message(2, 1 << 48, b"fragment"),
            sequence_record(1, 3),
            session_record(1, "alpha", b"s1"),
            session_record(1, "beta", b"s2"),
            duplicate_record(1, b"old", 1.0, 5.0),
            duplicate_record(1, b"new", 6.0, 50.0),
            definitions_record(b'{"queues":[]}'),
        ]
    )
    journal.append(
        [
            STATE.pack(K_STATE, 1, 1, 1, 3, 1, 11.0, 20.0, math.nan),
            STATE.pack(K_STATE, 1, 77, 1, 3, 1, 11.0, 20.0, math.nan),  # of no stored message: ignored
            delete_record(1, 2),
            session_record(1, "beta", None),
            purge_record(5.0),
            definitions_record(b'{"queues":[{}]}'),
        ]
    )
    journal.close()
    state = reopened(tmp_path).state
    assert state.entities == {1: "q", 2: "q#0"}
    assert state.next_sequence == {1: 3}
    assert state.messages == {
        1: {1: (1, 3, 1, 11.0, 20.0, None, b"one")},
        2: {1 << 48: (0, 0, 0, 10.0, math.inf, None, b"fragment")},
    }
    assert state.sessions == {1: {"alpha": b"s1"}}
    assert state.duplicates == {(1, b"new"): (6.0, 50.0)}
    assert state.definitions == b'{"queues":[{}]}'


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_last_batch_is_dropped_and_cut_so_that_later_batches_follow_valid_ones(
    tmp_path: Path, damage: str
) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"first"))
    whole = journal.size
    journal.append(message(1, 2, b"second" * 100))
    journal.close()
    as_if_crashed(tmp_path, whole, 1)
    path = only_file(tmp_path)
    damaged(path, damage, whole)
    journal = Journal(tmp_path, fsync=False)
    assert list(journal.state.messages[1]) == [1]
    assert path.stat().st_size == whole  # the torn batch is cut off
    journal.append(message(1, 3, b"third"))
    journal.close()
    # Had the torn bytes stayed, the batch after them would be unreadable.
    assert list(reopened(tmp_path).state.messages[1]) == [1, 3]


def damaged(path: Path, damage: str, whole: int) -> None:
    """The last batch (from offset ``whole``) cut by 10 bytes or 3 of its bytes overwritten."""
    with open(path, "r+b") as f:
        if damage == "truncated":
            f.truncate(path.stat().st_size - 10)
        else:
            f.seek(whole + 20)
            f.write(b"\xff\xff\xff")


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_the_same_damage_to_a_last_batch_committed_before_a_clean_stop_is_refused(tmp_path: Path, damage: str) -> None:
    """After a clean stop the recovery point covers every batch: the last one cut or changed
    is damage (it was committed), not a torn write."""
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"first"))
    whole = journal.size
    journal.append(message(1, 2, b"second" * 100))
    journal.close()
    path = only_file(tmp_path)
    size = path.stat().st_size
    damaged(path, damage, whole)
    before = path.read_bytes()
    with pytest.raises(CutShort if damage == "truncated" else CorruptJournal) as refused:
        Journal(tmp_path, fsync=False)
    text = str(refused.value)
    assert path.name in text and "--salvage" in text
    if damage == "truncated":
        assert f"is {size - 10} bytes long" in text and f"says {size} bytes were committed" in text
    else:
        assert f"damaged at offset {whole}" in text and f"says {size} bytes were committed" in text
    assert path.read_bytes() == before


def test_a_batch_that_passes_its_checksum_but_does_not_parse_is_refused(tmp_path: Path) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append([b"Z" + bytes(10)])
    journal.close()
    with pytest.raises(StoreError, match=r"unknown record kind.*--salvage"):
        Journal(tmp_path, fsync=False)


def test_compaction_replaces_the_journal_by_the_live_state(tmp_path: Path) -> None:
    journal = Journal(tmp_path, fsync=False)
    for seq in range(1, 101):
        journal.append(message(1, seq, b"x" * 1000))
    for seq in range(1, 100):
        journal.append([delete_record(1, seq)])
    assert journal.compaction_due(min_bytes=0)
    grown = journal.size
    journal.compact([entity_record(1, "q"), *message(1, 100, b"x" * 1000)])
    assert journal.size < grown / 50 and not journal.compaction_due(min_bytes=0)
    journal.append([delete_record(1, 100), *message(1, 101, b"after")])
    journal.close()
    assert only_file(tmp_path).name == "journal-00000002.log"
    state = reopened(tmp_path).state
    assert state.entities == {1: "q"}
    assert {seq: fields[6] for seq, fields in state.messages[1].items()} == {101: b"after"}


def test_a_compaction_interrupted_before_its_rename_leaves_the_old_journal(tmp_path: Path) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"kept"))
    journal.close()
    # The crash came while the new file was written: a partial .tmp beside the old journal.
    partial = tmp_path / "journal-00000002.log.tmp"
    partial.write_bytes(MAGIC + b"\x00\x00\x10\x00garbage")
    state = reopened(tmp_path).state
    assert state.messages[1][1][6] == b"kept"
    assert not partial.exists()
    assert only_file(tmp_path).name == "journal-00000001.log"


def test_a_compaction_interrupted_after_its_rename_reads_only_the_new_journal(tmp_path: Path) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"completed later"))
    journal.append(message(1, 2, b"live"))
    journal.close()
    old = only_file(tmp_path)
    saved = old.read_bytes()
    journal = Journal(tmp_path, fsync=False)
    journal.compact(message(1, 2, b"live"))
    journal.close()
    old.write_bytes(saved)  # the crash came before the old file was removed
    state = reopened(tmp_path).state
    assert {seq: fields[6] for seq, fields in state.messages[1].items()} == {2: b"live"}
    assert only_file(tmp_path).name == "journal-00000002.log"


def test_one_broker_per_directory(tmp_path: Path) -> None:
    first = Journal(tmp_path, fsync=False)
    with pytest.raises(StoreError, match="in use by another broker"):
        Journal(tmp_path, fsync=False)
    first.close()
    reopened(tmp_path)


def test_a_store_of_the_sqlite_version_is_refused_naming_it(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "broker.sqlite3").close()
    with pytest.raises(StoreError, match=r"broker\.sqlite3.*move the directory away"):
        Journal(tmp_path, fsync=False)
    assert journal_files(str(tmp_path)) == []
    assert os.listdir(tmp_path) != []


def test_a_failed_write_is_cut_off_so_that_later_batches_stay_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append(message(1, 1, b"before"))
    real = os.write

    def part_then_full(fd: int, data: bytes) -> int:
        real(fd, data[:100])
        raise OSError(28, "No space left on device")

    def part_then_full_v(fd: int, buffers: list[bytes]) -> int:
        return part_then_full(fd, b"".join(buffers))

    monkeypatch.setattr(os, "write", part_then_full)
    monkeypatch.setattr(os, "writev", part_then_full_v)
    with pytest.raises(OSError, match="No space"):
        journal.append(message(1, 2, b"lost" * 100))
    monkeypatch.undo()
    journal.append(message(1, 3, b"after"))
    journal.close()
    assert {seq: f[6] for seq, f in reopened(tmp_path).state.messages[1].items()} == {1: b"before", 3: b"after"}


@pytest.mark.parametrize("how", ["rename fails", "no room for the copy"])
def test_a_compaction_that_cannot_be_made_leaves_the_journal_and_waits_for_it_to_grow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    journal = Journal(tmp_path, fsync=False)
    journal.append([entity_record(1, "q"), *message(1, 1, b"completed"), *message(1, 2, b"live")])
    before = only_file(tmp_path).read_bytes()
    if how == "rename fails":

        def no_rename(src: str, dst: str) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "rename", no_rename)
    else:
        journal.space = 100  # room for a batch, not for a copy of the live state
    assert not journal.compact([RESET_RECORD, entity_record(1, "q"), *message(1, 2, b"live")])
    monkeypatch.undo()
    assert only_file(tmp_path).read_bytes() == before  # nothing written, nothing left behind
    assert not journal.compaction_due(min_bytes=0)  # not again at once: it waits for the file to grow
    journal.append(message(1, 3, b"after"))  # (what the caller does with the batch's own records)
    journal.close()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("journal")] == ["journal-00000001.log"]
    state = reopened(tmp_path).state
    assert {seq: f[6] for seq, f in state.messages[1].items()} == {1: b"completed", 2: b"live", 3: b"after"}
