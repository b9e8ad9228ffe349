"""The namespace's entity definitions as a JSON document, so that queues, topics,
subscriptions and rules made at run time (management REST API) come back on start.

The document holds every queue and topic with its properties and its own authorization
rules (names, rights and keys: the journal holding it is the owner's alone, mode 0600, as
every file of the data directory), and each topic's subscriptions with their properties and
rules (SQL parameters too). On start, :func:`restore` makes the entities the configuration
does not already define, with their authorization rules; one the configuration defines is
made from the configuration, rules included (it is the operator's statement of what must exist).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable
from typing import Any

from amqplink.atom.values import format_value, parse_value
from amqplink.broker.config import (
    ConfigError,
    CorrelationFilter,
    EntityProperties,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)
from amqplink.broker.namespace.namespace import Namespace
from amqplink.broker.rights import AccessRule, parse_rights, right_names

__all__ = ["dump", "restore"]

log = logging.getLogger(__name__)

_PROPERTY_FIELDS = frozenset(f.name for f in dataclasses.fields(EntityProperties))
_CORRELATION_FIELDS = frozenset(f.name for f in dataclasses.fields(CorrelationFilter))


def dump(namespace: Namespace) -> bytes:
    """The definitions of every entity of ``namespace`` (deterministic: equal namespaces, equal bytes)."""
    document = {
        "queues": [
            {"name": q.name, "properties": _properties(q.properties), **_access(namespace, q.name)}
            for q in namespace.queues.values()
        ],
        "topics": [
            {
                "name": t.name,
                "properties": _properties(t.properties),
                **_access(namespace, t.name),
                "subscriptions": [
                    {"name": s.name, "properties": _properties(s.properties), "rules": [_rule(r) for r in s.rules]}
                    for s in t.subscriptions.values()
                ],
            }
            for t in namespace.topics.values()
        ],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def restore(namespace: Namespace, document: bytes) -> None:
    """Make the entities of ``document`` that ``namespace`` does not have yet."""
    try:
        data = json.loads(document)
        queues = [QueueConfig(q["name"], _read_properties(q["properties"])) for q in data["queues"]]
        access = {
            entity["name"].lower(): [_read_access_rule(r) for r in entity["authorization_rules"]]
            for entity in (*data["queues"], *data["topics"])
            if entity.get("authorization_rules")
        }
        topics = [
            TopicConfig(
                t["name"],
                _read_properties(t["properties"]),
                tuple(
                    SubscriptionConfig(
                        s["name"], _read_properties(s["properties"]), tuple(_read_rule(r) for r in s["rules"])
                    )
                    for s in t["subscriptions"]
                ),
            )
            for t in data["topics"]
        ]
    except (ValueError, KeyError, TypeError, LookupError, IndexError, ConfigError) as exc:
        log.error("the stored entity definitions do not parse (%s); entities made at run time are not restored", exc)
        return
    for queue in queues:
        key = queue.name.lower()
        if key not in namespace.queues and key not in namespace.topics:
            namespace.add_queue(queue)
            _restore_access(namespace, queue.name, access.get(key))
    for topic in topics:
        key = topic.name.lower()
        if key in namespace.queues:
            continue
        existing = namespace.topics.get(key)
        if existing is None:
            namespace.add_topic(topic)
            _restore_access(namespace, topic.name, access.get(key))
            continue
        for sub in topic.subscriptions:
            if sub.name.lower() not in existing.subscriptions:
                namespace.add_subscription(existing, sub)


def _properties(properties: EntityProperties) -> dict[str, Any]:
    return dataclasses.asdict(properties)


def _read_properties(raw: dict[str, Any]) -> EntityProperties:
    return EntityProperties(**{k: v for k, v in raw.items() if k in _PROPERTY_FIELDS})


def _typed(items: Iterable[tuple[str, Any]]) -> list[list[str]]:
    """Key-values as ``[key, xsd type, text]`` (datetimes and timedeltas are not JSON)."""
    return [[key, *format_value(value)] for key, value in items]


def _untyped(raw: Iterable[list[Any]]) -> tuple[tuple[str, Any], ...]:
    """:func:`_typed`'s items back; a ``[key, value]`` pair (written before types were kept) as is."""
    return tuple((item[0], parse_value(item[1], item[2]) if len(item) == 3 else item[1]) for item in raw)


def _rule(rule: RuleConfig) -> dict[str, Any]:
    correlation = None
    if rule.correlation is not None:
        correlation = {**dataclasses.asdict(rule.correlation), "properties": _typed(rule.correlation.properties)}
    return {
        "name": rule.name,
        "filter_type": rule.filter_type,
        "correlation": correlation,
        "sql_expression": rule.sql_expression,
        "action_expression": rule.action_expression,
        "parameters": _typed(rule.parameters.items()),
        "action_parameters": _typed(rule.action_parameters.items()),
    }


def _read_rule(raw: dict[str, Any]) -> RuleConfig:
    correlation = raw["correlation"]
    if correlation is not None:
        fields = {k: v for k, v in correlation.items() if k in _CORRELATION_FIELDS}
        fields["properties"] = _untyped(fields.get("properties", ()))
        correlation = CorrelationFilter(**fields)
    return RuleConfig(
        raw["name"],
        raw["filter_type"],
        correlation,
        raw["sql_expression"],
        raw["action_expression"],
        parameters=dict(_untyped(raw.get("parameters", ()))),
        action_parameters=dict(_untyped(raw.get("action_parameters", ()))),
    )


def _access(namespace: Namespace, name: str) -> dict[str, Any]:
    """The entity's own authorization rules, if it has any (an entity without writes no key)."""
    rules = namespace.access_rules.get(name.lower(), ())
    if not rules:
        return {}
    return {
        "authorization_rules": [
            {"name": rule.name, "keys": list(rule.keys), "rights": list(right_names(rule.rights))} for rule in rules
        ]
    }


def _read_access_rule(raw: dict[str, Any]) -> AccessRule:
    keys = tuple(raw["keys"])
    if not raw["name"] or not keys or not all(isinstance(key, str) and key for key in keys):
        raise ValueError("an authorization rule without a name or keys")
    return AccessRule(raw["name"], keys, parse_rights(raw["rights"], "authorization rule"))


def _restore_access(namespace: Namespace, name: str, rules: list[AccessRule] | None) -> None:
    if rules:
        try:
            namespace.set_access_rules(name, rules)
        except ValueError as exc:
            log.error("the stored authorization rules of %r are not restored (%s)", name, exc)
