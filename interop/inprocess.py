"""The embedded Service Bus broker on an engine with no socket, for tests and benchmarks
that move the bytes between engines themselves (one process, nothing scheduled)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from amqplink.broker.config import EntityProperties
from amqplink.broker.durable import Persistence
from amqplink.broker.namespace import Namespace
from amqplink.broker.sbserver import ServiceBusHost
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import DeliveriesReceived, Event

__all__ = ["NoTransport", "Pipe", "accept", "broker", "call_count", "committed"]


def call_count(profile: Any) -> int:
    """The function calls a ``cProfile.Profile`` counted, each entry's own count summed.
    (Not ``pstats.Stats.total_calls``: pstats merges entries under one label, and the
    generated ``__init__`` of every dataclass is ``<string>:2:__init__``, so all but one of
    those went uncounted, which one depending on the build.)"""
    return sum(entry.callcount for entry in profile.getstats())


class NoTransport:
    """What :meth:`ServiceBusHost.accept` asks of a transport, when the caller writes
    what the engine has to send: nothing to flush, never paused."""

    write_paused = False
    peername = ("127.0.0.1", 0)
    on_writable: Any = None

    def schedule_flush(self) -> None:
        """The caller takes the engine's bytes itself."""


def accept(host: ServiceBusHost, server: Connection, *, runs: bool = True) -> Callable[[list[Event]], None]:
    """``host``'s event handler for the server-role engine ``server``; ``runs=False``: each
    run of received deliveries is handed over as runs of one, in order (as if each transfer
    had come in a read of its own: the reference the tests compare runs with)."""
    handler = host.accept(server, NoTransport())  # type: ignore[arg-type]
    if runs:
        return handler

    def one_at_a_time(events: list[Event]) -> None:
        handler([one for event in events for one in runs_of_one(event)])

    return one_at_a_time


def runs_of_one(event: Event) -> list[Event]:
    """``event``, a ``DeliveriesReceived`` split into runs of one delivery each."""
    if type(event) is not DeliveriesReceived:
        return [event]
    return [DeliveriesReceived(event.link, [delivery]) for delivery in event.deliveries]


class Pipe:
    """A client engine and the broker's server engine with the bytes moved between them
    by :meth:`pump`, which also counts the broker's CPU seconds (:attr:`broker_cpu`)."""

    def __init__(
        self,
        client: Connection,
        server: Connection,
        handler: Callable[[list[Event]], None],
        *,
        read: int = 0,
        calls: Any = None,
        persistence: Persistence | None = None,
    ) -> None:
        self.client = client
        self.server = server
        self.handler = handler
        self.read = read
        """Bytes per read the broker takes (0: all that is there at once, as one read)."""
        self.calls = calls
        """A ``cProfile.Profile`` enabled while the broker works (its calls counted), or None."""
        self.persistence = persistence
        """The broker's store, whose commits :meth:`pump_stored` waits for."""
        self.broker_cpu = 0.0

    async def pump_stored(self) -> list[Event]:
        """:meth:`pump`, then, while the broker's store has changes not yet written, wait for
        its commit (the settlements wait for it) and pump again. The CPU seconds of the wait
        count as the broker's: ``process_time`` counts every thread, the store's writer too."""
        got = self.pump()
        persistence = self.persistence
        calls = self.calls
        while persistence is not None and not persistence.commits.idle:
            start = time.process_time()
            if calls is not None:
                calls.enable()
            await committed(persistence)
            if calls is not None:
                calls.disable()
            self.broker_cpu += time.process_time() - start
            got += self.pump()
        return got

    def pump(self) -> list[Event]:
        """Move bytes both ways until neither side has any; the client's events."""
        client, server, handler, calls = self.client, self.server, self.handler, self.calls
        got: list[Event] = []
        while True:
            c2s = client.data_to_send()
            start = time.process_time()
            if calls is not None:
                calls.enable()
            step = self.read or len(c2s)
            for at in range(0, len(c2s), step or 1):  # the socket's reads
                handler(server.receive_data(c2s[at : at + step]))
            events = server.take_events()
            if events:
                handler(events)
            s2c = server.data_to_send()
            if calls is not None:
                calls.disable()
            self.broker_cpu += time.process_time() - start
            if not c2s and not s2c:
                return got
            if s2c:
                got += client.receive_data(s2c)


async def committed(persistence: Persistence) -> None:
    """Wait until everything ``persistence`` recorded so far is written (raise what failed)."""
    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    persistence.after_commit(done.set_result)
    error = await done
    if error is not None:
        raise error


def broker(
    partitioned: bool = False, persistence: Persistence | None = None
) -> tuple[Namespace, Connection, Callable[[list[Event]], None]]:
    """A namespace (its queues made on first use partitioned, when asked; kept in
    ``persistence`` when given), the broker's server-role engine and its event handler, as
    the benchmarks drive them."""
    namespace = Namespace()
    if partitioned:
        namespace.default_properties = EntityProperties(enable_partitioning=True)
    if persistence is not None:
        persistence.attach(namespace)
    server = Connection(ConnectionConfig(container_id="broker"), server=True)
    return namespace, server, accept(ServiceBusHost(namespace, persistence=persistence), server)
