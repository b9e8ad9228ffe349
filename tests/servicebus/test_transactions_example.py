"""The runnable example of docs/transactions.md, run as its reader would (a process of its own,
the connection string in the environment) against the embedded broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from amqplink.broker import Broker
from amqplink.message import Message
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from tests.conftest import broker_thread

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "transactions.md"


def example() -> str:
    """The python block after the ``<!-- example: move orders -->`` marker."""
    found = re.search(r"<!-- example: move orders -->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert found is not None, "docs/transactions.md lost its example"
    return found.group(1)


def test_the_example_moves_each_order_in_a_transaction() -> None:
    with broker_thread(Broker(servicebus=True)) as broker:
        with (
            ServiceBusClient.from_connection_string(broker.connection_string) as client,
            client.get_queue_sender("orders") as sender,
        ):
            sender.send_messages([ServiceBusMessage(f"order {i}", message_id=f"o{i}") for i in range(3)])
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SERVICEBUS_CONNECTION_STRING": broker.connection_string}
        run = subprocess.run(
            [sys.executable, "-c", example()], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines() == [f"invoiced o{i}" for i in range(3)]
        host = broker.servicebus
        assert host is not None
        assert len(host.namespace.receiver_source("orders").store) == 0
        invoices = host.namespace.receiver_source("invoices")
        bodies = sorted(Message.decode(invoices.encode(m, peek=True)).body for m in invoices.store)  # type: ignore[type-var]
        assert bodies == [f"invoice for order {i}".encode() for i in range(3)]
