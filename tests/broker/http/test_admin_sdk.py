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
    conn = f"Endpoint=sb://127.0.0.1:{broker.http_port};SharedAccessKeyName={KEY[0]};SharedAccessKey={KEY[1]}"
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


def test_topic_subscription_rules(broker: Broker) -> None:
    with admin(broker) as client:
        topic = client.create_topic("adm-t1", default_message_time_to_live=dt.timedelta(hours=1))
        assert topic.default_message_time_to_live == dt.timedelta(hours=1)
        sub = client.create_subscription("adm-t1", "s1", max_delivery_count=4)
        assert sub.max_delivery_count == 4
        # a new subscription has the $Default rule, a TrueFilter
        assert [(r.name, type(r.filter)) for r in client.list_rules("adm-t1", "s1")] == [("$Default", TrueRuleFilter)]
        client.delete_rule("adm-t1", "s1", "$Default")
        rule = client.create_rule(
            "adm-t1",
            "s1",
            "red",
            filter=SqlRuleFilter("color = 'red' AND size > 3"),
            action=SqlRuleAction("SET seen = 'yes'"),
        )
        assert isinstance(rule.filter, SqlRuleFilter) and rule.filter.sql_expression == "color = 'red' AND size > 3"
        assert isinstance(rule.action, SqlRuleAction) and rule.action.sql_expression == "SET seen = 'yes'"
        client.create_rule(
            "adm-t1", "s1", "corr", filter=CorrelationRuleFilter(correlation_id="c-1", properties={"n": 5, "b": True})
        )
        corr = client.get_rule("adm-t1", "s1", "corr")
        assert isinstance(corr.filter, CorrelationRuleFilter)
        assert corr.filter.correlation_id == "c-1" and corr.filter.properties == {"n": 5, "b": True}
        assert sorted(r.name for r in client.list_rules("adm-t1", "s1")) == ["corr", "red"]
        with pytest.raises(HttpResponseError) as bad:
            client.create_rule("adm-t1", "s1", "bad", filter=SqlRuleFilter("color = = 'red'"))
        assert bad.value.status_code == 400 and "position 9" in str(bad.value)
        red = client.get_rule("adm-t1", "s1", "red")
        red.filter = SqlRuleFilter("color = 'blue'")
        client.update_rule("adm-t1", "s1", red)
        assert client.get_rule("adm-t1", "s1", "red").filter.sql_expression == "color = 'blue'"
        sub = client.get_subscription("adm-t1", "s1")
        sub.max_delivery_count = 9
        client.update_subscription("adm-t1", sub)
        assert client.get_subscription("adm-t1", "s1").max_delivery_count == 9
        assert [s.name for s in client.list_subscriptions("adm-t1")] == ["s1"]
        assert client.get_topic_runtime_properties("adm-t1").subscription_count == 1
        topic = client.get_topic("adm-t1")
        topic.default_message_time_to_live = dt.timedelta(minutes=30)
        client.update_topic(topic)
        assert client.get_topic("adm-t1").default_message_time_to_live == dt.timedelta(minutes=30)
        assert "adm-t1" in [t.name for t in client.list_topics()]
        client.delete_subscription("adm-t1", "s1")
        with pytest.raises(ResourceNotFoundError):
            client.get_subscription("adm-t1", "s1")
        client.delete_topic("adm-t1")
        with pytest.raises(ResourceNotFoundError):
            client.get_topic("adm-t1")


