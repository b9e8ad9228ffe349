"""A damaged store is refused, never truncated: a bad batch followed by valid ones is
corruption (refused naming the file and the offset, nothing changed on disk, repaired by
``broker-store --salvage`` which keeps a copy); a stray or empty newer file beside a good
journal is refused with both kept; only a torn last write is dropped (issue 23, items 1-2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amqplink.broker.durable.journal import Journal, StoreError, journal_files
from amqplink.broker.durable.recovery import CorruptJournal
from amqplink.cli import main
from tests.broker.test_durable_journal import message, only_file, reopened


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and mtime (ns): what "nothing changed on disk" compares."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def written(directory: Path, batches: int) -> list[int]:
    """A journal of ``batches`` batches of one message each (sequence numbers 1..N); the
    offset each batch starts at."""
    journal = Journal(directory, fsync=False)
    starts = []
    for seq in range(1, batches + 1):
        starts.append(journal.size)
        journal.append(message(1, seq, b"payload %d " % seq * 20))
    journal.close()
    return starts


def flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x40]))


@pytest.mark.parametrize("where", ["body", "length"])
def test_one_flipped_byte_mid_journal_is_refused_naming_the_offset_and_nothing_changes(
    tmp_path: Path, where: str
) -> None:
    starts = written(tmp_path, 10)
    path = only_file(tmp_path)
    flip(path, starts[3] + (30 if where == "body" else 1))  # in the 4th batch; 6 valid batches after it
    before = snapshot(tmp_path)
    with pytest.raises(CorruptJournal) as refused:
        Journal(tmp_path, fsync=False)
    assert refused.value.offset == starts[3] and refused.value.resume == starts[4]
    text = str(refused.value)
    assert path.name in text and f"offset {starts[3]}" in text and "--salvage" in text
    assert snapshot(tmp_path) == before  # not truncated, not removed, not touched


def test_broker_store_reports_a_corrupt_journal_and_salvage_keeps_a_copy_and_every_valid_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    starts = written(tmp_path, 10)
    path = only_file(tmp_path)
    flip(path, starts[3] + 30)
    original = path.read_bytes()
    assert main(["broker-store", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"damaged at offset {starts[3]}" in err and "Traceback" not in err
    assert path.read_bytes() == original

    assert main(["broker-store", str(tmp_path), "--salvage"]) == 0
    report = json.loads(capsys.readouterr().out)
    salvaged = report["salvaged"]
    assert salvaged["lost_bytes"] == [{"offset": starts[3], "length": starts[4] - starts[3]}]
    assert "gone" in salvaged["lost"]
    assert Path(salvaged["copy"]).read_bytes() == original  # the copy is the damaged file as it was
    assert report["entities"] == {}  # (no entity record in this journal: counted by the state below)
    assert sorted(reopened(tmp_path).state.messages[1]) == [1, 2, 3, 5, 6, 7, 8, 9, 10]


@pytest.mark.parametrize("stray", [b"", b"junk that is not a journal"])
def test_a_stray_or_empty_newer_file_is_refused_and_the_good_journal_is_kept(tmp_path: Path, stray: bytes) -> None:
    written(tmp_path, 3)
    good = only_file(tmp_path)
    (tmp_path / "journal-00000002.log").write_bytes(stray)
    before = snapshot(tmp_path)
    with pytest.raises(StoreError, match=r"journal-00000002\.log.* is (empty|not an amqplink journal)"):
        Journal(tmp_path, fsync=False)
    assert snapshot(tmp_path) == before  # the good journal was not deleted
    assert main(["broker-store", str(tmp_path), "--salvage"]) == 0
    assert sorted(reopened(tmp_path).state.messages[1]) == [1, 2, 3]
    assert (tmp_path / "journal-00000002.log.damaged").read_bytes() == stray
    assert [Path(p).name for _, p in journal_files(str(tmp_path))] == [good.name]


@pytest.mark.parametrize("tail", ["cut", "zeros", "garbage"])
def test_a_torn_last_write_is_the_only_damage_dropped(tmp_path: Path, tail: str) -> None:
    starts = written(tmp_path, 5)
    path = only_file(tmp_path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        if tail == "cut":
            f.truncate(size - 7)
        elif tail == "zeros":  # a power cut: the file was extended, the block never written
            f.seek(starts[4] + 8)
            f.write(bytes(size - starts[4] - 8))
        else:
            f.seek(starts[4] + 3)
            f.write(os.urandom(size - starts[4] - 3))
    journal = Journal(tmp_path, fsync=False)
    journal.close()
    assert sorted(journal.state.messages[1]) == [1, 2, 3, 4]
    assert path.stat().st_size == starts[4]  # cut once read back


def test_a_compaction_tmp_and_superseded_files_stay_until_the_newest_was_read_back(tmp_path: Path) -> None:
    starts = written(tmp_path, 4)
    old = only_file(tmp_path)
    newer = tmp_path / "journal-00000002.log"
    newer.write_bytes(old.read_bytes()[:-5] + b"\x00" * 5)  # its last batch torn ...
    flip(newer, starts[1] + 30)  # ... and one two before it damaged: refused
    (tmp_path / "journal-00000003.log.tmp").write_bytes(b"partial")
    before = snapshot(tmp_path)
    with pytest.raises(CorruptJournal):
        Journal(tmp_path, fsync=False)
    assert snapshot(tmp_path) == before
