"""Paired namespaces (seeds 000/001): a client's sends fail over to backlog queues in a
secondary namespace when the primary entity is unavailable, a ping detects its return,
and a syphon moves the parked messages back.

    client = ServiceBusClient.from_connection_string(
        primary, paired_namespace=PairedNamespaceOptions(secondary, failover_interval=timedelta(seconds=10)))

Modules: :mod:`.options` (the options value), :mod:`.failover` (the per-entity state
machine), :mod:`.backlog` (REST check/create, rotation), :mod:`.parking` (the property
renames), :mod:`.pairing` (one client's machinery, pings), :mod:`.sender`, :mod:`.syphon`.
"""

from __future__ import annotations

from amqplink.servicebus.paired.backlog import BacklogQueueError
from amqplink.servicebus.paired.options import PairedNamespaceOptions
from amqplink.servicebus.paired.pairing import PairedState

__all__ = ["BacklogQueueError", "PairedNamespaceOptions", "PairedState"]
