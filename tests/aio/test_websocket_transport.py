"""WebSocketTransport: a WebSocket as an asyncio transport (message splitting, back-pressure,
text messages refused, close and abort), over a fake WebSocket."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from amqplink.aio.websocket import MAX_WS_MESSAGE, WRITE_HIGH, WebSocketTransport


@dataclass
class Message:
    type: int
    data: Any = None


class FakeWebSocket:
    """Messages to read come from ``incoming``; sends wait while ``open_send`` is clear."""

    def __init__(self) -> None:
        self.incoming: asyncio.Queue[Message] = asyncio.Queue()
        self.sent: list[bytes] = []
        self.open_send = asyncio.Event()
        self.open_send.set()
        self.closed = False

    async def send_bytes(self, data: bytes) -> None:
        await self.open_send.wait()
        self.sent.append(data)

    async def receive(self) -> Message:
        return await self.incoming.get()

    async def close(self) -> bool:
        self.closed = True
        self.incoming.put_nowait(Message(0x101))  # aiohttp's CLOSED
        return True

    def exception(self) -> BaseException | None:
        return None


class Recorder(asyncio.Protocol):
    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.calls: list[str] = []
        self.lost: list[Exception | None] = []

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def pause_writing(self) -> None:
        self.calls.append("pause")

    def resume_writing(self) -> None:
        self.calls.append("resume")

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


def started() -> tuple[FakeWebSocket, Recorder, WebSocketTransport]:
    ws, protocol = FakeWebSocket(), Recorder()
    transport = WebSocketTransport(ws, protocol, extra={"peername": ("127.0.0.1", 1)})
    transport.start()
    return ws, protocol, transport


async def test_binary_messages_are_the_byte_stream_and_writes_are_split() -> None:
    ws, protocol, transport = started()
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)
    ws.incoming.put_nowait(Message(0x2, b"AMQP"))
    ws.incoming.put_nowait(Message(0x2, b"\x00\x01"))
    big = bytes(range(256)) * (MAX_WS_MESSAGE // 256 * 2 + 1)
    transport.write(b"head")
    transport.write(big)
    await _until(lambda: sum(map(len, ws.sent)) == 4 + len(big))
    assert b"".join(ws.sent) == b"head" + big
    assert max(map(len, ws.sent)) == MAX_WS_MESSAGE and len(ws.sent) == 3
    await _until(lambda: len(protocol.data) == 2)
    assert protocol.data == [b"AMQP", b"\x00\x01"]
    transport.close()
    await asyncio.wait_for(transport.socket_closed, 5)
    assert ws.closed and protocol.lost == [None] and transport.is_closing()


async def test_a_slow_socket_pauses_and_resumes_the_writer() -> None:
    ws, protocol, transport = started()
    ws.open_send.clear()
    transport.write(b"x" * (WRITE_HIGH + 1))
    assert protocol.calls == ["pause"] and transport.get_write_buffer_size() == WRITE_HIGH + 1
    ws.open_send.set()
    await _until(lambda: protocol.calls == ["pause", "resume"])
    assert transport.get_write_buffer_size() == 0
    transport.abort()
    await asyncio.wait_for(transport.socket_closed, 5)
    assert protocol.lost == [None]


async def test_a_text_message_ends_the_connection_with_an_error() -> None:
    ws, protocol, transport = started()
    ws.incoming.put_nowait(Message(0x1, "hello"))
    await asyncio.wait_for(transport.socket_closed, 5)
    (error,) = protocol.lost
    assert isinstance(error, ConnectionError) and "binary" in str(error)
    transport.write(b"ignored once closed")
    assert ws.sent == []


async def _until(condition: Any, seconds: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0)