def test_created_entities_route_messages_over_amqp(broker: Broker) -> None:
    """A queue, topic, subscription and rules made over HTTP are used at once over AMQP; counts match."""
    with admin(broker) as client:
        client.create_queue("adm-q2")
        client.create_topic("adm-t2")
        client.create_subscription("adm-t2", "reds")
        client.delete_rule("adm-t2", "reds", "$Default")
        client.create_rule("adm-t2", "reds", "r", filter=SqlRuleFilter("color = 'red'"))
        client.create_subscription("adm-t2", "c7")
        client.delete_rule("adm-t2", "c7", "$Default")
        client.create_rule("adm-t2", "c7", "c", filter=CorrelationRuleFilter(correlation_id="7"))
        with ServiceBusClient.from_connection_string(broker.connection_string) as sb:
            with sb.get_queue_sender("adm-q2") as sender:
                sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
                sender.schedule_messages(ServiceBusMessage("later"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
            with sb.get_queue_receiver("adm-q2", max_wait_time=5) as receiver:
                got = receiver.receive_messages(max_message_count=2, max_wait_time=5)
                assert len(got) == 2
                receiver.dead_letter_message(got[0], reason="test")
                receiver.complete_message(got[1])
            with sb.get_topic_sender("adm-t2") as sender:
                sender.send_messages(
                    [
                        ServiceBusMessage("a", application_properties={"color": "red"}),
                        ServiceBusMessage("b", application_properties={"color": "blue"}, correlation_id="7"),
                        ServiceBusMessage("c", application_properties={"color": "red"}, correlation_id="7"),
                    ]
                )
        runtime = client.get_queue_runtime_properties("adm-q2")
        assert runtime.active_message_count == 3
        assert runtime.dead_letter_message_count == 1
        assert runtime.scheduled_message_count == 1
        assert runtime.total_message_count == 5
        assert runtime.size_in_bytes > 0
        reds = client.get_subscription_runtime_properties("adm-t2", "reds")
        c7 = client.get_subscription_runtime_properties("adm-t2", "c7")
        assert (reds.active_message_count, c7.active_message_count) == (2, 2)
        assert [(q.name, q.active_message_count) for q in client.list_queues_runtime_properties()] == [("adm-q2", 3)]


def test_namespace_properties_and_paging(broker: Broker) -> None:
    with admin(broker) as client:
        props = client.get_namespace_properties()
        assert props.name == broker.namespace.name and props.messaging_sku == "Standard"
        names = [f"page-{i:03d}" for i in range(105)]
        for name in names:
            client.create_queue(name)
        listed = [q.name for q in client.list_queues() if q.name.startswith("page-")]
        assert listed == names
        for name in names:
            client.delete_queue(name)


async def test_async_client_manages_a_queue() -> None:
    from azure.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin

    async with Broker(BrokerConfig(), servicebus=True, http_port=0) as broker:
        conn = f"Endpoint=sb://127.0.0.1:{broker.http_port};SharedAccessKeyName={KEY[0]};SharedAccessKey={KEY[1]}"
        async with AsyncAdmin.from_connection_string(conn, connection_verify=broker.http_ca) as client:
            created = await client.create_queue("async-q", requires_session=True)
            assert created.requires_session
            assert [q.name async for q in client.list_queues()] == ["async-q"]
            assert broker.namespace.queue("async-q").requires_session
            await client.delete_queue("async-q")
            assert not broker.namespace.queues


def test_deleting_an_entity_detaches_its_links(broker: Broker) -> None:
    """Links to a queue deleted over HTTP end with amqp:not-found; sends no longer reach a lost queue."""
    from azure.servicebus.exceptions import ServiceBusError

    with admin(broker) as client:
        client.create_queue("adm-gone")
        sb = ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0)
        with sb, sb.get_queue_sender("adm-gone") as sender:
            sender.send_messages(ServiceBusMessage("before"))
            client.delete_queue("adm-gone")
            with pytest.raises(ServiceBusError):
                sender.send_messages(ServiceBusMessage("after"))
        assert "adm-gone" not in broker.namespace.queues


async def test_a_given_certificate_is_served() -> None:
    import asyncio
    import ssl

    from amqplink.broker.http import self_signed

    given = self_signed("given")
    try:
        broker = Broker(BrokerConfig(), servicebus=True, http_port=0, http_cert=(given.cert_path, given.key_path))
        async with broker:
            assert broker.http_ca == given.cert_path
            served = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", broker.http_port))
            with open(given.cert_path) as f:
                assert served.strip() == f.read().strip()
        with open(given.cert_path) as f:
            assert f.read()  # the broker leaves a given certificate in place
    finally:
        given.remove()


def test_partitioned_queue_made_over_http(broker: Broker) -> None:
    with admin(broker) as client:
        created = client.create_queue("adm-part", enable_partitioning=True)
        assert created.enable_partitioning
        queue = broker.namespace.queue("adm-part")
        assert len(getattr(queue, "fragments", ())) == 16
        with (
            ServiceBusClient.from_connection_string(broker.connection_string) as sb,
            sb.get_queue_sender("adm-part") as sender,
        ):
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(20)])
        assert client.get_queue_runtime_properties("adm-part").active_message_count == 20
        props = client.get_queue("adm-part")
        props.lock_duration = dt.timedelta(seconds=20)
        client.update_queue(props)
        assert {f.properties.lock_duration for f in queue.fragments} == {20.0}  # type: ignore[attr-defined]
        props.enable_partitioning = False
        with pytest.raises(HttpResponseError) as refused:
            client.update_queue(props)
        assert refused.value.status_code == 400 and "EnablePartitioning" in str(refused.value)
        client.delete_queue("adm-part")


