"""A queue's or topic's own shared access rules over the management REST API (issue 24): kept,
read back, and authorizing AMQP and REST access to that entity as a ``Config.json`` rule does.

What Service Bus does, from Microsoft's documentation:

- "Authenticate access to Azure Service Bus with Shared Access Signatures"
  (learn.microsoft.com/azure/service-bus-messaging/service-bus-sas): rules are "configured
  either on a namespace, or a messaging entity (queue, or topic)"; each has a name, rights
  (Send, Listen, Manage) and "a pair of primary and secondary cryptographic keys. The keys are
  256-bit values in Base64 representation"; a rule on an entity authorizes access to that
  entity only; "up to 12 such rules on a namespace, queue, or topic".
- Azure.Messaging.ServiceBus.Administration ``SharedAccessAuthorizationRule`` and
  ``AccessRights``: keys not given are generated; "Manage" must come with "Send" and "Listen".
- ``QueueDescription`` / ``TopicDescription`` carry them as ``<AuthorizationRules>`` of
  ``<AuthorizationRule i:type="SharedAccessAuthorizationRule">`` (the SDK's ``_generated``
  ``AuthorizationRule``: ClaimType, ClaimValue, Rights, CreatedTime, ModifiedTime, KeyName,
  PrimaryKey, SecondaryKey); a subscription has none.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
import os
import secrets
import stat
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from amqplink.aio import connect
from amqplink.aio.connection import Connection
from amqplink.aio.errors import AMQPError
from amqplink.aio.request_response import RequestResponseLink
from amqplink.atom.authorization import SharedAccessRule, authorization_rules_xml, read_authorization_rules
from amqplink.atom.document import SB_NS, XSI_NS
from amqplink.atom.xmlsafe import parse_xml
from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, ConfigError, parse_config
from amqplink.broker.namespace.cbs import Authorizations
from amqplink.broker.rights import MAX_ENTITY_RULES, AccessRule, Right
from amqplink.message import Message
from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus import management as ours
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.cbs import put_token_request
from amqplink.servicebus.exceptions import ServiceBusAuthorizationError
from amqplink.servicebus.sas import AccessToken
from tests.broker.http.test_http_api import FUZZ, base, entry, error_of, token
from tests.broker.sdkutil import running_broker
from tests.broker.test_management import mint

ROOT = "RootManageSharedAccessKey", "SAS_KEY_VALUE"
XSI = f'xmlns:i="{XSI_NS}"'


def key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


def rule_xml(name: str, rights: list[str], primary: str | None = None, secondary: str | None = None) -> str:
    keys = "".join(
        f"<{tag}>{value}</{tag}>" for tag, value in (("PrimaryKey", primary), ("SecondaryKey", secondary)) if value
    )
    return (
        '<AuthorizationRule i:type="SharedAccessAuthorizationRule"><ClaimType>SharedAccessKey</ClaimType>'
        "<ClaimValue>None</ClaimValue><Rights>"
        + "".join(f"<AccessRights>{r}</AccessRights>" for r in rights)
        + f"</Rights><KeyName>{name}</KeyName>{keys}</AuthorizationRule>"
    )


def description(rules: list[str] | None, kind: str = "QueueDescription", extra: str = "") -> bytes:
    inner = "" if rules is None else f"<AuthorizationRules>{''.join(rules)}</AuthorizationRules>"
    return entry(f'<{kind} xmlns="{SB_NS}" {XSI}>{extra}{inner}</{kind}>')


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    config = parse_config(
        {
            "UserConfig": {
                "Namespaces": [
                    {
                        "AuthorizationRules": [{"Name": ROOT[0], "PrimaryKey": ROOT[1], "Rights": ["Manage"]}],
                        "Queues": [
                            {
                                "Name": "configured",
                                "AuthorizationRules": [{"Name": "cfg", "PrimaryKey": "cfg-key", "Rights": ["Listen"]}],
                            }
                        ],
                    }
                ]
            }
        }
    )
    with running_broker(config, require_auth=True, http_port=0) as broker:
        yield broker


@contextlib.contextmanager
def session_for(broker: Broker) -> Iterator[requests.Session]:
    """A session sending the namespace's Manage token to ``broker``'s management API."""
    with requests.Session() as session:
        session.trust_env = False
        session.verify = broker.http_ca
        session.headers["Authorization"] = token(broker)
        yield session


@pytest.fixture
def http(broker: Broker) -> Iterator[requests.Session]:
    with session_for(broker) as session:
        yield session


def described(response: requests.Response) -> list[SharedAccessRule]:
    """The rules an entity's entry holds."""
    root = parse_xml(response.content)
    found = root.find(f".//{{{SB_NS}}}AuthorizationRules")
    assert found is not None, response.text
    return read_authorization_rules(found)


