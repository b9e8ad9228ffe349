"""How a ServiceBusClient reaches its namespace: the SDK's connection keywords.

``transport_type`` (:class:`TransportType`; the SDK's own enum is taken too),
``http_proxy``, ``custom_endpoint_address`` and ``connection_verify``, as
azure-servicebus 7.x reads them:

* ``TransportType.AmqpOverWebsocket``: AMQP in WebSocket binary messages (subprotocol
  AMQPWSB10) at ``wss://HOST:PORT/$servicebus/websocket``; PORT is 443, or the
  endpoint's own port when it names one other than AMQP's (5671, 5672), as the embedded
  broker's ``Endpoint=sb://127.0.0.1:HTTP_PORT`` does. ``ws://`` when the connection string
  says ``UseDevelopmentEmulator=true`` (no TLS), as the SDK does. Needs aiohttp.
* ``http_proxy={"proxy_hostname": H, "proxy_port": P, "username": U, "password": W}``:
  the WebSocket is tunnelled through that HTTP proxy with CONNECT. As in the SDK, a proxy
  implies WebSockets; with ``transport_type=TransportType.Amqp`` given as well it cannot
  apply and is refused (the SDK switches transports silently).
* ``custom_endpoint_address="sb://HOST[:PORT]"``: connect there instead of the
  namespace's host (the AMQP hostname and the token audiences stay the namespace's); it
  implies WebSockets unless ``transport_type`` says otherwise; PORT defaults to 443
  (WebSockets) or 5671 (AMQP).
* ``connection_verify="ca.pem"``: verify the server's TLS certificate with that CA file
  (TLS to the AMQP port or the WebSocket); not with ``ssl_context`` as well, and not
  without TLS.

An option that cannot apply raises ``ValueError`` (or ``TypeError``) saying why; the
proxy's password never appears in an error, a ``repr`` or a log line.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from amqplink.aio.connection import Dialer
from amqplink.aio.url import Endpoint
from amqplink.aio.websocket import SERVICEBUS_WS_PATH, HttpProxy, open_websocket, require_aiohttp
from amqplink.servicebus.connection_string import PLAIN_PORT, TLS_PORT
from amqplink.servicebus.constants import TransportType

__all__ = ["WEBSOCKET_PORT", "Transport", "transport_from_options"]

WEBSOCKET_PORT = 443
"""Where Service Bus serves AMQP over WebSockets (HTTPS)."""
_PROXY_KEYS = frozenset(("proxy_hostname", "proxy_port", "username", "password"))


@dataclass(frozen=True)
class Transport:
    """Where and how the client's connection goes: the AMQP endpoint (the namespace: its
    host is the AMQP hostname and the audiences'), TLS, and a dialer when the bytes do not
    go over TCP to that endpoint (WebSockets, a custom endpoint)."""

    transport_type: TransportType
    endpoint: Endpoint
    ssl_context: ssl.SSLContext | None
    dialer: Dialer | None = None
    websocket_url: str | None = None


def _transport_type(value: Any) -> TransportType:
    if isinstance(value, TransportType):
        return value
    name = getattr(value, "name", value)  # the SDK's azure.servicebus.TransportType too
    for member in TransportType:
        if name == member.name:
            return member
    raise TypeError(f"transport_type must be TransportType.Amqp or TransportType.AmqpOverWebsocket, not {value!r}")


def _proxy(value: Any) -> HttpProxy:
    if not isinstance(value, Mapping):
        raise TypeError("http_proxy must be a dict: {'proxy_hostname': ..., 'proxy_port': ..., 'username', 'password'}")
    unknown = sorted(str(k) for k in value if k not in _PROXY_KEYS)
    if unknown:
        raise ValueError(f"http_proxy has unknown keys {unknown}: use proxy_hostname, proxy_port, username, password")
    host = value.get("proxy_hostname")
    port: Any = value.get("proxy_port")  # anything: int() below refuses what is no port number
    if isinstance(host, str) and host.lower().startswith("http://"):
        host = host[len("http://") :].rstrip("/")  # the form the SDK's aio client needs, taken too
    if not isinstance(host, str) or not host or "://" in host:
        raise ValueError("http_proxy needs 'proxy_hostname': the HTTP proxy's host name or address")
    try:
        number = int(port)
    except (TypeError, ValueError):
        raise ValueError("http_proxy needs 'proxy_port' (a port number)") from None
    if not 0 < number < 65536:
        raise ValueError(f"http_proxy's proxy_port {number} is not a port number")
    username, password = value.get("username"), value.get("password")
    if (username is not None and not isinstance(username, str)) or (
        password is not None and not isinstance(password, str)
    ):
        raise TypeError("http_proxy's username and password must be strings")
    return HttpProxy(host, number, username, password)


def _custom_endpoint(value: Any) -> tuple[str, int | None, str]:
    """``sb://HOST[:PORT][/PATH]`` (the scheme may be left out) -> (host, port, path)."""
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"custom_endpoint_address must be a string such as 'sb://HOST:PORT', not {value!r}")
    text = value.strip()
    try:
        parts = urlsplit(text if "//" in text else f"sb://{text}")
        port = parts.port
    except ValueError as exc:
        raise ValueError(
            f"custom_endpoint_address {text!r} is not an address ({exc}); use 'sb://HOST[:PORT]'"
        ) from None
    if not parts.hostname:
        raise ValueError(f"custom_endpoint_address {text!r} names no host; use 'sb://HOST[:PORT]'")
    return parts.hostname, port, parts.path.rstrip("/")


