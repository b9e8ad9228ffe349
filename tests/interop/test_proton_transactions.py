"""qpid-proton's transaction API (``Container.declare_transaction``, ``Transaction.send``,
``accept``, ``commit``, ``abort``) against the embedded Service Bus broker's coordinator;
and Debian's RabbitMQ 3.10, which has none, refusing our client's control link cleanly.

proton writes its control messages as ``amqp-value(described(symbol, list))`` (the
descriptor a symbol, not the code), keeps the deliveries it accepted in a transaction
unsettled until the discharge, then settles them (``released`` after a roll-back)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import Message as PMessage
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import Container

from amqplink.broker import Broker
from tests.conftest import broker_thread

TIMEOUT = 20.0


@pytest.fixture()
def sb() -> Iterator[Broker]:
    with broker_thread(Broker(servicebus=True)) as broker:
        yield broker


def _stored(broker: Broker, queue: str) -> list[Any]:
    host = broker.servicebus
    assert host is not None
    return list(host.namespace.receiver_source(queue).store)


def _run(handler: MessagingHandler) -> None:
    """Run proton's reactor with ``handler`` on a thread; fail if it has not stopped in time."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            Container(handler).run()
        except BaseException as exc:  # (reported below, in the test's thread)
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(TIMEOUT)
    assert not thread.is_alive(), "proton's reactor did not finish"
    assert not errors, errors


class _Outcome(MessagingHandler, TransactionHandler):  # type: ignore[misc]
    """Notes how its transaction ended (``outcome``) and closes the connection."""

    conn: Any
    outcome: str | None = None

    def _ended(self, outcome: str) -> None:
        self.outcome = outcome
        self.conn.close()

    def on_transaction_committed(self, event: Any) -> None:
        self._ended("committed")

    def on_transaction_aborted(self, event: Any) -> None:
        self._ended("aborted")

    def on_transaction_declare_failed(self, event: Any) -> None:
        self._ended("declare failed")

    def on_transaction_commit_failed(self, event: Any) -> None:
        self._ended("commit failed")


class _Send(_Outcome):
    """Declare, send ``count`` messages in the transaction, then commit (or abort)."""

    def __init__(self, url: str, queue: str, count: int, *, commit: bool) -> None:
        super().__init__()
        self.url, self.queue, self.count, self.commit = url, queue, count, commit

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url, reconnect=False)
        self.sender = event.container.create_sender(self.conn, self.queue)
        event.container.declare_transaction(self.conn, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        for i in range(self.count):
            event.transaction.send(self.sender, PMessage(body=f"m{i}", id=f"id-{i}"))
        if self.commit:
            event.transaction.commit()
        else:
            event.transaction.abort()


@pytest.mark.parametrize("commit", [True, False])
def test_proton_sends_in_a_transaction_and_commits_or_aborts(sb: Broker, commit: bool) -> None:
    handler = _Send(sb.url, "q", 5, commit=commit)
    _run(handler)
    assert handler.outcome == ("committed" if commit else "aborted")
    assert len(_stored(sb, "q")) == (5 if commit else 0)


class _Receive(_Outcome):
    """Receive ``count`` messages, accept each in a transaction, then commit (or abort)."""

    def __init__(self, url: str, queue: str, count: int, *, commit: bool) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url, self.queue, self.count, self.commit = url, queue, count, commit
        self.transaction: Any = None
        self.accepted = 0

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url, reconnect=False)
        self.receiver = event.container.create_receiver(self.conn, self.queue)
        event.container.declare_transaction(self.conn, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        self.transaction = event.transaction
        self.receiver.flow(self.count)

    def on_message(self, event: Any) -> None:
        self.transaction.accept(event.delivery)
        self.accepted += 1
        if self.accepted == self.count:
            if self.commit:
                self.transaction.commit()
            else:
                self.transaction.abort()


@pytest.mark.parametrize("commit", [True, False])
def test_proton_accepts_in_a_transaction_and_commits_or_aborts(sb: Broker, commit: bool) -> None:
    sender = _Send(sb.url, "work", 3, commit=True)
    _run(sender)
    assert len(_stored(sb, "work")) == 3
    handler = _Receive(sb.url, "work", 3, commit=commit)
    _run(handler)
    assert handler.outcome == ("committed" if commit else "aborted")
    left = _stored(sb, "work")
    if commit:
        assert left == []
    else:
        # proton releases what it accepted in the aborted transaction: back, not counted as an attempt
        assert len(left) == 3 and all(m.delivery_count == 0 for m in left)


@pytest.mark.peer("proton-examples")
def test_proton_examples_tx_send_and_tx_recv_against_the_broker(sb: Broker) -> None:
    """Debian's qpid-proton examples, unchanged: ``tx_send.py`` sends 20 messages in
    transactions of 5, ``tx_recv.py`` receives them in transactions of 5."""
    examples = Path("/usr/share/proton/examples/python")
    address = f"{sb.url.split('://', 1)[1]}/ex"
    sent = subprocess.run(
        [sys.executable, str(examples / "tx_send.py"), "-a", address, "-m", "20", "-b", "5"],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert len(_stored(sb, "ex")) == 20
    received = subprocess.run(
        [sys.executable, str(examples / "tx_recv.py"), "-a", address, "-m", "20", "-b", "5"],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert received.returncode == 0, received.stderr
    assert received.stdout.splitlines() == [f"{{'sequence': {i}}}" for i in range(1, 21)]
    assert _stored(sb, "ex") == []


@pytest.mark.peer("rabbitmq")
async def test_our_client_is_told_clearly_by_a_broker_without_transactions() -> None:
    """RabbitMQ 3.10's AMQP 1.0 plugin has no coordinator: it ends the session of the control
    link with ``amqp:not-implemented`` ("Transactions not supported"); the caller gets that
    condition, and the connection stays usable."""
    from amqplink.aio import connect
    from amqplink.aio.errors import AMQPError
    from amqplink.message import Message
    from interop.peers.rabbitmq import RabbitMQ

    with RabbitMQ() as rabbit:
        async with await connect(rabbit.url) as conn:
            with pytest.raises(AMQPError) as caught:
                await conn.transaction()
            assert caught.value.condition == "amqp:not-implemented"
            assert "ransaction" in str(caught.value)
            sender = await conn.create_sender("/queue/after-refusal")
            await sender.send(Message(b"still fine"))
