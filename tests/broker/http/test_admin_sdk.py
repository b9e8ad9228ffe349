"""The official SDK's ServiceBusAdministrationClient, unchanged, against the broker's management API."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig
from tests.broker.sdkutil import running_broker

KEY = "RootManageSharedAccessKey", "SAS_KEY_VALUE"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(BrokerConfig(), http_port=0) as broker:
        yield broker


def admin(broker: Broker) -> ServiceBusAdministrationClient:
    conn = (
        f"Endpoint=sb://127.0.0.1:{broker.http_port};SharedAccessKeyName={KEY[0]};SharedAccessKey={KEY[1]}"
    )
    return ServiceBusAdministrationClient.from_connection_string(conn, connection_verify=broker.http_ca)


def test_queue_create_get_update_list_delete(broker: Broker) -> None:
    with admin(broker) as client:
        created = client.create_queue(
            "adm-q1", lock_duration=dt.timedelta(seconds=30), max_delivery_count=7, user_metadata="hello"
        )
        assert created.name == "adm-q1"
        assert created.lock_duration == dt.timedelta(seconds=30)
        assert created.max_delivery_count == 7
        with pytest.raises(ResourceExistsError):
            client.create_queue("adm-q1")
        got = client.get_queue("adm-q1")
        assert got.user_metadata == "hello" and got.default_message_time_to_live > dt.timedelta(days=10000)
        got.max_delivery_count = 3
        got.lock_duration = dt.timedelta(seconds=45)
        client.update_queue(got)
        again = client.get_queue("adm-q1")
        assert again.max_delivery_count == 3 and again.lock_duration == dt.timedelta(seconds=45)
        assert broker.namespace.queue("adm-q1").properties.max_delivery_count == 3
        assert "adm-q1" in [q.name for q in client.list_queues()]
        client.delete_queue("adm-q1")
        with pytest.raises(ResourceNotFoundError):
            client.get_queue("adm-q1")
        with pytest.raises(ResourceNotFoundError):
            client.delete_queue("adm-q1")
        assert "adm-q1" not in [q.name for q in client.list_queues()]
