"""Helpers for the namespace tests: messages as the SDK would send them, decoded deliveries."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from amqplink.broker.namespace import Entity, Namespace, StoredMessage
from amqplink.broker.sbserver import _ServiceBusConnection
from amqplink.message import Message
from amqplink.protocol.definitions import Disposition, Rejected

T0 = 1_700_000_000.0


def payload(body: bytes = b"x", **friendly: Any) -> bytes:
    return Message(body, **friendly).encode()


def delivered(entity: Entity, msg: StoredMessage, *, peek: bool = False) -> Message:
    return Message.decode(entity.encode(msg, peek=peek))


def send(ns: Namespace, address: str, now: float = T0, body: bytes = b"x", **friendly: Any) -> None:
    ns.send(ns.sender_target(address), payload(body, **friendly), now)


@contextmanager
def per_delivery_outcomes() -> Iterator[list[None]]:
    """While open, one entry per outcome the broker handled one delivery at a time
    (``_ServiceBusConnection._on_outcome``, the path a disposition range goes without)."""
    calls: list[None] = []
    original = _ServiceBusConnection._on_outcome

    def counting(self: _ServiceBusConnection, *args: Any) -> None:
        calls.append(None)
        original(self, *args)

    _ServiceBusConnection._on_outcome = counting  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        _ServiceBusConnection._on_outcome = original  # type: ignore[method-assign]


def disposition_rows(dispositions: Iterable[Disposition]) -> list[tuple[Any, ...]]:
    """(first, last, settled, outcome, rejection condition) of each disposition."""
    return [
        (int(d.first), None if d.last is None else int(d.last), d.settled, type(d.state).__name__,
         d.state.error.condition if isinstance(d.state, Rejected) and d.state.error is not None else None)
        for d in dispositions
    ]  # fmt: skip