def _verify_context(cafile: Any) -> ssl.SSLContext:
    if not isinstance(cafile, str | os.PathLike):
        raise TypeError(f"connection_verify must be the path of a CA bundle (PEM), not {type(cafile).__name__}")
    if not os.path.isfile(cafile):
        raise ValueError(f"connection_verify: no CA file at {os.fspath(cafile)!r}")
    try:
        return ssl.create_default_context(cafile=cafile)
    except ssl.SSLError as exc:
        raise ValueError(f"connection_verify: {os.fspath(cafile)!r} holds no usable CA certificate ({exc})") from None


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def _dial_tcp(protocol: asyncio.Protocol, *, host: str, port: int, context: ssl.SSLContext | None) -> object:
    loop = asyncio.get_running_loop()
    return await loop.create_connection(
        lambda: protocol, host, port, ssl=context, server_hostname=host if context is not None else None
    )


def transport_from_options(host: str, port: int | None, use_tls: bool, options: Mapping[str, Any]) -> Transport:
    """The transport for namespace ``host`` (``port``: the one its address names, if any)
    from the client's keyword arguments (see the module's docstring)."""
    wanted = options.get("transport_type")
    transport_type = None if wanted is None else _transport_type(wanted)
    raw_proxy = options.get("http_proxy")
    proxy = None if raw_proxy is None else _proxy(raw_proxy)
    custom = options.get("custom_endpoint_address")
    target = None if custom is None else _custom_endpoint(custom)
    if proxy is not None and transport_type is TransportType.Amqp:
        raise ValueError(
            "http_proxy carries AMQP over WebSockets only: use transport_type=TransportType.AmqpOverWebsocket"
            " (or leave transport_type out), or drop http_proxy"
        )
    if transport_type is None:
        websocket = proxy is not None or target is not None
        transport_type = TransportType.AmqpOverWebsocket if websocket else TransportType.Amqp
    context: ssl.SSLContext | None = options.get("ssl_context")
    cafile = options.get("connection_verify")
    if cafile is not None:
        if context is not None:
            raise ValueError("give connection_verify (a CA file) or ssl_context, not both")
        if not use_tls:
            raise ValueError(
                "connection_verify needs TLS, and this connection has none (UseDevelopmentEmulator=true):"
                " drop connection_verify or the emulator setting"
            )
        context = _verify_context(cafile)
    if transport_type is TransportType.Amqp:
        endpoint = Endpoint(host=host, port=port or (TLS_PORT if use_tls else PLAIN_PORT), tls=use_tls)
        if target is None:
            return Transport(transport_type, endpoint, context)
        if use_tls and context is None:
            context = ssl.create_default_context()
        custom_host, custom_port, _ = target
        dialer = functools.partial(
            _dial_tcp, host=custom_host, port=custom_port or (TLS_PORT if use_tls else PLAIN_PORT), context=context
        )
        return Transport(transport_type, endpoint, None, dialer)
    require_aiohttp()
    if target is not None:
        ws_host, custom_port, path = target
        ws_port = custom_port or WEBSOCKET_PORT
    else:
        ws_host, path = host, ""
        ws_port = port if port is not None and port not in (TLS_PORT, PLAIN_PORT) else WEBSOCKET_PORT
    url = f"{'wss' if use_tls else 'ws'}://{_host(ws_host)}:{ws_port}{path}{SERVICEBUS_WS_PATH}"
    ws_dialer: Dialer = functools.partial(
        open_websocket, url=url, ssl_context=context if use_tls else None, proxy=proxy
    )
    endpoint = Endpoint(host=host, port=ws_port, tls=use_tls)
    return Transport(transport_type, endpoint, None, ws_dialer, url)
