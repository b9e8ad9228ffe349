"""SASL (5.3) through two engines: mechanisms, the bytes of PLAIN, and every outcome code."""

from __future__ import annotations

import logging

import pytest

from amqplink.codec.decode import decode
from amqplink.codec.types import Symbol, UByte
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import ConnectionClosed, ConnectionOpened, SaslCompleted
from amqplink.engine.frames import AMQP_HEADER, FRAME_TYPE_SASL, SASL_HEADER, FrameReader, write_frame
from amqplink.engine.sasl import (
    SASL_AUTH,
    SASL_OK,
    SASL_SYS,
    SASL_SYS_PERM,
    SASL_SYS_TEMP,
    SaslClient,
    SaslServer,
)
from amqplink.protocol.definitions import SaslInit, SaslMechanisms, SaslOutcome

from .pairs import Pair


def sasl_frames(chunks: list[bytes]) -> list[object]:
    """The SASL frame bodies of a captured stream (up to the AMQP header)."""
    data = b"".join(chunks)
    assert data.startswith(SASL_HEADER)
    reader = FrameReader(1 << 20)
    reader.feed(data[8:])
    out = []
    while reader.buffered:
        if reader._buf[reader._pos : reader._pos + 8] == AMQP_HEADER:  # test-only peek
            break
        got = reader.read_frame()
        if got is None:
            break
        out.append(decode(got[2])[0])
    return out


def test_plain_sends_authzid_user_and_password_nul_separated() -> None:
    """PLAIN (RFC 4616): "[authzid] NUL authcid NUL passwd"."""
    pair = Pair(sasl_client=SaslClient(username="alice", password="pw", authzid="boss"), sasl_server=SaslServer())
    pair.open()
    (init,) = [f for f in sasl_frames(pair.wire_c2s) if isinstance(f, SaslInit)]
    assert init.mechanism == Symbol("PLAIN") and init.initial_response == b"boss\x00alice\x00pw"
    assert pair.of(SaslCompleted, "server") == [SaslCompleted("PLAIN", "alice")]


def test_server_offers_its_mechanisms_and_mssbcbs_is_accepted_like_anonymous() -> None:
    pair = Pair(sasl_client=SaslClient(mechanism="MSSBCBS"), sasl_server=SaslServer())
    pair.open()
    mechanisms, outcome = sasl_frames(pair.wire_s2c)
    assert isinstance(mechanisms, SaslMechanisms)
    assert mechanisms.sasl_server_mechanisms == [Symbol("PLAIN"), Symbol("ANONYMOUS"), Symbol("MSSBCBS")]
    assert outcome == SaslOutcome(code=UByte(SASL_OK))
    assert pair.of(SaslCompleted, "server") == [SaslCompleted("MSSBCBS", None)]
    assert pair.client.is_open and pair.server.is_open


@pytest.mark.parametrize(
    ("code", "condition"),
    [
        (SASL_AUTH, "amqp:unauthorized-access"),
        (SASL_SYS_PERM, "amqp:unauthorized-access"),
        (SASL_SYS, "amqp:connection:forced"),
        (SASL_SYS_TEMP, "amqp:connection:forced"),
    ],
)
def test_every_failure_code_reaches_both_sides(code: int, condition: str) -> None:
    """sasl-code: "auth: authentication failed due to bad credentials", "sys: ... system
    error", "sys-perm: ... unrecoverable error", "sys-temp: ... transient system error"
    (5.3.3.6). The code travels to the client; both ends close without an AMQP close."""
    server = SaslServer(mechanisms=("PLAIN",), authenticate=lambda mechanism, user, password: code)
    pair = Pair(sasl_client=SaslClient(username="u", password="p"), sasl_server=server)
    pair.client.open()
    pair.pump()
    assert sasl_frames(pair.wire_s2c)[-1] == SaslOutcome(code=UByte(code))
    for side in ("client", "server"):
        (closed,) = pair.of(ConnectionClosed, side)
        assert closed.error is not None and not closed.by_peer
        assert closed.error.condition == condition
        assert closed.error.info == {Symbol("sasl-code"): UByte(code)}
        assert not pair.of(ConnectionOpened, side) and not pair.of(SaslCompleted, side)
    assert AMQP_HEADER not in b"".join(pair.wire_c2s)  # the AMQP layer never started


