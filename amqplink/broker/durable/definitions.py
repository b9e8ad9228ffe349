"""The namespace's entity definitions as a JSON document, so that queues, topics,
subscriptions and rules made at run time (management REST API) come back on start.

The document holds every queue and topic with its properties, and each topic's
subscriptions with their properties and rules (SQL parameters too). On start, :func:`restore` makes the
entities the configuration does not already define; one the configuration defines is
made from the configuration (it is the operator's statement of what must exist).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
from collections.abc import Mapping
from typing import Any

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

__all__ = ["dump", "restore"]

log = logging.getLogger(__name__)

_PROPERTY_FIELDS = frozenset(f.name for f in dataclasses.fields(EntityProperties))
_CORRELATION_FIELDS = frozenset(f.name for f in dataclasses.fields(CorrelationFilter))


def dump(namespace: Namespace) -> bytes:
    """The definitions of every entity of ``namespace`` (deterministic: equal namespaces, equal bytes)."""
    document = {
        "queues": [{"name": q.name, "properties": _properties(q.properties)} for q in namespace.queues.values()],
        "topics": [
            {
                "name": t.name,
                "properties": _properties(t.properties),
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
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        log.error("the stored entity definitions do not parse (%s); entities made at run time are not restored", exc)
        return
    for queue in queues:
        key = queue.name.lower()
        if key not in namespace.queues and key not in namespace.topics:
            namespace.add_queue(queue)
    for topic in topics:
        key = topic.name.lower()
        if key in namespace.queues:
            continue
        existing = namespace.topics.get(key)
        if existing is None:
            namespace.add_topic(topic)
            continue
        for sub in topic.subscriptions:
            if sub.name.lower() not in existing.subscriptions:
                namespace.add_subscription(existing, sub)


def _properties(properties: EntityProperties) -> dict[str, Any]:
    return dataclasses.asdict(properties)


def _read_properties(raw: dict[str, Any]) -> EntityProperties:
    return EntityProperties(**{k: v for k, v in raw.items() if k in _PROPERTY_FIELDS})


def _rule(rule: RuleConfig) -> dict[str, Any]:
    correlation = None if rule.correlation is None else dataclasses.asdict(rule.correlation)
    return {
        "name": rule.name,
        "filter_type": rule.filter_type,
        "correlation": correlation,
        "sql_expression": rule.sql_expression,
        "action_expression": rule.action_expression,
        "parameters": _parameters(rule.parameters),
        "action_parameters": _parameters(rule.action_parameters),
    }


def _parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """SQL parameters as JSON: text, numbers and booleans as they are; a ``dateTime`` and a
    ``duration`` (what the management API also takes) tagged."""
    out: dict[str, Any] = {}
    for name, value in sorted(parameters.items()):
        if isinstance(value, datetime.datetime):
            out[name] = {"dateTime": value.isoformat()}
        elif isinstance(value, datetime.timedelta):
            out[name] = {"duration": value.total_seconds()}
        else:
            out[name] = value
    return out


def _read_parameters(raw: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in (raw or {}).items():
        if isinstance(value, dict) and "dateTime" in value:
            out[name] = datetime.datetime.fromisoformat(value["dateTime"])
        elif isinstance(value, dict) and "duration" in value:
            out[name] = datetime.timedelta(seconds=value["duration"])
        else:
            out[name] = value
    return out


def _read_rule(raw: dict[str, Any]) -> RuleConfig:
    correlation = raw["correlation"]
    if correlation is not None:
        fields = {k: v for k, v in correlation.items() if k in _CORRELATION_FIELDS}
        fields["properties"] = tuple((k, v) for k, v in fields.get("properties", ()))
        correlation = CorrelationFilter(**fields)
    return RuleConfig(
        raw["name"],
        raw["filter_type"],
        correlation,
        raw["sql_expression"],
        raw["action_expression"],
        # (absent from definitions written before parameters were kept)
        parameters=_read_parameters(raw.get("parameters")),
        action_parameters=_read_parameters(raw.get("action_parameters")),
    )
