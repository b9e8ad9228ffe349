"""Every namespace of a Config.json is served (issue 24, C.9), each on its own name: a
connection's host name (the open's ``hostname``, the connection string's endpoint) picks
the namespace called so, or whose name is its first label (``second.localhost``); any
other name gets the first. Each keeps its own entities, keys and store.

A client reaches ``<name>.localhost`` where the resolver maps every ``*.localhost`` name
to loopback (RFC 6761, "localhost." names; systemd-resolved and browsers do): the tests
resolve them so in this process."""

from __future__ import annotations

from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, ConfigError, NamespaceConfig, QueueConfig
from amqplink.broker.rights import AccessRule
from tests.broker.localhost import resolve_localhost_names
from tests.broker.sdkutil import running_broker

pytestmark = pytest.mark.sdk

CONFIG = BrokerConfig(
    (
        NamespaceConfig("first", queues=(QueueConfig("orders"),)),
        NamespaceConfig("second", queues=(QueueConfig("orders"), QueueConfig("only-second"))),
    )
)


@pytest.fixture(autouse=True)
def localhost_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """``*.localhost`` resolves to 127.0.0.1 (RFC 6761) in this process."""
    resolve_localhost_names(monkeypatch)


def _as(broker: Broker, host: str, key: tuple[str, str] | None = None) -> str:
    cs = broker.connection_string.replace("sb://127.0.0.1", f"sb://{host}")
    if key is not None:
        name, secret = key
        cs = f"Endpoint=sb://{host}:{broker.port};SharedAccessKeyName={name};SharedAccessKey={secret}"
        cs += ";UseDevelopmentEmulator=true"
    return cs


def _send(connection_string: str, queue: str, body: str) -> None:
    with (
        ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage(body))


def _bodies(broker: Broker, namespace: str, queue: str) -> list[bytes]:
    return [msg.envelope.body for msg in broker.namespaces[namespace].queues[queue].store]


def test_each_namespace_is_served_on_its_own_name() -> None:
    with running_broker(CONFIG) as broker:
        assert set(broker.namespaces) == {"first", "second"}
        assert broker.connection_string_for("first") == broker.connection_string
        assert broker.connection_string_for("Second") == _as(broker, "second.localhost")
        with pytest.raises(KeyError, match="serves first, second"):
            broker.connection_string_for("third")
        _send(broker.connection_string_for("second"), "orders", "to second")
        _send(_as(broker, "second.localhost"), "only-second", "only there")
        _send(broker.connection_string, "orders", "to first")  # 127.0.0.1: the first namespace
        _send(_as(broker, "first.localhost"), "orders", "to first by name")
        assert len(_bodies(broker, "second", "orders")) == 1
        assert len(_bodies(broker, "second", "only-second")) == 1
        assert len(_bodies(broker, "first", "orders")) == 2
        with (
            ServiceBusClient.from_connection_string(_as(broker, "second.localhost")) as client,
            client.get_queue_receiver("orders", max_wait_time=5) as receiver,
        ):
            got = receiver.receive_messages(max_message_count=10, max_wait_time=5)
            assert [str(m) for m in got] == ["to second"]
            for m in got:
                receiver.complete_message(m)
        # The first namespace has no queue "only-second" (and makes none on first use): the
        # token's put is answered 404, the SDK's authentication error.
        with pytest.raises(ServiceBusAuthenticationError):
            _send(broker.connection_string, "only-second", "nowhere")
        assert "only-second" not in broker.namespaces["first"].queues


def test_each_namespace_keeps_its_own_keys() -> None:
    first_key, second_key = ("first-rule", "first-secret"), ("second-rule", "second-secret")
    config = BrokerConfig(
        (
            NamespaceConfig(
                "first",
                queues=(QueueConfig("orders"),),
                authorization_rules=(AccessRule(*first_key[:1], first_key[1:]),),
            ),
            NamespaceConfig(
                "second",
                queues=(QueueConfig("orders"),),
                authorization_rules=(AccessRule(*second_key[:1], second_key[1:]),),
            ),
        )
    )
    with running_broker(config, require_auth=True) as broker:
        _send(_as(broker, "second.localhost", second_key), "orders", "with its key")
        assert len(_bodies(broker, "second", "orders")) == 1
        with pytest.raises(ServiceBusAuthenticationError):
            _send(_as(broker, "second.localhost", first_key), "orders", "the other one's key")
        with pytest.raises(ServiceBusAuthenticationError):
            _send(_as(broker, "127.0.0.1", second_key), "orders", "the other one's key")
        assert len(_bodies(broker, "second", "orders")) == 1 and not _bodies(broker, "first", "orders")


def test_each_namespace_keeps_its_own_store(tmp_path: Path) -> None:
    with running_broker(CONFIG, data_dir=tmp_path) as broker:
        _send(_as(broker, "second.localhost"), "orders", "kept in second")
        _send(broker.connection_string, "orders", "kept in first")
    assert (tmp_path / "namespaces" / "second").is_dir()
    with running_broker(CONFIG, data_dir=tmp_path) as broker:
        (second,) = _bodies(broker, "second", "orders")
        (first,) = _bodies(broker, "first", "orders")
        assert second.endswith(b"kept in second") and first.endswith(b"kept in first")


def test_two_namespaces_with_one_name_are_refused() -> None:
    with pytest.raises(ConfigError, match="defined twice"):
        Broker(BrokerConfig((NamespaceConfig("same"), NamespaceConfig("SAME"))))


def test_amqplinks_client_reaches_each_namespace_by_name() -> None:
    from amqplink.servicebus import ServiceBusClient as LinkClient
    from amqplink.servicebus import ServiceBusMessage as LinkMessage

    with running_broker(CONFIG) as broker:
        for name in ("first", "second"):
            with (
                LinkClient.from_connection_string(broker.connection_string_for(name)) as client,
                client.get_queue_sender("orders") as sender,
            ):
                sender.send_messages(LinkMessage(f"to {name}"))
        for name in ("first", "second"):
            (body,) = _bodies(broker, name, "orders")
            assert body.endswith(f"to {name}".encode())