def test_an_authenticator_that_raises_answers_sys() -> None:
    def broken(mechanism: str, user: str | None, password: str | None) -> bool:
        raise OSError("user store unreachable")

    pair = Pair(sasl_client=SaslClient(username="u", password="p"), sasl_server=SaslServer(authenticate=broken))
    pair.client.open()
    logging.disable(logging.CRITICAL)
    try:
        pair.pump()
    finally:
        logging.disable(logging.NOTSET)
    assert sasl_frames(pair.wire_s2c)[-1] == SaslOutcome(code=UByte(SASL_SYS))
    (closed,) = pair.of(ConnectionClosed)
    assert closed.error is not None and closed.error.condition == "amqp:connection:forced"


def test_a_mechanism_the_server_does_not_offer_is_refused_with_auth() -> None:
    server = Connection(ConnectionConfig(container_id="s"), server=True, sasl=SaslServer(mechanisms=("PLAIN",)))
    server.receive_data(SASL_HEADER)
    server.data_to_send()
    init = bytearray()
    write_frame(init, FRAME_TYPE_SASL, 0, SaslInit(mechanism=Symbol("ANONYMOUS")))
    events = server.receive_data(bytes(init))
    assert sasl_frames([SASL_HEADER, server.data_to_send()]) == [SaslOutcome(code=UByte(SASL_AUTH))]
    (closed,) = [e for e in events if isinstance(e, ConnectionClosed)]
    assert closed.error is not None and closed.error.condition == "amqp:unauthorized-access"


def test_client_without_a_usable_mechanism_gives_up_with_sys_perm() -> None:
    """A user name needs PLAIN; a server that offers only ANONYMOUS cannot take it."""
    pair = Pair(sasl_client=SaslClient(username="u", password="p"), sasl_server=SaslServer(mechanisms=("ANONYMOUS",)))
    pair.client.open()
    pair.pump()
    (closed,) = pair.of(ConnectionClosed)
    assert closed.error is not None and closed.error.condition == "amqp:unauthorized-access"
    assert closed.error.info == {Symbol("sasl-code"): UByte(SASL_SYS_PERM)}
    assert not any(isinstance(f, SaslInit) for f in sasl_frames(pair.wire_c2s))


def test_a_server_that_admits_anonymous_clients_also_takes_a_client_without_sasl() -> None:
    """Many clients skip SASL by default; to a server that would let them in as
    ANONYMOUS anyway, the AMQP header first is as good as SASL ANONYMOUS."""
    pair = Pair(sasl_client=None, sasl_server=SaslServer())
    pair.open()
    assert b"".join(pair.wire_s2c).startswith(AMQP_HEADER)
    assert pair.of(ConnectionOpened, "client") and pair.of(ConnectionOpened, "server")
    assert not pair.of(ConnectionClosed, "client") and not pair.of(ConnectionClosed, "server")


@pytest.mark.parametrize(
    "server",
    [
        lambda: SaslServer(mechanisms=("PLAIN",)),
        lambda: SaslServer(authenticate=lambda mechanism, user, password: mechanism != "ANONYMOUS"),
    ],
    ids=["anonymous-not-offered", "anonymous-refused"],
)
def test_a_server_that_does_not_admit_anonymous_clients_insists_on_sasl(server: object) -> None:
    pair = Pair(sasl_client=None, sasl_server=server())  # type: ignore[operator]
    pair.client.open()
    pair.pump()
    assert b"".join(pair.wire_s2c) == SASL_HEADER
    assert not pair.of(ConnectionOpened, "server")
    (closed,) = pair.of(ConnectionClosed, "server")
    assert closed.error is not None and closed.error.condition == Symbol("amqp:connection:framing-error")
