"""The SQL filter subset: three-valued logic, the operators, refusals at load time."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import (
    ConfigError,
    NamespaceConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
    parse_config,
)
from amqplink.broker.namespace import Namespace
from amqplink.broker.sqlfilter import SqlFilterError, compile_sql_filter, mapping_getter
from tests.broker.nsutil import send

SYSTEM = {"messageid": "123456", "label": "red", "contenttype": "application/json"}
APP = {"userProp1": "value1", "n": 5, "f": 2.5, "flag": True, "name": "it's"}


def matches(expression: str, system: dict[str, Any] = SYSTEM, app: dict[str, Any] = APP) -> bool:
    return compile_sql_filter(expression)(mapping_getter(system, app))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("sys.MessageId = '123456' AND userProp1 = 'value1'", True),  # the emulator's sample rule
        ("sys.Label = 'blue' OR user.n > 4", True),
        ("n >= 5 AND n <= 5 AND n <> 4 AND n != 6 AND f < 3", True),
        ("NOT (n = 5)", False),
        ("missing = 1", False),
        ("NOT missing = 1", False),  # unknown stays unknown
        ("missing = 1 OR n = 5", True),
        ("missing IS NULL AND n IS NOT NULL", True),
        ("EXISTS(n) AND NOT EXISTS(missing)", True),
        ("sys.ContentType LIKE 'application/%' AND sys.Label LIKE 'r_d'", True),
        ("sys.Label NOT LIKE 'r%'", False),
        ("n IN (1, 5, 9) AND sys.Label NOT IN ('blue', 'green')", True),
        ("flag = TRUE AND flag <> FALSE", True),
        ("name = 'it''s'", True),
        ("[userProp1] = 'value1'", True),
        ("1=1", True),
        ("n = 'five'", False),
    ],
)
def test_expressions(expression: str, expected: bool) -> None:
    assert matches(expression) is expected


@pytest.mark.parametrize(
    "expression",
    ["n +", "n = ", "(n = 1", "sys.Nope = 1", "a.b = 1", "n = 1 extra", "NOT LIKE 'x'", "n ~ 1", "x" * 2000,
     "(" * 40 + "n = 1" + ")" * 40],
)  # fmt: skip
def test_refused_expressions(expression: str) -> None:
    with pytest.raises(SqlFilterError):
        compile_sql_filter(expression)


def test_config_names_a_bad_sql_expression() -> None:
    rule = {"Name": "r", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "n = "}}}
    doc = {
        "UserConfig": {"Namespaces": [{"Topics": [{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [rule]}]}]}]}
    }
    with pytest.raises(ConfigError, match=r"Rules\[0\]\.Properties\.SqlFilter\.SqlExpression: expected"):
        parse_config(doc)


def test_topic_subscription_with_a_sql_rule() -> None:
    rule = RuleConfig("r", "Sql", sql_expression="sys.MessageId = '123456' AND userProp1 = 'value1'")
    ns = Namespace(NamespaceConfig(topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("s", rules=(rule,)),)),)))
    send(ns, "t", message_id="123456", application_properties={"userProp1": "value1"})
    send(ns, "t", message_id="123456", application_properties={"userProp1": "other"})
    send(ns, "t", message_id="999", application_properties={"userProp1": "value1"})
    assert len(ns.receiver_source("t/Subscriptions/s").store) == 1


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("()[]',=<>! .%_abnNOTANDORISLIKEXSsy0123456789")), max_size=40))
def test_fuzz_only_sql_filter_error(expression: str) -> None:
    try:
        predicate = compile_sql_filter(expression)
    except SqlFilterError:
        return
    assert predicate(mapping_getter(SYSTEM, APP)) in (True, False)
