"""The tests' CONNECT proxy answers as a proxy does when it cannot make the tunnel: a host it
cannot reach gets ``502 Bad Gateway`` (the SDK's ``test_custom_endpoint_connection_verify_exception``
connects to ``fakeaddress.com:1111`` through it and expects ``ServiceBusConnectionError``, which
the SDK raises for a refused CONNECT, as against the real service, not for a closed tunnel)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.broker.connect_proxy import ConnectProxy


async def _status(proxy: ConnectProxy, target: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("fakeaddress.com:1111", b"HTTP/1.1 502 Bad Gateway\r\n"),  # a name it does not know
        ("127.0.0.1:{closed}", b"HTTP/1.1 502 Bad Gateway\r\n"),  # nothing listens there
        ("10.1.2.3:443", b"HTTP/1.1 403 Forbidden\r\n"),  # not loopback: not tunnelled
    ],
)
async def test_a_tunnel_the_proxy_cannot_make_is_answered(target: str, status: bytes) -> None:
    async with ConnectProxy() as proxy:
        assert await _status(proxy, target.format(closed=_closed_port())) == status
        assert (proxy.refused, proxy.tunnels) == (1, 0)
