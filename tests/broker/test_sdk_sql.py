"""The official azure-servicebus SDK sends to a topic whose subscriptions have SQL filters (Config.json)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode

from amqplink.broker import Broker
from amqplink.broker.config import load_config
from tests.broker.sdkutil import running_broker
from tests.broker.test_sdk import receive_n


def _sql(name: str, *expressions: str) -> dict[str, object]:
    rules = [
        {"Name": f"rule{i}", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": expr}}}
        for i, expr in enumerate(expressions)
    ]
    return {"Name": name, "Rules": rules}


CONFIG = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Topics": [
                    {
                        "Name": "shop",
                        "Subscriptions": [
                            {"Name": "everything"},
                            _sql("big-orders", "user.quantity >= 10 AND sys.Label = 'order'"),
                            _sql("europe", "region IN ('fr', 'de') OR [ship to] LIKE 'EU-%'"),
                            _sql("no-region", "NOT EXISTS(region) AND sys.Label IS NOT NULL"),
                            _sql("priced", "price * quantity > 100.0", "sys.CorrelationId = 'vip'"),
                            _sql("store5", "sys.To = 'store5' AND sys.MessageId LIKE 'm%'"),
                        ],
                    },
                    {
                        "Name": "audit",
                        "Subscriptions": [
                            {
                                "Name": "tagged",
                                "Rules": [
                                    {
                                        "Name": "mark-big",
                                        "Properties": {
                                            "FilterType": "Sql",
                                            "SqlFilter": {"SqlExpression": "quantity > 10"},
                                            "Action": {"SqlExpression": "SET size = 'big'; REMOVE price"},
                                        },
                                    }
                                ],
                            },
                        ],
                    },
                ],
            }
        ]
    }
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    path: Path = tmp_path_factory.mktemp("sql") / "Config.json"
    path.write_text(json.dumps(CONFIG), encoding="utf-8")
    with running_broker(load_config(path)) as b:
        yield b


def test_sdk_messages_are_routed_by_sql_filters(broker: Broker) -> None:
    messages = [
        ServiceBusMessage("m1", message_id="m1", subject="order", to="store5",
                          application_properties={"quantity": 12, "region": "fr", "price": 2.5}),
        ServiceBusMessage("m2", message_id="m2", subject="order",
                          application_properties={"quantity": 3, "ship to": "EU-Lyon", "price": 50.0}),
        ServiceBusMessage("m3", message_id="x3", subject="return", to="store5", correlation_id="vip",
                          application_properties={"quantity": 40, "region": "us"}),
        ServiceBusMessage("m4", message_id="m4", application_properties={"region": "de"}),
    ]  # fmt: skip
    expected = {
        "everything": ["m1", "m2", "m3", "m4"],
        "big-orders": ["m1"],
        "europe": ["m1", "m2", "m4"],
        "no-region": ["m2"],
        "priced": ["m2", "m3"],
        "store5": ["m1"],
    }
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_topic_sender("shop") as sender:
            for message in messages:
                sender.send_messages(message)
        got = {}
        for sub, want in expected.items():
            with client.get_subscription_receiver(
                "shop", sub, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
            ) as receiver:
                got[sub] = sorted(str(m) for m in receive_n(receiver, len(want)))
    assert got == expected
    for sub in expected:
        assert len(broker.namespace.receiver_source(f"shop/Subscriptions/{sub}").store) == 0, sub


def test_sdk_sees_what_a_rule_action_changed(broker: Broker) -> None:
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_topic_sender("audit") as sender:
            sender.send_messages(ServiceBusMessage("big", application_properties={"quantity": 11, "price": 1.5}))
            sender.send_messages(ServiceBusMessage("small", application_properties={"quantity": 1, "price": 1.5}))
        with client.get_subscription_receiver(
            "audit", "tagged", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver:
            (msg,) = receive_n(receiver, 1)
    assert str(msg) == "big"
    props = {k.decode() if isinstance(k, bytes) else k: v for k, v in (msg.application_properties or {}).items()}
    props = {k: v.decode() if isinstance(v, bytes) else v for k, v in props.items()}
    assert props == {"quantity": 11, "size": "big", "RuleName": "mark-big"}
    assert len(broker.namespace.receiver_source("audit/Subscriptions/tagged").store) == 0
