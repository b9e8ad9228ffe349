"""A socket-free model of an Azure Service Bus namespace (the embedded broker's brain).

Each concern is its own module: :mod:`.envelope` (stored bytes, annotation stamps),
:mod:`.store` (message store interface), :mod:`.entity` (peek-lock, TTL, deferral,
scheduling), :mod:`.sessions`, :mod:`.duplicates`, :mod:`.sql` (subscription
rules: correlation and SQL filters, rule actions),
:mod:`.nodes` (queues, topics, subscriptions, what an address names), :mod:`.routing`
(sending: a topic's copies, forwarding, batches), :mod:`.clock` (time: scheduled messages
come due), :mod:`.namespace` (the public face: building entities, resolving addresses),
:mod:`.management` (``$management``) and :mod:`.cbs` (``$cbs``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqplink import _lazy_names

if TYPE_CHECKING:
    from amqplink.broker.namespace.entity import Entity
    from amqplink.broker.namespace.envelope import Envelope, split_message
    from amqplink.broker.namespace.errors import EntityError
    from amqplink.broker.namespace.namespace import BATCH_FORMAT, Namespace
    from amqplink.broker.namespace.nodes import Queue, Subscription, Topic, entity_path
    from amqplink.broker.namespace.store import MemoryStore, MessageState, MessageStore, StoredMessage

_LAZY = {
    "Entity": "entity",
    "Envelope": "envelope",
    "split_message": "envelope",
    "EntityError": "errors",
    "BATCH_FORMAT": "namespace",
    "Namespace": "namespace",
    "Queue": "nodes",
    "Subscription": "nodes",
    "Topic": "nodes",
    "entity_path": "nodes",
    "MemoryStore": "store",
    "MessageState": "store",
    "MessageStore": "store",
    "StoredMessage": "store",
}
"""Loaded on first use (PEP 562), so that importing one module of this package (the SQL
filters, which :mod:`amqplink.broker.config` compiles) does not load the entities, which
import the configuration: no import cycle, no import deferred into a function."""
__getattr__, __dir__ = _lazy_names(__name__, {name: f"{__name__}.{module}" for name, module in _LAZY.items()})


__all__ = [
    "BATCH_FORMAT",
    "Entity",
    "EntityError",
    "Envelope",
    "MemoryStore",
    "MessageState",
    "MessageStore",
    "Namespace",
    "Queue",
    "StoredMessage",
    "Subscription",
    "Topic",
    "entity_path",
    "split_message",
]
