"""The management API over raw HTTPS: authorisation, body bounds, safe XML, and fuzzing (never a 500)."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, NamespaceConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.http import MAX_BODY
from amqplink.servicebus.sas import generate_sas_token
from tests.broker.sdkutil import running_broker

KEY_NAME, KEY = "RootManageSharedAccessKey", "SAS_KEY_VALUE"
SB = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
CONFIG = BrokerConfig((NamespaceConfig(topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("s"),)),)),))


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(CONFIG, http_port=0) as broker:
        yield broker


@pytest.fixture(scope="module")
def http(broker: Broker) -> Iterator[requests.Session]:
    session = requests.Session()
    session.trust_env = False  # else REQUESTS_CA_BUNDLE in the environment replaces session.verify
    session.verify = broker.http_ca
    session.headers["Authorization"] = token(broker)
    yield session
    session.close()


def base(broker: Broker) -> str:
    return f"https://127.0.0.1:{broker.http_port}"


def token(broker: Broker, *, key_name: str = KEY_NAME, key: str = KEY, ttl: int = 3600, audience: str = "") -> str:
    return generate_sas_token(audience or base(broker), key_name, key, int(time.time()) + ttl)


def entry(description: str) -> bytes:
    return (
        f'<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">{description}</content></entry>'
    ).encode()


def error_of(response: requests.Response) -> tuple[int, str]:
    root = ET.fromstring(response.content)
    assert root.tag == "Error"
    return int(root.findtext("Code") or 0), root.findtext("Detail") or ""


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer abc",
        "SharedAccessSignature sr=x",
        "wrong-key",
        "unknown-key-name",
        "expired",
        "other-audience",
    ],
)
def test_unauthorised_requests_get_401(broker: Broker, header: str | None) -> None:
    headers = {}
    if header == "wrong-key":
        header = token(broker, key="not-the-key")
    elif header == "unknown-key-name":
        header = token(broker, key_name="someone")
    elif header == "expired":
        header = token(broker, ttl=-10)
    elif header == "other-audience":
        header = token(broker, audience="https://elsewhere.example")
    if header is not None:
        headers["Authorization"] = header
    for method, path, body in (
        ("GET", "/$Resources/queues", None),
        ("PUT", "/sneaky", entry(f'<QueueDescription xmlns="{SB}"/>')),
    ):
        response = requests.request(
            method, base(broker) + path, headers=headers, data=body, verify=broker.http_ca, timeout=10
        )
        assert response.status_code == 401
        assert error_of(response)[0] == 401
    assert "sneaky" not in broker.namespace.queues


def test_body_size_is_bounded(broker: Broker, http: requests.Session) -> None:
    padding = "x" * MAX_BODY
    body = entry(f'<QueueDescription xmlns="{SB}"><UserMetadata>{padding}</UserMetadata></QueueDescription>')
    response = http.put(base(broker) + "/big", data=body, timeout=10)
    assert response.status_code == 413 and "larger than" in error_of(response)[1]
    chunked = http.put(base(broker) + "/big", data=iter([body[:1000], body[1000:]]), timeout=10)  # no Content-Length
    assert chunked.status_code == 413
    assert "big" not in broker.namespace.queues


def test_doctype_and_entities_are_refused(broker: Broker, http: requests.Session) -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE e [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        b'<entry xmlns="http://www.w3.org/2005/Atom"><content><QueueDescription xmlns="' + SB.encode() + b'">'
        b"<UserMetadata>&b;</UserMetadata></QueueDescription></content></entry>"
    )
    response = http.put(base(broker) + "/laughs", data=laughs, timeout=10)
    assert response.status_code == 400 and "DOCTYPE" in error_of(response)[1]
    external = b'<!DOCTYPE e SYSTEM "file:///etc/passwd"><entry/>'
    assert http.put(base(broker) + "/laughs", data=external, timeout=10).status_code == 400
    assert "laughs" not in broker.namespace.queues


def test_bad_values_name_the_element(broker: Broker, http: requests.Session) -> None:
    response = http.put(
        base(broker) + "/badq",
        data=entry(f'<QueueDescription xmlns="{SB}"><LockDuration>PT1X</LockDuration></QueueDescription>'),
        timeout=10,
    )
    assert response.status_code == 400
    assert "QueueDescription.LockDuration: 'PT1X' is not an ISO-8601 duration" in error_of(response)[1]
    ok = http.put(
        base(broker) + "/sessq",
        data=entry(f'<QueueDescription xmlns="{SB}"><RequiresSession>true</RequiresSession></QueueDescription>'),
        timeout=10,
    )
    assert ok.status_code == 201
    change = http.put(
        base(broker) + "/sessq",
        data=entry(f'<QueueDescription xmlns="{SB}"><RequiresSession>false</RequiresSession></QueueDescription>'),
        headers={"If-Match": "*"},
        timeout=10,
    )
    assert change.status_code == 400 and "RequiresSession" in error_of(change)[1]
    missing = http.put(
        base(broker) + "/nosuch", data=entry(f'<QueueDescription xmlns="{SB}"/>'), headers={"If-Match": "*"}, timeout=10
    )
    assert missing.status_code == 404
    assert http.delete(base(broker) + "/sessq", timeout=10).status_code == 200


def test_bad_sql_filter_names_the_position(broker: Broker, http: requests.Session) -> None:
    rule = (
        f'<RuleDescription xmlns="{SB}" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">'
        '<Filter i:type="SqlFilter"><SqlExpression>a IN (1, 2</SqlExpression></Filter></RuleDescription>'
    )
    response = http.put(base(broker) + "/t/subscriptions/s/rules/bad", data=entry(rule), timeout=10)
    code, detail = error_of(response)
    assert response.status_code == code == 400
    assert "position 11" in detail  # just past the 10 characters
    assert [r.name for r in broker.namespace.subscription("t", "s").rules] == ["$Default"]


# -- fuzzing ------------------------------------------------------------------------
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
QUEUE_FIELDS = [
    "LockDuration", "MaxSizeInMegabytes", "RequiresDuplicateDetection", "RequiresSession", "DefaultMessageTimeToLive",
    "DeadLetteringOnMessageExpiration", "DuplicateDetectionHistoryTimeWindow", "MaxDeliveryCount", "ForwardTo",
    "UserMetadata", "AutoDeleteOnIdle", "EnableBatchedOperations", "Status", "MaxMessageSizeInKilobytes", "Unknown",
]  # fmt: skip
values = st.one_of(
    st.sampled_from(
        [
            "PT1M",
            "PT0S",
            "-PT1M",
            "P10675199DT2H48M5.4775807S",
            "true",
            "false",
            "0",
            "-1",
            "10",
            "99999999999999",
            "",
            "Active",
            "Disabled",
        ]
    ),
    st.text(max_size=30),
)
texts = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@pytest.mark.fuzz
@FUZZ
@given(body=st.binary(max_size=400))
def test_random_bytes_get_400(broker: Broker, http: requests.Session, body: bytes) -> None:
    response = http.put(base(broker) + "/fuzzbytes", data=body, timeout=10)
    assert response.status_code == 400
    assert error_of(response)[0] == 400


@pytest.mark.fuzz
@FUZZ
@given(
    fields=st.lists(st.tuples(st.sampled_from(QUEUE_FIELDS), values), max_size=8),
    kind=st.sampled_from(["QueueDescription", "TopicDescription"]),
)
def test_fuzzed_descriptions_get_201_or_400(
    broker: Broker, http: requests.Session, fields: list[tuple[str, str]], kind: str
) -> None:
    inner = "".join(f"<{name}>{_escape(value)}</{name}>" for name, value in fields)
    response = http.put(base(broker) + "/fuzzq", data=entry(f'<{kind} xmlns="{SB}">{inner}</{kind}>'), timeout=10)
    assert response.status_code in (201, 400), response.text
    if response.status_code == 201:
        assert http.get(base(broker) + "/fuzzq", timeout=10).status_code == 200
        assert http.delete(base(broker) + "/fuzzq", timeout=10).status_code == 200
    else:
        assert error_of(response)[0] == 400


@pytest.mark.fuzz
@FUZZ
@given(
    filter_type=st.sampled_from(["SqlFilter", "CorrelationFilter", "TrueFilter", "FalseFilter", "Nope", ""]),
    expression=texts,
    action=st.one_of(st.none(), texts),
    props=st.lists(
        st.tuples(
            texts,
            st.sampled_from(["d6p1:int", "d6p1:string", "d6p1:double", "d6p1:boolean", "d6p1:dateTime", "x"]),
            texts,
        ),
        max_size=3,
    ),
)
def test_fuzzed_rules_get_201_or_400(
    broker: Broker,
    http: requests.Session,
    filter_type: str,
    expression: str,
    action: str | None,
    props: list[tuple[str, str, str]],
) -> None:
    pairs = "".join(
        f'<KeyValueOfstringanyType><Key>{_escape(k)}</Key><Value i:type="{t}">{_escape(v)}</Value>'
        "</KeyValueOfstringanyType>"
        for k, t, v in props
    )
    body = (
        f'<Filter i:type="{filter_type}"><SqlExpression>{_escape(expression)}</SqlExpression>'
        f"<CorrelationId>{_escape(expression)}</CorrelationId><Properties>{pairs}</Properties></Filter>"
    )
    if action is not None:
        body += f'<Action i:type="SqlRuleAction"><SqlExpression>{_escape(action)}</SqlExpression></Action>'
    description = (
        f'<RuleDescription xmlns="{SB}" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">{body}</RuleDescription>'
    )
    response = http.put(base(broker) + "/t/subscriptions/s/rules/fuzz", data=entry(description), timeout=10)
    assert response.status_code in (201, 400), response.text
    if response.status_code == 201:
        assert http.get(base(broker) + "/t/subscriptions/s/rules/fuzz", timeout=10).status_code == 200
        assert http.delete(base(broker) + "/t/subscriptions/s/rules/fuzz", timeout=10).status_code == 200


@pytest.mark.fuzz
@FUZZ
@given(
    method=st.sampled_from(["GET", "PUT", "DELETE", "POST", "PATCH"]),
    path=st.lists(
        st.sampled_from(
            [
                "t",
                "s",
                "subscriptions",
                "rules",
                "$Resources",
                "queues",
                "x",
                "$namespaceinfo",
                "",
                "..",
                "%00",
                "a" * 300,
            ]
        ),
        max_size=6,
    ),
    query=st.sampled_from(["", "?$skip=-1", "?$top=0", "?$skip=x", "?$top=5&$skip=2", "?api-version=2021-05"]),
)
def test_fuzzed_routes_never_fail_inside(
    broker: Broker, http: requests.Session, method: str, path: list[str], query: str
) -> None:
    url = base(broker) + "/" + "/".join(path) + query
    response = http.request(method, url, data=b"" if method == "PUT" else None, timeout=10)
    assert response.status_code < 500, (url, response.text)
    if response.status_code >= 400:
        assert error_of(response)[0] == response.status_code
    names = {q.name for q in broker.namespace.queues.values()} | {t.name for t in broker.namespace.topics.values()}
    assert names <= {"t"}  # an empty PUT creates nothing (a DELETE of /t may remove the topic)
