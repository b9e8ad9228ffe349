"""Two embedded namespaces at once (a primary and a secondary, as paired-namespace and
replication tests need): separate ports, separate keys, separate entities."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from amqplink.broker import Broker
from tests.broker.sdkutil import running_broker


def test_a_primary_and_a_secondary_namespace_run_side_by_side() -> None:
    with (
        running_broker(keys={"RootManageSharedAccessKey": "primary-key"}, require_auth=True) as primary,
        running_broker(keys={"RootManageSharedAccessKey": "secondary-key"}, require_auth=True) as secondary,
    ):
        assert primary.port != secondary.port
        assert "SharedAccessKey=primary-key" in primary.connection_string
        assert "SharedAccessKey=secondary-key" in secondary.connection_string
        for broker, body in ((primary, "to primary"), (secondary, "to secondary")):
            with (
                ServiceBusClient.from_connection_string(broker.connection_string) as client,
                client.get_queue_sender("orders") as sender,
            ):
                sender.send_messages(ServiceBusMessage(body))
        for broker, body in ((primary, "to primary"), (secondary, "to secondary")):
            with (
                ServiceBusClient.from_connection_string(broker.connection_string) as client,
                client.get_queue_receiver("orders", max_wait_time=5) as receiver,
            ):
                got = receiver.receive_messages(max_message_count=10, max_wait_time=5)
                assert [str(m) for m in got] == [body]
                for m in got:
                    receiver.complete_message(m)


def test_one_namespaces_key_does_not_open_the_other() -> None:
    with (
        running_broker(keys={"RootManageSharedAccessKey": "primary-key"}, require_auth=True) as primary,
        running_broker(keys={"RootManageSharedAccessKey": "secondary-key"}, require_auth=True) as secondary,
    ):
        wrong = primary.connection_string.replace(f":{primary.port};", f":{secondary.port};")
        with (
            pytest.raises(ServiceBusAuthenticationError),
            ServiceBusClient.from_connection_string(wrong, retry_total=0) as client,
            client.get_queue_sender("orders") as sender,
        ):
            sender.send_messages(ServiceBusMessage("refused"))
        # The secondary made the queue on first use (the attach came after the refused
        # token) or never saw it: either way nothing reached it.
        assert _stored(secondary, "orders") == 0


def _stored(broker: Broker, queue: str) -> int:
    entities = broker.namespace.queues
    return len(entities[queue].store) if queue in entities else 0
