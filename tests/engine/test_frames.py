"""The frame layer through the engine (2.2, 2.3, 2.4.1, 2.4.5): protocol headers, the
8-byte frame header, doff and the extended header, empty frames, max-frame-size."""

from __future__ import annotations

import struct

import pytest

from amqplink.codec.types import Symbol, UInt
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import (
    ConnectionClosed,
    LinkAttachRequested,
)
from amqplink.engine.frames import AMQP_HEADER, SASL_HEADER
from amqplink.engine.sasl import SaslServer
from amqplink.protocol.definitions import Attach, Close, Error, Target, Transfer

from .pairs import Pair, frames_in

_HEADER = struct.Struct(">IBBH")


def raw_frame(body: bytes, *, doff: int = 2, channel: int = 0, frame_type: int = 0, extended: bytes = b"") -> bytes:
    """A frame with any data offset: ``extended`` fills the extended header."""
    assert len(extended) == doff * 4 - 8 or doff < 2
    return _HEADER.pack(8 + len(extended) + len(body), doff, frame_type, channel) + extended + body


def encoded(performative: object) -> bytes:
    out = bytearray()
    performative._amqp_encode(out)  # type: ignore[attr-defined]
    return bytes(out)


def frame_sizes(chunks: list[bytes]) -> list[int]:
    """The size field of every frame in a captured stream (protocol headers skipped)."""
    data = b"".join(chunks)
    sizes, pos = [], 0
    while pos < len(data):
        if data[pos : pos + 8] in (AMQP_HEADER, SASL_HEADER):
            pos += 8
            continue
        (size,) = struct.unpack_from(">I", data, pos)
        sizes.append(size)
        pos += size
    return sizes


def closed_with(events: list[object]) -> str:
    closes = [e for e in events if isinstance(e, ConnectionClosed)]
    assert len(closes) == 1, events
    assert closes[0].error is not None
    return str(closes[0].error.condition)


def close_sent_by(conn: Connection) -> Close:
    closes = [p for _, p, _ in frames_in([conn.data_to_send()]) if isinstance(p, Close)]
    assert len(closes) == 1
    return closes[0]


# -- protocol headers (2.2, 5.1) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("sasl", "header", "answer"),
    [
        (False, SASL_HEADER, AMQP_HEADER),
        (False, b"AMQP\x02\x01\x00\x00", AMQP_HEADER),  # TLS, which this server does not speak
        (False, b"AMQP\x00\x02\x00\x00", AMQP_HEADER),  # a version it does not support
        (False, b"GET / HT", AMQP_HEADER),
        (True, AMQP_HEADER, SASL_HEADER),
    ],
)
def test_server_answers_an_unacceptable_header_with_its_own_then_stops(
    sasl: bool, header: bytes, answer: bytes
) -> None:
    """ "If the requested protocol version is not supported, the server MUST send a
    protocol header with a supported protocol version and then close the socket." (2.2)"""
    # A server that admits anonymous clients takes the AMQP header in place of SASL's:
    # this one does not.
    plain_only = SaslServer(mechanisms=("PLAIN",))
    server = Connection(ConnectionConfig(container_id="s"), server=True, sasl=plain_only if sasl else None)
    events = server.receive_data(header + b"more bytes that are never read")
    assert server.data_to_send() == answer
    assert closed_with(events) == "amqp:connection:framing-error"
    assert server.closed
    assert server.receive_data(AMQP_HEADER) == [] and server.data_to_send() == b""


def test_server_echoes_the_header_it_accepts() -> None:
    server = Connection(ConnectionConfig(container_id="s"), server=True)
    assert server.receive_data(AMQP_HEADER) == []
    assert server.data_to_send() == AMQP_HEADER
    sasl_server = Connection(ConnectionConfig(container_id="s"), server=True, sasl=SaslServer())
    sasl_server.receive_data(SASL_HEADER)
    assert sasl_server.data_to_send().startswith(SASL_HEADER)


# -- the frame header and doff (2.3.1) -----------------------------------------------------


def test_extended_header_is_skipped() -> None:
    """ "The extended header ... Implementations MUST ignore extended header fields they
    do not understand": the body starts at doff * 4."""
    pair = Pair()
    session = pair.open()
    attach = Attach(name="ext", handle=UInt(0), role=False, target=Target(address="q"))
    for doff in (3, 7, 255):
        pair.server_events.clear()
        attach.name = f"ext-{doff}"
        attach.handle = UInt(doff)
        extended = bytes((0xEE,)) * (doff * 4 - 8)
        events = pair.server.receive_data(raw_frame(encoded(attach), doff=doff, extended=extended))
        requested = [e for e in events if isinstance(e, LinkAttachRequested)]
        assert [e.link.name for e in requested] == [f"ext-{doff}"], events
    assert pair.server.is_open and session.is_mapped


