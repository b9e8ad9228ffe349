"""The Service Bus emulator's ``Config.json``, read unchanged into frozen dataclasses.

Shape (Microsoft's emulator): ``{"UserConfig": {"Namespaces": [{"Name", "Queues":
[{"Name", "Properties"}], "Topics": [{"Name", "Properties", "Subscriptions":
[{"Name", "Properties", "Rules": [{"Name", "Properties": {"FilterType",
"CorrelationFilter" | "SqlFilter", "Action"}}]}]}]}], "Logging": {...}}}``.

Entity properties default as Service Bus does: lock 60 s, max delivery count 10,
time to live unbounded, duplicate detection window 10 minutes. Durations are
ISO-8601 (``PT1M``; .NET's ``TimeSpan.MaxValue`` is ``P10675199DT2H48M5.4775807S``).
A bad file raises one :class:`ConfigError` naming the field path, e.g.
``UserConfig.Namespaces[0].Queues[2].Properties.LockDuration: 'PT1X' is not an
ISO-8601 duration``. Keys the emulator ignores (``Logging``) are accepted.

An extension of the emulator's format (the emulator has one fixed key): a namespace, a
queue or a topic may carry ``"AuthorizationRules": [{"Name": "sender", "PrimaryKey": "...",
"SecondaryKey": "...", "Rights": ["Send"]}]``, Service Bus's shared access rules
(``Listen``, ``Send``, ``Manage``; Manage brings the other two). A namespace's rules cover
every entity, a queue's or topic's only that entity (and a topic's subscriptions), 12 rules at
most on one queue or topic.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from amqplink import AMQPLinkError
from amqplink.atom.document import duration_seconds
from amqplink.broker.namespace.sql.filter import SqlFilter, SqlRuleAction
from amqplink.broker.namespace.sql.parser import parameter_values
from amqplink.broker.rights import MAX_ENTITY_RULES, RULE_NAME, AccessRule, parse_rights

__all__ = [
    "DEFAULT_DUPLICATE_WINDOW",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_LOCK_DURATION",
    "DEFAULT_MAX_DELIVERY_COUNT",
    "DEFAULT_MAX_ENTITY_BYTES",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DEFAULT_MAX_QUEUE_MESSAGES",
    "DEFAULT_PARTITION_COUNT",
    "MAX_PARTITION_COUNT",
    "PREMIUM_PARTITION_COUNT",
    "BrokerConfig",
    "ConfigError",
    "CorrelationFilter",
    "EntityProperties",
    "NamespaceConfig",
    "QueueConfig",
    "RuleConfig",
    "SubscriptionConfig",
    "TopicConfig",
    "load_config",
    "parse_config",
    "parse_duration",
    "sql_rule",
]

log = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT = 240.0
"""Seconds of silence after which the broker closes a connection (it advertises half): its
AMQP port's and its management API's WebSocket connections alike."""
DEFAULT_LOCK_DURATION = 60.0
"""Seconds; Service Bus's default ``LockDuration`` (PT1M)."""
DEFAULT_MAX_DELIVERY_COUNT = 10
DEFAULT_DUPLICATE_WINDOW = 600.0
"""Seconds; Service Bus's default ``DuplicateDetectionHistoryTimeWindow`` (PT10M)."""
DEFAULT_MAX_MESSAGE_SIZE = 256 * 1024
"""Bytes; Service Bus Standard's maximum message size."""
DEFAULT_MAX_QUEUE_MESSAGES = 100_000
"""Messages an entity holds before a send is refused with ``amqp:resource-limit-exceeded``."""
DEFAULT_MAX_ENTITY_BYTES = 256 << 20
"""Bytes of messages an entity holds before a send is refused with ``amqp:resource-limit-exceeded``
(Service Bus counts ``MaxSizeInMegabytes``; the emulator's file may set it)."""
MAX_LOCK_DURATION = 300.0
"""Seconds; "The maximum value for LockDuration is 5 minutes"."""
DEFAULT_PARTITION_COUNT = 16
"""Fragments of a partitioned entity: "When partitioning is enabled in the Basic or Standard
SKUs, we will always create 16 partitions"."""
PREMIUM_PARTITION_COUNT = 2
"""Fragments per entity in a ``"Tier": "Premium"`` namespace (seed 002: two on Premium)."""
MAX_PARTITION_COUNT = 1024
"""Fragments one entity may have at most (the fragment index lives in the top 16 bits of a
sequence number, and each fragment is a store of its own)."""


