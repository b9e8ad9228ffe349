"""Queue and topic names made of ``/``-separated segments (as Service Bus allows, and as
paired namespaces' backlog queues ``<namespace>/x-servicebus-transfer/<i>`` need): over
the management API and over AMQP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from amqplink.broker import Broker
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from amqplink.servicebus.paired.backlog import BACKLOG_QUEUE_DESCRIPTION
from tests.broker.http.test_http_api import CONFIG, base, error_of, token
from tests.broker.sdkutil import running_broker

NAME = "contoso/x-servicebus-transfer/0"


@pytest.fixture()
def broker() -> Iterator[Broker]:
    with running_broker(CONFIG, http_port=0) as broker:
        yield broker


@pytest.fixture()
def http(broker: Broker) -> Iterator[requests.Session]:
    session = requests.Session()
    session.trust_env = False
    session.verify = broker.http_ca
    session.headers["Authorization"] = token(broker)
    yield session
    session.close()


def test_a_segmented_queue_is_created_read_used_and_deleted(broker: Broker, http: requests.Session) -> None:
    url = f"{base(broker)}/{NAME}?api-version=2021-05"
    assert http.get(url).status_code == 404
    created = http.put(url, data=BACKLOG_QUEUE_DESCRIPTION.encode())
    assert created.status_code == 201, created.text
    assert http.put(url, data=BACKLOG_QUEUE_DESCRIPTION.encode()).status_code == 409  # exists
    got = http.get(url)
    assert got.status_code == 200 and "<LockDuration>PT1M</LockDuration>" in got.text
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender(NAME) as sender:
            sender.send_messages(ServiceBusMessage("parked"))
        with client.get_queue_receiver(NAME, max_wait_time=5) as receiver:
            assert [str(m) for m in receiver.receive_messages(max_wait_time=5)] == ["parked"]
    assert http.delete(url).status_code == 200
    assert http.get(url).status_code == 404
    assert NAME not in broker.namespace.queues


def test_subscription_paths_still_mean_subscriptions(broker: Broker, http: requests.Session) -> None:
    assert http.get(f"{base(broker)}/t/Subscriptions/s?api-version=2021-05").status_code == 200
    assert http.get(f"{base(broker)}/t/Subscriptions/nope?api-version=2021-05").status_code == 404


def test_later_segments_may_start_with_a_period_hyphen_or_underscore(broker: Broker, http: requests.Session) -> None:
    """``txt/.-_123``: the SDK's own management tests (``test_mgmt_queue_list_with_special_chars``)
    create it on Service Bus."""
    url = f"{base(broker)}/txt/.-_123?api-version=2021-05"
    assert http.put(url, data=BACKLOG_QUEUE_DESCRIPTION.encode()).status_code == 201
    assert "txt/.-_123" in broker.namespace.queues
    assert http.delete(url).status_code == 200


@pytest.mark.parametrize("path", ["-bad/a/0", "a/b!c/0", "a/b%20c/0", "a/" + "x" * 260])
def test_a_bad_segment_is_refused(broker: Broker, http: requests.Session, path: str) -> None:
    response = http.put(f"{base(broker)}/{path}?api-version=2021-05", data=BACKLOG_QUEUE_DESCRIPTION.encode())
    assert response.status_code == 400
    assert "name" in error_of(response)[1]


def test_an_unknown_segmented_address_is_not_found_over_amqp(broker: Broker) -> None:
    # The token's put is answered 404, as Service Bus answers it (the SDK's authentication error).
    from amqplink.servicebus.exceptions import ServiceBusAuthenticationError

    with (
        ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client,
        pytest.raises(ServiceBusAuthenticationError) as refused,
        client.get_queue_sender("no/such/queue") as sender,
    ):
        sender.send_messages(ServiceBusMessage("lost?"))
    assert refused.value.status_code == 404 and refused.value.condition == "amqp:not-found"
