"""AMQP over WebSockets: the broker serves it on its HTTPS management port at
``/$servicebus/websocket`` (subprotocol AMQPWSB10), and amqplink's Service Bus client
speaks it (``transport_type=TransportType.AmqpOverWebsocket``), directly or through an
HTTP CONNECT proxy."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from amqplink.aio.websocket import AMQP_WS_SUBPROTOCOL, SERVICEBUS_WS_PATH
from amqplink.broker import Broker
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.events import ConnectionClosed
from amqplink.servicebus import ServiceBusClient as BlockingClient
from amqplink.servicebus import ServiceBusMessage, TransportType
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.exceptions import ServiceBusError
from tests.broker.connect_proxy import ConnectProxy
from tests.conftest import broker_thread


def ws_connection_string(broker: Broker) -> str:
    """The broker's connection string for WebSockets: TLS (no emulator flag), its HTTPS port."""
    name, key = next(iter(broker.servicebus.keys.items()))  # type: ignore[union-attr]
    return f"Endpoint=sb://localhost:{broker.http_port};SharedAccessKeyName={name};SharedAccessKey={key}"


def websocket_options(broker: Broker) -> dict[str, Any]:
    return {"transport_type": TransportType.AmqpOverWebsocket, "connection_verify": broker.http_ca}


def client_context(broker: Broker) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=broker.http_ca)


async def round_trip(client: ServiceBusClient, queue: str, count: int) -> list[str]:
    """Send ``count`` messages, then receive them in peek-lock and complete each."""
    async with client.get_queue_sender(queue) as sender:
        await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(count)])
    got: list[str] = []
    async with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
        while len(got) < count:
            batch = await receiver.receive_messages(max_message_count=count, max_wait_time=5)
            assert batch, f"only {len(got)} of {count} messages came back"
            for message in batch:
                await receiver.complete_message(message)
            got += [str(m) for m in batch]
    return got


