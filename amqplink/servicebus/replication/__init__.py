"""Active and passive replication over two namespaces, and de-duplication (seed 003).

:class:`~amqplink.servicebus.replication.dedup.Deduplicator` is the id window a
de-duplicating consumer keeps; it works on its own (no receiver needed).
"""

from __future__ import annotations

from amqplink.servicebus.replication.dedup import DedupCounters, Deduplicator

__all__ = ["DedupCounters", "Deduplicator"]
