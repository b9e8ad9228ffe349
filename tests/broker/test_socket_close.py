"""The broker closes the socket whenever the connection is over (item 18).

"If the requested protocol version is not supported, the server MUST send a protocol
header with a supported protocol version and then close the socket." (2.2) After a
close with an error, or a SASL outcome that refuses, the socket must not stay open
either: each test reads raw bytes until EOF, within a bounded wait.
"""

from __future__ import annotations

from amqplink.broker import Broker
from amqplink.codec.types import Symbol, UInt
from amqplink.engine.frames import AMQP_HEADER, FRAME_TYPE_SASL, SASL_HEADER, write_frame
from amqplink.engine.sasl import SASL_AUTH
from amqplink.protocol.definitions import Begin, Close, SaslInit, SaslOutcome

from .wire import RawClient, frame, frames_in


async def test_a_protocol_header_mismatch_is_answered_then_the_socket_closes() -> None:
    async with Broker() as broker:
        client = await RawClient.connect(broker.port)
        client.send(b"AMQP\x01\x01\x00\x00")
        data = await client.until_eof()
        assert data == SASL_HEADER


async def test_a_sasl_failure_sends_its_outcome_then_closes_the_socket() -> None:
    async with Broker() as broker:
        client = await RawClient.connect(broker.port)
        out = bytearray(SASL_HEADER)
        write_frame(out, FRAME_TYPE_SASL, 0, SaslInit(mechanism=Symbol("NO-SUCH-MECHANISM"), initial_response=b""))
        client.send(bytes(out))
        data = await client.until_eof()
        assert data.startswith(SASL_HEADER)
        outcomes = [p for _, p, _ in frames_in([data]) if isinstance(p, SaslOutcome)]
        assert outcomes == [SaslOutcome(code=SASL_AUTH)]


async def test_a_close_with_an_error_is_followed_by_the_end_of_the_socket() -> None:
    async with Broker() as broker:
        client = await RawClient.connect(broker.port)
        client.open_session()
        # A begin that answers a session this side never began: a connection error (2.5.2).
        bogus = Begin(remote_channel=7, next_outgoing_id=UInt(0), incoming_window=UInt(10), outgoing_window=UInt(10))
        client.send(frame(1, bogus))
        data = await client.until_eof()
        closes = [p for _, p, _ in frames_in([data[data.index(AMQP_HEADER) :]]) if isinstance(p, Close)]
        assert len(closes) == 1 and closes[0].error is not None
        assert closes[0].error.condition == Symbol("amqp:not-allowed")


async def test_a_clean_close_by_the_client_ends_the_socket_too() -> None:
    async with Broker() as broker:
        client = await RawClient.connect(broker.port)
        client.open_session()
        client.send(frame(0, Close()))
        data = await client.until_eof()
        closes = [p for _, p, _ in frames_in([data[data.index(AMQP_HEADER) :]]) if isinstance(p, Close)]
        assert closes == [Close()]
