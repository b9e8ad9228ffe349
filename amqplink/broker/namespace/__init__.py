"""A socket-free model of an Azure Service Bus namespace (the embedded broker's brain).

Each concern is its own module: :mod:`.envelope` (stored bytes, annotation stamps),
:mod:`.store` (message store interface), :mod:`.entity` (peek-lock, TTL, deferral,
scheduling), :mod:`.sessions`, :mod:`.duplicates`, :mod:`.filters` (with
:mod:`.sql_filter`, SQL filters and rule actions),
:mod:`.namespace` (queues, topics, subscriptions, DLQs, forwarding, batches),
:mod:`.management` (``$management``) and :mod:`.cbs` (``$cbs``).
"""

from __future__ import annotations

from amqplink.broker.namespace.entity import Entity
from amqplink.broker.namespace.envelope import Envelope, split_message
from amqplink.broker.namespace.errors import EntityError
from amqplink.broker.namespace.namespace import BATCH_FORMAT, Namespace, Queue, Subscription, Topic, entity_path
from amqplink.broker.namespace.store import MemoryStore, MessageState, MessageStore, StoredMessage

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
