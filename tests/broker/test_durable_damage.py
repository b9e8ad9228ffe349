"""A damaged store is refused, never truncated: a bad batch followed by valid ones is
corruption (refused naming the file and the offset, nothing changed on disk, repaired by
``broker-store --salvage`` which keeps a copy); a stray or empty newer file beside a good
journal is refused with both kept; only a torn last write is dropped (issue 23, items 1-2).
A batch out of its place (copied, swapped), a damaged header and a record of out-of-range
fields are refused too, and salvaged (issue 30, item 3)."""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker.durable import records
from amqplink.broker.durable.journal import Journal, StoreError, journal_files
from amqplink.broker.durable.records import RUN, delete_record, entity_record
from amqplink.broker.durable.recovery import CorruptJournal, OutOfPlace
from amqplink.cli import main
from tests.broker.test_durable_journal import as_if_crashed, message, only_file, reopened


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
    as_if_crashed(tmp_path, starts[4], 4)  # (the last batch written within the second before a crash)
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


def refused_then_salvaged(
    directory: Path, refusal: type[StoreError], match: str, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """Starting on ``directory`` is refused (``refusal``, its text matching ``match``) with
    every file as it was; ``broker-store --salvage`` then repairs it: its report."""
    before = snapshot(directory)
    with pytest.raises(refusal, match=match):
        Journal(directory, fsync=False)
    assert snapshot(directory) == before
    capsys.readouterr()
    assert main(["broker-store", str(directory), "--salvage"]) == 0
    salvaged: dict[str, Any] = json.loads(capsys.readouterr().out)["salvaged"]
    return salvaged


def acknowledged_then_completed(directory: Path) -> tuple[list[int], list[int]]:
    """A journal where batch 1 stores messages 1-3, batch 2 completes 1 and 2, batch 3 stores
    4: the offset each batch starts at, and their lengths with their heads."""
    journal = Journal(directory, fsync=False)
    starts = [journal.size]
    journal.append([entity_record(1, "q"), *message(1, 1, b"one"), *message(1, 2, b"two"), *message(1, 3, b"three")])
    starts.append(journal.size)
    journal.append([delete_record(1, 1), delete_record(1, 2)])
    starts.append(journal.size)
    journal.append(message(1, 4, b"four"))
    journal.close()
    ends = [*starts[1:], journal.size]
    return starts, [end - start for start, end in zip(starts, ends, strict=True)]


@pytest.mark.parametrize("where", ["at the end", "before its completion"])
def test_a_batch_copied_elsewhere_is_refused_and_salvage_drops_the_copy(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CRC-valid copy of the batch that stored messages 1-3, replayed after the batch that
    completed 1 and 2, brought them back; now it is refused as a batch out of place."""
    starts, lengths = acknowledged_then_completed(tmp_path)
    path = only_file(tmp_path)
    data = bytearray(path.read_bytes())
    copy = data[starts[0] : starts[0] + lengths[0]]
    at = len(data) if where == "at the end" else starts[1]
    data[at:at] = copy
    path.write_bytes(bytes(data))
    match = rf"{path.name}.*the batch at offset {at} checks but is batch #1 where #\d+ was expected.*--salvage"
    salvaged = refused_then_salvaged(tmp_path, OutOfPlace, match, capsys)
    assert salvaged["copies_dropped"] == [at] and salvaged["lost"] == "nothing"
    assert sorted(reopened(tmp_path).state.messages[1]) == [3, 4]  # the completions stay


def test_two_batches_swapped_are_refused_and_salvage_puts_them_back_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Swapped, the store of 1-3 replayed after their completion: 1 and 2 came back."""
    starts, _ = acknowledged_then_completed(tmp_path)
    path = only_file(tmp_path)
    data = path.read_bytes()
    first, second = data[starts[0] : starts[1]], data[starts[1] : starts[2]]
    path.write_bytes(data[: starts[0]] + second + first + data[starts[2] :])
    salvaged = refused_then_salvaged(tmp_path, OutOfPlace, r"batch #2 where #1 was expected", capsys)
    assert salvaged["put_back_in_order"] == 1 and salvaged["lost"] == "nothing"
    assert sorted(reopened(tmp_path).state.messages[1]) == [3, 4]


@pytest.mark.parametrize("bit", [0, 7, 60, 127])
def test_a_bit_flipped_in_the_magic_header_is_refused_and_salvage_keeps_every_batch(
    tmp_path: Path, bit: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both the broker and --salvage said "start empty" while every batch was intact."""
    written(tmp_path, 10)
    path = only_file(tmp_path)
    flip_bit = bytearray(path.read_bytes())
    flip_bit[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(flip_bit))
    match = r"journal-00000001\.log.*header is damaged.*--salvage"
    salvaged = refused_then_salvaged(tmp_path, StoreError, match, capsys)
    assert salvaged["header"] == "damaged, written again" and salvaged["lost"] == "nothing"
    assert salvaged["batches_kept"] == 10
    assert sorted(reopened(tmp_path).state.messages[1]) == list(range(1, 11))



@pytest.mark.parametrize("kept", [1, 14])
def test_a_journal_cut_inside_its_header_is_refused_and_salvage_starts_it_reporting_the_loss(
    tmp_path: Path, kept: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the damage fuzz: salvage said "not an amqplink journal" of the broker's own
    journal cut to the first bytes of its header, and left nothing that would start."""
    written(tmp_path, 3)
    path = only_file(tmp_path)
    path.write_bytes(path.read_bytes()[:kept])
    salvaged = refused_then_salvaged(tmp_path, StoreError, r"journal-00000001\.log.*--salvage", capsys)
    assert salvaged["lost"] != "nothing"
    assert reopened(tmp_path).state.messages.get(1, {}) == {}

def forged(directory: Path, record: bytes) -> int:
    """A journal of message 1 then a batch that checks holding ``record``: that batch's offset."""
    journal = Journal(directory, fsync=False)
    journal.append([entity_record(1, "q"), *message(1, 1, b"kept")])
    start = journal.size
    journal.append([record])
    journal.close()
    return start


@pytest.mark.parametrize("kind", [chr(k) for k in records.KINDS if k != records.K_RESET])
def test_a_record_of_all_0xff_fields_is_refused(tmp_path: Path, kind: str) -> None:
    """Every kind, its fixed fields all 0xff (the tail a run or message needs included): the
    batch checks, the record does not: refused naming the file and the batch's offset."""
    start = forged(tmp_path, kind.encode() + b"\xff" * 64)
    before = snapshot(tmp_path)
    with pytest.raises(StoreError, match=rf"journal-00000001\.log.*the batch at offset {start}: .*--salvage"):
        Journal(tmp_path, fsync=False)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "field, value",
    [
        ("state", 0xFF), ("state", 4), ("delivery_count", 0xFFFFFFFF), ("deferred", 2), ("sequence", -1),
        ("sequence", 0), ("entity", 0), ("enqueued", math.nan), ("expires", math.nan), ("scheduled", math.inf),
    ],
)  # fmt: skip
@pytest.mark.parametrize("record", ["M", "U", "B", "V"])
def test_a_message_record_with_one_field_out_of_range_is_refused(
    tmp_path: Path, record: str, field: str, value: float
) -> None:
    """The record of an existing message (entity 1, sequence 1), one field out of range: the
    0xff state started the broker with a phantom locked message."""
    fields = {"entity": 1, "sequence": 1, "state": 1, "delivery_count": 1, "deferred": 0, "enqueued": 10.0,
              "expires": math.inf, "scheduled": math.nan}  # fmt: skip
    fields[field] = value
    e, q, st, dc, d, en, ex, sc = fields.values()
    packed = {
        "M": records.MESSAGE.pack(records.K_MESSAGE, e, q, st, dc, d, en, ex, sc, 3) + b"abc",
        "U": records.STATE.pack(records.K_STATE, e, q, st, dc, d, en, ex, sc),
        "B": RUN.pack(records.K_RUN, e, q, 1, st, dc, d, en, ex, sc) + struct.pack(">I", 3) + b"abc",
        "V": RUN.pack(records.K_STATE_RUN, e, q, 1, st, dc, d, en, ex, sc),
    }[record]
    forged(tmp_path, packed)
    with pytest.raises(StoreError, match=r"out of range"):
        Journal(tmp_path, fsync=False)


@pytest.mark.parametrize("record", ["V", "G"])
def test_a_run_of_four_billion_messages_replays_in_the_time_of_what_is_stored(tmp_path: Path, record: str) -> None:
    """A count is bounded by its field, not by what is stored: a run that checks walks the
    messages stored, not 2**32 sequence numbers (it would not end)."""
    first, count = 1, 0xFFFFFFFF
    packed = (
        RUN.pack(records.K_STATE_RUN, 1, first, count, 0, 2, 0, 10.0, math.inf, math.nan)
        if record == "V"
        else records.GONE.pack(records.K_GONE, 1, first, count)
    )
    forged(tmp_path, packed)
    state = reopened(tmp_path).state
    assert state.messages[1] == ({1: (0, 2, 0, 10.0, math.inf, None, b"kept")} if record == "V" else {})
