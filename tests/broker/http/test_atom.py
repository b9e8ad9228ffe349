"""Atom writing and description reading: round trips and escaping (property tests)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import isodate
from hypothesis import given
from hypothesis import strategies as st

from amqplink.atom.document import MAX_TIMESPAN, entry, format_duration
from amqplink.atom.xmlsafe import parse_xml
from amqplink.broker.config import CorrelationFilter, EntityProperties, RuleConfig, parse_duration
from amqplink.broker.http.descriptions import (
    Counts,
    EntityMeta,
    description_of,
    queue_description,
    read_meta,
    read_properties,
    read_rule,
    rule_description,
)

seconds = st.floats(min_value=0, max_value=10**9, allow_nan=False).map(lambda s: round(s, 7))
texts = st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), max_size=50)


@given(seconds)
def test_durations_round_trip_through_our_reader_and_the_sdks(value: float) -> None:
    text = format_duration(value)
    assert math.isclose(parse_duration(text), value, abs_tol=1e-6)
    assert math.isclose(isodate.parse_duration(text).total_seconds(), value, abs_tol=1e-5)


def test_unbounded_is_timespan_max() -> None:
    assert format_duration(math.inf) == MAX_TIMESPAN
    assert parse_duration(MAX_TIMESPAN) > 9 * 10**11


@given(
    lock=st.integers(1, 300),
    ttl=st.one_of(st.just(math.inf), st.integers(1, 10**7).map(float)),
    count=st.integers(1, 2**31 - 1),
    session=st.booleans(),
    forward=st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True)),
    metadata=texts,
)
def test_a_written_queue_description_reads_back(
    lock: int, ttl: float, count: int, session: bool, forward: str | None, metadata: str
) -> None:
    props = EntityProperties(
        lock_duration=float(lock),
        default_message_ttl=ttl,
        max_delivery_count=count,
        requires_session=session,
        forward_to=forward,
    )
    meta = EntityMeta(1.0, 2.0, user_metadata=metadata)
    body = entry(
        "https://h/q",
        "q<&>",
        queue_description(props, meta, Counts(1, 2, 3, 6, 99)),
        published=1,
        updated=2,
        author="n",
    )
    desc = description_of(parse_xml(body.encode()), "QueueDescription")
    back = read_properties(desc, EntityProperties())
    assert back.lock_duration == props.lock_duration and back.max_delivery_count == count
    assert back.requires_session == session and back.forward_to == forward
    assert back.default_message_ttl == ttl or (math.isinf(ttl) and back.default_message_ttl > 9 * 10**11)
    assert read_meta(desc, EntityMeta(0, 0), 5.0).user_metadata == metadata
    assert ET.fromstring(body).findtext("{http://www.w3.org/2005/Atom}title") == "q<&>"


@given(
    expression=st.sampled_from(["a = 1", "sys.label LIKE 'x%'", "color IN ('r', 'g') AND NOT EXISTS(z)"]),
    action=st.one_of(st.none(), st.just("SET a = 2")),
    correlation=st.dictionaries(
        st.from_regex(r"[a-z]{1,8}", fullmatch=True),
        st.one_of(st.integers(-(2**40), 2**40), st.booleans(), texts),
        max_size=3,
    ),
)
def test_a_written_rule_reads_back(expression: str, action: str | None, correlation: dict[str, object]) -> None:
    rules = [
        RuleConfig("s", "Sql", sql_expression=expression, action_expression=action),
        RuleConfig("c", "Correlation", CorrelationFilter(correlation_id="id", properties=tuple(correlation.items()))),
        RuleConfig("t", "True", sql_expression="1=1"),
        RuleConfig("f", "False", sql_expression="1=0"),
    ]
    for rule in rules:
        body = entry("https://h/r", rule.name, rule_description(rule, 1.0), published=1, updated=1, author="n")
        back = read_rule(description_of(parse_xml(body.encode()), "RuleDescription"), rule.name)
        assert back == rule
