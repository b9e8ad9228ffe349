"""What the streaming source took from Service Bus and Spark has not yet committed, on disk.

A micro-batch's rows are written here (an Arrow IPC stream, ``batches/<id>.arrow``, written
to a temporary name, fsynced, then renamed) before :meth:`DataSourceStreamReader.latestOffset`
hands Spark the batch's offset, so a batch Spark replays after a crash is read back from
here: the same rows, whatever the broker did with their locks meanwhile. ``state.json``
(written the same way) says which batches Spark committed (``settled``) and which sequence
numbers of those were emitted but not completed (``pending``: their next delivery is
completed, not emitted again), each with the time after which it is forgotten.

The directory is ``<checkpointLocation>/servicebus/<entity>-<digest>``: a path the driver's
Python can write and that survives the driver (local disk for a single machine; a mounted
shared file system on a cluster). With ``stagedReads=file`` the executors' tasks open a
batch's file themselves (:func:`open_staged`: its path, length and sha256 travel in the input
partition, checked before a row is read); with ``inline`` they never read it (the rows travel
in the partitions).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amqplink import AMQPLinkError

__all__ = [
    "PENDING_LIMIT",
    "PENDING_SECONDS",
    "StagedFile",
    "Staging",
    "StagingError",
    "StagingState",
    "open_staged",
    "staging_dir",
]

PENDING_SECONDS = 7 * 24 * 3600.0
"""How long a sequence number emitted but not completed is remembered (a message dead-lettered
or expired meanwhile never comes back; one coming back later than this is emitted again)."""
PENDING_LIMIT = 1_000_000
"""At most this many are remembered (the oldest forgotten first)."""


class StagingError(AMQPLinkError, RuntimeError):
    """The staging directory cannot give what Spark asks for (a batch missing, another query's state)."""


@dataclass
class StagingState:
    """``settled``: the last batch Spark committed (-1: none yet); ``pending``: sequence number
    -> the time (epoch seconds) after which it is forgotten."""

    settled: int = -1
    pending: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StagedFile:
    """A staged batch's file as written: what a task checks before reading it."""

    path: str
    size: int
    sha256: str
    rows: int


def open_staged(staged: StagedFile) -> Any:
    """The rows of ``staged`` (a ``pyarrow.Table`` over the memory-mapped file), once its length
    and sha256 are the ones written; :class:`StagingError` naming the path and ``stagedReads``
    otherwise (the executors do not see the driver's file, or it changed)."""
    import pyarrow as pa

    hint = ("with stagedReads=file the executors open the driver's staged batch files, so "
            "checkpointLocation must be a file system they share with the driver; set stagedReads=inline "
            "to carry the rows in the input partitions instead")  # fmt: skip
    try:
        mapped = pa.memory_map(staged.path, "r")
    except FileNotFoundError:
        raise StagingError(
            f"servicebus source: staged batch file {staged.path} not found on this executor: {hint}"
        ) from None
    buffer = mapped.read_buffer()
    if buffer.size != staged.size or hashlib.sha256(memoryview(buffer)).hexdigest() != staged.sha256:
        raise StagingError(
            f"servicebus source: staged batch file {staged.path} is not the one written ({buffer.size} bytes, "
            f"{staged.size} written, or another sha256): {hint}"
        )
    return pa.ipc.open_stream(buffer).read_all()


def staging_dir(checkpoint_location: str, namespace: str, entity: str) -> Path:
    """The source's directory under ``checkpoint_location`` for ``entity`` of ``namespace``."""
    digest = hashlib.sha256(f"{namespace}\0{entity}".encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", entity)[:60]
    return Path(checkpoint_location) / "servicebus" / f"{readable}-{digest}"


def _fsync_dir(path: Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: Any) -> None:
    """Write ``data`` (bytes or any buffer) to ``path`` durably."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class Staging:
    """The batches and the state of one source (one entity), in :func:`staging_dir`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.batches = root / "batches"
        self.batches.mkdir(parents=True, exist_ok=True)
        self._written: dict[int, StagedFile] = {}
        """Batch -> its file as this process wrote it (a file left by another: :meth:`describe` reads it)."""

    def __repr__(self) -> str:
        return f"Staging({str(self.root)!r})"

    def _path(self, batch: int) -> Path:
        return self.batches / f"{batch}.arrow"

    def ids(self) -> list[int]:
        """The batches written and not yet removed, in order."""
        return sorted(int(p.stem) for p in self.batches.glob("*.arrow") if p.stem.isdigit())

    def write(self, batch: int, rows: Any) -> int:
        """Write ``rows`` (a ``pyarrow.RecordBatch``) as batch ``batch``, durably; the bytes written."""
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write_batch(rows)
        data = sink.getvalue()  # written from Arrow's buffer: no copy of the batch as bytes
        path = self._path(batch)
        _write_atomically(path, data)
        digest = hashlib.sha256(memoryview(data)).hexdigest()
        self._written[batch] = StagedFile(str(path), int(data.size), digest, int(rows.num_rows))
        return int(data.size)

    def describe(self, batch: int) -> StagedFile:
        """Batch ``batch``'s file: path, length, sha256 and rows (:class:`StagingError` if it is not here)."""
        known = self._written.get(batch)
        if known is not None:
            return known
        import pyarrow as pa

        path = self._path(batch)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise self._missing(batch) from None
        rows = pa.ipc.open_stream(pa.py_buffer(data)).read_all().num_rows
        staged = StagedFile(str(path), len(data), hashlib.sha256(data).hexdigest(), int(rows))
        self._written[batch] = staged
        return staged

    def read(self, batch: int) -> Any:
        """Batch ``batch``'s rows (a ``pyarrow.Table``); :class:`StagingError` if it is not here."""
        import pyarrow as pa

        try:
            with pa.OSFile(str(self._path(batch)), "rb") as f:
                return pa.ipc.open_stream(f).read_all()
        except FileNotFoundError:
            raise self._missing(batch) from None

    def _missing(self, batch: int) -> StagingError:
        return StagingError(
            f"servicebus source: micro-batch {batch} is not in {self.batches}, so Spark's replay of it "
            "cannot return the rows it had: was the source's checkpointLocation changed or cleaned while "
            "the query's checkpoint was kept? Give the query the location it had, or start it with a new "
            "checkpoint"
        )

    def sequence_numbers(self, batch: int) -> list[int]:
        """The sequence numbers of batch ``batch``'s rows."""
        return [int(s) for s in self.read(batch).column("sequence_number").to_pylist()]

    def remove(self, batches: Iterable[int]) -> None:
        """Forget ``batches`` (Spark committed them and will not ask for them again)."""
        for batch in batches:
            self._written.pop(batch, None)
            self._path(batch).unlink(missing_ok=True)

    def load(self) -> StagingState:
        """The saved state (a new one when none was saved)."""
        path = self.root / "state.json"
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            return StagingState()
        return StagingState(int(saved["settled"]), {int(k): float(v) for k, v in saved["pending"].items()})

    def save(self, state: StagingState, now: float | None = None) -> None:
        """Save ``state`` durably, forgetting the pending sequence numbers past their time (and
        the oldest beyond :data:`PENDING_LIMIT`)."""
        now = time.time() if now is None else now
        pending = {seq: until for seq, until in state.pending.items() if until > now}
        if len(pending) > PENDING_LIMIT:
            pending = dict(sorted(pending.items(), key=lambda item: item[1])[-PENDING_LIMIT:])
        state.pending = pending
        text = json.dumps({"settled": state.settled, "pending": {str(k): v for k, v in pending.items()}})
        _write_atomically(self.root / "state.json", text.encode())
