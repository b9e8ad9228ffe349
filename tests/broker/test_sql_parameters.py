"""SQL filters and rule actions with ``@name`` parameters (issue 24, C.8), as the official
``mgmt_rule`` sample creates them (``SqlRuleFilter("property1 = @param1 AND property2 =
@param2", parameters={"@param1": "value", "@param2": 1})``).

Service Bus's SQL filter syntax: ``<constant>`` includes parameters, "@<parameter_name>"
(``SqlFilter.Parameters``: "the parameters of the SQL expression"); a rule action likewise
(``SqlRuleAction.Parameters``). The values are fixed with the rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.broker.config import (
    ConfigError,
    NamespaceConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
    load_config,
)
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.envelope import Envelope, split_message
from amqplink.broker.namespace.sql.filter import SqlFilter, SqlFilterError, SqlRuleAction
from tests.broker.nsutil import payload, send


def envelope(**app: Any) -> Envelope:
    return split_message(payload(b"x", application_properties=app))


def test_a_filter_compares_with_its_parameters() -> None:
    sql = SqlFilter("property1 = @param1 AND property2 = @param2", {"@param1": "value", "@param2": 1})
    assert sql.matches(envelope(property1="value", property2=1))
    assert not sql.matches(envelope(property1="value", property2=2))
    assert not sql.matches(envelope(property1="other", property2=1))


def test_parameter_names_are_case_insensitive_with_or_without_the_at() -> None:
    sql = SqlFilter("color = @Color OR size > @min", {"color": "red", "@MIN": 10})
    assert sql.matches(envelope(color="red")) and sql.matches(envelope(size=11))
    assert not sql.matches(envelope(color="blue", size=10))


def test_parameters_in_in_lists_like_patterns_and_arithmetic() -> None:
    sql = SqlFilter("region IN (@a, @b) AND name LIKE @prefix AND price * @rate > 100", {
        "@a": "fr", "@b": "de", "@prefix": "EU-%", "@rate": 2.5,
    })  # fmt: skip
    assert sql.matches(envelope(region="de", name="EU-1", price=41))
    assert not sql.matches(envelope(region="de", name="EU-1", price=40))
    assert not sql.matches(envelope(region="it", name="EU-1", price=41))


def test_a_boolean_parameter_is_a_condition() -> None:
    assert SqlFilter("@on", {"@on": True}).matches(envelope())
    assert not SqlFilter("@on", {"@on": False}).matches(envelope())


def test_a_missing_parameter_is_refused_with_its_position() -> None:
    with pytest.raises(SqlFilterError) as info:
        SqlFilter("a = 1 AND b = @missing", {"@other": 1})
    assert info.value.position == 15 and "@missing" in str(info.value) and "@other" in str(info.value)
    with pytest.raises(SqlFilterError, match="'@' and a name"):
        SqlFilter("a = @", {})


def test_an_action_sets_properties_from_its_parameters() -> None:
    action = SqlRuleAction("SET level = @level; SET sys.Label = @label", {"@level": 3, "@label": "routed"})
    out = action.apply(envelope(a=1), "rule")
    assert out.application_properties == {"a": 1, "level": 3, "RuleName": "rule"}
    assert out.properties is not None and out.properties.subject == "routed"


def test_equal_only_with_equal_parameters() -> None:
    assert SqlFilter("a = @p", {"@p": 1}) == SqlFilter("a = @p", {"p": 1})
    assert SqlFilter("a = @p", {"@p": 1}) != SqlFilter("a = @p", {"@p": 2})


@given(value=st.one_of(st.integers(-(2**63) + 1, 2**63 - 1), st.text(max_size=20), st.booleans()))
def test_a_parameter_is_the_constant_it_stands_for(value: Any) -> None:
    """``x = @p`` with ``{"@p": v}`` decides as ``x = <v as a literal>`` for the same message
    (-2**63 has no literal: 2**63 is out of range before the sign applies)."""
    literal = (
        repr(value).upper()
        if isinstance(value, bool)
        else ("'" + value.replace("'", "''") + "'" if isinstance(value, str) else str(value))
    )
    with_parameter = SqlFilter("x = @p", {"@p": value})
    with_literal = SqlFilter(f"x = {literal}")
    for message in (envelope(x=value), envelope(x="other"), envelope(x=0), envelope()):
        assert with_parameter.evaluate(message) == with_literal.evaluate(message)


def test_a_subscription_rule_with_parameters_routes_and_acts() -> None:
    rule = RuleConfig(
        "priced",
        "Sql",
        sql_expression="kind = @kind",
        action_expression="SET tier = @tier",
        parameters={"@kind": "order"},
        action_parameters={"@tier": "gold"},
    )
    ns = Namespace(NamespaceConfig(topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("s", rules=(rule,)),)),)))
    send(ns, "t", application_properties={"kind": "order"})
    send(ns, "t", application_properties={"kind": "refund"})
    sub = ns.receiver_source("t/Subscriptions/s")
    held = [m.envelope.application_properties for m in sub.peek(0, 10, 0)]
    assert held == [{"kind": "order", "tier": "gold", "RuleName": "priced"}]


def test_config_json_parameters(tmp_path: Path) -> None:
    rule = {
        "Name": "by-color",
        "Properties": {
            "FilterType": "Sql",
            "SqlFilter": {"SqlExpression": "color = @color", "Parameters": {"@color": "red"}},
            "Action": {"SqlExpression": "SET seen = @seen", "Parameters": {"@seen": True}},
        },
    }
    doc = {"UserConfig": {"Namespaces": [{"Name": "ns", "Topics": [
        {"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [rule]}]},
    ]}]}}  # fmt: skip
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(doc))
    (loaded,) = load_config(path).namespaces[0].topics[0].subscriptions[0].rules
    assert loaded.sql_filter is not None and loaded.sql_filter.matches(envelope(color="red"))
    assert loaded.action is not None
    assert loaded.action.apply(envelope(color="red"), "by-color").application_properties == {
        "color": "red", "seen": True, "RuleName": "by-color",
    }  # fmt: skip
    rule["Properties"]["SqlFilter"]["Parameters"] = {"@color": ["red"]}  # type: ignore[index]
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=r"SqlFilter\.Parameters\.@color"):
        load_config(path)


@pytest.mark.sdk
def test_the_official_sdk_sees_a_parametrized_rule_route_and_act(tmp_path: Path) -> None:
    """A topic whose subscription's rule has parameters (Config.json): what the official
    SDK sends is routed by them and the action's parameter is set on the copy."""
    from azure.servicebus import ServiceBusClient, ServiceBusMessage

    from tests.broker.sdkutil import running_broker

    rule = {
        "Name": "param-rule",
        "Properties": {
            "FilterType": "Sql",
            "SqlFilter": {"SqlExpression": "property1 = @param1 AND property2 = @param2",
                          "Parameters": {"@param1": "value", "@param2": 1}},
            "Action": {"SqlExpression": "SET routed = @by", "Parameters": {"@by": "param-rule"}},
        },
    }  # fmt: skip
    doc = {"UserConfig": {"Namespaces": [{"Name": "ns", "Topics": [
        {"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [rule]}]},
    ]}]}}  # fmt: skip
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(doc))
    with (
        running_broker(load_config(path)) as broker,
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
    ):
        with client.get_topic_sender("t") as sender:
            sender.send_messages(
                [
                    ServiceBusMessage("match", application_properties={"property1": "value", "property2": 1}),
                    ServiceBusMessage("miss", application_properties={"property1": "value", "property2": 2}),
                ]
            )
        with client.get_subscription_receiver("t", "s", max_wait_time=5) as receiver:
            got = receiver.receive_messages(max_message_count=10, max_wait_time=5)
            assert [str(m) for m in got] == ["match"]
            assert got[0].application_properties is not None
            assert got[0].application_properties[b"routed"] == b"param-rule"
            receiver.complete_message(got[0])
