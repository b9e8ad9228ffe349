"""The broker's durable store (``--data-dir``): an append-only journal of framed records,
written by group commit on a writer thread so that disk I/O never blocks the event loop,
and compacted by rewriting the live state into a new file."""

from __future__ import annotations

from amqplink.broker.durable.journal import LOCK_NAME, StoreError, journal_files
from amqplink.broker.durable.persistence import DurableStore, Persistence

__all__ = ["LOCK_NAME", "DurableStore", "Persistence", "StoreError", "journal_files"]
