"""The recovery point: a small file beside the journal (``recovery-point``) saying how much
of which journal file is known committed, so that a journal cut short (or replaced) is told
from a torn last write. Kafka's ``recovery-point-offset-checkpoint`` is the model.

The file is text, five lines, the last a CRC-32 of the four before::

    amqplink-recovery-point 1
    journal 00000003
    length 1048576
    batch 812
    crc32 e7273731

It is written whole to ``recovery-point.tmp``, flushed (``fsync``), renamed over the old
one, so it is always either the old point or the new one; the directory is flushed too
when the point names a new journal (or is the process's first), else not: a power cut
then leaves the point before, which claims less and stays true (:func:`write`). The
journal's writer thread writes it (:meth:`.journal.Journal.checkpoint`) after a batch's
``fdatasync``, at most once every :data:`INTERVAL` seconds while batches are written and
within that time of the last one; after a compaction (naming the new file); when the
journal is opened (what was read back) and when it is closed (a clean stop: everything).
It never claims more than the journal holds on disk.

What :func:`applies` makes of it when the broker starts (``docs/durability.md#the-recovery-point``):
none and a format-1 journal (a data directory of an earlier amqplink) is not checked, logged
once; none and a format-2 journal holding batches is refused (the file was lost: the
journal's length cannot be checked); a damaged one is refused naming it; one naming a
journal older than the newest (a compaction that stopped between its rename and its
recovery point) is not checked; one naming a journal newer than any there is refused (that
journal is missing). ``broker-store DIR --salvage`` rewrites it from the journal it kept.
"""

from __future__ import annotations

import binascii
import logging
import os

from amqplink.broker.durable.recovery import CURRENT, RecoveryPoint, Scan, StoreError, salvage_hint, sync_directory

__all__ = ["INTERVAL", "NAME", "RecoveryPoint", "applies", "decode", "encode", "missing", "older", "read", "write"]

log = logging.getLogger(__name__)

NAME = "recovery-point"
"""The recovery point's file under the data directory."""
INTERVAL = 1.0
"""Seconds between two recovery points while batches are written (at most one per interval,
and one within it after the last batch)."""
_FIRST = b"amqplink-recovery-point 1\n"
_FIELDS = ("journal", "length", "batch")


def encode(point: RecoveryPoint) -> bytes:
    """The recovery point file's bytes for ``point``."""
    body = _FIRST + f"journal {point.generation:08d}\nlength {point.length}\nbatch {point.batch}\n".encode()
    return body + b"crc32 %08x\n" % binascii.crc32(body)


def read(directory: str) -> RecoveryPoint | None:
    """The recovery point kept in ``directory`` (None: there is none); :class:`StoreError`
    naming the file if it is damaged."""
    path = os.path.join(directory, NAME)
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
    except FileNotFoundError:
        return None
    point = decode(data)
    if point is None:
        raise StoreError(
            f"the recovery point {path!r} is damaged (it does not check): the journal's committed length cannot"
            f" be checked. {salvage_hint(path, 'the recovery point is written again from the journal as it is')}"
        )
    return point


def decode(data: bytes) -> RecoveryPoint | None:
    """The recovery point ``data`` holds (None: it does not check or parse)."""
    lines = data.split(b"\n")
    if len(lines) != 6 or lines[-1] or not data.startswith(_FIRST):
        return None
    body = data[: data.rfind(b"crc32 ")]
    if lines[4] != b"crc32 %08x" % binascii.crc32(body):
        return None
    values = []
    for line, name in zip(lines[1:4], _FIELDS, strict=True):
        key, _, value = line.decode("ascii", "replace").partition(" ")
        if key != name or not value.isdigit():
            return None
        values.append(int(value))
    generation, length, batch = values
    return RecoveryPoint(generation, length, batch)


def write(directory: str, point: RecoveryPoint, *, sync: bool = True, rename_lasts: bool = True) -> None:
    """Replace the recovery point of ``directory`` by ``point``. ``sync``: the file is flushed
    to disk before it is renamed into place, and, with ``rename_lasts``, the directory's
    entry after. (Without it, a power cut may leave the point before: it claims less, which
    is safe, as long as it names the same journal; so a new generation, or a first point,
    needs it.)"""
    path = os.path.join(directory, NAME)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, encode(point))
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync and rename_lasts:
        sync_directory(directory)


def applies(directory: str, point: RecoveryPoint | None, generation: int, path: str) -> RecoveryPoint | None:
    """The recovery point the newest journal (``journal-<generation>.log`` at ``path``; 0 and
    its would-be name: there is none) must reach when it is read back (None: none is
    checked: there is no point, or it names an older file, :func:`older`);
    :class:`StoreError` if the journal the point names is missing."""
    if point is None:
        return None
    where = os.path.join(directory, NAME)
    if point.generation > generation and (generation or point.batch):
        newest = f"the newest journal there is {os.path.basename(path)!r}" if generation else "no journal is left"
        raise StoreError(
            f"the recovery point {where!r} names journal-{point.generation:08d}.log ({point.length} bytes"
            f" committed), which is missing: {newest}. {salvage_hint(path, 'what the missing journal held is lost')}"
        )
    return None if point.generation < generation else point


def older(point: RecoveryPoint, path: str) -> None:
    """The journal ``path`` was read back whole, its recovery point naming an older file (a
    compaction stopped between its rename and its recovery point): logged, once."""
    log.warning(
        "%s: the recovery point names journal-%08d.log, older (a compaction stopped before it wrote its"
        " recovery point): this journal's length was not checked this once", path, point.generation,
    )  # fmt: skip


def missing(directory: str, found: Scan) -> None:
    """No recovery point beside the journal ``found`` read back: a format-1 journal (a data
    directory of an earlier amqplink) is not checked this once (logged); a format-2 one that
    holds batches is refused (its recovery point was lost, so a cut cannot be told)."""
    where = os.path.join(directory, NAME)
    if found.layout is not CURRENT:
        log.warning(
            "%s: a journal of an earlier amqplink (format %d), with no recovery point: its length is not checked"
            " this once; %s is kept from now on", found.path, found.layout.version, where,
        )  # fmt: skip
        return
    if found.batches:
        raise StoreError(
            f"the recovery point {where!r} of {found.path!r} is missing: whether the journal was cut short"
            " cannot be told (it holds batches, and every journal of this format is written with one)."
            f" {salvage_hint(found.path, 'the recovery point is written from the journal as it is')}"
        )
