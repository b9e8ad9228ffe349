"""The namespace's runtime management API (what the management REST API calls)."""

from __future__ import annotations

import dataclasses

import pytest

from amqplink.broker.config import (
    EntityProperties,
    NamespaceConfig,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.errors import NOT_FOUND, EntityError
from tests.broker.nsutil import T0, send


def namespace() -> Namespace:
    topic = TopicConfig("t", subscriptions=(SubscriptionConfig("s"),))
    return Namespace(NamespaceConfig(queues=(QueueConfig("q"),), topics=(topic,)))


def test_a_subscription_made_without_rules_has_default_and_one_left_without_rules_receives_nothing() -> None:
    ns = namespace()
    sub = ns.subscription("T", "S")
    assert [(r.name, r.filter_type) for r in sub.rules] == [("$Default", "True")]
    send(ns, "t")
    assert len(sub.store) == 1
    ns.set_rules(sub, ())
    send(ns, "t")
    assert len(sub.store) == 1  # Service Bus: no rules, no messages
    ns.set_rules(sub, (RuleConfig("r", "Sql", sql_expression="sys.label = 'a'"),))
    send(ns, "t", subject="a")
    send(ns, "t", subject="b")
    assert len(sub.store) == 2


def test_update_applies_new_settings_and_refuses_fixed_ones() -> None:
    ns = namespace()
    queue = ns.queue("q")
    ns.update_queue(queue, dataclasses.replace(queue.properties, lock_duration=5.0, max_delivery_count=2))
    send(ns, "q")
    msg = queue.receive(T0)
    assert msg is not None and msg.locked_until == T0 + 5.0
    assert queue.dead_letter_queue.properties.max_delivery_count == 2
    with pytest.raises(ValueError, match="RequiresSession"):
        ns.update_queue(queue, dataclasses.replace(queue.properties, requires_session=True))
    topic = ns.topic("t")
    ns.update_topic(topic, dataclasses.replace(topic.properties, default_message_ttl=60.0))
    sub = ns.subscription("t", "s")
    ns.update_subscription(topic, sub, EntityProperties(default_message_ttl=3600.0, lock_duration=7.0))
    assert sub.properties.default_message_ttl == 60.0  # no longer than its topic's
    assert sub.sessions.lock_duration == 7.0


def test_delete_and_lookups() -> None:
    ns = namespace()
    ns.delete_subscription("t", "s")
    with pytest.raises(EntityError) as gone:
        ns.subscription("t", "s")
    assert gone.value.condition == NOT_FOUND
    ns.create_subscription(ns.topic("t"), SubscriptionConfig("s2"))
    with pytest.raises(ValueError, match="exists already"):
        ns.create_subscription(ns.topic("t"), SubscriptionConfig("S2"))
    ns.delete_topic("t")
    ns.delete_queue("Q")
    assert not ns.queues and not ns.topics
    with pytest.raises(EntityError):
        ns.resolve("q")
    with pytest.raises(EntityError):
        ns.delete_queue("q")
