"""The official SDK (azure-servicebus 7.15), unchanged, with
``transport_type=TransportType.AmqpOverWebsocket`` against the embedded broker's HTTPS port.

The SDK connects to ``wss://HOST:PORT/$servicebus/websocket`` with subprotocol AMQPWSB10,
PORT 443 unless ``custom_endpoint_address`` names one (its connection string's port is
dropped for TLS), and verifies the certificate with ``connection_verify``.
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.servicebus import ServiceBusClient as SdkBlockingClient
from azure.servicebus import ServiceBusMessage, TransportType
from azure.servicebus.aio import ServiceBusClient

from amqplink.broker import Broker
from tests.broker.connect_proxy import ConnectProxy
from tests.conftest import broker_thread

pytestmark = pytest.mark.sdk


def sdk_options(broker: Broker) -> dict[str, Any]:
    """A TLS connection string for the namespace, and where its WebSocket is."""
    name, key = next(iter(broker.servicebus.keys.items()))  # type: ignore[union-attr]
    return {
        "conn_str": f"Endpoint=sb://localhost;SharedAccessKeyName={name};SharedAccessKey={key}",
        "custom_endpoint_address": f"sb://localhost:{broker.http_port}",
        "connection_verify": broker.http_ca,
    }


async def test_the_sdk_sends_and_receives_over_websockets() -> None:
    async with Broker(servicebus=True, http_port=0) as broker:
        async with ServiceBusClient.from_connection_string(
            transport_type=TransportType.AmqpOverWebsocket, **sdk_options(broker)
        ) as client:
            async with client.get_queue_sender("sdkws") as sender:
                await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(20)])
            got: list[str] = []
            async with client.get_queue_receiver("sdkws") as receiver:
                while len(got) < 20:
                    batch = await receiver.receive_messages(max_message_count=20, max_wait_time=5)
                    assert batch, f"only {len(got)} of 20 came back"
                    for message in batch:
                        assert message.delivery_count == 0  # peek-lock: locked, first delivery
                        await receiver.complete_message(message)
                    got += [str(m) for m in batch]
                assert broker.management is not None and broker.management.websockets is not None
                assert broker.management.websockets.connections == 1  # the receiver's connection is a WebSocket
        assert sorted(got) == sorted(f"m{i}" for i in range(20))
        assert len(broker.namespace.queue("sdkws").store) == 0


def test_the_blocking_sdk_sends_and_receives_over_websockets() -> None:
    """The blocking SDK's WebSocket transport is websocket-client's (a test dependency)."""
    with broker_thread(Broker(servicebus=True, http_port=0)) as broker:
        with SdkBlockingClient.from_connection_string(
            transport_type=TransportType.AmqpOverWebsocket, **sdk_options(broker)
        ) as client:
            with client.get_queue_sender("sdkbws") as sender:
                sender.send_messages(ServiceBusMessage("hello"))
            with client.get_queue_receiver("sdkbws", max_wait_time=5) as receiver:
                (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                receiver.complete_message(message)
        assert str(message) == "hello"
        assert len(broker.namespace.queue("sdkbws").store) == 0


async def test_the_sdk_through_an_http_proxy() -> None:
    """The SDK's aio client hands aiohttp ``proxy_hostname:proxy_port`` as the proxy URL, so
    the host must carry its ``http://`` (amqplink's client takes either form)."""
    async with Broker(servicebus=True, http_port=0) as broker, ConnectProxy(("u", "pw")) as proxy:
        proxy_options = {
            "proxy_hostname": "http://127.0.0.1",
            "proxy_port": proxy.port,
            "username": "u",
            "password": "pw",
        }
        async with ServiceBusClient.from_connection_string(http_proxy=proxy_options, **sdk_options(broker)) as client:
            async with client.get_queue_sender("sdkpq") as sender:
                await sender.send_messages(ServiceBusMessage("via proxy"))
            async with client.get_queue_receiver("sdkpq") as receiver:
                (message,) = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                await receiver.complete_message(message)
        assert str(message) == "via proxy"
        assert proxy.tunnels >= 1 and proxy.refused == 0
        assert set(proxy.targets) == {("localhost", broker.http_port)}