@pytest.mark.parametrize("doff", [0, 1])
def test_data_offset_below_two_is_a_framing_error(doff: int) -> None:
    """ "DOFF ... MUST be at least 2" (2.3.1): the header itself is 8 bytes."""
    pair = Pair()
    pair.open()
    events = pair.server.receive_data(raw_frame(b"\x00" * 8, doff=doff))
    assert closed_with(events) == "amqp:connection:framing-error"
    error = close_sent_by(pair.server).error
    assert error is not None and error.condition == "amqp:connection:framing-error"


def test_data_offset_past_the_end_of_the_frame_is_a_framing_error() -> None:
    pair = Pair()
    pair.open()
    events = pair.server.receive_data(_HEADER.pack(12, 4, 0, 0) + b"\x00" * 4)  # offset 16 in a 12-byte frame
    assert closed_with(events) == "amqp:connection:framing-error"


def test_frame_smaller_than_its_header_is_a_framing_error() -> None:
    pair = Pair()
    pair.open()
    events = pair.server.receive_data(_HEADER.pack(7, 2, 0, 0))
    assert closed_with(events) == "amqp:connection:framing-error"


def test_unknown_frame_type_is_a_framing_error() -> None:
    pair = Pair()
    pair.open()
    events = pair.server.receive_data(raw_frame(b"", frame_type=0x05))
    assert closed_with(events) == "amqp:connection:framing-error"


def test_sasl_frame_after_sasl_is_a_framing_error() -> None:
    pair = Pair()
    pair.open()
    events = pair.server.receive_data(raw_frame(b"", frame_type=0x01))
    assert closed_with(events) == "amqp:connection:framing-error"


# -- empty frames (2.4.5) -----------------------------------------------------------------


def test_empty_frames_on_any_valid_channel_are_heartbeats() -> None:
    """ "Implementations MUST be prepared to handle empty frames arriving on any valid
    channel" (2.4.5); they have no meaning apart from keeping the connection alive."""
    config = ConnectionConfig(container_id="server", idle_timeout=4.0, channel_max=9)
    pair = Pair(server_config=config)
    pair.open()
    pair.server.tick(0.0)
    beats = raw_frame(b"") + raw_frame(b"", channel=9) + raw_frame(b"", doff=3, extended=b"\x01\x02\x03\x04")
    for i, chunk in enumerate((beats[:5], beats[5:], beats)):
        assert pair.server.receive_data(chunk) == []
        assert pair.server.tick(3.0 * (i + 1)) == []  # 3 s apart: each read reset the 4 s clock
    assert pair.server.data_to_send() == b""  # nothing to answer
    assert pair.server.is_open
    events = pair.server.tick(9.0 + 4.0)
    assert closed_with(events) == "amqp:resource-limit-exceeded"


def test_heartbeats_start_after_open_and_stop_after_close() -> None:
    """Empty frames "can only be sent after the open frame is sent" and "MUST NOT be
    sent after the close frame has been sent" (2.4.5)."""
    pair = Pair(server_config=ConnectionConfig(container_id="server", idle_timeout=2.0))
    pair.open()
    client = pair.client
    client.tick(0.0)
    assert client.data_to_send() == b""
    client.tick(0.4)
    assert client.data_to_send() == b""  # the server asked for a frame every 1 s: 0.5 s apart
    client.tick(0.5)
    assert client.data_to_send() == raw_frame(b"")
    client.close()
    client.data_to_send()
    for t in (1.0, 1.5, 2.0, 5.0):
        client.tick(t)
        assert client.data_to_send() == b""


# -- max-frame-size (2.4.1, 2.7.1) ----------------------------------------------------------


def test_frame_of_exactly_max_frame_size_is_accepted_one_larger_is_not() -> None:
    """ "A peer that receives an oversized frame MUST close the connection with the
    framing-error error-code." (2.7.1)"""
    pair = Pair(server_config=ConnectionConfig(container_id="server", max_frame_size=512))
    pair.open()
    at_limit = raw_frame(b"", doff=128, extended=bytes(504))  # an empty frame of 512 bytes
    assert len(at_limit) == 512
    assert pair.server.receive_data(at_limit) == [] and pair.server.is_open
    events = pair.server.receive_data(_HEADER.pack(513, 2, 0, 0))  # refused on its header alone
    assert closed_with(events) == "amqp:connection:framing-error"
    error = close_sent_by(pair.server).error
    assert error is not None and "513" in str(error.description)


