"""The ``amqplink.frames`` logger traces every frame both ways, and never a secret."""

from __future__ import annotations

import logging

import pytest

from amqplink.engine.events import DeliveryReceived
from amqplink.engine.link import SenderLink
from amqplink.engine.sasl import SaslClient, SaslServer
from amqplink.protocol.definitions import Source

from .pairs import Pair

SECRET = "pa55-w0rd-never-logged"


def test_frames_are_traced_both_ways_with_payload_sizes_and_no_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="amqplink.frames")
    pair = Pair(sasl_client=SaslClient(username="alice", password=SECRET), sasl_server=SaslServer())
    session = pair.open()
    receiver = session.attach_receiver("r", source=Source(address="queue"))
    pair.pump()
    sender = pair.server_link("r", sender=True)
    assert isinstance(sender, SenderLink)
    receiver.flow(1)
    pair.pump()
    sender.send(b"x" * 123)
    pair.pump()
    assert len(pair.of(DeliveryReceived)) == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "amqplink.frames"]
    text = "\n".join(lines)
    assert SECRET not in text and "alice" not in text  # the PLAIN response is redacted whole
    for name in ("SaslMechanisms(", "SaslInit(", "SaslOutcome(", "Open(", "Begin(", "Attach(", "Flow("):
        assert any(f"client -> [0] {name}" in line or f"server -> [0] {name}" in line for line in lines), name
        assert any(f"client <- [0] {name}" in line or f"server <- [0] {name}" in line for line in lines), name
    # The single-frame transfer leaves the fast path when tracing, so it is seen too.
    assert any(line.startswith("server -> [0] Transfer(") and line.endswith("+123 bytes") for line in lines)
    assert any(line.startswith("client <- [0] Transfer(") and line.endswith("+123 bytes") for line in lines)


def test_no_trace_records_when_the_logger_is_not_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="amqplink.frames")
    Pair().open()
    assert not [r for r in caplog.records if r.name == "amqplink.frames"]
