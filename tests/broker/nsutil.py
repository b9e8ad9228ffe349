"""Helpers for the namespace tests: messages as the SDK would send them, decoded deliveries."""

from __future__ import annotations

from typing import Any

from amqplink.broker.namespace import Entity, Namespace, StoredMessage
from amqplink.message import Message

T0 = 1_700_000_000.0


def payload(body: bytes = b"x", **friendly: Any) -> bytes:
    return Message(body, **friendly).encode()


def delivered(entity: Entity, msg: StoredMessage, *, peek: bool = False) -> Message:
    return Message.decode(entity.encode(msg, peek=peek))


def send(ns: Namespace, address: str, now: float = T0, body: bytes = b"x", **friendly: Any) -> None:
    ns.send(ns.sender_target(address), payload(body, **friendly), now)
