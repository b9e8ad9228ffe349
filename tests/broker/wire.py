"""A raw-socket client for the broker tests: hand-made frames out, every byte back."""

from __future__ import annotations

import asyncio
from typing import Any

from amqplink.codec.types import Symbol, UInt
from amqplink.engine.frames import AMQP_HEADER, FRAME_TYPE_SASL, SASL_HEADER, write_frame
from amqplink.protocol.definitions import Attach, Begin, Flow, Open, SaslInit, Source, Target

from ..engine.pairs import FrameTap, frame, frames_in

__all__ = ["RawClient", "frame", "frames_in"]


class RawClient:
    """One TCP connection to a broker, written and read by the test itself."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.received = bytearray()
        self._tap = FrameTap()
        self._decoded = 0  # bytes of ``received`` fed to the tap
        self._performatives: list[Any] = []

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
        except TimeoutError:
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

    async def wait_for(self, kind: type, count: int = 1, timeout: float = 5.0) -> list[Any]:
        """Read until ``count`` frames of type ``kind`` have arrived; return them all."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            found = [p for p in self.performatives() if isinstance(p, kind)]
            if len(found) >= count:
                return found
            left = deadline - loop.time()
            if left <= 0:
                raise AssertionError(f"{count} {kind.__name__} frame(s) did not arrive within {timeout} s")
            try:
                chunk = await asyncio.wait_for(self.reader.read(1 << 16), left)
            except TimeoutError:
                continue
            if not chunk:
                raise AssertionError(f"the broker closed the socket; {kind.__name__} frames seen: {len(found)}")
            self.received += chunk

    def close(self) -> None:
        self.writer.close()

    def performatives(self) -> list[Any]:
        """Every performative received so far (each frame decoded once, as its bytes arrive)."""
        if self._decoded < len(self.received):
            self._performatives += [p for _, p, _ in self._tap.feed(bytes(self.received[self._decoded :]))]
            self._decoded = len(self.received)
        return list(self._performatives)

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

    def attach_receiver(self, address: str, *, credit: int, handle: int = 0, name: str = "raw-receiver") -> None:
        self.send(
            frame(0, Attach(name=name, handle=UInt(handle), role=True, source=Source(address=address)))
            + frame(
                0,
                Flow(
                    next_incoming_id=UInt(0),
                    incoming_window=UInt(0x7FFFFFFF),
                    next_outgoing_id=UInt(0),
                    outgoing_window=UInt(5000),
                    handle=UInt(handle),
                    delivery_count=UInt(0),
                    link_credit=UInt(credit),
                ),
            )
        )

    def attach_sender(self, address: str, *, handle: int = 0, name: str = "raw-sender") -> None:
        self.send(
            frame(
                0,
                Attach(
                    name=name,
                    handle=UInt(handle),
                    role=False,
                    target=Target(address=address),
                    initial_delivery_count=UInt(0),
                ),
            )
        )
