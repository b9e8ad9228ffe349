"""Subscription rules: TrueFilter, FalseFilter, CorrelationFilter and SqlFilter.

"A correlation filter holds a set of conditions that are matched against one or
more of an arriving message's user and system properties" (Service Bus topic
filters); every condition given must equal, and a subscription takes a copy when
any of its rules matches. A subscription made without rules has the ``$Default``
rule, a TrueFilter (one left with none receives nothing). A SqlFilter matches when its condition is true (not false,
not unknown); it is compiled when the rule is loaded (:mod:`.filter`). A rule
with a SqlRuleAction puts its own, changed, copy of a matching message on the
subscription.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from amqplink.broker.config import CorrelationFilter, RuleConfig
from amqplink.broker.namespace.envelope import Envelope
from amqplink.codec.types import Timestamp

__all__ = ["correlation_matches", "rule_matches", "rules_match", "subscription_copies"]

# (filter field, Properties field)
_SYSTEM_FIELDS = (
    ("correlation_id", "correlation_id"),
    ("message_id", "message_id"),
    ("to", "to"),
    ("reply_to", "reply_to"),
    ("subject", "subject"),
    ("session_id", "group_id"),
    ("reply_to_session_id", "reply_to_group_id"),
    ("content_type", "content_type"),
)


def _same(expected: Any, actual: Any) -> bool:
    if actual is None:
        return False
    if isinstance(expected, datetime.datetime) and isinstance(actual, Timestamp):
        # a dateTime property (management API) against an AMQP timestamp: the same instant, to the ms
        return Timestamp.from_datetime(expected) == actual
    if isinstance(expected, str) and not isinstance(actual, str):
        return expected == str(actual)
    return bool(expected == actual)


def correlation_matches(flt: CorrelationFilter, envelope: Envelope) -> bool:
    """Every field the filter sets equals the message's."""
    props = envelope.properties
    for filter_field, prop_field in _SYSTEM_FIELDS:
        expected = getattr(flt, filter_field)
        if expected is None:
            continue
        if props is None or not _same(expected, getattr(props, prop_field)):
            return False
    if flt.properties:
        app = envelope.application_properties or {}
        for key, expected in flt.properties:
            if key not in app or not _same(expected, app[key]):
                return False
    return True


def rule_matches(rule: RuleConfig, envelope: Envelope) -> bool:
    """Whether one rule's filter selects the message."""
    if rule.filter_type == "True":
        return True
    if rule.filter_type == "Sql":
        return rule.sql_filter is not None and rule.sql_filter.matches(envelope)
    if rule.filter_type == "Correlation":
        return rule.correlation is not None and correlation_matches(rule.correlation, envelope)
    return False


def rules_match(rules: Sequence[RuleConfig], envelope: Envelope) -> bool:
    """Whether a subscription with ``rules`` selects the message (none: it receives nothing).

    A subscription made without rules gets the ``$Default`` TrueFilter (:mod:`.namespace`);
    "if you remove the default rule and add no others, the subscription receives no messages".
    """
    for rule in rules:  # noqa: SIM110 -- a plain loop: no generator per message on the fan-out path
        if rule_matches(rule, envelope):
            return True
    return False


def subscription_copies(rules: Sequence[RuleConfig], envelopes: list[Envelope]) -> list[Envelope]:
    """The messages a subscription with ``rules`` receives from ``envelopes``, in order.

    "All rules without actions are combined using an OR condition and result in a single
    message on the subscription even if you have multiple matching rules. Each rule with an
    action produces a copy of the message" (Topic filters and actions).
    """
    if all(rule.action is None for rule in rules):
        return [e for e in envelopes if rules_match(rules, e)]
    acting = [rule for rule in rules if rule.action is not None]
    plain = [rule for rule in rules if rule.action is None]
    out: list[Envelope] = []
    for envelope in envelopes:
        if any(rule_matches(rule, envelope) for rule in plain):
            out.append(envelope)
        for rule in acting:
            if rule.action is not None and rule_matches(rule, envelope):
                out.append(rule.action.apply(envelope, rule.name))
    return out
