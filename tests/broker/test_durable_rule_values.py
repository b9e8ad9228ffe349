"""Rules made over the management API keep their typed values across a restart with a data dir:
correlation properties and SQL parameters of every type (datetimes and timedeltas are not JSON)."""

from __future__ import annotations

import datetime as dt
import json

from hypothesis import given
from hypothesis import strategies as st

from amqplink.broker.config import CorrelationFilter, NamespaceConfig, RuleConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.durable.definitions import dump, restore
from amqplink.broker.namespace.namespace import Namespace

_values = st.one_of(
    st.text(max_size=10),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.datetimes(
        min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1), timezones=st.none() | st.just(dt.UTC)
    ),
    st.timedeltas(min_value=dt.timedelta(0), max_value=dt.timedelta(days=3650)),
)
_maps = st.dictionaries(st.text(alphabet="abc@_", min_size=1, max_size=5), _values, max_size=4)


def _topic(rules: tuple[RuleConfig, ...]) -> Namespace:
    ns = Namespace(NamespaceConfig(), auto_create=False)
    ns.add_topic(TopicConfig("t", subscriptions=(SubscriptionConfig("s", rules=rules),)))
    return ns


@given(properties=_maps, parameters=_maps, action_parameters=_maps)
def test_rules_round_trip_through_the_definitions(
    properties: dict[str, object], parameters: dict[str, object], action_parameters: dict[str, object]
) -> None:
    """dump then restore into an empty namespace gives the same rules, values of the same types."""
    rules = (
        RuleConfig("corr", "Correlation", CorrelationFilter(subject="x", properties=tuple(properties.items()))),
        RuleConfig(
            "sql",
            "Sql",
            sql_expression="a = 1",
            action_expression="SET b = 2",
            parameters=parameters,
            action_parameters=action_parameters,
        ),
    )
    fresh = Namespace(NamespaceConfig(), auto_create=False)
    restore(fresh, dump(_topic(rules)))
    back = fresh.subscription("t", "s").rules
    assert back == rules
    corr = back[0].correlation
    assert corr is not None
    assert [type(v) for _, v in corr.properties] == [type(v) for v in properties.values()]
    assert [type(v) for v in back[1].parameters.values()] == [type(v) for v in parameters.values()]


def test_definitions_written_before_types_were_kept_still_restore() -> None:
    """A document whose correlation properties are ``[key, value]`` pairs (no type) still restores."""
    document = json.loads(dump(_topic((RuleConfig("corr", "Correlation", CorrelationFilter(subject="x")),))))
    rule = document["topics"][0]["subscriptions"][0]["rules"][0]
    rule["correlation"]["properties"] = [["n", 5], ["s", "v"]]
    del rule["parameters"], rule["action_parameters"]
    fresh = Namespace(NamespaceConfig(), auto_create=False)
    restore(fresh, json.dumps(document).encode())
    corr = fresh.subscription("t", "s").rules[0].correlation
    assert corr is not None and corr.properties == (("n", 5), ("s", "v"))
