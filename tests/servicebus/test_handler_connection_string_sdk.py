"""The handlers' ``from_connection_string`` beside the SDK's ``_from_connection_string`` (its 7.15
name): for every case of EntityPath and keywords both choose the same entity or both refuse
with ``ValueError``; messages sent by one's handler are received by the other's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage as SdkMessage
from azure.servicebus import ServiceBusReceiver as SdkReceiver
from azure.servicebus import ServiceBusSender as SdkSender
from azure.servicebus.aio import ServiceBusReceiver as SdkAsyncReceiver
from azure.servicebus.aio import ServiceBusSender as SdkAsyncSender

from amqplink.broker import Broker
from amqplink.servicebus import ServiceBusMessage, ServiceBusReceiver, ServiceBusSender
from amqplink.servicebus import aio as sb_aio
from tests.broker.sdkutil import running_broker
from tests.servicebus.test_handler_connection_string import CASES, CONFIG, path_of, with_entity

pytestmark = pytest.mark.sdk

PAIRS = {
    "sender": ((SdkSender, ServiceBusSender), (SdkAsyncSender, sb_aio.ServiceBusSender)),
    "receiver": ((SdkReceiver, ServiceBusReceiver), (SdkAsyncReceiver, sb_aio.ServiceBusReceiver)),
}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(CONFIG) as broker:
        yield broker


def _outcome(make: Any, conn_str: str, keywords: dict[str, Any]) -> str:
    try:
        return path_of(make(conn_str, **keywords))
    except ValueError:
        return "ValueError"


@pytest.mark.parametrize(("kind", "entity", "keywords", "expected"), CASES)
def test_same_choice_as_the_sdk(
    broker: Broker, kind: str, entity: str | None, keywords: dict[str, Any], expected: str | None
) -> None:
    conn_str = with_entity(broker.connection_string, entity)
    for sdk, ours in PAIRS[kind]:
        theirs = _outcome(sdk._from_connection_string, conn_str, keywords)
        assert theirs == (expected or "ValueError")  # the table is the SDK's behaviour
        assert _outcome(ours.from_connection_string, conn_str, keywords) == theirs


def test_messages_cross_between_the_sdks_handlers_and_ours(broker: Broker) -> None:
    queue = with_entity(broker.connection_string, "orders")
    with SdkSender._from_connection_string(queue) as sender:
        sender.send_messages(SdkMessage("from the SDK"))
    with ServiceBusReceiver.from_connection_string(queue, max_wait_time=5) as receiver:
        (got,) = receiver.receive_messages(max_wait_time=5)
        assert str(got) == "from the SDK"
        receiver.complete_message(got)
    with ServiceBusSender.from_connection_string(broker.connection_string, topic_name="news") as sender:
        sender.send_messages(ServiceBusMessage("from amqplink"))
    with SdkReceiver._from_connection_string(
        broker.connection_string, topic_name="news", subscription_name="all", max_wait_time=5
    ) as receiver:
        (got,) = receiver.receive_messages(max_wait_time=5)
        assert str(got) == "from amqplink"
        receiver.complete_message(got)


def test_messages_cross_asyncio(broker: Broker) -> None:
    async def run() -> list[str]:
        conn_str = with_entity(broker.connection_string, "other")
        async with SdkAsyncSender._from_connection_string(conn_str, queue_name="other") as sender:
            await sender.send_messages(SdkMessage("asyncio SDK"))
        async with sb_aio.ServiceBusReceiver.from_connection_string(conn_str, max_wait_time=5) as receiver:
            got = await receiver.receive_messages(max_wait_time=5)
            for message in got:
                await receiver.complete_message(message)
        return [str(m) for m in got]

    assert asyncio.run(run()) == ["asyncio SDK"]