def create(
    http: requests.Session, broker: Broker, name: str, rules: list[str], kind: str = "QueueDescription"
) -> list[SharedAccessRule]:
    http.delete(f"{base(broker)}/{name}", timeout=10)
    response = http.put(f"{base(broker)}/{name}", data=description(rules, kind), timeout=10)
    assert response.status_code == 201, response.text
    return described(response)


def update(http: requests.Session, broker: Broker, name: str, rules: list[str] | None) -> requests.Response:
    return http.put(f"{base(broker)}/{name}", data=description(rules), headers={"If-Match": "*"}, timeout=10)


# -- AMQP with a rule's key ------------------------------------------------------------------------
async def put_token(conn: Connection, broker: Broker, rule: str, secret: str, path: str) -> tuple[int, str]:
    audience = f"sb://127.0.0.1:{broker.port}/{path}"
    cbs = await RequestResponseLink.open(conn, "$cbs")
    answer = await cbs.request(
        put_token_request(audience, AccessToken(mint(audience, key=secret, name=rule), int(time.time()) + 300))
    )
    app = answer.application_properties or {}
    return app["status-code"], app["status-description"]


@contextlib.asynccontextmanager
async def connected(broker: Broker) -> AsyncIterator[Connection]:
    conn = await connect(broker.url)
    try:
        yield conn
    finally:
        await conn.close()


async def refused(action: object) -> str:
    with pytest.raises(AMQPError) as info:
        await action  # type: ignore[misc]
    assert info.value.condition == "amqp:unauthorized-access"
    return str(info.value)


def connection_string(broker: Broker, rule: str, secret: str, entity: str | None = None) -> str:
    text = (
        f"Endpoint=sb://127.0.0.1:{broker.port};SharedAccessKeyName={rule};SharedAccessKey={secret};"
        "UseDevelopmentEmulator=true"
    )
    return text if entity is None else f"{text};EntityPath={entity}"


@pytest.mark.parametrize("given_keys", [False, True])
async def test_a_send_rule_made_over_rest_sends_to_its_queue_only(
    broker: Broker, http: requests.Session, given_keys: bool
) -> None:
    primary, secondary = (key(), key()) if given_keys else (None, None)
    queue, other = f"rest-send-{given_keys}".lower(), "rest-other"
    (rule,) = create(http, broker, queue, [rule_xml("sender", ["Send"], primary, secondary)])
    create(http, broker, other, [])
    assert rule.key_name == "sender" and rule.rights == ("Send",)
    assert rule.primary_key and rule.secondary_key and rule.primary_key != rule.secondary_key
    if given_keys:
        assert (rule.primary_key, rule.secondary_key) == (primary, secondary)
    else:  # generated as the portal does: 256 random bits in Base64
        assert len(base64.b64decode(rule.primary_key, validate=True)) == 32
        assert len(base64.b64decode(rule.secondary_key, validate=True)) == 32
    assert rule.created is not None and rule.modified == rule.created

    # our client, with the rule's connection string naming the queue
    client = ServiceBusClient.from_connection_string(
        connection_string(broker, "sender", rule.primary_key, queue), retry_total=0
    )
    async with client, client.get_queue_sender(queue) as sender:
        await sender.send_messages(ServiceBusMessage(b"with the queue's own rule"))
    assert len(broker.namespace.queue(queue).store) == 1
    async with connected(broker) as conn:
        assert (await put_token(conn, broker, "sender", rule.secondary_key, queue))[0] == 202
        text = await refused(conn.create_receiver(queue))
        assert "grants Send" in text
        code, why = await put_token(conn, broker, "sender", rule.primary_key, other)
        assert code == 401 and queue in why
        await refused(conn.create_sender(other))
    # nor the REST API (Manage only)
    rest = requests.get(
        f"{base(broker)}/{queue}",
        headers={
            "Authorization": token(broker, key_name="sender", key=rule.primary_key, audience=f"{base(broker)}/{queue}")
        },
        verify=broker.http_ca,
        timeout=10,
    )
    assert rest.status_code == 401 and "Manage" in error_of(rest)[1]