@pytest.mark.parametrize("tag_size", [1, 8, 32])
def test_no_frame_exceeds_the_peer_max_frame_size(tag_size: int) -> None:
    """ "A peer MUST NOT send frames larger than its partner can handle." (2.7.1): transfers
    around the single-frame limit, split ones, and every other frame, both directions."""
    pair = Pair(
        ConnectionConfig(container_id="client", max_frame_size=600),
        ConnectionConfig(container_id="server", max_frame_size=512),
    )
    session = pair.open()
    sender = session.attach_sender("s", target=Target(address="q"))
    receiver = session.attach_receiver("r", source=Target(address="q"))  # type: ignore[arg-type]
    pair.pump()
    server_receiver = pair.server_link("s", sender=False)
    server_sender = pair.server_link("r", sender=True)
    server_receiver.flow(1000)  # type: ignore[union-attr]
    receiver.flow(1000)
    pair.pump()
    sizes = [*range(380, 620), 5000]
    for i, n in enumerate(sizes):  # tags unique among the unsettled deliveries (2.8.7)
        tag = n.to_bytes(tag_size, "big") if tag_size > 1 else bytes([i])
        sender.send(bytes([n % 256]) * n, tag=tag, message_format=0xFFFFFFFF)
        server_sender.send(bytes([n % 256]) * n, tag=tag)  # type: ignore[union-attr]
    pair.pump()
    assert [len(d.payload) for d in pair.deliveries("server")] == sizes
    assert [len(d.payload) for d in pair.deliveries()] == sizes
    c2s, s2c = frame_sizes(pair.wire_c2s), frame_sizes(pair.wire_s2c)
    assert 512 - 80 < max(c2s) <= 512 and 600 - 80 < max(s2c) <= 600  # near the limit, never past it
    transfers = [p for _, p, _ in frames_in(pair.wire_c2s) if isinstance(p, Transfer)]
    assert sum(1 for t in transfers if t.more) > len(sizes) / 2  # most of them were split


def test_a_performative_too_large_for_the_peer_closes_with_frame_size_too_small() -> None:
    """A frame that cannot be split and does not fit is never written; the connection
    closes with "amqp:frame-size-too-small: The peer cannot send a frame because the
    smallest encoding of the performative ... would be too large" (2.8.15)."""
    pair = Pair(server_config=ConnectionConfig(container_id="server", max_frame_size=512))
    session = pair.open()
    session.attach_sender("big", target=Target(address="q"), properties={Symbol("p"): "x" * 600})
    events = pair.client.take_events()
    assert closed_with(events) == "amqp:frame-size-too-small"
    pair.pump()
    assert max(frame_sizes(pair.wire_c2s)) <= 512
    assert not pair.of(LinkAttachRequested, "server")
    closed = pair.of(ConnectionClosed, "server")
    assert closed and closed[0].by_peer and closed[0].error is not None
    assert closed[0].error.condition == "amqp:frame-size-too-small"


def test_a_close_too_large_for_the_peer_goes_out_with_its_condition_only() -> None:
    pair = Pair(server_config=ConnectionConfig(container_id="server", max_frame_size=512))
    pair.open()
    pair.client.close(Error(condition=Symbol("amqp:internal-error"), description="why " * 200))
    pair.pump()
    assert max(frame_sizes(pair.wire_c2s)) <= 512
    closed = pair.of(ConnectionClosed, "server")
    assert closed == [ConnectionClosed(Error(condition=Symbol("amqp:internal-error")), True)]


def test_before_the_peers_open_frames_are_held_to_512_bytes() -> None:
    """ "Prior to any explicit negotiation, the maximum frame size is 512" (2.4.1):
    pipelined frames must fit what every peer accepts (2.4.2)."""
    client = Connection(ConnectionConfig(container_id="client"))
    client.open()
    session = client.begin_session()
    session.attach_sender("small", target=Target(address="q"))
    assert client.take_events() == []
    session.attach_sender("big", target=Target(address="q"), properties={Symbol("p"): "x" * 600})
    assert closed_with(client.take_events()) == "amqp:frame-size-too-small"
    assert max(frame_sizes([client.data_to_send()])) <= 512


def test_a_peer_that_never_opens_is_timed_out() -> None:
    """The idle time-out runs from the start: a peer silent after its header is dropped."""
    server = Connection(ConnectionConfig(container_id="server", idle_timeout=3.0), server=True)
    server.tick(0.0)
    server.receive_data(AMQP_HEADER)
    server.tick(1.0)
    assert server.tick(3.9) == []
    assert closed_with(server.tick(4.0)) == "amqp:resource-limit-exceeded"
    kinds = [type(p).__name__ for _, p, _ in frames_in([server.data_to_send()])]
    assert kinds == ["Open", "Close"]  # "an open frame before ... any other frames" (2.4.1)


def test_what_data_to_send_returned_is_the_callers_later_output_does_not_change_it() -> None:
    """``data_to_send`` hands its buffer over (no copy): what the engine writes after that
    goes into a new one, and the bytes already taken stay as they were."""
    pair = Pair(server_config=ConnectionConfig(container_id="server", idle_timeout=2.0))
    pair.open()
    client = pair.client
    client.tick(0.0)
    client.data_to_send()
    client.tick(0.5)
    taken = client.data_to_send()
    kept = bytes(taken)
    assert kept == raw_frame(b"")
    client.close()  # a close frame, written after the heartbeat was taken
    assert [type(p) for _, p, _ in frames_in([client.data_to_send()])] == [Close]
    assert taken == kept