async def wait_until(condition: object, what: str, seconds: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():  # type: ignore[operator]
        assert loop.time() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


async def test_the_aio_client_sends_and_receives_over_websockets() -> None:
    async with Broker(servicebus=True, http_port=0) as broker:
        client = ServiceBusClient.from_connection_string(ws_connection_string(broker), **websocket_options(broker))
        async with client:
            assert await round_trip(client, "wsq", 200) == [f"m{i}" for i in range(200)]
            assert broker.management is not None and broker.management.websockets is not None
            assert broker.management.websockets.connections == 1
        await wait_until(lambda: broker.management.websockets.connections == 0, "the WebSocket closed")  # type: ignore[union-attr]
        assert len(broker.namespace.queue("wsq").store) == 0


def test_the_blocking_client_sends_and_receives_over_websockets() -> None:
    with broker_thread(Broker(servicebus=True, http_port=0)) as broker:
        client = BlockingClient.from_connection_string(ws_connection_string(broker), **websocket_options(broker))
        with client:
            with client.get_queue_sender("bq") as sender:
                sender.send_messages([ServiceBusMessage("one"), ServiceBusMessage("two")])
            with client.get_queue_receiver("bq", max_wait_time=5) as receiver:
                received = receiver.receive_messages(max_message_count=2, max_wait_time=5)
                for message in received:
                    receiver.complete_message(message)
        assert sorted(str(m) for m in received) == ["one", "two"]


async def test_http_proxy_tunnels_the_websocket() -> None:
    """``http_proxy`` as the SDK takes it; the proxy checks the credentials and counts tunnels.
    Each connection of the client is one tunnel (the client has one connection)."""
    async with Broker(servicebus=True, http_port=0) as broker, ConnectProxy(("alice", "s3cret")) as proxy:
        proxy_options = {"proxy_hostname": "127.0.0.1", "proxy_port": proxy.port, "username": "alice"}
        async with ServiceBusClient.from_connection_string(
            ws_connection_string(broker),
            http_proxy={**proxy_options, "password": "s3cret"},  # implies AmqpOverWebsocket, as in the SDK
            connection_verify=broker.http_ca,
        ) as client:
            assert await round_trip(client, "pq", 10) == [f"m{i}" for i in range(10)]
        assert (proxy.tunnels, proxy.refused) == (1, 0)
        assert proxy.targets == [("localhost", broker.http_port)]
        refused = ServiceBusClient.from_connection_string(
            ws_connection_string(broker),
            http_proxy={**proxy_options, "password": "wrong"},
            connection_verify=broker.http_ca,
            retry_total=0,
        )
        async with refused:
            with pytest.raises(ServiceBusError) as caught:
                async with refused.get_queue_sender("pq") as sender:
                    await sender.send_messages(ServiceBusMessage("never"))
        assert "407" in str(caught.value) and "wrong" not in str(caught.value)
        assert (proxy.tunnels, proxy.refused) == (1, 1)


async def test_the_server_certificate_is_verified() -> None:
    """Without ``connection_verify`` the broker's self-signed certificate is not trusted."""
    async with Broker(servicebus=True, http_port=0) as broker:
        client = ServiceBusClient.from_connection_string(
            ws_connection_string(broker), transport_type=TransportType.AmqpOverWebsocket, retry_total=0
        )
        async with client:
            with pytest.raises(ServiceBusError, match="certificate"):
                async with client.get_queue_sender("q") as sender:
                    await sender.send_messages(ServiceBusMessage("never"))


@asynccontextmanager
async def http_session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.mark.parametrize(
    ("path", "protocols", "status", "says"),
    [
        ("/$servicebus/other", (AMQP_WS_SUBPROTOCOL,), 404, SERVICEBUS_WS_PATH),
        ("/queue", (AMQP_WS_SUBPROTOCOL,), 404, SERVICEBUS_WS_PATH),
        (SERVICEBUS_WS_PATH, ("AMQPWSB09",), 400, AMQP_WS_SUBPROTOCOL),
        (SERVICEBUS_WS_PATH, (), 400, AMQP_WS_SUBPROTOCOL),
    ],
)
async def test_a_wrong_path_or_subprotocol_is_refused_with_a_clear_status(
    path: str, protocols: tuple[str, ...], status: int, says: str
) -> None:
    async with Broker(servicebus=True, http_port=0) as broker, http_session() as session:
        url = f"wss://localhost:{broker.http_port}{path}"
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await session.ws_connect(url, protocols=protocols, ssl=client_context(broker))
        assert caught.value.status == status
        response = await session.get(
            url,
            ssl=client_context(broker),
            headers={
                "Upgrade": "websocket",
                "Connection": "Upgrade",
                "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                **({"Sec-WebSocket-Protocol": ", ".join(protocols)} if protocols else {}),
            },
        )
        assert response.status == status and says in await response.text()


async def test_the_client_reports_a_refused_upgrade() -> None:
    """A client pointed at the wrong path (a custom endpoint with one) hears the 404."""
    async with Broker(servicebus=True, http_port=0) as broker:
        client = ServiceBusClient.from_connection_string(
            ws_connection_string(broker),
            custom_endpoint_address=f"sb://localhost:{broker.http_port}/elsewhere",
            connection_verify=broker.http_ca,
            retry_total=0,
        )
        async with client:
            with pytest.raises(ServiceBusError, match="404"):
                async with client.get_queue_sender("q") as sender:
                    await sender.send_messages(ServiceBusMessage("never"))


async def raw_amqp_socket(broker: Broker, session: aiohttp.ClientSession) -> aiohttp.ClientWebSocketResponse:
    return await session.ws_connect(
        f"wss://localhost:{broker.http_port}{SERVICEBUS_WS_PATH}",
        protocols=(AMQP_WS_SUBPROTOCOL,),
        ssl=client_context(broker),
    )


async def read_until_closed(ws: aiohttp.ClientWebSocketResponse, engine: EngineConnection | None) -> list[object]:
    """Feed what the broker sends to ``engine`` until the WebSocket closes; the events."""
    events: list[object] = []
    async for message in ws:
        if message.type is aiohttp.WSMsgType.BINARY and engine is not None:
            events += engine.receive_data(message.data)
    return events


async def test_amqp_bounds_apply_over_websockets_and_http_deadlines_do_not() -> None:
    """The AMQP handshake time-out drops an upgraded socket that never opens; an opened
    connection outlives the HTTP per-request deadline; the idle time-out then closes it
    with ``amqp:resource-limit-exceeded``."""
    handshake, idle = 0.5, 2.0
    async with Broker(servicebus=True, http_port=0, handshake_timeout=handshake, idle_timeout=idle) as broker:
        loop = asyncio.get_running_loop()
        async with http_session() as session:
            silent = await raw_amqp_socket(broker, session)
            started = loop.time()
            await asyncio.wait_for(read_until_closed(silent, None), 10)
            assert handshake - 0.1 <= loop.time() - started < handshake + 5  # timed from the upgrade
            engine = EngineConnection(ConnectionConfig(container_id="quiet"), sasl=None)
            engine.open()
            opened = await raw_amqp_socket(broker, session)
            await opened.send_bytes(engine.data_to_send())
            started = loop.time()
            events = await asyncio.wait_for(read_until_closed(opened, engine), 30)
            lasted = loop.time() - started
        assert lasted >= idle - 0.1 > 2 * handshake  # not dropped at the HTTP request deadline
        (closed,) = [e for e in events if isinstance(e, ConnectionClosed)]
        assert closed.error is not None and closed.error.condition == "amqp:resource-limit-exceeded"


async def test_websocket_connections_share_the_amqp_connection_cap() -> None:
    """One connection allowed: the TCP one holds it, so the WebSocket one is refused at its
    open with ``amqp:resource-limit-exceeded``, as a second TCP one would be."""
    async with Broker(servicebus=True, http_port=0, max_connections=1) as broker:
        tcp = ServiceBusClient.from_connection_string(broker.connection_string)
        async with tcp, tcp.get_queue_sender("capped") as sender:
            await sender.send_messages(ServiceBusMessage("tcp"))
            engine = EngineConnection(ConnectionConfig(container_id="second"), sasl=None)
            engine.open()
            async with http_session() as session:
                ws = await raw_amqp_socket(broker, session)
                await ws.send_bytes(engine.data_to_send())
                events = await asyncio.wait_for(read_until_closed(ws, engine), 10)
        (closed,) = [e for e in events if isinstance(e, ConnectionClosed)]
        assert closed.error is not None and closed.error.condition == "amqp:resource-limit-exceeded"


async def test_stopping_the_broker_drops_its_websocket_connections() -> None:
    broker = Broker(servicebus=True, http_port=0)
    await broker.start()
    client = ServiceBusClient.from_connection_string(ws_connection_string(broker), **websocket_options(broker))
    async with client, client.get_queue_sender("gone") as sender:
        await sender.send_messages(ServiceBusMessage("x"))
        websockets = broker.management.websockets  # type: ignore[union-attr]
        assert websockets is not None and websockets.connections == 1
        loop = asyncio.get_running_loop()
        started = loop.time()
        await broker.stop()
        assert loop.time() - started < 3 and websockets.connections == 0