async def test_our_client_is_refused_receiving_with_a_send_rule(broker: Broker, http: requests.Session) -> None:
    (rule,) = create(http, broker, "rest-recv", [rule_xml("sendonly", ["Send"])])
    client = ServiceBusClient.from_connection_string(
        connection_string(broker, "sendonly", rule.primary_key or "", "rest-recv"), retry_total=0
    )
    async with client:
        with pytest.raises(ServiceBusAuthorizationError) as info:
            async with client.get_queue_receiver("rest-recv", max_wait_time=1) as receiver:
                await receiver.receive_messages(max_wait_time=1)
    assert info.value.condition == "amqp:unauthorized-access"


async def test_an_update_replaces_the_rules(broker: Broker, http: requests.Session) -> None:
    first = key()
    (rule,) = create(http, broker, "rest-upd", [rule_xml("r", ["Send"], first)])
    async with connected(broker) as conn:
        assert (await put_token(conn, broker, "r", first, "rest-upd"))[0] == 202
    # the rule changed: Listen now, a new primary key; the old key and right no longer hold
    second = key()
    response = update(http, broker, "rest-upd", [rule_xml("r", ["Listen"], second, rule.secondary_key)])
    assert response.status_code == 200, response.text
    (changed,) = described(response)
    assert changed.rights == ("Listen",) and changed.primary_key == second
    assert changed.created == rule.created and changed.modified is not None and changed.modified >= rule.created  # type: ignore[operator]
    async with connected(broker) as conn:
        assert (await put_token(conn, broker, "r", first, "rest-upd"))[0] == 401
        assert (await put_token(conn, broker, "r", second, "rest-upd"))[0] == 202
        await refused(conn.create_sender("rest-upd"))
        await (await conn.create_receiver("rest-upd")).close()
    # the rule removed: new connections with it are refused
    response = update(http, broker, "rest-upd", [])
    assert response.status_code == 200 and described(response) == []
    async with connected(broker) as conn:
        code, why = await put_token(conn, broker, "r", second, "rest-upd")
        assert code == 401 and "'r'" in why
        await refused(conn.create_receiver("rest-upd"))


async def test_a_token_put_before_its_rule_changed_authorizes_no_new_link(
    broker: Broker, http: requests.Session
) -> None:
    secret = key()
    create(http, broker, "rest-revoke", [rule_xml("before", ["Send", "Listen"], secret)])
    async with connected(broker) as conn:
        assert (await put_token(conn, broker, "before", secret, "rest-revoke"))[0] == 202
        sender = await conn.create_sender("rest-revoke")  # attached while the rule holds
        # the rule changed (Listen only): the token it signed no longer opens links
        response = update(http, broker, "rest-revoke", [rule_xml("before", ["Listen"], secret)])
        assert response.status_code == 200, response.text
        text = await refused(conn.create_receiver("rest-revoke"))
        assert "rest-revoke" in text
        await sender.send(Message(b"the link attached before keeps going"))
        # a token signed with the rule as it is now: Listen, not Send
        assert (await put_token(conn, broker, "before", secret, "rest-revoke"))[0] == 202
        await (await conn.create_receiver("rest-revoke")).close()
        await refused(conn.create_sender("rest-revoke"))


def test_revoke_forgets_only_what_a_rule_no_longer_holding_signed() -> None:
    auth = Authorizations()
    holding, changed = AccessRule("a", ("k",), Right.SEND, "q"), AccessRule("b", ("k",), Right.SEND, "q2")
    auth.grant("sb://h/q", 100.0, Right.SEND, holding)
    auth.grant("sb://h/q2", 100.0, Right.SEND, changed)
    auth.grant("sb://h/q3", 100.0, Right.SEND)  # (no rule known: a key map's)
    assert auth.revoke({holding, AccessRule("b", ("k",), Right.LISTEN, "q2")}) == ["q2"]
    assert auth.covers("q", 0.0, Right.SEND) and auth.covers("q3", 0.0) and not auth.covers("q2", 0.0)
    assert sorted(auth.expire(200.0)) == ["q", "q3"] and not auth.sources


async def test_deleting_the_entity_removes_its_rules(broker: Broker, http: requests.Session) -> None:
    (rule,) = create(http, broker, "rest-del", [rule_xml("gone", ["Send", "Listen"])], kind="TopicDescription")
    assert http.delete(f"{base(broker)}/rest-del", timeout=10).status_code == 200
    assert "rest-del" not in broker.namespace.access_rules
    create(http, broker, "rest-del", [], kind="TopicDescription")
    async with connected(broker) as conn:
        assert (await put_token(conn, broker, "gone", rule.primary_key or "", "rest-del"))[0] == 401