def test_forward_to_set_over_http_routes_messages(broker: Broker) -> None:
    with admin(broker) as client:
        client.create_queue("adm-target")
        source = client.create_queue("adm-source", forward_to="adm-target")
        assert source.forward_to is not None and source.forward_to.endswith("/adm-target")
        with (
            ServiceBusClient.from_connection_string(broker.connection_string) as sb,
            sb.get_queue_sender("adm-source") as sender,
        ):
            sender.send_messages(ServiceBusMessage("forwarded"))
        assert client.get_queue_runtime_properties("adm-target").active_message_count == 1
        assert client.get_queue_runtime_properties("adm-source").active_message_count == 0
        client.delete_queue("adm-source")
        client.delete_queue("adm-target")


def test_a_deleted_entity_leaves_no_messages_in_the_data_dir(tmp_path: object) -> None:
    """Made again under the same name (and after a restart) a deleted queue or topic starts empty."""
    for run in range(2):
        with running_broker(None, http_port=0, data_dir=tmp_path) as durable, admin(durable) as client:
            if run == 0:
                client.create_queue("dq")
                client.create_topic("dt")
                client.create_subscription("dt", "s")
                with ServiceBusClient.from_connection_string(durable.connection_string) as sb:
                    with sb.get_queue_sender("dq") as sender:
                        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
                    with sb.get_topic_sender("dt") as sender:
                        sender.send_messages(ServiceBusMessage("t"))
                        later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
                        sender.schedule_messages(ServiceBusMessage("later"), later)
                assert client.get_queue_runtime_properties("dq").active_message_count == 3
                assert client.get_topic_runtime_properties("dt").scheduled_message_count == 1
                client.delete_queue("dq")
                client.delete_topic("dt")
                client.create_queue("dq")
                # Made over HTTP, entities outlive the broker (the data dir keeps their definitions)
                client.create_topic("dt")
                client.create_subscription("dt", "s")
            assert client.get_queue_runtime_properties("dq").total_message_count == 0
            assert client.get_subscription_runtime_properties("dt", "s").total_message_count == 0
            assert client.get_topic_runtime_properties("dt").scheduled_message_count == 0


def test_entities_made_changed_and_deleted_over_http_are_kept_in_the_data_dir(tmp_path: object) -> None:
    with running_broker(None, http_port=0, data_dir=tmp_path) as durable, admin(durable) as client:
        client.create_queue("kept", max_delivery_count=4, lock_duration=dt.timedelta(seconds=20))
        client.create_queue("gone")
        client.create_topic("news", requires_duplicate_detection=True)
        client.create_subscription("news", "sports", max_delivery_count=6)
        client.create_rule("news", "sports", "football", filter=SqlRuleFilter("sport = 'football'"))
        client.delete_rule("news", "sports", "$Default")
        queue = client.get_queue("kept")
        queue.max_delivery_count = 5
        client.update_queue(queue)
        client.delete_queue("gone")
        with ServiceBusClient.from_connection_string(durable.connection_string) as sb:
            with sb.get_queue_sender("kept") as sender:
                sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
            with sb.get_topic_sender("news") as sender:
                sender.send_messages(ServiceBusMessage("goal", application_properties={"sport": "football"}))
                sender.send_messages(ServiceBusMessage("ace", application_properties={"sport": "tennis"}))
    with running_broker(None, http_port=0, data_dir=tmp_path) as durable, admin(durable) as client:
        queue = client.get_queue("kept")
        assert queue.max_delivery_count == 5 and queue.lock_duration == dt.timedelta(seconds=20)
        assert client.get_queue_runtime_properties("kept").active_message_count == 3
        with pytest.raises(ResourceNotFoundError):
            client.get_queue("gone")
        assert client.get_topic("news").requires_duplicate_detection
        assert client.get_subscription("news", "sports").max_delivery_count == 6
        assert [r.name for r in client.list_rules("news", "sports")] == ["football"]
        assert client.get_subscription_runtime_properties("news", "sports").active_message_count == 1
        with (
            ServiceBusClient.from_connection_string(durable.connection_string) as sb,
            sb.get_topic_sender("news") as sender,  # the rule still filters after the restart
        ):
            sender.send_messages(ServiceBusMessage("ace", application_properties={"sport": "tennis"}))
            sender.send_messages(ServiceBusMessage("save", application_properties={"sport": "football"}))
        assert client.get_subscription_runtime_properties("news", "sports").active_message_count == 2
