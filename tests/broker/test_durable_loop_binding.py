"""A durable broker built while one event loop runs and served from another writes its store on
the loop that serves it: the group commit is bound when the namespace starts
(``GroupCommit.bind`` from ``ServiceBusHost.start``), not to whichever loop ran when the
broker's construction first recorded something (its entity definitions)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from amqplink.broker import Broker
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from tests.conftest import broker_thread


async def _built_in_a_coroutine(data_dir: Path) -> Broker:
    return Broker(servicebus=True, data_dir=data_dir)


def _send_and_receive(broker: Broker, body: str) -> list[str]:
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("kept") as sender:
            sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver("kept", max_wait_time=5) as receiver:
            return [str(m) for m in receiver.peek_messages(max_message_count=10)]


def test_a_broker_built_in_one_loop_and_served_in_another_keeps_its_messages(tmp_path: Path) -> None:
    # The loop the broker is built in is closed before the broker serves: a batch scheduled
    # on it would never be written (or fail with "Event loop is closed").
    broker = asyncio.run(_built_in_a_coroutine(tmp_path))
    with broker_thread(broker):
        assert _send_and_receive(broker, "first") == ["first"]
    with broker_thread(Broker(servicebus=True, data_dir=tmp_path)) as again:
        assert _send_and_receive(again, "second") == ["first", "second"]
