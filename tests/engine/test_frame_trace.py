"""The ``amqplink.frames`` logger traces every frame both ways, and never a secret."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from amqplink.engine.link import ReceiverLink, SenderLink
from amqplink.engine.sasl import SaslClient, SaslServer
from amqplink.engine.transfer_paths import FastTransferReader, FastTransferWriter
from amqplink.protocol.definitions import Source, Target

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
    assert len(pair.deliveries()) == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "amqplink.frames"]
    text = "\n".join(lines)
    assert SECRET not in text and "alice" not in text  # the PLAIN response is redacted whole
    for name in ("SaslMechanisms(", "SaslInit(", "SaslOutcome(", "Open(", "Begin(", "Attach(", "Flow("):
        assert any(f"client -> [0] {name}" in line or f"server -> [0] {name}" in line for line in lines), name
        assert any(f"client <- [0] {name}" in line or f"server <- [0] {name}" in line for line in lines), name
    # The single-frame transfer, written and read by the fast paths, is traced from its bytes.
    assert any(line.startswith("server -> [0] Transfer(") and line.endswith("+123 bytes") for line in lines)
    assert any(line.startswith("client <- [0] Transfer(") and line.endswith("+123 bytes") for line in lines)


def test_no_trace_records_when_the_logger_is_not_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="amqplink.frames")
    Pair().open()
    assert not [r for r in caplog.records if r.name == "amqplink.frames"]


def _traced_run(fast: bool, caplog: pytest.LogCaptureFixture) -> tuple[list[str], list[bytes], int, int]:
    """A run of deliveries with tracing on: the trace lines, the bytes each way, and how
    often the fast writer's runs (or run parts) and the fast reader's scan were used."""
    caplog.clear()
    used = {"write": 0, "read": 0}
    pair = Pair()
    pair.client.fast_paths = pair.server.fast_paths = fast
    original_parts, original_run = FastTransferWriter.run_parts, FastTransferWriter.write_run
    original_scan = FastTransferReader.scan

    def parts(channel: int, handle: int, tag_size: int) -> Any:
        used["write"] += 1
        return original_parts(channel, handle, tag_size)

    def run(*args: Any) -> int:
        written = original_run(*args)
        used["write"] += written
        return written

    def scan(body: Any) -> Any:
        used["read"] += 1
        return original_scan(body)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FastTransferWriter, "run_parts", staticmethod(parts))
        patch.setattr(FastTransferWriter, "write_run", staticmethod(run))
        patch.setattr(FastTransferReader, "scan", staticmethod(scan))
        session = pair.open()
        sender = session.attach_sender("s", target=Target(address="queue"))
        pair.pump()
        receiver = pair.server_link("s", sender=False)
        assert isinstance(receiver, ReceiverLink)
        receiver.flow(300)
        pair.pump()
        session._next_delivery_id = 1000  # (the usual frame's four-byte delivery-id)
        sender.send_all([b"m%d" % i for i in range(20)], [i.to_bytes(8, "big") for i in range(20)])
        pair.pump()
    assert len(pair.deliveries("server")) == 20
    lines = [r.getMessage() for r in caplog.records if r.name == "amqplink.frames"]
    return lines, pair.wire_c2s + pair.wire_s2c, used["write"], used["read"]


def test_tracing_chooses_no_path_and_traces_both_alike(caplog: pytest.LogCaptureFixture) -> None:
    """Frame logging leaves the fast paths on (``fast_paths`` alone chooses them), and the
    trace of the fast paths is the reference's, line for line, as are the bytes."""
    caplog.set_level(logging.DEBUG, logger="amqplink.frames")
    fast_lines, fast_wire, fast_writes, fast_reads = _traced_run(True, caplog)
    lines, wire, writes, reads = _traced_run(False, caplog)
    assert fast_writes >= 1 and fast_reads >= 1  # the fast writer and reader ran, traced
    assert writes == reads == 0  # the reference never touches them
    assert fast_wire == wire
    assert fast_lines == lines
    transfers = [line for line in lines if line.startswith("client -> [0] Transfer(")]
    assert len(transfers) == 20 and all(line.endswith(" +2 bytes") or line.endswith(" +3 bytes") for line in transfers)
    assert len([line for line in lines if line.startswith("server <- [0] Transfer(")]) == 20
