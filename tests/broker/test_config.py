"""The emulator's Config.json: parsed unchanged, defaults as Service Bus, one clear error."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import (
    BrokerConfig,
    ConfigError,
    CorrelationFilter,
    EntityProperties,
    load_config,
    parse_config,
    parse_duration,
)

EMULATOR_SAMPLE = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {
                        "Name": "queue.1",
                        "Properties": {
                            "DeadLetteringOnMessageExpiration": False,
                            "DefaultMessageTimeToLive": "PT1H",
                            "DuplicateDetectionHistoryTimeWindow": "PT20S",
                            "ForwardDeadLetteredMessagesTo": "",
                            "ForwardTo": "",
                            "LockDuration": "PT1M",
                            "MaxDeliveryCount": 3,
                            "RequiresDuplicateDetection": False,
                            "RequiresSession": False,
                        },
                    }
                ],
                "Topics": [
                    {
                        "Name": "topic.1",
                        "Properties": {
                            "DefaultMessageTimeToLive": "PT1H",
                            "DuplicateDetectionHistoryTimeWindow": "PT20S",
                            "RequiresDuplicateDetection": False,
                        },
                        "Subscriptions": [
                            {
                                "Name": "subscription.1",
                                "Properties": {"LockDuration": "PT30S", "MaxDeliveryCount": 3, "RequiresSession": True},
                                "Rules": [
                                    {
                                        "Name": "app-prop-filter-1",
                                        "Properties": {
                                            "FilterType": "Correlation",
                                            "CorrelationFilter": {
                                                "ContentType": "application/text",
                                                "CorrelationId": "id1",
                                                "Label": "subject1",
                                                "MessageId": "msgid1",
                                                "ReplyTo": "someQueue",
                                                "ReplyToSessionId": "sessionId",
                                                "SessionId": "session1",
                                                "To": "xyz",
                                                "Properties": {"prop1": "value1"},
                                            },
                                        },
                                    }
                                ],
                            },
                            {
                                "Name": "subscription.2",
                                "Rules": [
                                    {
                                        "Name": "sql",
                                        "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "1=1"}},
                                    }
                                ],
                            },
                        ],
                    }
                ],
            }
        ],
        "Logging": {"Type": "File"},
    }
}


def test_emulator_sample_file(tmp_path: Any) -> None:
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(EMULATOR_SAMPLE))
    config = load_config(path)
    ns = config.namespaces[0]
    assert ns.name == "sbemulatorns"
    q = ns.queues[0]
    assert q.name == "queue.1"
    assert q.properties.lock_duration == 60.0
    assert q.properties.max_delivery_count == 3
    assert q.properties.default_message_ttl == 3600.0
    assert q.properties.duplicate_detection_window == 20.0
    assert q.properties.forward_to is None and q.properties.forward_dead_lettered_messages_to is None
    sub1, sub2 = ns.topics[0].subscriptions
    assert sub1.properties.requires_session and sub1.properties.lock_duration == 30.0
    rule = sub1.rules[0]
    assert rule.filter_type == "Correlation"
    assert rule.correlation == CorrelationFilter(
        correlation_id="id1", message_id="msgid1", to="xyz", reply_to="someQueue", subject="subject1",
        session_id="session1", reply_to_session_id="sessionId", content_type="application/text",
        properties=(("prop1", "value1"),),
    )  # fmt: skip
    assert sub2.rules[0].filter_type == "True"


def test_defaults_are_service_bus_defaults() -> None:
    p = EntityProperties()
    assert (p.lock_duration, p.max_delivery_count, p.duplicate_detection_window) == (60.0, 10, 600.0)
    assert p.default_message_ttl == math.inf and p.max_message_size == 256 * 1024
    assert parse_config({"UserConfig": {}}) == BrokerConfig()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("PT1M", 60.0), ("PT30S", 30.0), ("PT1H", 3600.0), ("P1D", 86400.0), ("P1DT1H1M1.5S", 90061.5),
     ("P10675199DT2H48M5.4775807S", 10675199 * 86400 + 2 * 3600 + 48 * 60 + 5.4775807), ("P1W", 604800.0)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["PT1X", "P", "PT", "1M", "PT-1S", "", "P1H", "pt1m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ConfigError, match="is not an ISO-8601 duration"):
        parse_duration(text)


def test_error_names_the_field_path() -> None:
    doc = json.loads(json.dumps(EMULATOR_SAMPLE))
    doc["UserConfig"]["Namespaces"][0]["Queues"] += [
        {"Name": "b"},
        {"Name": "c", "Properties": {"LockDuration": "PT1X"}},
    ]
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert str(info.value) == (
        "UserConfig.Namespaces[0].Queues[2].Properties.LockDuration: 'PT1X' is not an ISO-8601 duration"
    )


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"MaxDeliveryCount": 0}, "Properties.MaxDeliveryCount"),
        ({"MaxDeliveryCount": "3"}, "Properties.MaxDeliveryCount"),
        ({"RequiresSession": "yes"}, "Properties.RequiresSession"),
        ({"LockDuration": "PT10M"}, "Properties.LockDuration"),
        ({"ForwardTo": 3}, "Properties.ForwardTo"),
    ],
)
def test_bad_property_values(patch: dict[str, Any], where: str) -> None:
    doc = {"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": patch}]}]}}
    with pytest.raises(ConfigError, match=f"^UserConfig.Namespaces\\[0\\].Queues\\[0\\].{where}: "):
        parse_config(doc)


def test_bad_file(tmp_path: Any) -> None:
    path = tmp_path / "Config.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json")


def test_duplicate_and_unknown_filter_type() -> None:
    with pytest.raises(ConfigError, match=r"Queues\[1\].Name: 'Q' appears twice"):
        parse_config({"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q"}, {"Name": "Q"}]}]}})
    rule = {"Name": "r", "Properties": {"FilterType": "Regex"}}
    doc = {
        "UserConfig": {"Namespaces": [{"Topics": [{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [rule]}]}]}]}
    }
    with pytest.raises(ConfigError, match=r"Rules\[0\].Properties.FilterType: 'Regex' is not"):
        parse_config(doc)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
keys = st.sampled_from(
    ["UserConfig", "Namespaces", "Queues", "Topics", "Subscriptions", "Rules", "Name", "Properties", "LockDuration",
     "MaxDeliveryCount", "FilterType", "CorrelationFilter", "SqlFilter", "RequiresSession", "ForwardTo", "Logging"]
)  # fmt: skip
shaped = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["PT1M", "PT1X", "Correlation", "Sql", "q", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=30,
)


@settings(deadline=None)
@given(st.one_of(json_values, shaped))
def test_fuzz_parser_raises_only_config_error(document: Any) -> None:
    with contextlib.suppress(ConfigError):
        parse_config(document)


@settings(deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.from_regex(r"P(\d{1,400}[YMWD])*(T(\d{1,3}(\.\d{1,9})?[HMS])*)?", fullmatch=True),
        json_values,
    )
)
def test_fuzz_duration_raises_only_config_error(text: Any) -> None:
    try:
        seconds = parse_duration(text)
    except ConfigError:
        return
    assert seconds >= 0 and math.isfinite(seconds)


def test_a_config_with_two_namespaces_serves_both() -> None:
    """Every namespace is served (tests/broker/test_config_namespaces.py); the first is the default."""
    from amqplink.broker.server import _servicebus_host

    config = parse_config(
        {"UserConfig": {"Namespaces": [{"Name": "first", "Queues": [{"Name": "q1"}]}, {"Name": "second"}]}}
    )
    host = _servicebus_host(config, None, None, 100, None)
    assert host.namespace.queue("q1").name == "q1"
    assert [h.namespace.name for h in host.hosts] == ["first", "second"]
    assert host.route("second.localhost") is host.others[0]
    assert host.route("SECOND") is host.others[0]
    assert host.route("localhost") is host and host.route("first.localhost") is host and host.route(None) is host
