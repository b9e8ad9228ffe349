"""The broker's durable store (``--data-dir``): SQLite in WAL mode, written by group commit
on a writer thread so that disk I/O never blocks the event loop."""

from __future__ import annotations

from amqplink.broker.durable.database import DB_NAME, StoreError
from amqplink.broker.durable.persistence import DurableStore, Persistence

__all__ = ["DB_NAME", "DurableStore", "Persistence", "StoreError"]
