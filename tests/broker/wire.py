"""A raw-socket client for the broker tests: hand-made frames out, every byte back."""

from __future__ import annotations

import asyncio
from typing import Any

from amqplink.codec.types import Symbol, UInt
from amqplink.engine.frames import AMQP_HEADER, FRAME_TYPE_SASL, SASL_HEADER, write_frame
from amqplink.protocol.definitions import Attach, Begin, Open, SaslInit, Target

from ..engine.pairs import frame, frames_in

__all__ = ["RawClient", "frame", "frames_in"]


class RawClient:
    """One TCP connection to a broker, written and read by the test itself."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.received = bytearray()

    @classmethod
    async def connect(cls, port: int) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def until_eof(self, timeout: float = 5.0) -> bytes:
        """Every byte the broker sends until it closes the socket; fails if it does not
        close within ``timeout`` seconds."""

        async def drain() -> None:
            while chunk := await self.reader.read(1 << 16):
                self.received += chunk

        try:
            await asyncio.wait_for(drain(), timeout)
        except (asyncio.TimeoutError, TimeoutError):
            raise AssertionError(f"the broker kept the socket open for {timeout} s") from None
        except ConnectionResetError:
            pass  # closed too, less politely
        return bytes(self.received)

    async def read_at_least(self, size: int, timeout: float = 5.0) -> bytes:
        while len(self.received) < size:
            chunk = await asyncio.wait_for(self.reader.read(1 << 16), timeout)
            if not chunk:
                break
            self.received += chunk
        return bytes(self.received)

    def close(self) -> None:
        self.writer.close()

    def performatives(self) -> list[Any]:
        return [p for _, p, _ in frames_in([bytes(self.received)])]

    # -- canned openings ------------------------------------------------------------
    def sasl_anonymous(self) -> None:
        out = bytearray(SASL_HEADER)
        write_frame(out, FRAME_TYPE_SASL, 0, SaslInit(mechanism=Symbol("ANONYMOUS"), initial_response=b""))
        self.send(bytes(out))

    def open_session(self, *, sasl: bool = True, idle_time_out_ms: int | None = None) -> None:
        """(SASL ANONYMOUS,) the AMQP header, open and begin, all pipelined."""
        if sasl:
            self.sasl_anonymous()
        idle = UInt(idle_time_out_ms) if idle_time_out_ms is not None else None
        self.send(
            AMQP_HEADER
            + frame(0, Open(container_id="raw", idle_time_out=idle))
            + frame(0, Begin(next_outgoing_id=UInt(0), incoming_window=UInt(5000), outgoing_window=UInt(5000)))
        )

    def attach_sender(self, address: str, *, handle: int = 0, name: str = "raw-sender") -> None:
        self.send(
            frame(
                0,
                Attach(
                    name=name, handle=UInt(handle), role=False, target=Target(address=address),
                    initial_delivery_count=UInt(0),
                ),
            )
        )
