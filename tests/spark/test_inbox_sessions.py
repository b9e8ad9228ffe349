"""The streaming source's inbox on a session entity, without Spark: a trigger that finds no
session free is idle, not a failure (the broker refuses a next-available-session receiver
with ``com.microsoft:timeout`` when its wait runs out; the receiver raises that)."""

from __future__ import annotations

from pathlib import Path

from amqplink.servicebus import ServiceBusMessage
from amqplink.spark.credentials import make_async_client
from amqplink.spark.inbox import Inbox
from amqplink.spark.source_options import parse_source_options
from amqplink.spark.staging import Staging, staging_dir
from tests.servicebus.scenario import BrokerThread, broker

__all__ = ["broker"]  # fixture


async def test_a_trigger_with_no_session_free_is_idle_then_takes_the_next_session(
    broker: BrokerThread, tmp_path: Path
) -> None:
    options = {"connectionString": broker.connection_string, "entity": "sessions", "sessions": "true",
               "receiveWait": "1", "checkpointLocation": str(tmp_path)}  # fmt: skip
    config = parse_source_options(options)
    staging = Staging(staging_dir(str(tmp_path), config.namespace, "sessions"))
    async with make_async_client(config) as client:
        inbox = Inbox(config, staging, client)
        try:
            assert await inbox.take(0, 10) == []
            assert inbox.counters.receive_failures == 0  # no session is not a receive failure
            async with client.get_queue_sender("sessions") as sender:
                await sender.send_messages(ServiceBusMessage("first", session_id="s-1"))
            (held,) = await inbox.take(0, 10)
            assert b"".join(held.message.body) == b"first"
            assert held.message.session_id == "s-1" and inbox.counters.receive_failures == 0
        finally:
            await inbox.close()
