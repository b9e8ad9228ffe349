"""The official SDK's asyncio AutoLockRenewer on several messages at once (the official
``auto_lock_renew`` sample's pattern) against the broker.

Its renewals run in one task per message and wake together; its aio session reads
next-outgoing-id before an ``await`` and increments it after, so concurrent requests on
the receiver's ``$management`` link carry one delivery-id. Service Bus answers each of
them; so must the broker (its ``$management`` request links tolerate the reuse,
docs/dropin-websockets.md), or the session ends and every renewal and settlement fails.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.aio import AutoLockRenewer, ServiceBusClient

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, EntityProperties, NamespaceConfig, QueueConfig

pytestmark = pytest.mark.sdk

LOCK = 5.0
COUNT = 8


async def test_concurrent_renewals_of_several_messages_keep_their_locks() -> None:
    config = BrokerConfig((NamespaceConfig(queues=(QueueConfig("renewed", EntityProperties(lock_duration=LOCK)),)),))
    failures: list[Any] = []

    async def on_failure(renewable: Any, error: Exception | None) -> None:
        failures.append(error)

    async with Broker(config) as broker:
        async with ServiceBusClient.from_connection_string(broker.connection_string) as client:
            async with client.get_queue_sender("renewed") as sender:
                await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(COUNT)])
            renewer = AutoLockRenewer()
            async with client.get_queue_receiver("renewed") as receiver:
                messages: list[Any] = []
                while len(messages) < COUNT:
                    messages += await receiver.receive_messages(max_message_count=COUNT, max_wait_time=5)
                first_until = [m.locked_until_utc for m in messages]
                for message in messages:
                    renewer.register(receiver, message, max_lock_renewal_duration=60, on_lock_renew_failure=on_failure)
                # Wait (deadline 30 s) until every lock has been renewed past twice its first term.
                wanted = [t + datetime.timedelta(seconds=2 * LOCK) for t in first_until]
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 30
                while not failures and any(m.locked_until_utc < w for m, w in zip(messages, wanted, strict=True)):
                    assert loop.time() < deadline, "the locks were not renewed"
                    await asyncio.sleep(0.1)
                assert failures == []
                management = [link for conn in broker.servicebus.connections for link in conn.requests]
                assert sum(link.reused_delivery_ids for link in management) > 0  # the SDK's pattern happened
                for message in messages:
                    await receiver.complete_message(message)
            await renewer.close()
        assert failures == []
        assert len(broker.namespace.queue("renewed").store) == 0
