"""SQL LIKE: agrees with a regex reference, is linear without ``_``, and is held to a step budget."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from amqplink.broker.config import NamespaceConfig, RuleConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.sql.filter import SqlFilter
from amqplink.broker.namespace.sql.like import (
    LIKE_ALLOWANCE_PER_CHAR,
    LIKE_PIECE_STEPS,
    LIKE_STEP_BUDGET,
    LikeBudget,
    LikeBudgetExceeded,
    LikePattern,
)
from amqplink.protocol.definitions import Properties
from tests import profiles
from tests.broker.nsutil import send


def reference(pattern: str, escape: str | None) -> re.Pattern[str]:
    """The pattern as a regex, one character at a time (the escape first, as SQL reads it)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


TEXT = st.text(alphabet="ab\n", max_size=12)
PATTERN = st.text(alphabet="ab%_!\n", max_size=10)


@settings(profiles.FUZZ, deadline=None)
@given(PATTERN, TEXT, st.sampled_from([None, "!", "%", "_", "a"]))
@example("%a_%b", "xaybb", None)
@example("a!%", "a%", "!")
@example("%%a", "a", "%")
@example("__", "ab", "_")
def test_like_agrees_with_a_regex(pattern: str, text: str, escape: str | None) -> None:
    if escape is not None and (len(pattern) - len(pattern.rstrip(escape))) % 2 == 1:
        with pytest.raises(ValueError, match="ends with the escape character"):
            LikePattern(pattern, escape)
        return
    expected = reference(pattern, escape).fullmatch(text) is not None
    assert LikePattern(pattern, escape).matches(text) is expected, (pattern, text, escape)


def _spend(pattern: str, text: str) -> tuple[bool, int]:
    budget = LikeBudget(1 << 40)
    return LikePattern(pattern).matches(text, budget), budget.spent


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("%" + "a" * 500 + "b%", "a" * 100_000, False),
        ("%a" * 200 + "%b", "a" * 20_000, False),
        ("%a" * 200 + "%b", "a" * 20_000 + "b", True),
        ("_" * 50_000 + "%b", "a" * 100_000, False),
        ("%" + "ab" * 300 + "%", "ab" * 50_000 + "a", True),
        ("a_c%" + "x" * 1000 + "%z__", "abc" + "x" * 999 + "y" * 50_000 + "z", False),
        ("a_c%" + "x" * 1000 + "%z__", "abc" + "x" * 1000 + "y" * 50_000 + "zzz", True),
    ],
    ids=lambda v: str(v)[:12] if isinstance(v, str) else str(v),
)
def test_patterns_without_wildcards_inside_segments_are_linear(pattern: str, text: str, expected: bool) -> None:
    """Middle segments with no ``_``: at most 2 (n + m) characters examined, plus the pieces."""
    matched, spent = _spend(pattern, text)
    assert matched is expected
    pieces = sum(len(s.pieces) for s in LikePattern(pattern).segments)
    assert spent <= 2 * (len(text) + len(pattern)) + LIKE_PIECE_STEPS * pieces


def test_the_repro_pattern_goes_over_its_budget_within_a_bound() -> None:
    """The issue's repro: text and pattern from the message, an O(n x m) search without a budget."""
    pattern, text = "%" + "a_" * 50_000 + "b%", "a" * 200_000
    budget = LikeBudget()
    allowance = LIKE_ALLOWANCE_PER_CHAR * (len(text) + len(pattern))
    budget.grant(allowance)
    with pytest.raises(LikeBudgetExceeded):
        LikePattern(pattern).matches(text, budget)
    # overshoot: at most one piece (or one scan) past the budget
    assert budget.spent <= LIKE_STEP_BUDGET + allowance + len(text) + LIKE_PIECE_STEPS + 1


def envelope(**app: object) -> Envelope:
    return Envelope(None, {}, Properties(), dict(app), b"", b"")


def test_a_rule_over_budget_is_unknown_logged_once_and_the_next_message_is_evaluated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flt = SqlFilter("user.s LIKE user.p")
    hostile = envelope(s="a" * 200_000, p="%" + "a_" * 5_000 + "b%")
    with caplog.at_level(logging.DEBUG, logger="amqplink.broker.namespace.sql.like"):
        assert flt.evaluate(hostile) is None
        assert flt.evaluate(hostile) is None
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.WARNING, logging.DEBUG], levels
    assert "user.s LIKE user.p" in caplog.records[0].getMessage()
    # the budget is per evaluation: a fair message on the same rule matches afterwards
    assert flt.evaluate(envelope(s="x" * 100_000 + "y", p="%y")) is True
    assert flt.evaluate(envelope(s="abc", p="a_c")) is True
    assert SqlFilter("user.s NOT LIKE user.p").evaluate(hostile) is None


def test_a_constant_pattern_is_budgeted_too() -> None:
    flt = SqlFilter("s LIKE '%" + "a_" * 100 + "b%'")
    assert flt.evaluate(envelope(s="a" * 200_000)) is None  # 200 k candidates x 100 pieces: over budget
    assert flt.evaluate(envelope(s="a" * 220)) is False  # 20 candidates: within budget, decided
    assert flt.evaluate(envelope(s="xx" + "ab" * 100 + "bx")) is True


def test_the_repro_through_a_topic_goes_to_the_other_rules_only(caplog: pytest.LogCaptureFixture) -> None:
    """The issue's repro sent to a topic: the LIKE rule does not match, the other subscription
    gets the message, and the next message is filtered as usual."""
    cfg = NamespaceConfig(
        topics=(
            TopicConfig(
                "t",
                subscriptions=(
                    SubscriptionConfig("like", rules=(RuleConfig("r", "Sql", sql_expression="user.s LIKE user.p"),)),
                    SubscriptionConfig("all"),
                ),
            ),
        )
    )
    ns = Namespace(cfg)
    send(ns, "t", application_properties={"s": "a" * 150_000, "p": "%" + "a_" * 20_000 + "b%"})  # under 256 KB
    assert [r.levelno for r in caplog.records if r.name.endswith("sql.like")] == [logging.WARNING]
    send(ns, "t", application_properties={"s": "abc", "p": "a%"})
    counts = {name: len(ns.receiver_source(f"t/Subscriptions/{name}").store) for name in ("like", "all")}
    assert counts == {"like": 1, "all": 2}
