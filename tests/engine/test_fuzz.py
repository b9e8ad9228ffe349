"""Fuzz: random and mutated byte streams into a server-role engine.

Whatever arrives, ``receive_data`` never raises; the engine ends in a clean close,
and when it closes on an error the condition is one the spec defines for the fault
(never ``amqp:internal-error``, which would mean an engine bug surfaced); so do the
sessions and links it ends on its own. What it writes back is itself a valid frame
stream.
"""

from __future__ import annotations

import functools
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqplink.codec.types import Symbol
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import (
    ConnectionClosed,
    Event,
    LinkAttachRequested,
    LinkDetached,
    SessionEnded,
)
from amqplink.engine.link import ReceiverLink
from amqplink.engine.sasl import SaslClient, SaslServer
from amqplink.protocol.definitions import Accepted, Error, Target

from .pairs import Pair, frames_in

EXPECTED_CONDITIONS = {
    "amqp:connection:framing-error",
    "amqp:decode-error",
    "amqp:not-allowed",
    "amqp:unauthorized-access",
    "amqp:resource-limit-exceeded",
    "amqp:connection:forced",
    "amqp:invalid-field",
    "amqp:illegal-state",
}
# Conditions a session or link may end with when the engine ends it on its own.
SCOPE_CONDITIONS = EXPECTED_CONDITIONS | {
    "amqp:session:window-violation",
    "amqp:session:errant-link",
    "amqp:session:handle-in-use",
    "amqp:session:unattached-handle",
    "amqp:link:message-size-exceeded",
    "amqp:link:transfer-limit-exceeded",
}


@functools.cache
def recorded_stream(sasl: bool) -> bytes:
    """A real client's bytes: SASL?, open, begin, attach, flow (with drain), transfers
    (split, aborted), dispositions (ranges), detach with an error, end, close."""
    pair = Pair(
        ConnectionConfig(container_id="client", max_frame_size=512),
        ConnectionConfig(container_id="server", max_frame_size=512, incoming_window=3),
        sasl_client=SaslClient(username="u", password="p") if sasl else None,
        sasl_server=SaslServer() if sasl else None,
    )
    session = pair.open()
    sender = session.attach_sender("s", target=Target(address="q"))
    receiver = session.attach_receiver("r", source=Target(address="q"))  # type: ignore[arg-type]
    receiver.flow(5)
    pair.pump()
    server_receiver = pair.server_link("s", sender=False)
    server_receiver.flow(10)  # type: ignore[union-attr]
    server_sender = pair.server_link("r", sender=True)
    for i in range(4):
        server_sender.send(bytes([i]))  # type: ignore[union-attr]
    pair.pump()
    for delivery in pair.deliveries():
        receiver.settle(delivery, Accepted())
    receiver.flow(3, drain=True)
    for i in range(4):
        sender.send(bytes([i]) * (50 + 400 * i))
    pair.pump()
    doomed = sender.send(b"d" * 3000)
    assert doomed.offset > 0
    sender.abort(doomed)
    pair.pump()
    sender.detach(Error(condition=Symbol("amqp:internal-error"), description="bye"))
    session.end()
    pair.client.close()
    pair.pump()
    return b"".join(pair.wire_c2s)


def feed(data: bytes, chunk_sizes: list[int], sasl: bool) -> tuple[Connection, list[Event]]:
    server = Connection(
        ConnectionConfig(container_id="fuzz-server", max_frame_size=4096),
        server=True,
        sasl=SaslServer() if sasl else None,
    )
    events: list[Event] = []
    pos = 0
    sizes = iter(chunk_sizes or [len(data) or 1])
    while pos < len(data):
        n = next(sizes, len(data))
        new = server.receive_data(data[pos : pos + max(1, n)])
        for ev in new:
            if isinstance(ev, LinkAttachRequested):
                ev.link.attach()
                if isinstance(ev.link, ReceiverLink):
                    ev.link.flow(100)  # let transfers through, to fuzz that path too
        events += new
        pos += max(1, n)
    events += server.transport_closed()
    return server, events


