"""Embedded broker: the server side of the engine (in-memory queues for now)."""

from __future__ import annotations

from amqplink.broker.entities import Consumer, Queue
from amqplink.broker.server import Broker

__all__ = ["Broker", "Consumer", "Queue"]
