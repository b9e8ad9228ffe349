"""The SDK's ``ServiceBusAdministrationClient`` reaches each namespace of one Config.json under its
own host name, and sees what amqplink's admin client sees there."""

from __future__ import annotations

from typing import Any

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.servicebus.management import ServiceBusAdministrationClient as SdkAdmin

from amqplink.broker import Broker
from amqplink.servicebus import management
from tests.broker.http import test_namespaces_http as fast

pytestmark = pytest.mark.sdk
broker = fast.broker  # the same fixtures: a broker serving both namespaces, *.localhost resolved
localhost_names = fast.localhost_names
admin_string = fast.admin_string


def _seen(admin: Any) -> tuple[str, list[tuple[str, int]]]:
    """The namespace's name and its queues with their message counts."""
    name = admin.get_namespace_properties().name
    return name, sorted((q.name, q.total_message_count) for q in admin.list_queues_runtime_properties())


@pytest.mark.parametrize(("host", "namespace"), [("second.localhost", "second"), ("127.0.0.1", "first")])
def test_sdk_admin_reaches_each_namespace(broker: Broker, host: str, namespace: str) -> None:
    conn_str = admin_string(broker, host, namespace)
    with (
        SdkAdmin.from_connection_string(conn_str, connection_verify=broker.http_ca) as sdk,
        management.ServiceBusAdministrationClient.from_connection_string(
            conn_str, connection_verify=broker.http_ca
        ) as ours,
    ):
        sdk.create_queue(f"by-sdk-in-{namespace}")
        try:
            seen = _seen(sdk)
            assert seen[0] == namespace
            assert [q for q, _ in seen[1]] == sorted(["orders", f"only-{namespace}", f"by-sdk-in-{namespace}"])
            assert _seen(ours) == seen
        finally:
            sdk.delete_queue(f"by-sdk-in-{namespace}")
    other = "first" if namespace == "second" else "second"
    assert f"by-sdk-in-{namespace}" not in broker.namespaces[other].queues


def test_sdk_admin_with_the_other_namespaces_key_is_refused(broker: Broker) -> None:
    with (
        SdkAdmin.from_connection_string(
            admin_string(broker, "second.localhost", "first"), connection_verify=broker.http_ca
        ) as sdk,
        pytest.raises(ClientAuthenticationError),
    ):
        sdk.get_namespace_properties()
