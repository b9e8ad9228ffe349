"""``ServiceBusSender.from_connection_string`` / ``ServiceBusReceiver.from_connection_string`` (and
the SDK 7.15's private name ``_from_connection_string``), blocking and asyncio, against the
embedded broker: the entity from the string's ``EntityPath`` or the keywords, as the SDK's rules
say (``test_handler_connection_string_sdk.py`` puts the SDK beside them)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.servicebus import ServiceBusMessage, ServiceBusReceiver, ServiceBusSender
from amqplink.servicebus import aio as sb_aio
from tests.broker.sdkutil import running_broker

CONFIG = BrokerConfig(
    (
        NamespaceConfig(
            queues=(QueueConfig("orders"), QueueConfig("other")),
            topics=(TopicConfig("news", subscriptions=(SubscriptionConfig("all"),)),),
        ),
    )
)

CASES: list[tuple[str, str | None, dict[str, Any], str | None]] = [
    # (handler, EntityPath, keywords, the entity path it works on; None: ValueError)
    ("sender", "orders", {}, "orders"),
    ("sender", None, {"queue_name": "orders"}, "orders"),
    ("sender", None, {"topic_name": "news"}, "news"),
    ("sender", "orders", {"queue_name": "orders"}, "orders"),
    ("sender", "news", {"topic_name": "news"}, "news"),
    ("sender", "orders", {"queue_name": "other"}, None),
    ("sender", "orders", {"topic_name": "news"}, None),
    ("sender", None, {}, None),
    ("sender", None, {"queue_name": "orders", "topic_name": "news"}, None),
    ("receiver", "orders", {}, "orders"),
    ("receiver", None, {"queue_name": "orders"}, "orders"),
    ("receiver", "orders", {"queue_name": "orders"}, "orders"),
    ("receiver", None, {"topic_name": "news", "subscription_name": "all"}, "news/Subscriptions/all"),
    ("receiver", "news", {"subscription_name": "all"}, "news/Subscriptions/all"),
    ("receiver", "news", {"topic_name": "news", "subscription_name": "all"}, "news/Subscriptions/all"),
    ("receiver", "orders", {"queue_name": "other"}, None),
    ("receiver", None, {"queue_name": "orders", "subscription_name": "all"}, None),
    ("receiver", None, {"topic_name": "news"}, None),
    ("receiver", None, {}, None),
]


def with_entity(connection_string: str, entity: str | None) -> str:
    return connection_string if entity is None else f"{connection_string};EntityPath={entity}"


def path_of(handler: Any) -> str:
    """The entity path a handler works on (receivers' ``entity_path``; senders' entity name)."""
    return str(getattr(handler, "entity_path", None) or handler.entity_name)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(CONFIG) as broker:
        yield broker


@pytest.mark.parametrize(("kind", "entity", "keywords", "expected"), CASES)
def test_the_entity_is_chosen_as_the_sdk_chooses(
    broker: Broker, kind: str, entity: str | None, keywords: dict[str, Any], expected: str | None
) -> None:
    conn_str = with_entity(broker.connection_string, entity)
    classes = {
        "sender": (ServiceBusSender, sb_aio.ServiceBusSender),
        "receiver": (ServiceBusReceiver, sb_aio.ServiceBusReceiver),
    }
    for cls in classes[kind]:
        for make in (cls.from_connection_string, cls._from_connection_string):
            if expected is None:
                with pytest.raises(ValueError):
                    make(conn_str, **keywords)
                continue
            handler = make(conn_str, **keywords)
            assert path_of(handler) == expected
            assert handler.fully_qualified_namespace == f"127.0.0.1:{broker.port}"


def test_blocking_handlers_send_and_receive(broker: Broker) -> None:
    with ServiceBusSender.from_connection_string(with_entity(broker.connection_string, "orders")) as sender:
        sender.send_messages(ServiceBusMessage("by EntityPath"))
    with ServiceBusSender.from_connection_string(broker.connection_string, topic_name="news") as sender:
        sender.send_messages(ServiceBusMessage("to the topic"))
    receiver = ServiceBusReceiver.from_connection_string(broker.connection_string, queue_name="orders", max_wait_time=5)
    with receiver:
        (got,) = receiver.receive_messages(max_wait_time=5)
        assert str(got) == "by EntityPath"
        receiver.complete_message(got)
    assert receiver._aio._owner is None  # its own connection was closed with it
    with ServiceBusReceiver.from_connection_string(
        with_entity(broker.connection_string, "news"), subscription_name="all", max_wait_time=5
    ) as receiver:
        (got,) = receiver.receive_messages(max_wait_time=5)
        assert str(got) == "to the topic"
        receiver.complete_message(got)


def test_asyncio_handlers_send_and_receive(broker: Broker) -> None:
    async def run() -> list[str]:
        conn_str = with_entity(broker.connection_string, "other")
        async with sb_aio.ServiceBusSender.from_connection_string(conn_str, queue_name="other") as sender:
            await sender.send_messages(ServiceBusMessage("asyncio"))
        receiver = sb_aio.ServiceBusReceiver._from_connection_string(conn_str, max_wait_time=5)
        own = receiver._owner
        assert own is receiver._holder  # a connection of its own, no client
        async with receiver:
            assert own._connection is not None and not own._connection.closed
            got = await receiver.receive_messages(max_wait_time=5)
            for message in got:
                await receiver.complete_message(message)
        assert receiver._owner is None and own._connection is None  # closed with the receiver
        return [str(m) for m in got]

    assert asyncio.run(run()) == ["asyncio"]
