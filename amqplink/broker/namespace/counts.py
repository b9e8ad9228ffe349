"""The message counts of a queue, topic or subscription, as the management API's runtime
properties report them (``CountDetails``) and ``amqplink broker`` lists them at start."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, overload

from amqplink.broker.namespace.store import MessageState

if TYPE_CHECKING:
    from amqplink.broker.namespace.interface import MessagingEntity
    from amqplink.broker.namespace.nodes import Topic

__all__ = ["MessageCounts", "entity_counts", "topic_counts"]


@dataclass(frozen=True)
class MessageCounts:
    """Active, dead-lettered and scheduled messages, all of them, and their bytes."""

    active: int = 0
    dead_letter: int = 0
    scheduled: int = 0
    total: int = 0
    size: int = 0


C = TypeVar("C", bound=MessageCounts)


@overload
def entity_counts(entity: MessagingEntity, dlq: MessagingEntity) -> MessageCounts: ...
@overload
def entity_counts(entity: MessagingEntity, dlq: MessagingEntity, kind: type[C]) -> C: ...
def entity_counts(
    entity: MessagingEntity, dlq: MessagingEntity, kind: type[MessageCounts] = MessageCounts
) -> MessageCounts:
    """A queue's or subscription's counts, ``dlq`` its dead-letter queue (deferred messages
    count in ``total`` only, as on Service Bus)."""
    active = scheduled = 0
    for msg in entity.store:
        if msg.state is MessageState.SCHEDULED:
            scheduled += 1
        elif msg.state is not MessageState.DEFERRED:
            active += 1
    dead = len(dlq.store)
    return kind(active, dead, scheduled, len(entity.store) + dead, entity.bytes + dlq.bytes)


@overload
def topic_counts(topic: Topic) -> MessageCounts: ...
@overload
def topic_counts(topic: Topic, kind: type[C]) -> C: ...
def topic_counts(topic: Topic, kind: type[MessageCounts] = MessageCounts) -> MessageCounts:
    """A topic's: scheduled messages (kept by the topic until due) and the bytes of its subscriptions."""
    size = topic.scheduled_bytes + sum(s.bytes + s.dead_letter_queue.bytes for s in topic.subscriptions.values())
    return kind(scheduled=topic.scheduled_count, size=size)
