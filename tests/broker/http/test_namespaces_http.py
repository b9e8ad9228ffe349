"""The management REST API serves every namespace of a Config.json, each under its own host name
as the AMQP port does (the request's ``Host``: ``second.localhost:PORT``; any other name, the
first namespace), each with its own entities and keys. ``test_namespaces_http_sdk.py`` does the
same with the SDK's admin client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, NamespaceConfig, QueueConfig
from amqplink.broker.rights import AccessRule
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from amqplink.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin
from amqplink.servicebus.management import (
    ClientAuthenticationError,
    ResourceNotFoundError,
    ServiceBusAdministrationClient,
)
from tests.broker.localhost import resolve_localhost_names
from tests.broker.sdkutil import running_broker

KEYS = {"first": ("first-rule", "first-secret"), "second": ("second-rule", "second-secret")}
CONFIG = BrokerConfig(
    (
        NamespaceConfig(
            "first",
            queues=(QueueConfig("orders"), QueueConfig("only-first")),
            authorization_rules=(AccessRule(KEYS["first"][0], (KEYS["first"][1],)),),
        ),
        NamespaceConfig(
            "second",
            queues=(QueueConfig("orders"), QueueConfig("only-second")),
            authorization_rules=(AccessRule(KEYS["second"][0], (KEYS["second"][1],)),),
        ),
    )
)


def admin_string(broker: Broker, host: str, key_of: str) -> str:
    """An admin connection string for ``host`` at the broker's HTTPS port, with ``key_of``'s key."""
    name, key = KEYS[key_of]
    return f"Endpoint=sb://{host}:{broker.http_port};SharedAccessKeyName={name};SharedAccessKey={key}"


@pytest.fixture(autouse=True)
def localhost_names(monkeypatch: pytest.MonkeyPatch) -> None:
    resolve_localhost_names(monkeypatch)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(CONFIG, http_port=0) as broker:
        yield broker


def _admin(broker: Broker, host: str, key_of: str) -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient.from_connection_string(
        admin_string(broker, host, key_of), connection_verify=broker.http_ca
    )


@pytest.mark.parametrize(
    ("host", "namespace"),
    [("second.localhost", "second"), ("first.localhost", "first"), ("127.0.0.1", "first"), ("localhost", "first")],
)
def test_each_namespace_under_its_own_host(broker: Broker, host: str, namespace: str) -> None:
    with _admin(broker, host, namespace) as admin:
        assert admin.get_namespace_properties().name == namespace
        assert sorted(q.name for q in admin.list_queues()) == ["only-" + namespace, "orders"]
        other = "first" if namespace == "second" else "second"
        with pytest.raises(ResourceNotFoundError):
            admin.get_queue("only-" + other)


def test_changes_reach_only_the_namespace_named(broker: Broker) -> None:
    with _admin(broker, "second.localhost", "second") as admin:
        admin.create_queue("made-over-http")
        try:
            assert "made-over-http" in broker.namespaces["second"].queues
            assert "made-over-http" not in broker.namespaces["first"].queues
            conn_str = broker.connection_string_for("second")
            with (
                ServiceBusClient.from_connection_string(conn_str) as client,
                client.get_queue_sender("made-over-http") as sender,
            ):
                sender.send_messages(ServiceBusMessage("over AMQP"))
            assert admin.get_queue_runtime_properties("made-over-http").active_message_count == 1
        finally:
            admin.delete_queue("made-over-http")
        assert "made-over-http" not in broker.namespaces["second"].queues


@pytest.mark.parametrize(("host", "key_of"), [("second.localhost", "first"), ("127.0.0.1", "second")])
def test_each_namespace_takes_only_its_own_keys(broker: Broker, host: str, key_of: str) -> None:
    with _admin(broker, host, key_of) as admin, pytest.raises(ClientAuthenticationError):
        admin.get_namespace_properties()


def test_asyncio_client_reaches_each_namespace(broker: Broker) -> None:
    async def listed(host: str, key_of: str) -> tuple[str, list[str]]:
        async with AsyncAdmin.from_connection_string(
            admin_string(broker, host, key_of), connection_verify=broker.http_ca
        ) as admin:
            name = (await admin.get_namespace_properties()).name
            return name, sorted([q.name async for q in admin.list_queues()])

    async def run() -> list[tuple[str, list[str]]]:
        return list(await asyncio.gather(listed("second.localhost", "second"), listed("127.0.0.1", "first")))

    assert asyncio.run(run()) == [("second", ["only-second", "orders"]), ("first", ["only-first", "orders"])]