def check(server: Connection, events: list[Event]) -> None:
    closes = [e for e in events if isinstance(e, ConnectionClosed)]
    assert server.closed
    assert len(closes) == 1, closes
    error = closes[0].error
    if error is not None:
        assert str(error.condition) in EXPECTED_CONDITIONS, error
    for ev in events:
        if isinstance(ev, SessionEnded | LinkDetached) and not ev.by_peer and ev.error is not None:
            assert str(ev.error.condition) in SCOPE_CONDITIONS, ev
    # what the server wrote back is a well-formed frame stream
    frames_in([server.data_to_send()])


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("oversize"), st.integers(0, 10_000), st.just(0)),
)


def mutate(data: bytes, ops: list[tuple[str, int, int]]) -> bytes:
    buf = bytearray(data)
    for op, where, value in ops:
        if not buf:
            break
        i = where % len(buf)
        if op == "flip":
            buf[i] ^= value
        elif op == "truncate":
            del buf[i:]
        elif op == "insert":
            buf.insert(i, value)
        else:  # a frame header that claims 4 GiB
            buf[i:i] = b"\xff\xff\xff\xf0\x02\x00\x00\x00"
    return bytes(buf)


pytestmark = pytest.mark.fuzz

QUIET = settings(
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@QUIET
@given(
    sasl=st.booleans(),
    ops=st.lists(mutation, min_size=1, max_size=4),
    chunks=st.lists(st.integers(1, 300), max_size=20),
)
def test_mutated_valid_streams_end_in_a_clean_close(
    sasl: bool, ops: list[tuple[str, int, int]], chunks: list[int]
) -> None:
    logging.disable(logging.WARNING)
    try:
        server, events = feed(mutate(recorded_stream(sasl), ops), chunks, sasl)
    finally:
        logging.disable(logging.NOTSET)
    check(server, events)


@QUIET
@given(data=st.binary(max_size=2000), with_header=st.booleans(), chunks=st.lists(st.integers(1, 64), max_size=10))
def test_random_bytes_end_in_a_clean_close(data: bytes, with_header: bool, chunks: list[int]) -> None:
    prefix = b"AMQP\x00\x01\x00\x00" if with_header else b""
    logging.disable(logging.WARNING)
    try:
        server, events = feed(prefix + data, chunks, False)
    finally:
        logging.disable(logging.NOTSET)
    check(server, events)


def test_unmutated_stream_is_a_clean_close_without_error() -> None:
    for sasl in (False, True):
        server, events = feed(recorded_stream(sasl), [97], sasl)
        closes = [e for e in events if isinstance(e, ConnectionClosed)]
        assert closes == [ConnectionClosed(None, True)]
        assert server.remote_close is not None


def test_frame_on_unknown_channel_closes_with_not_allowed() -> None:
    pair = Pair()
    pair.open()
    from amqplink.engine.frames import FRAME_TYPE_AMQP, write_frame

    bad = bytearray()
    write_frame(bad, FRAME_TYPE_AMQP, 7, Accepted())  # not even a performative, channel 7
    events = pair.server.receive_data(bytes(bad))
    assert isinstance(events[-1], ConnectionClosed)
    assert events[-1].error is not None and events[-1].error.condition == "amqp:not-allowed"


def test_oversized_frame_closes_with_framing_error() -> None:
    pair = Pair()
    pair.open()
    events = pair.server.receive_data(b"\x00\x10\x00\x00\x02\x00\x00\x00")  # 1 MiB > 64 KiB
    assert isinstance(events[-1], ConnectionClosed)
    assert events[-1].error is not None and events[-1].error.condition == "amqp:connection:framing-error"


def test_garbage_body_closes_with_decode_error() -> None:
    pair = Pair()
    pair.open()
    events = pair.server.receive_data(b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x14\xff")
    assert isinstance(events[-1], ConnectionClosed)
    assert events[-1].error is not None and events[-1].error.condition == "amqp:decode-error"
