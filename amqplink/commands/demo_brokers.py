"""The demo's two embedded namespaces: a primary that can go down and come back, a secondary
with the management API for the paired client's backlog queues.

The primary keeps its messages in a data directory and serves a partitioned queue with
duplicate detection (given by a config, as a user would write it). An outage stops the
whole broker (clients see their connections drop and new ones refused) and starts a new
one on the same port from the same directory, as a restarted namespace would be.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, EntityProperties, NamespaceConfig, QueueConfig

__all__ = ["BACKLOG_MARK", "DemoNamespaces"]

log = logging.getLogger(__name__)

BACKLOG_MARK = "x-servicebus-transfer"
"""Backlog queues are named ``<primary>/x-servicebus-transfer/<i>`` in the secondary."""


def _config(queue: str, partitions: int) -> BrokerConfig:
    properties = EntityProperties(
        requires_duplicate_detection=True, enable_partitioning=True, partition_count=partitions
    )
    return BrokerConfig((NamespaceConfig(queues=(QueueConfig(queue, properties),)),))


@dataclass
class DemoNamespaces:
    """Primary and secondary embedded namespaces on this event loop."""

    queue: str
    data_dir: str
    partitions: int = 4
    primary: Broker | None = None
    secondary: Broker | None = None
    port: int = 0
    outages: int = 0
    _last: dict[str, int] = field(default_factory=dict)
    _dropped_before: int = 0
    """Copies the primaries stopped by outages had dropped (each restart counts from 0)."""

    async def start(self) -> DemoNamespaces:
        """Start both namespaces (the primary on a free port it keeps across outages)."""
        self.primary = await Broker(_config(self.queue, self.partitions), data_dir=self.data_dir).start()
        self.port = self.primary.port
        self.secondary = await Broker(servicebus=True, http_port=0).start()
        return self

    async def stop(self) -> None:
        """Stop both (what is running)."""
        for broker in (self.primary, self.secondary):
            if broker is not None:
                await broker.stop()
        self.primary = self.secondary = None

    @property
    def primary_connection_string(self) -> str:
        """The primary's connection string (the same across outages: it comes back on its port)."""
        assert self.primary is not None
        return self.primary.connection_string

    @property
    def secondary_connection_string(self) -> str:
        """The secondary's connection string (its backlog queues)."""
        assert self.secondary is not None
        return self.secondary.connection_string

    @property
    def management_endpoint(self) -> str:
        """The secondary's management REST API (the paired client checks its backlog queues there)."""
        assert self.secondary is not None
        return f"https://127.0.0.1:{self.secondary.http_port}/"

    @property
    def management_ca(self) -> str:
        """The CA file of the secondary's self-signed certificate."""
        assert self.secondary is not None
        return self.secondary.http_ca

    async def outage(self, seconds: float) -> None:
        """Take the primary down for ``seconds``, then start it again on its port from its data.

        Cancelled (Ctrl-C), the primary stays down: a start under way is stopped, so
        :meth:`stop` has nothing half-started to miss."""
        assert self.primary is not None
        self.stored()  # remember the count from before
        self._dropped_before = self.dropped()
        connection_string = self.primary.connection_string
        await self.primary.stop()
        self.primary = None
        self.outages += 1
        log.info("demo: primary namespace down for %.1f s", seconds)
        await asyncio.sleep(seconds)  # the outage itself: a length of time, not a wait for an event
        restarted = Broker(_config(self.queue, self.partitions), data_dir=self.data_dir)
        try:
            await restarted.start(port=self.port)
        except BaseException:
            await restarted.stop()
            raise
        self.primary = restarted
        assert self.primary.connection_string == connection_string
        log.info("demo: primary namespace back on port %d", self.port)

    def stored(self) -> int:
        """Messages in the primary's queue (the last count while it is down)."""
        if self.primary is not None:
            entity = self.primary.namespace.queues.get(self.queue.lower())
            self._last["stored"] = 0 if entity is None else len(entity.store)
        return self._last.get("stored", 0)

    def dropped(self) -> int:
        """Copies the primary's duplicate detection acknowledged and dropped, across outages:
        batches sent again (their acknowledgement lost in the outage) and parked copies of
        rows the primary already had, dropped as the syphon brings them back."""
        queue = None if self.primary is None else self.primary.namespace.queues.get(self.queue.lower())
        if queue is None:
            return self._dropped_before
        detectors = [queue.duplicates, *(queue.partitions.duplicates or [] if queue.partitions else [])]
        return self._dropped_before + sum(d.dropped for d in detectors if d is not None)

    def parked(self) -> int:
        """Messages waiting in the secondary's backlog queues."""
        if self.secondary is None:
            return 0
        return sum(len(q.store) for name, q in list(self.secondary.namespace.queues.items()) if BACKLOG_MARK in name)


def new_data_dir(base: str) -> str:
    """A fresh directory for the primary's messages under ``base``."""
    path = os.path.join(base, "primary")
    os.makedirs(path, exist_ok=True)
    return path