def test_a_manage_rule_made_over_rest_manages_its_entity_only(broker: Broker, http: requests.Session) -> None:
    (rule,) = create(http, broker, "rest-manage", [rule_xml("owner", ["Manage", "Listen", "Send"])])
    create(http, broker, "rest-manage-other", [])
    assert rule.rights == ("Listen", "Send", "Manage")

    def get(path: str) -> requests.Response:
        audience = f"{base(broker)}/{path}"
        header = token(broker, key_name="owner", key=rule.primary_key or "", audience=audience)
        return requests.get(audience, headers={"Authorization": header}, verify=broker.http_ca, timeout=10)

    assert get("rest-manage").status_code == 200
    for elsewhere in ("rest-manage-other", "$Resources/queues"):
        response = get(elsewhere)
        assert response.status_code == 401 and "'rest-manage'" in error_of(response)[1]


def test_a_topic_rule_covers_its_subscriptions_and_subscriptions_have_none(
    broker: Broker, http: requests.Session
) -> None:
    (rule,) = create(http, broker, "rest-topic", [rule_xml("t-listen", ["Listen"])], kind="TopicDescription")
    sub = http.put(
        f"{base(broker)}/rest-topic/Subscriptions/s",
        data=entry(f'<SubscriptionDescription xmlns="{SB_NS}"/>'),
        timeout=10,
    )
    assert sub.status_code == 201 and b"AuthorizationRules" not in sub.content
    grant = broker.servicebus.rules.verify(  # type: ignore[union-attr]
        mint(f"sb://127.0.0.1:{broker.port}/rest-topic/subscriptions/s", key=rule.primary_key or "", name="t-listen"),
        now=time.time(),
    )
    assert grant.rights == Right.LISTEN and grant.rule == "t-listen"


def test_configured_entity_rules_read_back(broker: Broker, http: requests.Session) -> None:
    (rule,) = described(http.get(f"{base(broker)}/configured", timeout=10))
    assert (rule.key_name, rule.rights, rule.primary_key, rule.secondary_key) == ("cfg", ("Listen",), "cfg-key", None)
    listed = http.get(f"{base(broker)}/$Resources/queues", timeout=10)
    assert b"cfg-key" in listed.content  # the feed's entries carry them too


# -- refused descriptions -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([rule_xml("r", [])], "AuthorizationRules[0].Rights: a rule needs at least one right"),
        ([rule_xml("r", ["Read"])], "AuthorizationRules[0].Rights: 'Read' is not a right"),
        ([rule_xml("r", ["Send", "Send"])], "'Send' is named twice"),
        ([rule_xml("r", ["Manage"])], "Manage must come with Listen and Send"),
        ([rule_xml("r", ["Manage", "Send"])], "Manage must come with Listen and Send"),
        ([rule_xml(f"r{i}", ["Send"]) for i in range(MAX_ENTITY_RULES + 1)], "13 rules, above the limit of 12"),
        ([rule_xml("bad name", ["Send"])], "AuthorizationRules[0].KeyName: 'bad name' is not a rule name"),
        ([rule_xml("", ["Send"])], "KeyName: '' is not a rule name"),
        ([rule_xml("-x", ["Send"])], "is not a rule name"),
        ([rule_xml("x" * 257, ["Send"])], "is not a rule name"),
        ([rule_xml("r", ["Send"]), rule_xml("r", ["Listen"])], "AuthorizationRules[1].KeyName: 'r' appears twice"),
        ([rule_xml("r", ["Send"], "not base64!")], "AuthorizationRules[0].PrimaryKey: a key must be Base64"),
        ([rule_xml("r", ["Send"], "QQ==" * 65)], "PrimaryKey: a key is 1 to 256 characters"),
        (['<AuthorizationRule i:type="AllowRule"><KeyName>r</KeyName></AuthorizationRule>'], "'AllowRule' is not kept"),
        (["<Rule/>"], "AuthorizationRules[0]: expected <AuthorizationRule>, not <Rule>"),
        (
            [rule_xml("r", ["Send"]).replace("<KeyName>", "<CreatedTime>soon</CreatedTime><KeyName>")],
            "CreatedTime: 'soon' is not a time",
        ),
    ],
)
def test_a_bad_rule_is_a_400_naming_it(broker: Broker, http: requests.Session, rules: list[str], message: str) -> None:
    http.delete(f"{base(broker)}/rest-bad", timeout=10)
    response = http.put(f"{base(broker)}/rest-bad", data=description(rules), timeout=10)
    code, detail = error_of(response)
    assert response.status_code == code == 400
    assert "QueueDescription.AuthorizationRules" in detail and message in detail, detail
    assert "rest-bad" not in broker.namespace.queues  # nothing made
    # an update is refused the same way and keeps the rules it had
    create(http, broker, "rest-bad", [rule_xml("kept", ["Send"])])
    response = update(http, broker, "rest-bad", rules)
    assert response.status_code == 400 and message in error_of(response)[1]
    assert [r.name for r in broker.namespace.access_rules["rest-bad"]] == ["kept"]


