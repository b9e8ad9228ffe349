"""The SDK's connection keywords on ServiceBusClient: where the connection goes, and a clear
error for every option that cannot apply (never silence)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import TransportType as SdkTransportType

from amqplink.servicebus import TransportType
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.transport import Transport, transport_from_options

KEYS = "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=c2VjcmV0"
PROXY = {"proxy_hostname": "proxy.local", "proxy_port": 3128, "username": "u", "password": "hunter2"}


def options(host: str = "ns.servicebus.windows.net", port: int | None = None, tls: bool = True, **kw: Any) -> Transport:
    return transport_from_options(host, port, tls, kw)


def test_tcp_is_the_default() -> None:
    transport = options()
    assert transport.transport_type is TransportType.Amqp and transport.dialer is None
    assert (transport.endpoint.host, transport.endpoint.port, transport.endpoint.tls) == (
        "ns.servicebus.windows.net",
        5671,
        True,
    )


@pytest.mark.parametrize(
    ("port", "kw", "url"),
    [
        (None, {}, "wss://ns.servicebus.windows.net:443/$servicebus/websocket"),
        (5671, {}, "wss://ns.servicebus.windows.net:443/$servicebus/websocket"),
        (8443, {}, "wss://ns.servicebus.windows.net:8443/$servicebus/websocket"),
        (None, {"custom_endpoint_address": "sb://gw.local"}, "wss://gw.local:443/$servicebus/websocket"),
        (None, {"custom_endpoint_address": "gw.local:9000/x"}, "wss://gw.local:9000/x/$servicebus/websocket"),
    ],
)
def test_websocket_urls(port: int | None, kw: dict[str, Any], url: str) -> None:
    transport = options(port=port, transport_type=TransportType.AmqpOverWebsocket, **kw)
    assert transport.websocket_url == url and transport.dialer is not None
    assert transport.endpoint.host == "ns.servicebus.windows.net"  # the AMQP hostname and audiences stay


def test_the_sdks_enum_and_what_implies_websockets() -> None:
    assert options(transport_type=SdkTransportType.AmqpOverWebsocket).transport_type is TransportType.AmqpOverWebsocket
    assert options(http_proxy=PROXY).transport_type is TransportType.AmqpOverWebsocket
    assert options(custom_endpoint_address="sb://gw.local").transport_type is TransportType.AmqpOverWebsocket
    tcp = options(transport_type=TransportType.Amqp, custom_endpoint_address="sb://gw.local")
    assert tcp.transport_type is TransportType.Amqp and tcp.dialer is not None and tcp.websocket_url is None
    plain = options(tls=False, port=5672, transport_type=TransportType.AmqpOverWebsocket)
    assert plain.websocket_url == "ws://ns.servicebus.windows.net:443/$servicebus/websocket"


@pytest.mark.parametrize(
    ("kw", "error", "says"),
    [
        ({"transport_type": "carrier-pigeon"}, TypeError, "TransportType.Amqp"),
        ({"transport_type": TransportType.Amqp, "http_proxy": PROXY}, ValueError, "AmqpOverWebsocket"),
        ({"http_proxy": {**PROXY, "proxy_user": "x"}}, ValueError, "proxy_user"),
        ({"http_proxy": {"proxy_port": 1}}, ValueError, "proxy_hostname"),
        ({"http_proxy": {"proxy_hostname": "p", "proxy_port": "x"}}, ValueError, "proxy_port"),
        ({"http_proxy": {"proxy_hostname": "https://p", "proxy_port": 1}}, ValueError, "proxy_hostname"),
        ({"http_proxy": "http://p:1"}, TypeError, "dict"),
        ({"connection_verify": "/nonexistent/ca.pem"}, ValueError, "no CA file"),
        ({"custom_endpoint_address": "sb://"}, ValueError, "names no host"),
    ],
)
def test_an_option_that_cannot_apply_is_refused(kw: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says) as caught:
        options(**kw)
    assert "hunter2" not in str(caught.value)


def test_connection_verify_needs_tls_and_excludes_ssl_context(tmp_path: Path) -> None:
    import ssl

    not_a_ca = tmp_path / "ca.pem"
    not_a_ca.write_text("not a certificate")
    with pytest.raises(ValueError, match="no usable CA"):
        options(connection_verify=str(not_a_ca))
    with pytest.raises(ValueError, match="UseDevelopmentEmulator"):
        options(tls=False, connection_verify=str(not_a_ca))
    with pytest.raises(ValueError, match="not both"):
        options(connection_verify=str(not_a_ca), ssl_context=ssl.create_default_context())


def test_the_client_refuses_bad_options_at_construction() -> None:
    conn_str = f"Endpoint=sb://ns.servicebus.windows.net/;{KEYS}"
    with pytest.raises(ValueError, match="AmqpOverWebsocket"):
        ServiceBusClient.from_connection_string(conn_str, transport_type=TransportType.Amqp, http_proxy=PROXY)


def test_the_proxy_password_is_not_in_a_repr() -> None:
    transport = options(http_proxy=PROXY)
    assert "hunter2" not in repr(transport) and "hunter2" not in repr(transport.dialer)


def test_aiohttp_is_imported_only_for_websockets_and_missing_it_says_what_to_install() -> None:
    """Importing the client and using TCP loads no aiohttp; asking for WebSockets without it
    raises ImportError naming ``pip install aiohttp``."""
    code = (
        "import sys\n"
        "from amqplink.servicebus.aio import ServiceBusClient\n"
        "from amqplink.servicebus import TransportType\n"
        f"c = ServiceBusClient.from_connection_string({f'Endpoint=sb://ns/;{KEYS}'!r})\n"
        "assert 'aiohttp' not in sys.modules, 'aiohttp imported for TCP'\n"
        "sys.modules['aiohttp'] = None\n"
        "try:\n"
        f"    ServiceBusClient.from_connection_string({f'Endpoint=sb://ns/;{KEYS}'!r},"
        " transport_type=TransportType.AmqpOverWebsocket)\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install aiohttp" in out.stdout
