"""Active and passive replication over two namespaces, and de-duplication (seed 003).

The senders and the de-duplicating receiver are imported from
:mod:`amqplink.servicebus` (blocking, :mod:`.blocking`) or :mod:`amqplink.servicebus.aio`
(asyncio, :mod:`.senders` and :mod:`.receiver`), with the same names.
:class:`~amqplink.servicebus.replication.dedup.Deduplicator` is the id window a
de-duplicating consumer keeps; it works on its own (no receiver needed).
"""

from __future__ import annotations

from amqplink.servicebus.replication.dedup import DedupCounters, Deduplicator
from amqplink.servicebus.replication.outage import ReplicationError, suggests_outage

__all__ = ["DedupCounters", "Deduplicator", "ReplicationError", "suggests_outage"]
