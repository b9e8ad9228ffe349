"""``amqplink local-queue DIR``: shows what a local queue holds without taking it from a
running client, refuses a damaged one naming the file (and changes nothing), and
``--forward CONN`` sends it by hand, in order, then removes it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amqplink.broker import Broker
from amqplink.cli import main
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from amqplink.servicebus.localqueue.store import LocalQueueFile, Stored
from tests.conftest import broker_thread


def stored_directory(directory: Path, count: int = 5) -> LocalQueueFile:
    """A directory holding ``count`` messages for ``orders`` and one for ``invoices`` (left open)."""
    f = LocalQueueFile(str(directory), 1 << 20)
    f.append([[Stored("orders", "", ServiceBusMessage(f"{i}", message_id=f"m{i}")._message.encode())]
              for i in range(count)])  # fmt: skip
    f.append([[Stored("invoices", "s", ServiceBusMessage("i", message_id="i0", session_id="s")._message.encode())]])
    return f


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object] | None, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    return code, json.loads(lines[-1]) if lines else None, captured.err


def test_show_reads_a_directory_a_client_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = stored_directory(tmp_path)
    try:
        code, shown, _ = run(capsys, "local-queue", str(tmp_path))
        assert code == 0 and shown is not None
        assert shown["depth"] == 6 and shown["writer_pid"] == os.getpid()
        entities = shown["entities"]
        assert isinstance(entities, dict) and entities["orders"]["depth"] == 5 and entities["invoices"]["depth"] == 1
        assert f.depth == 6  # nothing taken from the writer
    finally:
        f.close()


def test_a_damaged_directory_is_reported_and_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stored_directory(tmp_path).close()
    segment = next(tmp_path.glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[60] ^= 0x10
    segment.write_bytes(bytes(data))
    code, _, err = run(capsys, "local-queue", str(tmp_path))
    assert code == 1 and str(segment) in err and "damaged at offset" in err
    assert segment.read_bytes() == bytes(data)
    code, _, err = run(capsys, "local-queue", str(tmp_path / "missing"))
    assert code == 2 and "not a directory" in err


def test_forward_by_hand_sends_in_order_and_empties_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stored_directory(tmp_path).close()
    with broker_thread(Broker(servicebus=True)) as broker:
        code, done, _ = run(capsys, "local-queue", str(tmp_path), "--forward", broker.connection_string)
        assert code == 0 and done is not None and done["complete"] is True
        assert done["at_start"] == 6 and done["depth"] == 0 and done["forwarded"] == 6
        with (
            ServiceBusClient.from_connection_string(broker.connection_string) as client,
            client.get_queue_receiver("orders", max_wait_time=2) as receiver,
        ):
            got = receiver.receive_messages(max_message_count=10, max_wait_time=2)
        assert [str(m.message_id) for m in got] == [f"m{i}" for i in range(5)]
        code, shown, _ = run(capsys, "local-queue", str(tmp_path))
        assert shown is not None and shown["depth"] == 0


def test_forward_refuses_a_directory_a_client_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = stored_directory(tmp_path)
    try:
        with broker_thread(Broker(servicebus=True)) as broker:
            code, _, err = run(capsys, "local-queue", str(tmp_path), "--forward", broker.connection_string)
        assert code == 1 and "in use by another client" in err and str(os.getpid()) in err
        assert f.depth == 6
    finally:
        f.close()