class ConfigError(AMQPLinkError, ValueError):
    """A configuration file that cannot be used; the message names the field path."""


def parse_duration(text: Any, where: str = "duration") -> float:
    """Seconds in an ISO-8601 duration (``PT1M`` -> 60.0); :class:`ConfigError` otherwise."""
    try:
        return duration_seconds(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class EntityProperties:
    """A queue's or subscription's (or, for the relevant fields, a topic's) settings."""

    lock_duration: float = DEFAULT_LOCK_DURATION
    max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT
    default_message_ttl: float = math.inf
    dead_lettering_on_message_expiration: bool = False
    requires_duplicate_detection: bool = False
    duplicate_detection_window: float = DEFAULT_DUPLICATE_WINDOW
    requires_session: bool = False
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_messages: int = DEFAULT_MAX_QUEUE_MESSAGES
    max_bytes: int = DEFAULT_MAX_ENTITY_BYTES
    """Bytes one store holds (each fragment's own limit on a partitioned entity, as Service Bus
    gives a partitioned entity 16 times ``MaxSizeInMegabytes``)."""
    enable_partitioning: bool = False
    partition_count: int | None = None
    """Fragments when partitioned; ``None``: the namespace's count (16, or 2 on Premium)."""


@dataclass(frozen=True)
class CorrelationFilter:
    """Matches when every field given equals the message's (Service Bus correlation filter)."""

    correlation_id: str | None = None
    message_id: str | None = None
    to: str | None = None
    reply_to: str | None = None
    subject: str | None = None
    session_id: str | None = None
    reply_to_session_id: str | None = None
    content_type: str | None = None
    properties: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class RuleConfig:
    """A subscription rule: ``filter_type`` is ``"Correlation"``, ``"Sql"``, ``"True"`` or ``"False"``.

    A ``"Sql"`` rule carries ``sql_filter``, its expression compiled when the rule is made, and
    any rule with an ``action_expression`` (a SqlRuleAction) carries ``action`` compiled
    (``SqlFilterError``, with the position, if either is not valid); see also :func:`sql_rule`.
    """

    name: str
    filter_type: str = "True"
    correlation: CorrelationFilter | None = None
    sql_expression: str | None = None
    action_expression: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """The SQL filter's ``@name`` parameters (``SqlFilter.Parameters``), values as Python values."""
    action_parameters: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """The SQL rule action's ``@name`` parameters (``SqlRuleAction.Parameters``)."""
    sql_filter: SqlFilter | None = field(default=None, compare=False, repr=False)
    action: SqlRuleAction | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        sql, action = self.sql_filter, self.action
        if self.filter_type == "Sql" and (sql is None or sql.parameters != parameter_values(self.parameters)):
            object.__setattr__(self, "sql_filter", SqlFilter(self.sql_expression or "", self.parameters))
        if self.action_expression is not None and (
            action is None or action.parameters != parameter_values(self.action_parameters)
        ):
            object.__setattr__(self, "action", SqlRuleAction(self.action_expression, self.action_parameters))


def sql_rule(name: str, expression: str, parameters: Mapping[str, Any] | None = None) -> RuleConfig:
    """A rule for a SQL filter expression (``@name``: ``parameters[name]``), compiled now;
    ``SqlFilterError`` (with the position) if bad.

    ``1=1``/``TRUE`` and ``1=0``/``FALSE`` become the True and False filters.
    """
    rule = RuleConfig(name, "Sql", sql_expression=expression, parameters=dict(parameters or {}))
    normal = "".join(expression.split()).upper()
    if normal in ("1=1", "TRUE"):
        return RuleConfig(name, "True", sql_expression=expression)
    if normal in ("1=0", "FALSE"):
        return RuleConfig(name, "False", sql_expression=expression)
    return rule


@dataclass(frozen=True)
class QueueConfig:
    name: str
    properties: EntityProperties = field(default_factory=EntityProperties)


@dataclass(frozen=True)
class SubscriptionConfig:
    name: str
    properties: EntityProperties = field(default_factory=EntityProperties)
    rules: tuple[RuleConfig, ...] = ()


@dataclass(frozen=True)
class TopicConfig:
    name: str
    properties: EntityProperties = field(default_factory=EntityProperties)
    subscriptions: tuple[SubscriptionConfig, ...] = ()


@dataclass(frozen=True)
class NamespaceConfig:
    name: str = "sbemulatorns"
    queues: tuple[QueueConfig, ...] = ()
    topics: tuple[TopicConfig, ...] = ()
    partition_count: int = DEFAULT_PARTITION_COUNT
    """Fragments of a partitioned entity that names no ``PartitionCount`` of its own."""
    partition_all: bool = False
    """Partition every queue and topic ("queues and topics in a Premium namespace are always
    partitioned"); set by ``"Tier": "Premium"``."""
    authorization_rules: tuple[AccessRule, ...] = ()
    """``AuthorizationRules`` of the namespace and of its queues and topics (an extension)."""


@dataclass(frozen=True)
class BrokerConfig:
    """The whole file: its namespaces (the broker serves each, on its own host name; the first
    is the one a connection gets unless its host name names another)."""

    namespaces: tuple[NamespaceConfig, ...] = (NamespaceConfig(),)


# -- reading -------------------------------------------------------------------------
def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected an object, not {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list, not {type(value).__name__}")
    return value


def _name(obj: dict[str, Any], where: str) -> str:
    name = obj.get("Name")
    if not isinstance(name, str) or not name.strip() or "$" in name:
        raise ConfigError(f"{where}.Name: expected a non-empty entity name, not {name!r}")
    return name


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, not {value!r}")
    return value


def _int(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{where}: expected an integer from {low} to {high}, not {value!r}")
    return value


def _opt_str(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, not {value!r}")
    return value


def _positive_duration(value: Any, where: str, high: float = math.inf) -> float:
    seconds = parse_duration(value, where)
    if not 0 < seconds <= high:
        raise ConfigError(f"{where}: {value!r} must be more than zero and at most {high:g} seconds")
    return seconds


_PROPERTY_READERS: dict[str, tuple[str, Any]] = {
    "LockDuration": ("lock_duration", lambda v, w: _positive_duration(v, w, MAX_LOCK_DURATION)),
    "MaxDeliveryCount": ("max_delivery_count", lambda v, w: _int(v, w, 1, 2**31 - 1)),
    "DefaultMessageTimeToLive": ("default_message_ttl", _positive_duration),
    "DeadLetteringOnMessageExpiration": ("dead_lettering_on_message_expiration", _bool),
    "RequiresDuplicateDetection": ("requires_duplicate_detection", _bool),
    "DuplicateDetectionHistoryTimeWindow": ("duplicate_detection_window", _positive_duration),
    "RequiresSession": ("requires_session", _bool),
    "ForwardTo": ("forward_to", _opt_str),
    "ForwardDeadLetteredMessagesTo": ("forward_dead_lettered_messages_to", _opt_str),
    "MaxMessageSizeInKilobytes": ("max_message_size", lambda v, w: 1024 * _int(v, w, 1, 102400)),
    "MaxSizeInMegabytes": ("max_bytes", lambda v, w: (1 << 20) * _int(v, w, 1, 81920)),
    "EnablePartitioning": ("enable_partitioning", _bool),
    "PartitionCount": ("partition_count", lambda v, w: _int(v, w, 1, MAX_PARTITION_COUNT)),
}


def _properties(value: Any, where: str) -> EntityProperties:
    if value is None:
        return EntityProperties()
    obj = _obj(value, where)
    kwargs: dict[str, Any] = {}
    for key, raw in obj.items():
        reader = _PROPERTY_READERS.get(key)
        if reader is None:
            log.warning("config: %s.%s is not a property the broker knows; ignored", where, key)
            continue
        attr, read = reader
        kwargs[attr] = read(raw, f"{where}.{key}")
    return EntityProperties(**kwargs)


_CORRELATION_FIELDS = {
    "CorrelationId": "correlation_id",
    "MessageId": "message_id",
    "To": "to",
    "ReplyTo": "reply_to",
    "Label": "subject",
    "Subject": "subject",
    "SessionId": "session_id",
    "ReplyToSessionId": "reply_to_session_id",
    "ContentType": "content_type",
}


def _correlation(value: Any, where: str) -> CorrelationFilter:
    obj = _obj(value, where)
    kwargs: dict[str, Any] = {}
    for key, raw in obj.items():
        if key == "Properties":
            props = _obj(raw if raw is not None else {}, f"{where}.Properties")
            for pkey, pvalue in props.items():
                if isinstance(pvalue, dict | list) or pvalue is None:
                    raise ConfigError(f"{where}.Properties.{pkey}: expected a simple value, not {pvalue!r}")
            kwargs["properties"] = tuple(props.items())
        elif key in _CORRELATION_FIELDS:
            kwargs[_CORRELATION_FIELDS[key]] = _opt_str(raw, f"{where}.{key}")
        else:
            raise ConfigError(f"{where}.{key}: not a correlation filter field")
    return CorrelationFilter(**kwargs)


def _sql_text(props: dict[str, Any], key: str, where: str, default: str | None) -> str | None:
    value = _obj(props.get(key) or {}, f"{where}.{key}").get("SqlExpression", default)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}.{key}.SqlExpression: expected a string, not {value!r}")
    return value


def _sql_parameters(props: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``{key: {"Parameters": {"@name": value}}}`` (an extension of the emulator's format, as
    ``SqlFilter.Parameters`` over the management API): text, numbers and booleans."""
    value = _obj(props.get(key) or {}, f"{where}.{key}").get("Parameters") or {}
    params = _obj(value, f"{where}.{key}.Parameters")
    for name, item in params.items():
        if not isinstance(item, str | int | float | bool):
            raise ConfigError(f"{where}.{key}.Parameters.{name}: expected text, a number or a boolean, not {item!r}")
    return dict(params)


def _rule(value: Any, where: str) -> RuleConfig:
    obj = _obj(value, where)
    name = _name(obj, where)
    at = f"{where}.Properties"
    props = _obj(obj.get("Properties") or {}, at)
    kind = props.get("FilterType", "Correlation" if "CorrelationFilter" in props else "Sql")
    if kind == "Correlation":
        rule = RuleConfig(
            name, "Correlation", _correlation(props.get("CorrelationFilter") or {}, f"{at}.CorrelationFilter")
        )
    elif kind == "Sql":
        sql = _sql_text(props, "SqlFilter", at, "1=1")
        try:
            rule = sql_rule(name, sql or "", _sql_parameters(props, "SqlFilter", at))
        except ValueError as exc:  # SqlFilterError
            raise ConfigError(f"{at}.SqlFilter.SqlExpression: {exc}") from None
    else:
        raise ConfigError(f"{at}.FilterType: {kind!r} is not Correlation or Sql")
    action = _sql_text(props, "Action", at, None)
    if action is None:
        return rule
    try:
        return replace(rule, action_expression=action, action_parameters=_sql_parameters(props, "Action", at))
    except ValueError as exc:  # SqlFilterError
        raise ConfigError(f"{at}.Action.SqlExpression: {exc}") from None


def _access_rules(container: dict[str, Any], where: str, entity: str = "") -> list[AccessRule]:
    """A namespace's, queue's or topic's ``AuthorizationRules`` (see the module)."""
    rules: list[AccessRule] = []
    for i, item in enumerate(_list(container.get("AuthorizationRules"), f"{where}.AuthorizationRules")):
        at = f"{where}.AuthorizationRules[{i}]"
        obj = _obj(item, at)
        name = obj.get("Name")
        if not isinstance(name, str) or not RULE_NAME.fullmatch(name):
            raise ConfigError(f"{at}.Name: expected a rule name (letters, digits, '.', '-', '_'), not {name!r}")
        if any(rule.name == name for rule in rules):
            raise ConfigError(f"{at}.Name: {name!r} appears twice")
        keys = []
        for field_name in ("PrimaryKey", "SecondaryKey"):
            key = obj.get(field_name)
            if key is None and field_name == "SecondaryKey":
                continue
            if not isinstance(key, str) or not key:
                raise ConfigError(f"{at}.{field_name}: expected a non-empty key")
            keys.append(key)
        try:
            rights = parse_rights(_list(obj.get("Rights"), f"{at}.Rights"), f"{at}.Rights")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        unknown = sorted(set(obj) - {"Name", "PrimaryKey", "SecondaryKey", "Rights"})
        if unknown:
            raise ConfigError(f"{at}.{unknown[0]}: not a field of an authorization rule")
        rules.append(AccessRule(name, tuple(keys), rights, entity.lower()))
    if entity and len(rules) > MAX_ENTITY_RULES:
        raise ConfigError(
            f"{where}.AuthorizationRules: {len(rules)} rules, above {MAX_ENTITY_RULES} per queue or topic"
        )
    return rules


def _entity_list(container: dict[str, Any], key: str, where: str) -> list[tuple[str, dict[str, Any], str]]:
    out = []
    seen: set[str] = set()
    for i, item in enumerate(_list(container.get(key), f"{where}.{key}")):
        at = f"{where}.{key}[{i}]"
        obj = _obj(item, at)
        name = _name(obj, at)
        if name.lower() in seen:
            raise ConfigError(f"{at}.Name: {name!r} appears twice")
        seen.add(name.lower())
        out.append((name, obj, at))
    return out


def _namespace(value: Any, where: str) -> NamespaceConfig:
    obj = _obj(value, where)
    name = obj.get("Name", "sbemulatorns")
    if not isinstance(name, str):
        raise ConfigError(f"{where}.Name: expected a string, not {name!r}")
    access = _access_rules(obj, where)
    queues = []
    for n, o, at in _entity_list(obj, "Queues", where):
        queues.append(QueueConfig(n, _properties(o.get("Properties"), f"{at}.Properties")))
        access += _access_rules(o, at, n)
    topics = []
    for n, o, at in _entity_list(obj, "Topics", where):
        access += _access_rules(o, at, n)
        subs = []
        for sn, so, sat in _entity_list(o, "Subscriptions", at):
            rules = tuple(_rule(r, f"{sat}.Rules[{j}]") for j, r in enumerate(_list(so.get("Rules"), f"{sat}.Rules")))
            subs.append(SubscriptionConfig(sn, _properties(so.get("Properties"), f"{sat}.Properties"), rules))
        topics.append(TopicConfig(n, _properties(o.get("Properties"), f"{at}.Properties"), tuple(subs)))
    names = {q.name.lower() for q in queues}
    for t in topics:
        if t.name.lower() in names:
            raise ConfigError(f"{where}.Topics: {t.name!r} is also a queue's name")
    tier = obj.get("Tier", "Standard")
    if tier not in ("Basic", "Standard", "Premium"):
        raise ConfigError(f"{where}.Tier: expected Basic, Standard or Premium, not {tier!r}")
    premium = tier == "Premium"
    count = PREMIUM_PARTITION_COUNT if premium else DEFAULT_PARTITION_COUNT
    if "PartitionCount" in obj:
        count = _int(obj["PartitionCount"], f"{where}.PartitionCount", 1, MAX_PARTITION_COUNT)
    return NamespaceConfig(
        name,
        tuple(queues),
        tuple(topics),
        partition_count=count,
        partition_all=premium,
        authorization_rules=tuple(access),
    )


def parse_config(document: Any) -> BrokerConfig:
    """A :class:`BrokerConfig` from the decoded JSON document (a dict)."""
    root = _obj(document, "(file)")
    user = _obj(root.get("UserConfig"), "UserConfig")
    namespaces = tuple(
        _namespace(ns, f"UserConfig.Namespaces[{i}]")
        for i, ns in enumerate(_list(user.get("Namespaces"), "UserConfig.Namespaces"))
    )
    return BrokerConfig(namespaces or (NamespaceConfig(),))


def load_config(path: str | os.PathLike[str]) -> BrokerConfig:
    """Read and check an emulator ``Config.json``; :class:`ConfigError` names what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc}") from None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    return parse_config(document)
