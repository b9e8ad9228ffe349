"""``amqplink broker-store DIR --salvage``: make a damaged data directory readable again,
keeping a copy of every file it changes (``*.damaged``) and saying what is lost.

A journal is rewritten with every valid batch it holds, whatever its header says (a
damaged header is rewritten; the format is told by the batches found). In the current
format each batch names its place (its number), so the batches are put back in the order
of their numbers: two batches swapped are read back as written, a copy of a batch is
dropped, and the numbers missing are listed (those batches are lost). The rewritten file
is in the current format, and the recovery point is written again for it; a journal
shorter than its recovery point said (cut short) is read back as far as it goes, what was
cut off reported lost. A newest file that holds no batch at all (empty, stray) is moved
aside when an older journal is there, which is then read.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field

from amqplink.broker.durable import checkpoint
from amqplink.broker.durable.journal import journal_files, recover, remove_leftovers, take_lock
from amqplink.broker.durable.records import RecordError, State
from amqplink.broker.durable.recovery import (
    CURRENT,
    LAYOUTS,
    Layout,
    RecoveryPoint,
    StoreError,
    frame_head,
    frames,
    guess_layout,
    layout_of,
    scan,
    sync_directory,
    unused,
)

__all__ = ["salvage", "salvage_directory"]


def salvage_directory(directory: str) -> dict[str, object]:
    """Repair ``directory`` (refused while a broker holds it): the report of what was done."""
    lock = take_lock(directory)
    try:
        point, point_state = _point(directory)
        files = journal_files(directory)
        if not files:
            raise StoreError(f"{directory!r} holds no amqplink journal")
        moved_aside: list[dict[str, str]] = []
        while True:
            number, path = files[-1]
            with open(path, "rb") as f:
                data = f.read()
            layout = _layout(path, data)
            if layout is None:
                if len(files) == 1:
                    layout_of(path, data)  # (raises: not a journal, or empty)
                kept = unused(path + ".damaged")
                os.rename(path, kept)
                sync_directory(directory)
                moved_aside.append({"file": path, "kept_as": kept})
                files.pop()
                continue
            break
        expected = point if point is not None and point.generation == number else None
        if point_state == "intact" and not moved_aside:
            try:
                recover(directory, State())
            except StoreError:
                pass
            else:
                return {"moved_aside": moved_aside, "journal": path, "lost": "nothing", "recovery_point": "intact"}
        if point_state == "damaged":
            point_state = f"damaged (kept as {_keep_point(directory)})"
        report = salvage(path, number, layout, expected)
        if point is not None and point.generation > number:
            report["missing_journal"] = f"journal-{point.generation:08d}.log (named by the recovery point)"
            report["lost"] = _LOST
        report["recovery_point"] = f"{point_state}, written again"
        return {"moved_aside": moved_aside, **report}
    finally:
        os.close(lock)


def _point(directory: str) -> tuple[RecoveryPoint | None, str]:
    """The recovery point of ``directory`` and what it is ("intact", "missing", or "damaged":
    then it is ignored)."""
    try:
        point = checkpoint.read(directory)
    except StoreError:
        return None, "damaged"
    return point, "missing" if point is None else "intact"


def _keep_point(directory: str) -> str:
    """Keep a copy of the damaged recovery point of ``directory`` (before it is written again): its name."""
    path = os.path.join(directory, checkpoint.NAME)
    with open(path, "rb") as f:
        data = f.read()
    kept = unused(path + ".damaged")
    _write(kept, data, exclusive=True)
    return kept


def _layout(path: str, data: bytes) -> Layout | None:
    """The format of the journal ``data``: as its header says, else as its batches say (a
    damaged header), else the format whose header it is the start of (a journal cut inside
    its header: the broker's, holding no batch); None when it is none of these."""
    for layout in LAYOUTS:
        if data.startswith(layout.magic):
            return layout
    guessed = guess_layout(data)
    if guessed is None and data:
        guessed = next((layout for layout in LAYOUTS if layout.magic.startswith(data)), None)
    return guessed


@dataclass
class _Kept:
    """The batches a salvage keeps, by number (format 1: in file order), and what it drops."""

    bodies: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    """number -> (offset, body)."""
    copies: list[int] = field(default_factory=list)
    """Offsets of the batches dropped as copies of another."""
    conflicting: list[int] = field(default_factory=list)
    """Offsets of batches whose number another batch, different, had first (dropped: lost)."""


def salvage(path: str, generation: int, layout: Layout, point: RecoveryPoint | None) -> dict[str, object]:
    """Rewrite the journal ``path`` (``journal-<generation>.log``, of ``layout``) with every
    valid batch it holds, in the order of their numbers, and write its recovery point; the
    original is kept as ``path + ".damaged"`` (numbered if that exists). ``point``: the
    recovery point it should have reached (what is missing of it is reported lost). The
    caller holds the directory's lock."""
    with open(path, "rb") as f:
        data = f.read()
    view = memoryview(data)
    head = layout.head.size
    kept = _Kept()
    for offset, length, number in frames(view, layout):
        body = bytes(view[offset + head : offset + head + length])
        if not layout.numbered:
            number = len(kept.bodies) + 1
        seen = kept.bodies.get(number)
        if seen is None:
            kept.bodies[number] = (offset, body)
        elif seen[1] == body:
            kept.copies.append(offset)
        else:
            kept.conflicting.append(offset)
    order = sorted(kept.bodies)
    put_back_in_order = sum(1 for a, b in itertools.pairwise(order) if kept.bodies[a][0] > kept.bodies[b][0])
    state, unparsed, pieces, batches = State(), [], [CURRENT.magic], 0
    for number in order:
        offset, body = kept.bodies[number]
        try:
            state.apply(body)
        except RecordError:  # (what it applied before the record that does not parse is not counted)
            unparsed.append(offset)
            continue
        batches += 1
        pieces += (frame_head(body, batches), body)  # (numbered 1, 2, ... as kept)
    copy = unused(path + ".damaged")
    _write(copy, data, exclusive=True)
    directory = os.path.dirname(path) or "."
    remove_leftovers(directory)
    _write(path + ".salvage.tmp", b"".join(pieces))
    os.rename(path + ".salvage.tmp", path)
    sync_directory(directory)
    size = sum(map(len, pieces))
    checkpoint.write(directory, RecoveryPoint(generation, size, batches))
    check = State()
    scan(path, check)  # (what the broker reads next: it must read back whole)
    lost = _lost_ranges(data, layout, kept, unparsed)
    torn = None
    if lost and point is not None and sum(lost[-1]) == len(data) and lost[-1][0] >= point.length:
        torn = lost.pop()  # (after what the recovery point says was committed: a torn write, nothing lost)
    last = max(order[-1] if order else 0, point.batch if point is not None else 0)
    missing = [n for n in range(1, last + 1) if n not in kept.bodies] if layout.numbered else []
    cut = None
    if point is not None and len(data) < point.length:
        cut = {"expected_bytes": point.length, "found_bytes": len(data)}
    report: dict[str, object] = {
        "journal": path,
        "copy": copy,
        "header": "intact" if data.startswith(layout.magic) else "damaged, written again",
        "format": f"{layout.version} (written as {CURRENT.version})",
        "batches_kept": batches,
        "lost_bytes": [{"offset": offset, "length": length} for offset, length in lost],
        "batches_missing": missing,
        "copies_dropped": kept.copies,
        "put_back_in_order": put_back_in_order,
        "cut_short": cut,
        "torn_tail": None if torn is None else {"offset": torn[0], "length": torn[1]},
        "lost": _LOST if lost or missing or cut or kept.conflicting or unparsed else "nothing",
        "messages": sum(len(m) for m in check.messages.values()),
    }
    return report


_LOST = (
    "the batches in these byte ranges, numbers or cut off: messages sent and settlements confirmed in them are"
    " gone (a completed message may come back; an acknowledged send may be missing)"
)


def _lost_ranges(data: bytes, layout: Layout, kept: _Kept, unparsed: list[int]) -> list[tuple[int, int]]:
    """(offset, length) of the stretches of ``data`` whose batches the salvage did not keep
    (damaged, not parsing, in conflict, a torn tail); copies dropped are not lost."""
    head = layout.head.size
    view = memoryview(data)
    used = sorted(
        (offset, offset + head + layout.head.unpack_from(view, offset)[0])
        for offset in [*(o for o, _ in kept.bodies.values() if o not in unparsed), *kept.copies]
    )
    lost, pos = [], len(layout.magic)
    for start, end in used:
        if start > pos:
            lost.append((pos, start - pos))
        pos = max(pos, end)
    if pos < len(data):
        lost.append((pos, len(data) - pos))
    return lost


def _write(path: str, data: bytes, *, exclusive: bool = False) -> None:
    with open(path, "xb" if exclusive else "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
