"""The embedded Service Bus broker on an engine with no socket, for tests and benchmarks
that move the bytes between engines themselves (one process, nothing scheduled)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amqplink.broker.sbserver import ServiceBusHost
from amqplink.engine.connection import Connection
from amqplink.engine.events import Event

__all__ = ["NoTransport", "accept"]


class NoTransport:
    """What :meth:`ServiceBusHost.accept` asks of a transport, when the caller writes
    what the engine has to send: nothing to flush, never paused."""

    write_paused = False
    peername = ("127.0.0.1", 0)
    on_writable: Any = None

    def schedule_flush(self) -> None:
        """The caller takes the engine's bytes itself."""


def accept(host: ServiceBusHost, server: Connection) -> Callable[[list[Event]], None]:
    """``host``'s event handler for the server-role engine ``server``."""
    return host.accept(server, NoTransport())  # type: ignore[arg-type]
