"""Connections per Python worker, keyed by the sink's configuration.

A Spark Python worker runs many tasks one after another: opening a connection (TCP,
SASL, CBS token, link attach) per task would cost more than a small partition's sends.
The cache keeps one asyncio ``ServiceBusClient`` (with its senders, one per entity) per
:attr:`SinkConfig.cache_key`, on :mod:`amqplink.sync`'s event loop. It is
pid-checked (a forked worker starts empty: the parent's sockets are not its own), an
entry unused for ``idle_timeout`` seconds is closed, and :func:`discard` closes an entry
after a failed partition so the retried task opens a fresh connection.

Every function here runs on that loop, which one thread at a time runs (no lock needed).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from amqplink.servicebus.aio import PairedNamespaceOptions, ServiceBusClient, ServiceBusSender
from amqplink.spark.credentials import make_async_client
from amqplink.spark.options import SinkConfig

__all__ = ["Lease", "acquire", "discard", "open_entries", "release"]

log = logging.getLogger(__name__)


@dataclass
class Lease:
    """One cached client and its senders; ``users`` counts the partitions using it now."""

    config: SinkConfig
    client: ServiceBusClient
    senders: dict[str, ServiceBusSender] = field(default_factory=dict)
    users: int = 0
    last_used: float = 0.0

    def sender(self, entity: str) -> ServiceBusSender:
        """The cached sender to ``entity`` (made on first use; it attaches when first used)."""
        sender = self.senders.get(entity)
        if sender is None:
            sender = self.senders[entity] = self.client.get_queue_sender(
                entity, max_in_flight=self.config.max_in_flight
            )
        return sender

    def paired_counters(self) -> dict[str, int]:
        """The paired client's counters (parked, syphoned, ...), empty without a paired namespace."""
        state = self.client.paired_state
        if state is None:
            return {}
        return {"parked": state.parked, "failovers": state.failovers, "syphoned": state.syphoned}


_entries: dict[str, Lease] = {}
_pid = os.getpid()
_sweeper: asyncio.TimerHandle | None = None
_closing: set[asyncio.Task[None]] = set()


def make_client(config: SinkConfig) -> ServiceBusClient:
    """An unopened asyncio client for ``config`` (paired when a paired connection string is
    given; a token credential when ``credentialFactory`` is)."""
    kwargs: dict[str, Any] = {"timeout": config.send_timeout}
    if config.paired_connection_string is not None:
        kwargs["paired_namespace"] = paired_options(config)
    return make_async_client(config, **kwargs)


def paired_options(config: SinkConfig) -> PairedNamespaceOptions:
    """The :class:`PairedNamespaceOptions` of ``config`` (which must have a paired connection string)."""
    import datetime as dt

    assert config.paired_connection_string is not None
    return PairedNamespaceOptions(
        config.paired_connection_string,
        backlog_queue_count=config.backlog_queue_count,
        failover_interval=dt.timedelta(seconds=config.failover_interval),
        ping_primary_interval=dt.timedelta(seconds=config.ping_primary_interval),
        enable_syphon=config.enable_syphon,
        management_endpoint=config.management_endpoint,
        connection_verify=config.connection_verify,
    )


def _check_pid() -> None:
    global _pid, _sweeper
    if os.getpid() != _pid:  # forked: the parent's connections are not ours to use or close
        _entries.clear()
        _sweeper = None
        _pid = os.getpid()


def acquire(config: SinkConfig) -> Lease:
    """The cached lease for ``config`` (a new, unopened client when none is cached)."""
    _check_pid()
    key = config.cache_key
    lease = _entries.get(key)
    if lease is None:
        lease = _entries[key] = Lease(config, make_client(config))
        log.info("servicebus sink: new connection to %s (pid %d)", config.namespace, os.getpid())
    lease.users += 1
    return lease


def release(lease: Lease) -> None:
    """A partition is done with ``lease``: it stays cached until idle for ``idle_timeout``."""
    loop = asyncio.get_running_loop()
    lease.users -= 1
    lease.last_used = loop.time()
    _sweep_by(lease.last_used + lease.config.idle_timeout)


def _sweep_by(when: float) -> None:
    """Make sure a sweep runs no later than ``when`` (loop time)."""
    global _sweeper
    if _sweeper is not None and _sweeper.when() <= when:
        return
    if _sweeper is not None:
        _sweeper.cancel()
    _sweeper = asyncio.get_running_loop().call_at(when, _sweep)


async def discard(lease: Lease) -> None:
    """Close ``lease``'s client and forget it (after a failure: the next task opens a new one)."""
    lease.users -= 1
    if _entries.get(lease.config.cache_key) is lease:
        del _entries[lease.config.cache_key]
    await _close(lease)


async def _close(lease: Lease) -> None:
    try:
        await lease.client.close()
    except Exception as exc:  # closing a broken connection: nothing left to save
        log.debug("servicebus sink: closing a connection failed: %s", type(exc).__name__)


def _sweep() -> None:
    global _sweeper
    _sweeper = None
    loop = asyncio.get_running_loop()
    now = loop.time()
    soonest: float | None = None
    for key, lease in list(_entries.items()):
        idle_until = lease.last_used + lease.config.idle_timeout
        if lease.users == 0 and now >= idle_until:
            del _entries[key]
            task = loop.create_task(_close(lease))
            _closing.add(task)
            task.add_done_callback(_closing.discard)
            log.info("servicebus sink: closed an idle connection to %s", lease.config.namespace)
        else:
            due = max(idle_until, now + 0.05)
            soonest = due if soonest is None else min(soonest, due)
    if soonest is not None:
        _sweep_by(soonest)


def open_entries() -> int:
    """How many clients are cached in this process (for tests)."""
    _check_pid()
    return len(_entries)
