"""Entities made at run time come back after a restart with ``--data-dir`` whether or not the
broker has a configuration (issue 24, C.9): a run-time definition overrides nothing the
configuration defines; SQL rule parameters are kept with their rules (C.8)."""

from __future__ import annotations

import datetime
from pathlib import Path

from amqplink.broker.config import (
    EntityProperties,
    NamespaceConfig,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)
from amqplink.broker.namespace import Namespace
from tests.broker.nsutil import T0, send
from tests.broker.test_durable import opened, restart

CONFIG = NamespaceConfig(
    queues=(QueueConfig("configured", EntityProperties(max_delivery_count=3)),),
    topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("a"),)),),
)
WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def _run_time_entities(ns: Namespace) -> None:
    ns.add_queue(QueueConfig("made-later", EntityProperties(max_delivery_count=7)))
    topic = ns.topic("t")
    rule = RuleConfig(
        "by-kind",
        "Sql",
        sql_expression="kind = @kind AND at < @when",
        action_expression="SET tier = @tier",
        parameters={"@kind": "order", "@when": WHEN},
        action_parameters={"@tier": "gold"},
    )
    ns.create_subscription(topic, SubscriptionConfig("b", rules=(rule,)))
    # A run-time change to what the configuration defines: the configuration wins on start.
    ns.update_queue(ns.queue("configured"), EntityProperties(max_delivery_count=9))


async def test_run_time_entities_come_back_with_and_without_a_configuration(tmp_path: Path) -> None:
    for config in (CONFIG, None):
        directory = tmp_path / ("with" if config else "without")
        store, ns = await opened(directory, CONFIG if config else None)
        if config is None:
            ns.add_topic(TopicConfig("t", subscriptions=(SubscriptionConfig("a"),)))
            ns.add_queue(QueueConfig("configured", EntityProperties(max_delivery_count=3)))
        _run_time_entities(ns)
        send(ns, "made-later", message_id="kept")
        store, ns = await restart(store, directory, config)
        assert ns.queue("made-later").properties.max_delivery_count == 7
        assert [m.envelope.message_id for m in ns.queue("made-later").peek(0, 10, T0)] == ["kept"]
        sub = ns.subscription("t", "b")
        (rule,) = sub.rules
        assert rule.parameters == {"@kind": "order", "@when": WHEN}
        assert rule.action_parameters == {"@tier": "gold"}
        send(ns, "t", application_properties={"kind": "order", "at": WHEN - datetime.timedelta(days=1)})
        send(ns, "t", application_properties={"kind": "refund", "at": WHEN - datetime.timedelta(days=1)})
        (routed,) = sub.peek(0, 10, T0)
        assert routed.envelope.application_properties is not None
        assert routed.envelope.application_properties["tier"] == "gold"
        expected = 3 if config is not None else 9  # the configuration's statement wins
        assert ns.queue("configured").properties.max_delivery_count == expected
        await store.close()
