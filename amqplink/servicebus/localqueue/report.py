"""A local queue's state as plain values: read from a directory without opening it for
writing (``amqplink local-queue DIR``; a client may be running on it), and as the JSON
the command prints (the same fields as ``client.local_queue_state``)."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from amqplink.servicebus.localqueue.queue import EntityBacklog, LocalQueueState
from amqplink.servicebus.localqueue.segments import read_directory
from amqplink.servicebus.localqueue.store import LOCK_NAME

__all__ = ["as_json", "directory_state", "writer"]

_ATTEMPTS = 5
"""Reads of a directory a running client compacts under the reader (a segment gone)."""


def directory_state(directory: str, max_bytes: int = 0, *, now: float | None = None) -> LocalQueueState:
    """What ``directory`` holds, read only (``LocalQueueCorruptError`` for damage)."""
    path = os.path.abspath(directory)
    for attempt in range(_ATTEMPTS):
        try:
            found = read_directory(path)
            break
        except FileNotFoundError:  # compacted meanwhile: read again
            if attempt == _ATTEMPTS - 1:
                raise
    now = time.time() if now is None else now
    entities = {
        entity: EntityBacklog(len(queue), now - queue[0].stored_at, "idle", None, None)
        for entity, queue in sorted(found.pending.items())
    }
    oldest = min((queue[0].stored_at for queue in found.pending.values()), default=None)
    return LocalQueueState(
        directory=path,
        depth=sum(e.depth for e in entities.values()),
        bytes=sum(e.size for queue in found.pending.values() for e in queue),
        max_bytes=max_bytes,
        oldest_age=None if oldest is None else now - oldest,
        forwarding="not open" if entities else "idle",
        entities=entities,
        torn_bytes=found.torn,
        segments=len(found.segments),
        file_bytes=found.file_bytes,
    )


def writer(directory: str) -> int | None:
    """The process id of the client that last held ``directory`` if it still runs, else None."""
    try:
        with open(os.path.join(directory, LOCK_NAME), "rb") as f:
            pid = int(f.read(32).decode("ascii").strip() or 0)
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # another user's process: it runs
        return pid
    return pid


def as_json(state: LocalQueueState) -> dict[str, Any]:
    """``state`` as plain values (ages in seconds, rounded to the millisecond)."""
    values = dataclasses.asdict(state)
    for key in ("oldest_age",):
        if values[key] is not None:
            values[key] = round(values[key], 3)
    for entity in values["entities"].values():
        for key in ("oldest_age", "retry_in"):
            if entity[key] is not None:
                entity[key] = round(entity[key], 3)
    return values
