"""The broker answers a read in the read's own loop turn: what its handlers schedule while a
read's events are handled leaves with the read's flush (``ServerProtocol.data_received``), so a
sequential sender costs the broker one loop turn per message, not a second one to run a
deferred flush that finds nothing to write."""

from __future__ import annotations

from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient
from tests.servicebus.scenario import BrokerThread, broker

__all__ = ["broker"]

SENDS = 20


async def test_sequential_sends_need_no_deferred_flush_on_the_broker(broker: BrokerThread) -> None:
    async with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages(ServiceBusMessage("attach"))
            host = broker.broker.servicebus
            assert host is not None
            protocols = [conn.protocol for conn in host.connections]
            assert len(protocols) == 1
            protocol = protocols[0]
            deferred = 0
            flush = protocol._deferred_flush

            def counted() -> None:
                nonlocal deferred
                deferred += 1
                flush()

            # Each send is answered before the next one is read: a deferred flush scheduled
            # by a read would have run before the next read, so all but the last are counted.
            protocol._deferred_flush = counted  # type: ignore[method-assign]
            for i in range(SENDS):
                await sender.send_messages(ServiceBusMessage(f"m{i}"))
            assert deferred == 0
        async with client.get_queue_receiver("other", max_wait_time=5) as receiver:
            got = 0
            while got < SENDS + 1:
                batch = await receiver.receive_messages(max_message_count=SENDS + 1, max_wait_time=5)
                assert batch, f"received {got} of {SENDS + 1}"
                got += len(batch)
                for message in batch:
                    await receiver.complete_message(message)
