"""Auth of the Service Bus namespace, with tokens minted here (not by the library) and
qpid-proton as the client: $cbs put-token answers, refused links, strict mode."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from proton import Message as PMessage
from proton.reactor import AtMostOnce, LinkOption
from proton.utils import BlockingConnection, ConnectionClosed, LinkDetached

from amqplink.broker import Broker
from tests.broker.sdkutil import running_broker
from tests.broker.test_management import mint


def _name() -> str:
    return f"auth-{uuid.uuid4()}"


class CbsClient:
    """put-token over a proton connection: sender to $cbs, receiver from $cbs."""

    def __init__(self, broker: Broker) -> None:
        self.conn = BlockingConnection(broker.url, timeout=10)
        self.sender = self.conn.create_sender("$cbs", name=_name())
        self.replies = self.conn.create_receiver("$cbs", name=_name(), credit=10)

    def put(self, token: str, audience: str) -> tuple[int, str]:
        request = PMessage(
            body=token,
            id=str(uuid.uuid4()),
            reply_to="$cbs",
            properties={
                "operation": "put-token",
                "type": "servicebus.windows.net:sastoken",
                "name": audience,
                "expiration": int(time.time()) + 3600,
            },
        )
        self.sender.send(request)
        reply = self.replies.receive(timeout=10)
        self.replies.accept()
        assert reply.correlation_id == request.id
        return reply.properties["status-code"], reply.properties["status-description"]

    def close(self) -> None:
        self.conn.close()


@pytest.fixture()
def loopback() -> Iterator[Broker]:
    with running_broker() as b:
        yield b


@pytest.fixture()
def strict() -> Iterator[Broker]:
    # The emulator's key given explicitly: strict mode given no key makes a random one.
    with running_broker(require_auth=True, keys={"RootManageSharedAccessKey": "SAS_KEY_VALUE"}) as b:
        yield b


def attach_receiver(conn: BlockingConnection, address: str) -> Any:
    return conn.create_receiver(address, name=_name(), credit=1)


def test_valid_token_then_send_and_receive(loopback: Broker) -> None:
    cbs = CbsClient(loopback)
    try:
        assert cbs.put(mint("sb://127.0.0.1/q"), "sb://127.0.0.1/q")[0] == 202
        cbs.conn.create_sender("q", name=_name()).send(PMessage(body=b"with token"))
        receiver = attach_receiver(cbs.conn, "q")
        msg = receiver.receive(timeout=10)
        assert bytes(msg.body) == b"with token"
        assert msg.annotations["x-opt-sequence-number"] == 1
        receiver.accept()
    finally:
        cbs.close()


@pytest.mark.parametrize(
    "token",
    [
        mint("sb://127.0.0.1/q", key="not-the-key"),
        mint("sb://127.0.0.1/q", expiry=int(time.time()) - 10),
        mint("sb://127.0.0.1/q", name="UnknownKeyName"),
        mint("sb://127.0.0.1/other"),
    ],
    ids=["bad-signature", "expired", "unknown-key-name", "audience-of-another-entity"],
)
def test_bad_token_gets_401_and_its_links_are_refused(loopback: Broker, token: str) -> None:
    cbs = CbsClient(loopback)
    try:
        status, description = cbs.put(token, "sb://127.0.0.1/q")
        assert status == 401 and description
        with pytest.raises(LinkDetached) as info:
            attach_receiver(cbs.conn, "q")
        assert "amqp:unauthorized-access" in str(info.value)
        # An entity no refused token names is still open on loopback.
        attach_receiver(cbs.conn, "unrelated").close()
    finally:
        cbs.close()


def test_loopback_client_without_token_uses_entities(loopback: Broker) -> None:
    conn = BlockingConnection(loopback.url, timeout=10, sasl_enabled=False)
    try:
        conn.create_sender("plain", name=_name()).send(PMessage(body=b"no token"))
        receiver = attach_receiver(conn, "plain")
        assert bytes(receiver.receive(timeout=10).body) == b"no token"
        receiver.accept()
    finally:
        conn.close()


def test_strict_mode_refuses_links_without_a_token(strict: Broker) -> None:
    cbs = CbsClient(strict)  # $cbs itself needs no token
    try:
        with pytest.raises(LinkDetached) as info:
            attach_receiver(cbs.conn, "q")
        assert "amqp:unauthorized-access" in str(info.value)
        assert cbs.put(mint("sb://127.0.0.1/q"), "sb://127.0.0.1/q")[0] == 202
        attach_receiver(cbs.conn, "q").close()
        with pytest.raises(LinkDetached):
            attach_receiver(cbs.conn, "other")  # the token covers q only
    finally:
        cbs.close()


def test_strict_mode_detaches_links_when_the_token_expires(strict: Broker) -> None:
    cbs = CbsClient(strict)
    try:
        soon = int(time.time()) + 2
        assert cbs.put(mint("sb://127.0.0.1/q", expiry=soon), "sb://127.0.0.1/q")[0] == 202
        receiver = attach_receiver(cbs.conn, "q")
        with pytest.raises(LinkDetached) as info:
            receiver.receive(timeout=10)  # nothing to receive: the link ends when the token does
        assert "amqp:unauthorized-access" in str(info.value)
        assert time.time() >= soon
    finally:
        cbs.close()


def test_strict_mode_closes_a_connection_that_puts_no_token(strict: Broker) -> None:
    assert strict.servicebus is not None
    strict.servicebus.cbs_deadline = 0.5  # 20 s by default
    conn = BlockingConnection(strict.url, timeout=10)
    try:
        started = time.monotonic()
        with pytest.raises(ConnectionClosed) as info:
            conn.wait(lambda: False, timeout=10, msg="the broker to close the connection")
        assert "amqp:unauthorized-access" in str(info.value)
        assert time.monotonic() - started < 5
    finally:
        conn.close()


class _SmallMessages(LinkOption):  # type: ignore[misc]
    def apply(self, link: Any) -> None:
        link.max_message_size = 1000


@pytest.mark.parametrize("mode", ["peek-lock", "receive-and-delete"])
def test_receiver_with_a_small_max_message_size_is_detached_and_the_message_stays(loopback: Broker, mode: str) -> None:
    conn = BlockingConnection(loopback.url, timeout=10)
    try:
        conn.create_sender("big", name=_name()).send(PMessage(body=b"x" * 5000))
        options: list[Any] = [_SmallMessages()]
        if mode == "receive-and-delete":
            options.append(AtMostOnce())
        with pytest.raises(LinkDetached) as info:
            receiver = conn.create_receiver("big", name=_name(), credit=1, options=options)
            receiver.receive(timeout=10)
        assert "amqp:link:message-size-exceeded" in str(info.value)
        (msg,) = loopback.namespace.receiver_source("big").peek(0, 10, time.time())
        assert msg.delivery_count == 0 and msg.state.value == "available"
        receiver = conn.create_receiver("big", name=_name(), credit=1)  # a receiver that takes it
        assert len(receiver.receive(timeout=10).body) == 5000
        receiver.accept()
    finally:
        conn.close()


def test_strict_mode_keeps_a_connection_whose_token_expired(strict: Broker) -> None:
    assert strict.servicebus is not None
    strict.servicebus.cbs_deadline = 0.5
    cbs = CbsClient(strict)
    try:
        soon = int(time.time()) + 1
        assert cbs.put(mint("sb://127.0.0.1/q", expiry=soon), "sb://127.0.0.1/q")[0] == 202
        time.sleep(1.5)  # past the token and the deadline: the test is about what time does
        # the connection is still open: a fresh token puts and a link attaches
        assert cbs.put(mint("sb://127.0.0.1/q"), "sb://127.0.0.1/q")[0] == 202
        attach_receiver(cbs.conn, "q").close()
    finally:
        cbs.close()


def test_sdk_in_strict_mode_with_the_right_and_a_wrong_key(strict: Broker) -> None:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
    from azure.servicebus.exceptions import ServiceBusAuthenticationError

    with ServiceBusClient.from_connection_string(strict.connection_string) as client:
        with client.get_queue_sender("strict-q") as sender:
            sender.send_messages(ServiceBusMessage("authorised"))
        mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
        with client.get_queue_receiver("strict-q", receive_mode=mode) as receiver:
            assert [str(m) for m in receiver.receive_messages(max_wait_time=5)] == ["authorised"]
    wrong = strict.connection_string.replace("SharedAccessKey=SAS_KEY_VALUE", "SharedAccessKey=not-it")
    refused = ServiceBusClient.from_connection_string(wrong, retry_total=0)
    with refused, pytest.raises(ServiceBusAuthenticationError), refused.get_queue_sender("strict-q") as sender:
        sender.send_messages(ServiceBusMessage("refused"))
