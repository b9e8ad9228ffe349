"""The SDK's asyncio client (azure.servicebus.aio), unchanged, against the namespace in the same loop."""

from __future__ import annotations

from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient

from amqplink.broker import Broker


async def test_async_send_receive_abandon_complete_and_dead_letter() -> None:
    async with Broker(servicebus=True) as broker:
        async with ServiceBusClient.from_connection_string(broker.connection_string) as client:
            async with client.get_queue_sender("aq") as sender:
                batch = await sender.create_message_batch()
                for body in ("a", "b"):
                    batch.add_message(ServiceBusMessage(body))
                await sender.send_messages(batch)
            async with client.get_queue_receiver("aq") as receiver:
                first = await receiver.receive_messages(max_message_count=2, max_wait_time=5)
                assert [str(m) for m in first] == ["a", "b"]
                await receiver.abandon_message(first[0])
                await receiver.dead_letter_message(first[1], reason="r", error_description="d")
                (again,) = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                assert str(again) == "a" and again.delivery_count == 1
                await receiver.complete_message(again)
            async with client.get_queue_receiver("aq", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
                (dead,) = await dlq.receive_messages(max_message_count=1, max_wait_time=5)
                assert (str(dead), dead.dead_letter_reason, dead.dead_letter_error_description) == ("b", "r", "d")
                await dlq.complete_message(dead)
        assert len(broker.namespace.receiver_source("aq").store) == 0
