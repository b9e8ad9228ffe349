"""The blocking replication API: the asyncio objects of this package run on
:mod:`amqplink.sync`'s event loop, and each call waits for its result.

Same names and behaviour as :mod:`amqplink.servicebus.replication.senders` and
:mod:`amqplink.servicebus.replication.receiver`; they take the blocking senders and
receivers of :mod:`amqplink.servicebus`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

from amqplink.servicebus import blocking
from amqplink.servicebus.message import ServiceBusReceivedMessage
from amqplink.servicebus.replication import receiver as aio_receiver
from amqplink.servicebus.replication import senders as aio_senders
from amqplink.servicebus.replication.breaker import DEFAULT_BREAK_FOR, BreakerState
from amqplink.servicebus.replication.dedup import Deduplicator
from amqplink.sync import _run

__all__ = ["ActiveReplicationSender", "DeduplicatingReceiver", "PassiveReplicationSender"]


class _Blocking:
    _aio: (
        aio_senders.ActiveReplicationSender | aio_senders.PassiveReplicationSender | aio_receiver.DeduplicatingReceiver
    )

    def close(self) -> None:
        """Close (and wait until closed)."""
        _run(self._aio.close())

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._aio)


class ActiveReplicationSender(_Blocking):
    """Blocking twin of :class:`amqplink.servicebus.aio.ActiveReplicationSender` (every message
    to both namespaces; succeeds when at least one accepted it)."""

    _aio: aio_senders.ActiveReplicationSender

    def __init__(
        self,
        primary: blocking.ServiceBusSender,
        secondary: blocking.ServiceBusSender,
        *,
        break_for: float = DEFAULT_BREAK_FOR,
    ) -> None:
        self._aio = aio_senders.ActiveReplicationSender(primary._aio, secondary._aio, break_for=break_for)
        self.senders = (primary, secondary)

    def __enter__(self) -> ActiveReplicationSender:
        return self

    @property
    def counters(self) -> aio_senders.ReplicationCounters:
        """Sends, sends only one namespace accepted, failures."""
        return self._aio.counters

    @property
    def degraded(self) -> tuple[int, ...]:
        """Indexes of the namespaces whose last send failed."""
        return self._aio.degraded

    @property
    def breakers(self) -> tuple[BreakerState, BreakerState]:
        """Each namespace's circuit breaker (``open``: skipped after an outage error)."""
        return _run(_breakers(self._aio))

    def send_messages(self, message: aio_senders.SendInput, *, timeout: float | None = None) -> None:
        """Send to both namespaces; raises ``ReplicationError`` when neither accepted."""
        _run(self._aio.send_messages(message, timeout=timeout))


class PassiveReplicationSender(_Blocking):
    """Blocking twin of :class:`amqplink.servicebus.aio.PassiveReplicationSender` (the active
    namespace, else the backup and a role swap)."""

    _aio: aio_senders.PassiveReplicationSender

    def __init__(self, active: blocking.ServiceBusSender, backup: blocking.ServiceBusSender) -> None:
        self._aio = aio_senders.PassiveReplicationSender(active._aio, backup._aio)
        self._blocking = {id(active._aio): active, id(backup._aio): backup}

    def __enter__(self) -> PassiveReplicationSender:
        return self

    @property
    def active(self) -> blocking.ServiceBusSender:
        """The sender every send goes to first."""
        return self._blocking[id(self._aio.active)]

    @property
    def backup(self) -> blocking.ServiceBusSender:
        """The sender a send goes to when the active namespace seems down."""
        return self._blocking[id(self._aio.backup)]

    @property
    def counters(self) -> aio_senders.ReplicationCounters:
        """Sends, failures, role swaps."""
        return self._aio.counters

    def send_messages(self, message: aio_senders.SendInput, *, timeout: float | None = None) -> None:
        """Send to the active namespace, or to the backup (swapping roles) when it seems down."""
        _run(self._aio.send_messages(message, timeout=timeout))


class DeduplicatingReceiver(_Blocking):
    """Blocking twin of :class:`amqplink.servicebus.aio.DeduplicatingReceiver`: same arguments,
    with blocking receivers; iterate it or call :meth:`receive_messages`."""

    _aio: aio_receiver.DeduplicatingReceiver

    def __init__(
        self,
        receivers: Sequence[blocking.ServiceBusReceiver],
        *,
        deduplicator: Deduplicator | None = None,
        id_property: str | None = None,
        **options: Any,
    ) -> None:
        self._aio = aio_receiver.DeduplicatingReceiver(
            [r._aio for r in receivers], deduplicator=deduplicator, id_property=id_property, **options
        )

    def __enter__(self) -> DeduplicatingReceiver:
        return self

    @property
    def deduplicator(self) -> Deduplicator:
        """The id window (its counters say how many duplicates were removed)."""
        return self._aio.deduplicator

    @property
    def duplicates_removed(self) -> int:
        """Copies not yielded because their id was handled."""
        return self._aio.duplicates_removed

    @property
    def held_copies(self) -> int:
        """Copies held until the message handed out with their id is settled."""
        return self._aio.held_copies

    @property
    def without_id(self) -> int:
        """Messages yielded without an id."""
        return self._aio.without_id

    def receive_messages(
        self, max_message_count: int | None = 1, max_wait_time: float | None = None
    ) -> list[ServiceBusReceivedMessage]:
        """Up to ``max_message_count`` messages none of which was yielded before."""
        return _run(self._aio.receive_messages(max_message_count, max_wait_time))

    def __iter__(self) -> Iterator[ServiceBusReceivedMessage]:
        return self

    def __next__(self) -> ServiceBusReceivedMessage:
        got = self.receive_messages(1)
        if not got:
            raise StopIteration
        return got[0]

    def complete_message(self, message: ServiceBusReceivedMessage) -> None:
        """Record its id, complete it, remove its held copies."""
        _run(self._aio.complete_message(message))

    def abandon_message(self, message: ServiceBusReceivedMessage) -> None:
        """Give it (and its held copies) back."""
        _run(self._aio.abandon_message(message))

    def defer_message(self, message: ServiceBusReceivedMessage) -> None:
        """Defer it in its namespace; record its id."""
        _run(self._aio.defer_message(message))

    def dead_letter_message(
        self, message: ServiceBusReceivedMessage, reason: str | None = None, error_description: str | None = None
    ) -> None:
        """Dead-letter it once; record its id."""
        _run(self._aio.dead_letter_message(message, reason, error_description))

    def renew_message_lock(self, message: ServiceBusReceivedMessage, *, timeout: float | None = None) -> dt.datetime:
        """Renew its lock in the namespace it came from."""
        return _run(self._aio.renew_message_lock(message, timeout=timeout))


async def _breakers(sender: aio_senders.ActiveReplicationSender) -> tuple[BreakerState, BreakerState]:
    return sender.breakers  # read on the loop thread, where they change
