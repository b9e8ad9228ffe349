"""Embedded broker: the server side of the engine, a local Service Bus namespace
(``Broker(config)``, ``Broker(servicebus=True)``) or plain in-memory queues (``Broker()``)."""

from __future__ import annotations

from amqplink.broker.config import BrokerConfig, ConfigError, load_config, parse_config
from amqplink.broker.entities import Consumer, PlainQueue, Queue
from amqplink.broker.server import Broker

__all__ = ["Broker", "BrokerConfig", "ConfigError", "Consumer", "PlainQueue", "Queue", "load_config", "parse_config"]
