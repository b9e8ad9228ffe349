"""A broker serving the management API, and what the admin-client tests share."""

from __future__ import annotations

from collections.abc import Callable

from amqplink.broker import Broker
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage

KEY_NAME, KEY = "RootManageSharedAccessKey", "SAS_KEY_VALUE"


def admin_connection_string(broker: Broker) -> str:
    """The connection string an admin client uses: the broker's HTTPS port."""
    return f"Endpoint=sb://127.0.0.1:{broker.http_port};SharedAccessKeyName={KEY_NAME};SharedAccessKey={KEY}"


def sender(broker: Broker) -> Callable[[str, int], None]:
    """Sends ``n`` small messages to a queue over AMQP (what the samples' runtime counts then show)."""

    def send(queue: str, n: int) -> None:
        client = ServiceBusClient.from_connection_string(broker.connection_string)
        with client, client.get_queue_sender(queue) as s:
            s.send_messages([ServiceBusMessage(f"message {i}") for i in range(n)])

    return send
