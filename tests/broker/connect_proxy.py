"""A small HTTP CONNECT proxy on loopback for the tests: it counts the tunnels it made.

It answers ``CONNECT host:port`` with ``200`` and relays bytes both ways; with
``credentials=(user, password)`` a request without that Basic ``Proxy-Authorization``
gets ``407``; tunnels go to loopback addresses only (``redirect`` maps a name and port to one):
another address gets ``403``, and a name it does not know or a port nothing listens on
``502 Bad Gateway``, as a proxy that cannot reach the host answers (the SDK then raises
``ServiceBusConnectionError``, as against the real service: its own
``test_custom_endpoint_connection_verify_exception``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
from types import TracebackType


class ConnectProxy:
    """``async with ConnectProxy() as proxy``: listening on ``proxy.port``; ``proxy.tunnels``
    counts the tunnels opened, ``proxy.refused`` the requests refused."""

    def __init__(
        self,
        credentials: tuple[str, str] | None = None,
        *,
        redirect: dict[tuple[str, int], tuple[str, int]] | None = None,
    ) -> None:
        self.credentials = credentials
        self.redirect = redirect or {}
        """Tunnels asked for a ``(host, port)`` here go to the loopback address it maps to instead
        (a name such as ``ns.servicebus.windows.net:443`` served by a local broker)."""
        self.tunnels = 0
        self.refused = 0
        self.targets: list[tuple[str, int]] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def __aenter__(self) -> ConnectProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if self.credentials is not None:
            expected = "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()
            if headers.get("proxy-authorization") != expected:
                self.refused += 1
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                return
        name, _, number = target.rpartition(":")
        host, port = self.redirect.get((name.strip("[]").lower(), int(number)), (name.strip("[]"), int(number)))
        if method == "CONNECT" and host != "localhost" and not _is_address(host):
            await self._refuse(writer, b"502 Bad Gateway")  # (no name is resolved here)
            return
        if method != "CONNECT" or not (host == "localhost" or ipaddress.ip_address(host).is_loopback):
            await self._refuse(writer, b"403 Forbidden")
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            await self._refuse(writer, b"502 Bad Gateway")
            return
        self.tunnels += 1
        self.targets.append((host, port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _refuse(self, writer: asyncio.StreamWriter, status: bytes) -> None:
        self.refused += 1
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.write_eof()
