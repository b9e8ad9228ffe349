"""Authorization rules with rights (issue 23, item 8): Listen, Send, Manage per namespace and
per entity, from Config.json's ``AuthorizationRules`` and ``Broker(rules=...)``; enforced on
links (through ``$cbs``), ``$management`` operations, ``$control`` and the HTTPS API, with
the official SDK as one of the peers."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.aio import connect
from amqplink.aio.connection import Connection
from amqplink.aio.errors import AMQPError
from amqplink.aio.request_response import RequestResponseLink
from amqplink.broker import Broker
from amqplink.broker.audience import NamespaceNames
from amqplink.broker.config import ConfigError, parse_config
from amqplink.broker.rights import AccessRule, AccessRules, Right, parse_rights
from amqplink.codec.types import Long
from amqplink.message import Message
from amqplink.servicebus.cbs import put_token_request
from amqplink.servicebus.sas import AccessToken, SasTokenError
from tests.broker.sdkutil import running_broker
from tests.broker.test_control import raw_request, status
from tests.broker.test_management import mint

ROOT = ("RootManageSharedAccessKey", "root-key")
SENDER = ("sender", "send-key")
LISTENER = ("listener", "listen-key")
ONLY_Q1 = ("q1only", "q1-key")
SECONDARY = "listen-key-2"

CONFIG = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "AuthorizationRules": [
                    {"Name": ROOT[0], "PrimaryKey": ROOT[1], "Rights": ["Manage"]},
                    {"Name": SENDER[0], "PrimaryKey": SENDER[1], "Rights": ["Send"]},
                    {"Name": LISTENER[0], "PrimaryKey": LISTENER[1], "SecondaryKey": SECONDARY, "Rights": ["Listen"]},
                ],
                "Queues": [
                    {
                        "Name": "q1",
                        "AuthorizationRules": [
                            {"Name": ONLY_Q1[0], "PrimaryKey": ONLY_Q1[1], "Rights": ["Listen", "Send"]}
                        ],
                    },
                    {"Name": "q2"},
                    {"Name": "sdk-rights"},
                ],
            }
        ]
    }
}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(parse_config(CONFIG), require_auth=True, http_port=0) as b:
        yield b


# -- rules from the configuration ------------------------------------------------------------
def test_config_rules_are_read_with_their_scope_and_rights() -> None:
    rules = parse_config(CONFIG).namespaces[0].authorization_rules
    assert [(r.name, r.entity, r.rights) for r in rules] == [
        (ROOT[0], "", Right.LISTEN | Right.SEND | Right.MANAGE),  # Manage brings the others
        (SENDER[0], "", Right.SEND),
        (LISTENER[0], "", Right.LISTEN),
        (ONLY_Q1[0], "q1", Right.LISTEN | Right.SEND),
    ]
    assert rules[2].keys == (LISTENER[1], SECONDARY)
    assert LISTENER[1] not in repr(rules)  # keys never in a repr


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            {"Name": "r", "PrimaryKey": "k", "Rights": ["Read"]},
            r"AuthorizationRules\[0\]\.Rights: 'Read' is not a right",
        ),
        ({"Name": "r", "PrimaryKey": "k", "Rights": []}, r"AuthorizationRules\[0\]\.Rights: a rule needs at least one"),
        ({"Name": "r", "Rights": ["Send"]}, r"AuthorizationRules\[0\]\.PrimaryKey: expected a non-empty key"),
        (
            {"Name": "r r", "PrimaryKey": "k", "Rights": ["Send"]},
            r"AuthorizationRules\[0\]\.Name: expected a rule name",
        ),
        ({"Name": "r", "PrimaryKey": "k", "Rights": ["Send"], "Key": 1}, r"\.Key: not a field"),
    ],
)
def test_a_bad_rule_names_the_field(rule: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "AuthorizationRules": [rule]}]}]}})


def test_parse_rights() -> None:
    assert parse_rights(["send", "LISTEN"]) == Right.SEND | Right.LISTEN
    assert parse_rights(["Manage"]) == Right.SEND | Right.LISTEN | Right.MANAGE
    with pytest.raises(ValueError, match="at least one"):
        parse_rights([])


# -- over AMQP ----------------------------------------------------------------------------------
class Client:
    """One connection that has put a token for ``path`` signed with ``rule``."""

    def __init__(self, conn: Connection, broker: Broker) -> None:
        self.conn = conn
        self.broker = broker

    async def put(self, rule: tuple[str, str], path: str) -> tuple[int, str]:
        audience = f"sb://127.0.0.1:{self.broker.port}/{path}"
        cbs = await RequestResponseLink.open(self.conn, "$cbs")
        token = AccessToken(mint(audience, key=rule[1], name=rule[0]), int(time.time()) + 300)
        answer = await cbs.request(put_token_request(audience, token))
        app = answer.application_properties or {}
        return app["status-code"], app["status-description"]

    async def management(self, entity: str, operation: str, body: dict[str, Any]) -> tuple[int, str]:
        pair = await RequestResponseLink.open(self.conn, f"{entity}/$management")
        answer = await pair.request(Message(body, application_properties={"operation": f"com.microsoft:{operation}"}))
        app = answer.application_properties or {}
        return app["statusCode"], str(app.get("statusDescription"))


@contextlib.asynccontextmanager
async def connected(broker: Broker) -> AsyncIterator[Client]:
    conn = await connect(broker.url)
    try:
        yield Client(conn, broker)
    finally:
        await conn.close()


async def refused(action: Any) -> str:
    with pytest.raises(AMQPError) as info:
        await action
    assert info.value.condition == "amqp:unauthorized-access"
    return str(info.value)


async def test_a_send_only_rule_sends_but_does_not_receive(broker: Broker) -> None:
    async with connected(broker) as client:
        assert (await client.put(SENDER, "q2"))[0] == 202  # the token is valid; its rights are Send only
        sender = await client.conn.create_sender("q2")
        await sender.send(Message(b"sent with Send"))
        text = await refused(client.conn.create_receiver("q2"))
        assert "'Listen'" in text and "'q2'" in text and "Send" in text
        code, description = await client.management(
            "q2", "peek-message", {"from-sequence-number": Long(1), "message-count": 1}
        )
        assert code == 401 and "'Listen'" in description
        schedule = {"messages": [{"message-id": "s1", "message": Message(b"later").encode()}]}
        assert (await client.management("q2", "schedule-message", schedule))[0] == 200  # Send schedules


async def test_a_listen_only_rule_receives_but_does_not_send(broker: Broker) -> None:
    async with connected(broker) as client:
        assert (await client.put(LISTENER, "q1"))[0] == 202
        text = await refused(client.conn.create_sender("q1"))
        assert "'Send'" in text and "'q1'" in text
        receiver = await client.conn.create_receiver("q1")
        await receiver.close()
        code, _ = await client.management("q1", "peek-message", {"from-sequence-number": Long(1), "message-count": 1})
        assert code in (200, 204)  # (204: nothing to peek) allowed with Listen
        code, description = await client.management("q1", "cancel-scheduled-message", {"sequence-numbers": [Long(1)]})
        assert code == 401 and "'Send'" in description


async def test_a_secondary_key_signs_as_well(broker: Broker) -> None:
    async with connected(broker) as client:
        assert (await client.put((LISTENER[0], SECONDARY), "q1"))[0] == 202
        await (await client.conn.create_receiver("q1")).close()


async def test_an_entity_rule_covers_its_entity_only(broker: Broker) -> None:
    async with connected(broker) as client:
        assert (await client.put(ONLY_Q1, "q1"))[0] == 202
        sender = await client.conn.create_sender("q1")
        await sender.send(Message(b"q1 rule"))
        code, description = await client.put(ONLY_Q1, "q2")
        assert code == 401 and "q1" in description
        assert (await client.put(ONLY_Q1, ""))[0] == 401  # not the namespace either
        await refused(client.conn.create_sender("q2"))


async def test_control_needs_manage_on_the_namespace(broker: Broker) -> None:
    root = f"sb://127.0.0.1:{broker.port}/"
    for rule in (SENDER, LISTENER):
        answer = await raw_request(
            broker, {"operation": "list", "security_token": mint(root, key=rule[1], name=rule[0])}
        )
        code, description = status(answer)
        assert code == 401 and "Manage" in description and rule[0] in description
    answer = await raw_request(broker, {"operation": "list", "security_token": mint(root, key=ROOT[1], name=ROOT[0])})
    assert status(answer)[0] == 200


# -- over HTTPS ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["$Resources/queues", "q1", "$namespaceinfo"])
def test_the_management_api_needs_manage(broker: Broker, path: str) -> None:
    base = f"https://127.0.0.1:{broker.http_port}"

    def get(rule: tuple[str, str]) -> requests.Response:
        with requests.Session() as session:
            session.trust_env = False
            headers = {"Authorization": mint(base + "/", key=rule[1], name=rule[0])}
            return session.get(f"{base}/{path}", headers=headers, verify=broker.http_ca, timeout=10)

    for rule in (SENDER, LISTENER):
        answer = get(rule)
        assert answer.status_code == 401 and b"Manage" in answer.content
    assert get(ROOT).status_code == 200


# -- the official SDK ------------------------------------------------------------------------
def _conn_str(broker: Broker, rule: tuple[str, str]) -> str:
    return (
        f"Endpoint=sb://127.0.0.1:{broker.port};SharedAccessKeyName={rule[0]};SharedAccessKey={rule[1]};"
        "UseDevelopmentEmulator=true"
    )


@pytest.mark.sdk
def test_sdk_send_only_and_listen_only_keys(broker: Broker) -> None:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
    from azure.servicebus.exceptions import ServiceBusAuthorizationError

    mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
    with ServiceBusClient.from_connection_string(_conn_str(broker, SENDER), retry_total=0) as client:
        with client.get_queue_sender("sdk-rights") as sender:
            sender.send_messages(ServiceBusMessage("from the sender rule"))
        receiving = client.get_queue_receiver("sdk-rights", receive_mode=mode)
        with pytest.raises(ServiceBusAuthorizationError) as info, receiving as r:
            r.receive_messages(max_wait_time=5)
        assert "unauthorized" in str(info.value).lower() and "Listen" in str(info.value)
    with ServiceBusClient.from_connection_string(_conn_str(broker, LISTENER), retry_total=0) as client:
        with client.get_queue_receiver("sdk-rights", receive_mode=mode) as receiver:
            assert [str(m) for m in receiver.receive_messages(max_wait_time=5)] == ["from the sender rule"]
        with pytest.raises(ServiceBusAuthorizationError) as info, client.get_queue_sender("sdk-rights") as sender:
            sender.send_messages(ServiceBusMessage("refused"))
        assert "unauthorized" in str(info.value).lower() and "Send" in str(info.value)


@pytest.mark.sdk
def test_sdk_rights_hold_on_loopback_too() -> None:
    rules = [AccessRule(SENDER[0], (SENDER[1],), Right.SEND)]
    with running_broker(rules=rules) as loopback:  # not strict: a token still grants only its rights
        from azure.servicebus import ServiceBusClient, ServiceBusMessage
        from azure.servicebus.exceptions import ServiceBusAuthorizationError

        with ServiceBusClient.from_connection_string(_conn_str(loopback, SENDER), retry_total=0) as client:
            with client.get_queue_sender("loop") as sender:
                sender.send_messages(ServiceBusMessage("ok"))
            with pytest.raises(ServiceBusAuthorizationError), client.get_queue_receiver("loop") as receiver:
                receiver.receive_messages(max_wait_time=5)


@pytest.mark.sdk
def test_sdk_admin_client_needs_manage(broker: Broker) -> None:
    from azure.core.exceptions import HttpResponseError
    from azure.servicebus.management import ServiceBusAdministrationClient

    def admin(rule: tuple[str, str]) -> ServiceBusAdministrationClient:
        conn_str = f"Endpoint=sb://127.0.0.1:{broker.http_port};SharedAccessKeyName={rule[0]};SharedAccessKey={rule[1]}"
        return ServiceBusAdministrationClient.from_connection_string(conn_str, connection_verify=broker.http_ca)

    with admin(LISTENER) as client, pytest.raises(HttpResponseError) as info:
        client.get_queue_runtime_properties("q1")
    assert info.value.status_code == 401
    with admin(ROOT) as client:
        assert client.get_queue_runtime_properties("q1").name == "q1"


@given(
    scope=st.sampled_from(["", "q", "t"]),
    path=st.sampled_from(["", "q", "q/$management", "qq", "Q", "t", "t/subscriptions/s", "other", "q/../t"]),
    right_key=st.booleans(),
    rights=st.sets(st.sampled_from(["Listen", "Send", "Manage"]), min_size=1),
)
@settings(max_examples=200, deadline=None)
def test_a_rule_grants_its_rights_within_its_scope_only(
    scope: str, path: str, right_key: bool, rights: set[str]
) -> None:
    rules = AccessRules([AccessRule("r", ("the-key",), parse_rights(rights), scope)])
    token = mint(f"sb://127.0.0.1/{path}", key="the-key" if right_key else "another-key", name="r")
    normal = path.lower()
    covered = not scope or normal == scope or normal.startswith(scope + "/")
    try:
        grant = rules.verify(token, now=time.time(), names=NamespaceNames.of(["127.0.0.1"]))
    except SasTokenError as exc:
        assert not (right_key and covered), exc
        return
    assert right_key and covered
    assert grant.path == normal and grant.rights == parse_rights(rights) and grant.rule == "r"