def test_config_holds_12_rules_per_entity_at_most() -> None:
    rules = [{"Name": f"r{i}", "PrimaryKey": "k", "Rights": ["Send"]} for i in range(MAX_ENTITY_RULES + 1)]
    with pytest.raises(ConfigError, match=r"Queues\[0\]\.AuthorizationRules: 13 rules, above 12 per queue or topic"):
        parse_config({"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "AuthorizationRules": rules}]}]}})
    twelve = parse_config(
        {"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "AuthorizationRules": rules[:-1]}]}]}}
    )
    assert len(twelve.namespaces[0].authorization_rules) == MAX_ENTITY_RULES


# -- durable ------------------------------------------------------------------------------------------
def test_rules_made_over_rest_survive_a_restart(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret = key()
    with running_broker(BrokerConfig(), http_port=0, data_dir=tmp_path) as first, session_for(first) as session:
        (rule,) = create(session, first, "kept", [rule_xml("durable", ["Send", "Listen"], secret)])
    with running_broker(BrokerConfig(), http_port=0, data_dir=tmp_path) as second:
        assert [(r.name, r.keys[0], r.rights) for r in second.namespace.access_rules["kept"]] == [
            ("durable", secret, Right.SEND | Right.LISTEN)
        ]
        with session_for(second) as session:
            (again,) = described(session.get(f"{base(second)}/kept", timeout=10))
        assert (again.primary_key, again.secondary_key) == (secret, rule.secondary_key)

        async def use_the_rule() -> int:
            async with connected(second) as conn:
                code = (await put_token(conn, second, "durable", secret, "kept"))[0]
                await (await conn.create_sender("kept")).close()
                return code

        assert asyncio.run(use_the_rule()) == 202
    # the key material is in files only their owner reads, and in no log line
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0, path
    assert secret not in caplog.text and (rule.secondary_key or "") not in caplog.text


# -- both admin clients ---------------------------------------------------------------------------
def _admin_conn(broker: Broker) -> str:
    return f"Endpoint=sb://127.0.0.1:{broker.http_port};SharedAccessKeyName={ROOT[0]};SharedAccessKey={ROOT[1]}"


def test_our_admin_client_round_trips_rules(broker: Broker) -> None:
    primary, secondary = key(), key()
    rule = ours.AuthorizationRule(
        key_name="ours",
        rights=[ours.AccessRights.SEND, ours.AccessRights.LISTEN],
        primary_key=primary,
        secondary_key=secondary,
    )
    assert primary not in repr(rule) and secondary not in repr(rule)
    with ours.ServiceBusAdministrationClient.from_connection_string(
        _admin_conn(broker), connection_verify=broker.http_ca
    ) as client:
        with contextlib.suppress(ours.ResourceNotFoundError):
            client.delete_topic("ours-t")
        created = client.create_topic("ours-t", authorization_rules=[rule])
        (got,) = created.authorization_rules or []
        assert (got.key_name, got.rights, got.primary_key, got.secondary_key) == (
            "ours",
            [ours.AccessRights.LISTEN, ours.AccessRights.SEND],
            primary,
            secondary,
        )
        assert got.type == "SharedAccessAuthorizationRule" and got.claim_type == "SharedAccessKey"
        topic = client.get_topic("ours-t")
        topic.authorization_rules = [
            *(topic.authorization_rules or []),
            ours.AuthorizationRule(key_name="gen", rights=["Manage", "Listen", "Send"]),
        ]
        client.update_topic(topic)
        again = client.get_topic("ours-t").authorization_rules or []
        assert [(r.key_name, len(r.rights or ())) for r in again] == [("ours", 2), ("gen", 3)]
        assert again[0].primary_key == primary and again[1].primary_key and again[1].primary_key != primary
        assert client.get_queue("configured").authorization_rules is not None
        client.delete_topic("ours-t")


@pytest.mark.sdk
def test_the_sdks_admin_client_round_trips_rules(broker: Broker) -> None:
    from azure.servicebus.management import AccessRights, AuthorizationRule, ServiceBusAdministrationClient

    primary = key()
    with ServiceBusAdministrationClient.from_connection_string(
        _admin_conn(broker), connection_verify=broker.http_ca
    ) as client:
        with contextlib.suppress(Exception):
            client.delete_queue("sdk-rules")
        queue = client.create_queue(
            "sdk-rules",
            authorization_rules=[
                AuthorizationRule(
                    type="SharedAccessAuthorizationRule",
                    key_name="sdk",
                    claim_type="SharedAccessKey",
                    claim_value="None",
                    rights=[AccessRights.SEND],
                    primary_key=primary,
                )
            ],
        )
        (rule,) = queue.authorization_rules
        assert (rule.key_name, rule.rights, rule.primary_key) == ("sdk", ["Send"], primary)
        assert rule.secondary_key and len(base64.b64decode(rule.secondary_key)) == 32
        assert rule.created_at_utc is not None
        assert client.get_queue("sdk-rules").authorization_rules[0].secondary_key == rule.secondary_key
        # the same rule, read by our client
        with ours.ServiceBusAdministrationClient.from_connection_string(
            _admin_conn(broker), connection_verify=broker.http_ca
        ) as mine:
            (seen,) = mine.get_queue("sdk-rules").authorization_rules or []
            assert (seen.key_name, seen.primary_key, seen.secondary_key) == ("sdk", primary, rule.secondary_key)
        queue.authorization_rules = None  # an update without rules removes them
        client.update_queue(queue)
        assert client.get_queue("sdk-rules").authorization_rules is None
        assert "sdk-rules" not in broker.namespace.access_rules
        client.delete_queue("sdk-rules")


# -- the XML on its own ---------------------------------------------------------------------------
names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
rights = st.lists(st.sampled_from(["Listen", "Send", "Manage"]), unique=True, max_size=3)
times = st.none() | st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1), timezones=st.just(dt.UTC))
rules = st.builds(
    SharedAccessRule,
    names,
    rights.map(tuple),
    st.none() | st.text("ABCabc019+/=", min_size=1, max_size=60),
    st.none() | st.text("ABCabc019+/=", min_size=1, max_size=60),
    times,
    times,
)


@given(st.lists(rules, max_size=4))
def test_the_rules_xml_round_trips(found: list[SharedAccessRule]) -> None:
    xml = f'<QueueDescription xmlns="{SB_NS}" {XSI}>{authorization_rules_xml(found)}</QueueDescription>'
    node = ET.fromstring(xml).find(f"{{{SB_NS}}}AuthorizationRules")
    assert node is not None
    assert read_authorization_rules(node) == found


def test_keys_are_never_in_a_repr() -> None:
    rule = SharedAccessRule("r", ("Send",), "primary-secret", "secondary-secret")
    assert "secret" not in repr(rule)


def xml_text(size: int) -> st.SearchStrategy[str]:
    return st.text(st.characters(blacklist_categories=["Cs", "Cc"]), max_size=size)


@pytest.mark.fuzz
@FUZZ
@given(
    items=st.lists(
        st.tuples(
            xml_text(12),
            st.lists(st.sampled_from(["Listen", "Send", "Manage", "", "listen", "Nope"]), max_size=4),
            st.none() | xml_text(50),
        ),
        max_size=14,
    ),
    kind=st.sampled_from(["QueueDescription", "TopicDescription"]),
)
def test_fuzzed_rules_get_201_or_400(
    broker: Broker, http: requests.Session, items: list[tuple[str, list[str], str | None]], kind: str
) -> None:
    def esc(text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    body = [rule_xml(esc(name), rs, esc(k) if k else None) for name, rs, k in items]
    http.delete(f"{base(broker)}/fuzz-rules", timeout=10)
    response = http.put(f"{base(broker)}/fuzz-rules", data=description(body, kind), timeout=10)
    assert response.status_code in (201, 400), response.text
    if response.status_code == 400:
        assert error_of(response)[0] == 400 and "AuthorizationRules" in error_of(response)[1]
    else:
        assert [r.key_name for r in described(response)] == [name.strip() for name, _, _ in items]
