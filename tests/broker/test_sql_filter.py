"""Service Bus SQL filters: evaluation table, error positions, fuzzing, three-valued NOT, wiring."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
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
from amqplink.broker.namespace.envelope import Envelope, split_message
from amqplink.broker.namespace.sql.filter import (
    MAX_SQL_DEPTH,
    MAX_SQL_LENGTH,
    SqlFilter,
    SqlFilterError,
    SqlRuleAction,
)
from amqplink.broker.namespace.sql.rules import rules_match
from amqplink.codec.types import Long, Symbol
from tests.broker.nsutil import delivered, payload, send


def envelope(**friendly: Any) -> Envelope:
    return split_message(payload(**friendly))


ORDER = envelope(
    message_id="order-17",
    correlation_id="corr-1",
    subject="Sales",
    to="store-5",
    reply_to="replies",
    session_id="s1",
    reply_to_group_id="rs1",
    content_type="application/json",
    application_properties={
        "Color": "red",
        "size": "L",
        "quantity": Long(12),
        "price": 9.5,
        "priority": 3,
        "vip": True,
        "note": None,
        "path": "50%_off",
        "Property With Space": "yes",
        "HR-EmployeeID": 7,
    },
    message_annotations={Symbol("x-opt-partition-key"): "pk-1"},
)
BARE = envelope()

# (expression, expected for ORDER, expected for BARE): True matches, False/None (unknown) do not
TABLE: list[tuple[str, bool | None, bool | None]] = [
    ("1=1", True, True),
    ("1 = 0", False, False),
    ("TRUE", True, True),
    ("false", False, False),
    ("color = 'red'", True, None),
    ("COLOR = 'red'", True, None),  # "Property names are case-insensitive"
    ("user.Color = 'red'", True, None),
    ("[user].[Color] = 'red'", True, None),
    ("color = 'RED'", False, None),  # string values compare exactly
    ("color <> 'blue'", True, None),
    ("color != 'red'", False, None),
    ("quantity > 10", True, None),
    ("quantity >= 12 AND quantity <= 12", True, None),
    ("quantity < 12", False, None),
    ("price > 9", True, None),
    ("price = 9.5", True, None),
    ("quantity = 12.0", True, None),  # long and double mix
    ("price < 1e1", True, None),
    ("quantity + 1 = 13", True, None),
    ("quantity - 2 * 3 = 6", True, None),  # * binds tighter than -
    ("(quantity - 2) * 3 = 30", True, None),
    ("quantity / 5 = 2", True, None),  # integer division truncates
    ("-quantity / 5 = -2", True, None),
    ("quantity % 5 = 2", True, None),
    ("-quantity % 5 = -2", True, None),
    ("price * 2 = 19", True, None),
    ("quantity / 0 = 1", None, None),  # C# throws; unknown here
    ("-price < 0", True, None),
    ("+quantity = 12", True, None),
    ("size + color = 'Lred'", True, None),
    ("'n' + priority = 'n3'", True, None),
    ("vip = TRUE", True, None),
    ("vip = true AND NOT vip = false", True, None),
    ("vip > FALSE", None, None),  # booleans are not ordered
    ("quantity = '12'", None, None),  # a number and a string do not compare
    ("sys.Label = 'Sales'", True, None),
    ("sys.Subject = 'Sales'", True, None),
    ("sys.label LIKE 'Sal%'", True, None),
    ("sys.MessageId = 'order-17'", True, None),
    ("sys.CorrelationId = 'corr-1'", True, None),
    ("sys.To = 'store-5'", True, None),
    ("sys.ReplyTo = 'replies'", True, None),
    ("sys.SessionId = 's1'", True, None),
    ("sys.ReplyToSessionId = 'rs1'", True, None),
    ("sys.ContentType = 'application/json'", True, None),
    ("sys.PartitionKey = 'pk-1'", True, None),
    ("sys.To IN ('store-1', 'store-5')", True, None),
    ("sys.To NOT IN ('store-1', 'store-5')", False, None),
    ("sys.To IN ('store-1') OR color = 'red'", True, None),
    ("priority IN (1, 2, 3)", True, None),
    ("priority IN ('3')", False, None),
    ("color LIKE 'r_d'", True, None),
    ("color LIKE 'r%'", True, None),
    ("color LIKE '%e%'", True, None),
    ("color LIKE '%x%'", False, None),
    ("color NOT LIKE 'b%'", True, None),
    ("color LIKE 'R%'", False, None),
    ("path LIKE '50!%!_off' ESCAPE '!'", True, None),
    ("path LIKE '50!%!_of' ESCAPE '!'", False, None),
    ("path LIKE '%!%%' ESCAPE '!'", True, None),
    ("path LIKE '50%off'", True, None),
    ("quantity LIKE '1%'", None, None),  # LIKE needs a string
    ("note IS NULL", True, True),
    ("note IS NOT NULL", False, False),
    ("missing IS NULL", True, True),
    ("color IS NOT NULL", True, False),
    ("EXISTS(note)", True, False),  # present with a null value
    ("EXISTS(color) AND NOT EXISTS(missing)", True, False),
    ("NOT EXISTS(color)", False, True),
    ("EXISTS(sys.To)", True, False),
    ("missing = 1", None, None),
    ("NOT missing = 1", None, None),
    ("note = NULL", None, None),
    ("missing = 1 OR color = 'red'", True, None),
    ("missing = 1 AND color = 'red'", None, None),
    ("missing = 1 AND color = 'blue'", False, None),
    ("missing = 1 OR 1 = 0", None, None),
    ("color = 'red' OR color = 'blue' AND size = 'S'", True, None),  # AND binds tighter than OR
    ("(color = 'red' OR color = 'blue') AND size = 'S'", False, None),
    ("NOT color = 'blue' AND size = 'L'", True, None),
    ("NOT (color = 'red' AND size = 'L')", False, None),
    ("[Property With Space] = 'yes'", True, None),
    ('"HR-EmployeeID" = 7', True, None),
    ("user.[HR-EmployeeID] + 1 = 8", True, None),
    ("color = 'it''s'", False, None),
    ("1 + 2 * 3 = 7", True, True),
    ("10 / 4 = 2.5", False, False),
    ("10.0 / 4 = 2.5", True, True),
]


@pytest.mark.parametrize(("expression", "on_order", "on_bare"), TABLE)
def test_expression_table(expression: str, on_order: bool | None, on_bare: bool | None) -> None:
    flt = SqlFilter(expression)
    assert flt.evaluate(ORDER) is on_order
    assert flt.evaluate(BARE) is on_bare
    assert flt.matches(ORDER) is (on_order is True)


def test_like_is_linear_on_a_hostile_pattern() -> None:
    flt = SqlFilter("v LIKE '" + "%a" * 200 + "%b'")
    text = "a" * 20_000
    assert flt.evaluate(envelope(application_properties={"v": text})) is False
    assert flt.evaluate(envelope(application_properties={"v": text + "b"})) is True


@pytest.mark.parametrize(
    ("expression", "position", "reason"),
    [
        ("color = 'red' AND size =", 25, "expected a value after '=', found end of expression"),
        ("color", 1, "expected a condition (a comparison, IN, LIKE, IS NULL or EXISTS), found a value"),
        ("color 'red'", 7, "expected an operator, found a string"),
        ("color = 'red' AND", 18, "after 'AND', found end of expression"),
        ("color = 'red' OR size", 18, "after 'OR', found a value"),
        ("(color = 'red'", 15, "expected ')' or an operator, found end of expression"),
        ("color = 'red')", 14, "expected AND, OR or the end of the expression, found ')'"),
        ("sys.Nope = 1", 5, "sys.Nope is not a Service Bus system property"),
        ("sys.EnqueuedTimeUtc > 0", 5, "not available to filters"),
        ("other.x = 1", 1, "expected sys or user before '.'"),
        ("color = 'red", 9, "unterminated string"),
        ("[color = 1", 1, "unterminated delimited name"),
        ("color = #", 9, "unexpected character '#'"),
        ("n = 99999999999999999999", 5, "out of range for a 64-bit integer"),
        ("n = 12abc", 7, "unexpected 'a' after a number"),
        ("color IN ()", 11, "expected a value after '(', found ')'"),
        ("color IN ('a' 'b')", 15, "expected ',' or ')' in the IN list"),
        ("color IN 'a'", 10, "expected '(' after 'IN'"),
        ("color NOT = 'a'", 11, "expected IN or LIKE after 'NOT'"),
        ("color IS 'x'", 10, "expected NULL after 'IS'"),
        ("color + 1 IS NULL", 1, "IS NULL applies to a property"),
        ("color LIKE 5", 12, "the LIKE pattern must be a string"),
        ("color LIKE 'a!' ESCAPE '!'", 12, "ends with the escape character"),
        ("color LIKE 'a' ESCAPE '!!'", 23, "ESCAPE character must be a string of length 1"),
        ("EXISTS(1)", 8, "expected a property name after '('"),
        ("EXISTS(color", 13, "expected ')'"),
        ("(a = 1) + 1 = 2", 1, "expected a value before '+', found a condition"),
        ("NOT", 4, "after 'NOT', found end of expression"),
        ("", 1, "found end of expression"),
        ("   ", 4, "found end of expression"),
        ("a = 1 = 2", 7, "expected AND, OR or the end of the expression, found '='"),
        ("sys. = 1", 6, "expected a property name after '.'"),
        ("a < > 1", 5, "expected a value after '<', found '>'"),
    ],
)
def test_error_positions(expression: str, position: int, reason: str) -> None:
    with pytest.raises(SqlFilterError) as info:
        SqlFilter(expression)
    assert info.value.position == position, str(info.value)
    assert reason in str(info.value)
    assert str(info.value).startswith(f"position {position}: ")


def test_length_and_nesting_are_bounded() -> None:
    deep = "(" * (MAX_SQL_DEPTH + 1) + "a = 1" + ")" * (MAX_SQL_DEPTH + 1)
    with pytest.raises(SqlFilterError, match=f"nests deeper than {MAX_SQL_DEPTH}"):
        SqlFilter(deep)
    ok = "(" * MAX_SQL_DEPTH + "a = 1" + ")" * MAX_SQL_DEPTH
    assert SqlFilter(ok).evaluate(envelope(application_properties={"a": 1})) is True
    for hostile in ("NOT " * (MAX_SQL_DEPTH + 1) + "a = 1", "a = " + "-" * (MAX_SQL_DEPTH + 1) + "1"):
        with pytest.raises(SqlFilterError, match="nests deeper"):
            SqlFilter(hostile)
    with pytest.raises(SqlFilterError, match=f"longer than {MAX_SQL_LENGTH}"):
        SqlFilter("a = 1 OR " * 200 + "a = 1")
    # long flat chains are fine: they do not nest
    chain = " OR ".join(f"a = {i}" for i in range(100))
    assert SqlFilter(chain).evaluate(envelope(application_properties={"a": 99})) is True
    sums = "a" + " + a" * 200 + " = 201"
    assert SqlFilter(sums).evaluate(envelope(application_properties={"a": 1})) is True


# -- fuzzing ---------------------------------------------------------------------------
VALID = [expr for expr, _, _ in TABLE]
WORDS = [" AND ", " OR ", " NOT ", " IN ", " LIKE ", " ESCAPE ", " IS ", " NULL ", "EXISTS", "sys.", "user.", "TRUE"]
ALPHABET = st.sampled_from([*"abcsyuer.[]()'\"=<>!+-*/%,_ 019eE\u00e9\n", *WORDS])


def _compile_or_refuse(text: str) -> SqlFilter | None:
    try:
        return SqlFilter(text)
    except SqlFilterError as exc:
        assert 1 <= exc.position <= len(text) + 1
        return None


@settings(deadline=None)
@given(st.text(max_size=80) | st.lists(ALPHABET, max_size=40).map("".join))
@example("(" * 2000)
@example("(" * 1000)
@example("NOT " * 300 + "a=1")
@example("-" * 1000 + "1")
def test_fuzz_random_text_only_raises_sql_filter_error(text: str) -> None:
    flt = _compile_or_refuse(text)
    if flt is not None:
        for env in (ORDER, BARE):
            assert flt.evaluate(env) in (True, False, None)


@settings(deadline=None)
@given(st.sampled_from(VALID), st.data())
def test_fuzz_mutated_valid_expressions(expression: str, data: st.DataObject) -> None:
    text = expression
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        piece = data.draw(ALPHABET)
        if action == "insert":
            text = text[:at] + piece + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + 1 :]
        elif action == "replace":
            text = text[:at] + piece + text[at + 1 :]
        else:
            text = text[:at] + text + text[at:]
    flt = _compile_or_refuse(text)
    if flt is not None:
        for env in (ORDER, BARE):
            assert flt.evaluate(env) in (True, False, None)
    try:
        action = SqlRuleAction("SET x = " + text)
    except SqlFilterError as exc:
        assert 1 <= exc.position <= len(text) + 9
    else:
        for env in (ORDER, BARE):
            assert split_message(action.apply(env, "r").encode()).application_properties is not None


# -- three-valued NOT ------------------------------------------------------------------
PROPS = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False) | st.sampled_from(["x", "y"]),
)
LEAF = st.sampled_from(["a", "b", "c", "1", "2.5", "'x'", "TRUE", "NULL"])
CONDITION = st.recursive(
    st.builds(lambda x, op, y: f"{x} {op} {y}", LEAF, st.sampled_from(["=", "<>", "<", ">=", "+ 1 ="]), LEAF)
    | st.builds("EXISTS({})".format, st.sampled_from(["a", "b"]))
    | st.builds("{} IS NULL".format, st.sampled_from(["a", "b"]))
    | st.builds("{} IN (1, 'x', TRUE)".format, LEAF)
    | st.builds("{} LIKE 'x%'".format, LEAF),
    lambda inner: (
        st.builds("({}) AND ({})".format, inner, inner)
        | st.builds("({}) OR ({})".format, inner, inner)
        | st.builds("NOT ({})".format, inner)
    ),
    max_leaves=8,
)


@settings(deadline=None)
@given(CONDITION, PROPS)
def test_not_is_the_complement_unless_unknown(expression: str, props: dict[str, Any]) -> None:
    env = envelope(application_properties=props)
    value = SqlFilter(expression).evaluate(env)
    negated = SqlFilter(f"NOT ({expression})").evaluate(env)
    if value is None:
        assert negated is None
    else:
        assert negated is (not value)
        assert SqlFilter(f"NOT ({expression})").matches(env) != SqlFilter(expression).matches(env)


# -- wiring ----------------------------------------------------------------------------
def _topic_doc(expression: object) -> dict[str, Any]:
    rule = {"Name": "r", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": expression}}}
    sub = {"Name": "s", "Rules": [rule]}
    return {"UserConfig": {"Namespaces": [{"Name": "ns", "Topics": [{"Name": "t", "Subscriptions": [sub]}]}]}}


def test_config_compiles_sql_rules_and_names_the_position() -> None:
    (rule,) = parse_config(_topic_doc("color = 'red'")).namespaces[0].topics[0].subscriptions[0].rules
    assert rule.filter_type == "Sql" and rule.sql_filter == SqlFilter("color = 'red'")
    with pytest.raises(ConfigError) as info:
        parse_config(_topic_doc("color = 'red' AND size ="))
    assert str(info.value) == (
        "UserConfig.Namespaces[0].Topics[0].Subscriptions[0].Rules[0].Properties.SqlFilter.SqlExpression: "
        "position 25: expected a value after '=', found end of expression"
    )
    for trivially in ("1=1", " 1 = 1 ", "true"):
        (rule,) = parse_config(_topic_doc(trivially)).namespaces[0].topics[0].subscriptions[0].rules
        assert rule.filter_type == "True"


def test_rule_made_at_runtime_is_compiled() -> None:
    rule = RuleConfig("r", "Sql", sql_expression="sys.Label = 'x'")
    assert rule.sql_filter is not None and rules_match([rule], envelope(subject="x"))
    assert not rules_match([rule], envelope(subject="y"))
    with pytest.raises(SqlFilterError, match="position 13"):
        RuleConfig("r", "Sql", sql_expression="sys.Label = ")


def test_namespace_fans_out_by_sql_filter() -> None:
    def sub(name: str, *expressions: str) -> SubscriptionConfig:
        return SubscriptionConfig(name, rules=tuple(RuleConfig(f"r{i}", "Sql", sql_expression=e)
                                                    for i, e in enumerate(expressions)))  # fmt: skip

    cfg = NamespaceConfig(
        topics=(
            TopicConfig(
                "t",
                subscriptions=(
                    sub("big", "quantity > 10"),
                    sub("red-or-vip", "color = 'red'", "vip = TRUE"),
                    sub("not-red", "NOT color = 'red'"),
                    sub("sales", "sys.Label LIKE 'Sale%' AND sys.To IN ('a', 'b')"),
                ),
            ),
        )
    )
    ns = Namespace(cfg)
    send(ns, "t", subject="Sales", to="a", application_properties={"quantity": 20, "color": "red"})
    send(ns, "t", subject="Sales", to="c", application_properties={"quantity": 5, "vip": True})
    send(ns, "t", subject="Other", application_properties={"color": "blue"})
    send(ns, "t")
    counts = {name: len(ns.receiver_source(f"t/Subscriptions/{name}").store)
              for name in ("big", "red-or-vip", "not-red", "sales")}  # fmt: skip
    assert counts == {"big": 1, "red-or-vip": 2, "not-red": 1, "sales": 1}


# -- SqlRuleAction ---------------------------------------------------------------------
def test_rule_action_sets_and_removes_user_properties_in_order() -> None:
    action = SqlRuleAction("SET status = 'routed'; SET total = quantity * price REMOVE color; SET COUNT = total + 1")
    env = envelope(subject="x", application_properties={"quantity": 2, "price": 2.5, "Color": "red", "count": 0})
    out = action.apply(env, "big")
    assert out.application_properties == {"quantity": 2, "price": 2.5, "count": 6.0, "status": "routed",
                                          "total": 5.0, "RuleName": "big"}  # fmt: skip
    decoded = split_message(out.encode())  # the properties section is re-encoded, the rest kept
    assert decoded.application_properties == out.application_properties
    assert decoded.properties is not None and decoded.properties.subject == "x" and decoded.body == env.body
    assert env.application_properties == {"quantity": 2, "price": 2.5, "Color": "red", "count": 0}
    assert SqlRuleAction("SET gone = missing").apply(BARE, "r").application_properties == {
        "gone": None,
        "RuleName": "r",
    }


@pytest.mark.parametrize(
    ("expression", "position", "reason"),
    [
        ("", 1, "expected SET or REMOVE, found end of expression"),
        ("SET", 4, "expected a property name after 'SET'"),
        ("SET a", 6, "expected '=' after 'a'"),
        ("SET a = ", 9, "expected a value after '='"),
        ("SET a = 1;; ", 11, "expected SET or REMOVE, found ';'"),
        ("UPDATE a = 1", 1, "expected SET or REMOVE, found 'UPDATE'"),
        ("SET sys.PartitionKey = 'x'", 5, "sys.PartitionKey cannot be changed by a rule action"),
        ("REMOVE sys.Nope", 12, "sys.Nope is not a Service Bus system property"),
        ("SET a = b = 1", 11, "expected SET or REMOVE, found '='"),
        ("SET a = 1; " * 33, 32 * 11 + 1, "at most 32 statements"),
    ],
)
def test_rule_action_errors(expression: str, position: int, reason: str) -> None:
    with pytest.raises(SqlFilterError) as info:
        SqlRuleAction(expression)
    assert info.value.position == position and reason in str(info.value), str(info.value)


def test_config_reads_rule_actions_and_names_a_bad_one() -> None:
    doc = _topic_doc("color = 'red'")
    rule_props = doc["UserConfig"]["Namespaces"][0]["Topics"][0]["Subscriptions"][0]["Rules"][0]["Properties"]
    rule_props["Action"] = {"SqlExpression": "SET seen = TRUE"}
    (rule,) = parse_config(doc).namespaces[0].topics[0].subscriptions[0].rules
    assert rule.action == SqlRuleAction("SET seen = TRUE") and rule.sql_filter == SqlFilter("color = 'red'")
    rule_props["Action"] = {"SqlExpression": "SET seen ="}
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert str(info.value) == (
        "UserConfig.Namespaces[0].Topics[0].Subscriptions[0].Rules[0].Properties.Action.SqlExpression: "
        "position 11: expected a value after '=', found end of expression"
    )


def test_each_matching_rule_with_an_action_makes_its_own_copy() -> None:
    # "a subscription has five rules: two rules with actions and the other three without actions ...
    # if you send one message that matches all five rules, you get three messages on the subscription"
    rules = (
        RuleConfig("plain1", "Sql", sql_expression="a = 1"),
        RuleConfig("plain2", "True"),
        RuleConfig("plain3", "Sql", sql_expression="EXISTS(a)"),
        RuleConfig("act1", "Sql", sql_expression="a > 0", action_expression="SET tag = 'one'"),
        RuleConfig("act2", "True", action_expression="SET tag = 'two'; REMOVE a"),
    )
    ns = Namespace(NamespaceConfig(topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("s", rules=rules),)),)))
    send(ns, "t", application_properties={"a": 1})
    send(ns, "t", application_properties={"a": -1})
    sub = ns.receiver_source("t/Subscriptions/s")
    got = [delivered(sub, m).application_properties for m in sub.store]
    assert got == [
        {"a": 1},
        {"a": 1, "tag": "one", "RuleName": "act1"},
        {"tag": "two", "RuleName": "act2"},
        {"a": -1},
        {"tag": "two", "RuleName": "act2"},
    ]


def test_rule_action_sets_system_properties_as_the_emulator_sample_does() -> None:
    # Microsoft's emulator sample Config.json: "Action": {"SqlExpression": "SET sys.To = 'Entity'"}
    rule = {
        "Name": "sql-filter-1",
        "Properties": {
            "FilterType": "Sql",
            "SqlFilter": {"SqlExpression": "sys.MessageId = '123456' AND userProp1 = 'value1'"},
            "Action": {"SqlExpression": "SET sys.To = 'Entity'"},
        },
    }
    doc = {"UserConfig": {"Namespaces": [{"Name": "ns", "Topics": [
        {"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [rule]}]}]}]}}  # fmt: skip
    ns = Namespace(parse_config(doc).namespaces[0])
    send(ns, "t", message_id="123456", to="elsewhere", application_properties={"userProp1": "value1"})
    send(ns, "t", message_id="654321", application_properties={"userProp1": "value1"})
    sub = ns.receiver_source("t/Subscriptions/s")
    (msg,) = [delivered(sub, m) for m in sub.store]
    assert msg.to == "Entity" and msg.message_id == "123456"
    assert msg.application_properties == {"userProp1": "value1", "RuleName": "sql-filter-1"}
    action = SqlRuleAction("SET sys.Label = sys.Label + '!'; SET sys.ContentType = 'text/plain'; REMOVE sys.ReplyTo")
    out = split_message(action.apply(envelope(subject="hi", reply_to="r", body=b"payload"), "r").encode())
    assert out.properties is not None
    assert (out.properties.subject, out.properties.content_type, out.properties.reply_to) == ("hi!", "text/plain", None)
    assert out.properties.content_type.__class__ is Symbol  # the AMQP type of content-type
    assert out.body == envelope(body=b"payload").body


# -- cases from the first SQL filter subset on sbbroker (its tests/broker/test_sqlfilter.py) --
SAMPLE = envelope(
    message_id="123456",
    subject="red",
    content_type="application/json",
    application_properties={"userProp1": "value1", "n": 5, "f": 2.5, "flag": True, "name": "it's"},
)


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
def test_sample_expressions(expression: str, expected: bool) -> None:
    assert SqlFilter(expression).matches(SAMPLE) is expected


@pytest.mark.parametrize(
    "expression",
    ["n +", "n = ", "(n = 1", "sys.Nope = 1", "a.b = 1", "n = 1 extra", "NOT LIKE 'x'", "n ~ 1", "x" * 2000,
     "(" * 40 + "n = 1" + ")" * 40],
)  # fmt: skip
def test_refused_expressions(expression: str) -> None:
    with pytest.raises(SqlFilterError):
        SqlFilter(expression)
