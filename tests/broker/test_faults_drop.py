"""drop-connections counts exactly: N more bytes, or N more whole frames, then the socket is aborted."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from amqplink.broker.faults import Faults


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.aborted, "a write after the abort"
        self.written += data

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.aborted


def armed(**budget: int) -> tuple[Faults, FakeTransport, Any]:
    transport = FakeTransport()
    conn = SimpleNamespace(protocol=SimpleNamespace(transport=transport, peername="peer"), controls=False)
    host = SimpleNamespace(clock=lambda: 0.0, connections=[conn])
    faults = Faults(host)  # type: ignore[arg-type]
    return faults, transport, faults.drop_connections(**budget)


def frame(body_size: int) -> bytes:
    return struct.pack(">IBBH", 8 + body_size, 2, 0, 0) + b"b" * body_size


_writes = st.lists(st.lists(st.integers(0, 40).map(frame), min_size=1, max_size=4), min_size=1, max_size=8)


@given(writes=_writes, budget=st.integers(0, 30))
def test_after_frames_writes_exactly_that_many_whole_frames(writes: list[list[bytes]], budget: int) -> None:
    faults, transport, fault = armed(after_frames=budget)
    for chunk in writes:
        if transport.aborted:
            break
        transport.write(b"".join(chunk))  # the cutter stands in for write until it fires
    frames = [f for chunk in writes for f in chunk]
    assert bytes(transport.written) == b"".join(frames[:budget])
    assert transport.aborted == (budget <= len(frames))
    assert fault.fired == int(transport.aborted) and fault.active != transport.aborted
    assert ("write" in vars(transport)) != transport.aborted  # the cutter is gone once it fired
    assert [r.what for r in faults.history] == ["dropped the connection from peer"] * transport.aborted


@given(writes=st.lists(st.binary(min_size=1, max_size=50), min_size=1, max_size=8), budget=st.integers(0, 200))
def test_after_bytes_writes_exactly_that_many_bytes(writes: list[bytes], budget: int) -> None:
    _, transport, fault = armed(after_bytes=budget)
    for chunk in writes:
        if transport.aborted:
            break
        transport.write(chunk)
    everything = b"".join(writes)
    assert bytes(transport.written) == everything[:budget]
    assert transport.aborted == (budget <= len(everything)) and fault.fired == int(transport.aborted)
