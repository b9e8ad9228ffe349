"""Entity descriptions of the management API <-> the namespace's settings and rules.

Reading takes the description element of a request's Atom entry (element names as
the SDK's ``_generated`` models write them, in any order, in the Service Bus
namespace or none) and checks every value with the same readers as ``Config.json``
(:mod:`amqplink.broker.config`), so a bad value is a :class:`ValueError` naming the
element. Writing emits elements in the order of the service's data contracts.
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from amqplink.atom.authorization import (
    SHARED_ACCESS_RULE,
    SharedAccessRule,
    authorization_rules_xml,
    read_authorization_rules,
)
from amqplink.atom.document import (
    COUNTS_NS,
    MAX_TIMESPAN,
    SB_NS,
    XSI_NS,
    element,
    format_duration,
    format_time,
)
from amqplink.atom.values import CORRELATION_FIELDS, key_values_xml, read_key_values
from amqplink.atom.xmlsafe import local_name
from amqplink.broker.config import (
    _PROPERTY_READERS,
    ConfigError,
    CorrelationFilter,
    EntityProperties,
    RuleConfig,
    parse_duration,
)
from amqplink.broker.namespace.counts import MessageCounts
from amqplink.broker.rights import (
    MAX_ENTITY_RULES,
    RULE_NAME,
    AccessRule,
    check_key,
    new_key,
    parse_rights,
    right_names,
)

__all__ = [
    "Counts",
    "EntityMeta",
    "described_access_rules",
    "read_access_rules",
    "MAX_DUPLICATE_WINDOW",
    "MAX_USER_METADATA",
    "MIN_DUPLICATE_WINDOW",
    "PREMIUM_MAX_MESSAGE_KB",
    "PREMIUM_MIN_MESSAGE_KB",
    "description_of",
    "queue_description",
    "read_meta",
    "read_properties",
    "created",
    "read_rule",
    "replacing",
    "rule_description",
    "subscription_description",
    "topic_description",
]

MIN_DUPLICATE_WINDOW = 20.0
MAX_DUPLICATE_WINDOW = 7 * 86400.0
"""Seconds of ``DuplicateDetectionHistoryTimeWindow`` the API accepts (20 seconds to 7 days)."""
PREMIUM_MIN_MESSAGE_KB = 1024
PREMIUM_MAX_MESSAGE_KB = 102400
"""``MaxMessageSizeInKilobytes`` on a Premium namespace: at least 1 MB (its default), at most 100 MB."""
MAX_USER_METADATA = 1024
"""Characters of ``UserMetadata`` (Service Bus: "maximum length is 1024")."""
_XSI_TYPE = f"{{{XSI_NS}}}type"
_BOOL_KEYS = {"RequiresSession", "RequiresDuplicateDetection", "DeadLetteringOnMessageExpiration"}
_INT_KEYS = {"MaxDeliveryCount", "MaxMessageSizeInKilobytes", "MaxSizeInMegabytes"}
_TEXT_KEYS = {
    "LockDuration",
    "DefaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow",
    "ForwardTo",
    "ForwardDeadLetteredMessagesTo",
}
"""Elements read as text; any other a config reader knows is typed by its text (a boolean or a number)."""
_CORRELATION = tuple((key, "subject" if attr == "label" else attr) for key, attr in CORRELATION_FIELDS)
"""Correlation elements -> :class:`CorrelationFilter` fields (the SDK's ``label`` is the broker's ``subject``)."""


@dataclass(frozen=True)
class EntityMeta:
    """What the API keeps about an entity beyond its settings."""

    created: float
    updated: float
    user_metadata: str = ""
    auto_delete_on_idle: str = MAX_TIMESPAN
    enable_batched_operations: bool = True
    enable_express: bool = False
    support_ordering: bool = True
    """``SupportOrdering``: kept and read back (the broker delivers in order either way)."""


@dataclass(frozen=True)
class Counts(MessageCounts):
    """Runtime counts of a queue, topic or subscription (``CountDetails``, ``MessageCount``, ``SizeInBytes``)."""

    def xml(self) -> str:
        """The ``CountDetails`` element of an entity's description (active, dead-letter, scheduled; transfers 0)."""
        items = (
            ("ActiveMessageCount", self.active),
            ("DeadLetterMessageCount", self.dead_letter),
            ("ScheduledMessageCount", self.scheduled),
            ("TransferDeadLetterMessageCount", 0),
            ("TransferMessageCount", 0),
        )
        inner = "".join(element(f"d2p1:{name}", value) for name, value in items)
        return f'<CountDetails xmlns:d2p1="{COUNTS_NS}">{inner}</CountDetails>'


# -- reading -------------------------------------------------------------------------
def description_of(root: ET.Element, kind: str) -> ET.Element:
    """The ``kind`` element (e.g. ``QueueDescription``) inside an Atom ``entry``'s ``content``."""
    if local_name(root.tag) != "entry":
        raise ValueError(f"expected an Atom entry, not <{local_name(root.tag)}>")
    for content in root:
        if local_name(content.tag) == "content":
            for child in content:
                if local_name(child.tag) == kind:
                    return child
    raise ValueError(f"the entry's content holds no {kind}")


def _fields(desc: ET.Element) -> dict[str, ET.Element]:
    return {local_name(child.tag): child for child in desc}


def _bool(text: str, where: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{where}: expected true or false, not {text!r}")
    return value == "true"


def _typed(key: str, text: str, where: str) -> Any:
    if key in _BOOL_KEYS or (key not in _TEXT_KEYS and text.strip().lower() in ("true", "false")):
        return _bool(text, where)
    if key in _INT_KEYS or (key not in _TEXT_KEYS and text.strip().isdigit()):
        stripped = text.strip()
        if not stripped.isascii() or not stripped.lstrip("-").isdigit() or len(stripped) > 12:
            raise ConfigError(f"{where}: expected an integer, not {text!r}")
        return int(stripped)
    return text.strip()


def read_properties(desc: ET.Element, base: EntityProperties, *, premium: bool = False) -> EntityProperties:
    """``base`` with the settings ``desc`` gives; :class:`ConfigError` names a bad element or a
    value Service Bus refuses (:func:`_check_limits`)."""
    kind = local_name(desc.tag)
    fields = _fields(desc)
    changed: dict[str, Any] = {}
    for key, (attr, read) in _PROPERTY_READERS.items():
        child = fields.get(key)
        if child is not None:
            where = f"{kind}.{key}"
            changed[attr] = read(_typed(key, child.text or "", where), where)
    result = replace(base, **changed)
    _check_limits(kind, result, base, premium)
    return result


def _check_limits(kind: str, p: EntityProperties, base: EntityProperties, premium: bool) -> None:
    """What the service refuses though ``Config.json`` may set it.

    ``DuplicateDetectionHistoryTimeWindow``: "Max value is 7 days and minimum is 20 seconds"
    (QueueProperties.DuplicateDetectionHistoryTimeWindow, Azure.Messaging.ServiceBus);
    ``MaxMessageSizeInKilobytes``: "only available when using a Premium namespace [...] The
    minimum allowed value is 1024 while the maximum allowed value is 102400. Default value is
    1024." (ServiceBusAdministrationClient.create_queue), so a Standard namespace refuses a change.
    """
    window = p.duplicate_detection_window
    if window != base.duplicate_detection_window and not MIN_DUPLICATE_WINDOW <= window <= MAX_DUPLICATE_WINDOW:
        raise ConfigError(
            f"{kind}.DuplicateDetectionHistoryTimeWindow: {format_duration(window)} is outside"
            f" {format_duration(MIN_DUPLICATE_WINDOW)}..{format_duration(MAX_DUPLICATE_WINDOW)} (20 seconds to 7 days)"
        )
    if p.max_message_size != base.max_message_size:
        if not premium:
            raise ConfigError(
                f"{kind}.MaxMessageSizeInKilobytes: can be set only on a Premium namespace; this one is Standard"
                f" (its limit is {base.max_message_size >> 10} KB)"
            )
        if not PREMIUM_MIN_MESSAGE_KB << 10 <= p.max_message_size <= PREMIUM_MAX_MESSAGE_KB << 10:
            raise ConfigError(
                f"{kind}.MaxMessageSizeInKilobytes: {p.max_message_size >> 10} is outside"
                f" {PREMIUM_MIN_MESSAGE_KB}..{PREMIUM_MAX_MESSAGE_KB}"
            )


def created(premium: bool) -> EntityProperties:
    """The base a new entity's description reads onto: the defaults, and on Premium a 1 MB message limit."""
    return EntityProperties(max_message_size=PREMIUM_MIN_MESSAGE_KB << 10) if premium else EntityProperties()


def replacing(current: EntityProperties) -> EntityProperties:
    """The base an update (a ``PUT`` with ``If-Match``) reads onto: the description replaces the
    entity's, so an element left out (``ForwardTo``, say) takes its default; what no
    description carries or cannot change (sessions, partitioning) stays."""
    return EntityProperties(
        requires_session=current.requires_session,
        enable_partitioning=current.enable_partitioning,
        partition_count=current.partition_count,
        max_messages=current.max_messages,
        max_message_size=current.max_message_size,
    )


def read_meta(desc: ET.Element, base: EntityMeta, now: float) -> EntityMeta:
    """``base`` with the API-only fields ``desc`` gives (``Status`` other than Active is refused)."""
    kind = local_name(desc.tag)
    fields = _fields(desc)
    changed: dict[str, Any] = {"updated": now}
    status = fields.get("Status")
    if status is not None and (status.text or "").strip() not in ("", "Active"):
        raise ConfigError(f"{kind}.Status: {status.text!r} is not supported by this broker (only Active)")
    if "UserMetadata" in fields:
        text = fields["UserMetadata"].text or ""
        if len(text) > MAX_USER_METADATA:
            raise ConfigError(f"{kind}.UserMetadata: longer than {MAX_USER_METADATA} characters")
        changed["user_metadata"] = text
    if "AutoDeleteOnIdle" in fields:
        text = (fields["AutoDeleteOnIdle"].text or "").strip()
        parse_duration(text, f"{kind}.AutoDeleteOnIdle")
        changed["auto_delete_on_idle"] = text
    for key, attr in (
        ("EnableBatchedOperations", "enable_batched_operations"),
        ("EnableExpress", "enable_express"),
        ("SupportOrdering", "support_ordering"),
    ):
        if key in fields:
            changed[attr] = _bool(fields[key].text or "", f"{kind}.{key}")
    return replace(base, **changed)


def read_access_rules(desc: ET.Element) -> tuple[AccessRule, ...]:
    """The queue's or topic's own shared access rules its ``AuthorizationRules`` gives (none when
    it is left out: a description replaces the entity's); :class:`ConfigError` naming the element.

    As Service Bus checks them (``SharedAccessAuthorizationRule``, Azure.Messaging.ServiceBus;
    "Authenticate access to Azure Service Bus with Shared Access Signatures"): the only type
    is ``SharedAccessAuthorizationRule``; ``KeyName`` letters, digits, periods, hyphens and
    underscores (256 at most), once per entity; ``Rights`` each right once, Manage only with
    Listen and Send; keys Base64, each made (256 random bits) when not given; 12 rules at most.
    """
    kind = local_name(desc.tag)
    node = _fields(desc).get("AuthorizationRules")
    if node is None:
        return ()
    where = f"{kind}.AuthorizationRules"
    try:
        found = read_authorization_rules(node, where)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if len(found) > MAX_ENTITY_RULES:
        raise ConfigError(f"{where}: {len(found)} rules, above the limit of {MAX_ENTITY_RULES} per queue or topic")
    rules: list[AccessRule] = []
    for i, rule in enumerate(found):
        at = f"{where}[{i}]"
        if rule.type not in ("", SHARED_ACCESS_RULE):
            raise ConfigError(f"{at}: type {rule.type[:60]!r} is not kept; the only rule type is {SHARED_ACCESS_RULE}")
        if not RULE_NAME.fullmatch(rule.key_name):
            raise ConfigError(
                f"{at}.KeyName: {rule.key_name[:80]!r} is not a rule name"
                " (1 to 256 letters, digits, '.', '-', '_', starting with a letter or digit)"
            )
        if any(other.name == rule.key_name for other in rules):
            raise ConfigError(f"{at}.KeyName: {rule.key_name!r} appears twice")
        try:
            rights = parse_rights(rule.rights, f"{at}.Rights", strict=True)
            keys = tuple(
                new_key() if key is None else check_key(key, f"{at}.{name}")
                for name, key in (("PrimaryKey", rule.primary_key), ("SecondaryKey", rule.secondary_key))
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        rules.append(AccessRule(rule.key_name, keys, rights))
    return tuple(rules)


def described_access_rules(
    rules: Iterable[AccessRule], times: Callable[[AccessRule], tuple[float, float]]
) -> list[SharedAccessRule]:
    """``rules`` as a description writes them, keys included (the API answers only Manage
    callers), with their creation and change times (``times``)."""
    out = []
    for rule in rules:
        created_at, modified_at = times(rule)
        out.append(
            SharedAccessRule(
                rule.name,
                right_names(rule.rights),
                rule.keys[0],
                rule.keys[1] if len(rule.keys) > 1 else None,
                dt.datetime.fromtimestamp(created_at, dt.UTC),
                dt.datetime.fromtimestamp(modified_at, dt.UTC),
            )
        )
    return out


def _xsi_type(node: ET.Element) -> str:
    return node.attrib.get(_XSI_TYPE, "").rsplit(":", 1)[-1]


def read_rule(desc: ET.Element, name: str) -> RuleConfig:
    """The rule a ``RuleDescription`` describes; :class:`ValueError` (``SqlFilterError`` with the position)."""
    fields = _fields(desc)
    flt = fields.get("Filter")
    kind = "TrueFilter" if flt is None else _xsi_type(flt)
    f = {} if flt is None else _fields(flt)
    where = f"RuleDescription.Filter({kind})"
    if kind == "TrueFilter":
        rule = RuleConfig(name, "True", sql_expression="1=1")
    elif kind == "FalseFilter":
        rule = RuleConfig(name, "False", sql_expression="1=0")
    elif kind == "SqlFilter":
        rule = RuleConfig(
            name,
            "Sql",
            sql_expression=(f["SqlExpression"].text or "") if "SqlExpression" in f else "",
            parameters=read_key_values(f.get("Parameters"), f"{where}.Parameters"),
        )
    elif kind == "CorrelationFilter":
        kwargs: dict[str, Any] = {attr: f[key].text for key, attr in _CORRELATION if key in f and f[key].text}
        props = f.get("Properties")
        if props is not None:
            kwargs["properties"] = tuple(read_key_values(props, f"{where}.Properties").items())
        if not kwargs:
            raise ValueError(f"{where}: a correlation filter needs at least one field or property")
        rule = RuleConfig(name, "Correlation", CorrelationFilter(**kwargs))
    else:
        raise ValueError(f"RuleDescription.Filter: {kind!r} is not a Sql, Correlation, True or False filter")
    action = fields.get("Action")
    action_kind = "EmptyRuleAction" if action is None else _xsi_type(action)
    if action_kind == "SqlRuleAction":
        a = _fields(action) if action is not None else {}
        return replace(
            rule,
            action_expression=(a["SqlExpression"].text or "") if "SqlExpression" in a else "",
            action_parameters=read_key_values(a.get("Parameters"), "RuleDescription.Action.Parameters"),
        )
    if action_kind != "EmptyRuleAction":
        raise ValueError(f"RuleDescription.Action: {action_kind!r} is not SqlRuleAction or EmptyRuleAction")
    return rule


# -- writing -------------------------------------------------------------------------
def _open(kind: str) -> str:
    return f'<{kind} xmlns="{SB_NS}" xmlns:i="{XSI_NS}">'


def _times(meta: EntityMeta) -> str:
    return (
        element("CreatedAt", format_time(meta.created))
        + element("UpdatedAt", format_time(meta.updated))
        + element("AccessedAt", format_time(meta.updated))
    )


def _forward(value: str | None) -> str:
    return element("ForwardTo", value) if value else ""


def _forward_dead_letters(value: str | None) -> str:
    return element("ForwardDeadLetteredMessagesTo", value) if value else ""


def queue_description(
    p: EntityProperties, meta: EntityMeta, counts: Counts, authorization: Sequence[SharedAccessRule] = ()
) -> str:
    """A ``QueueDescription``, elements in the service's order; ``authorization``: its own rules."""
    return (
        _open("QueueDescription")
        + element("LockDuration", format_duration(p.lock_duration))
        + element("MaxSizeInMegabytes", p.max_bytes >> 20)
        + element("RequiresDuplicateDetection", p.requires_duplicate_detection)
        + element("RequiresSession", p.requires_session)
        + element("DefaultMessageTimeToLive", format_duration(p.default_message_ttl))
        + element("DeadLetteringOnMessageExpiration", p.dead_lettering_on_message_expiration)
        + element("DuplicateDetectionHistoryTimeWindow", format_duration(p.duplicate_detection_window))
        + element("MaxDeliveryCount", p.max_delivery_count)
        + element("EnableBatchedOperations", meta.enable_batched_operations)
        + element("SizeInBytes", counts.size)
        + element("MessageCount", counts.total)
        + element("IsAnonymousAccessible", False)
        + authorization_rules_xml(authorization)
        + element("Status", "Active")
        + _forward(p.forward_to)
        + element("UserMetadata", meta.user_metadata)
        + _times(meta)
        + element("SupportOrdering", meta.support_ordering)
        + counts.xml()
        + element("AutoDeleteOnIdle", meta.auto_delete_on_idle)
        + element("EnablePartitioning", p.enable_partitioning)
        + element("EntityAvailabilityStatus", "Available")
        + _forward_dead_letters(p.forward_dead_lettered_messages_to)
        + element("EnableExpress", meta.enable_express)
        + element("MaxMessageSizeInKilobytes", p.max_message_size >> 10)
        + "</QueueDescription>"
    )


def topic_description(
    p: EntityProperties,
    meta: EntityMeta,
    counts: Counts,
    subscriptions: int,
    filters: Mapping[str, int],
    authorization: Sequence[SharedAccessRule] = (),
) -> str:
    """A ``TopicDescription``; ``filters`` counts rules by filter type (``Sql``, ``Correlation``);
    ``authorization``: its own rules."""
    return (
        _open("TopicDescription")
        + element("DefaultMessageTimeToLive", format_duration(p.default_message_ttl))
        + element("MaxSizeInMegabytes", p.max_bytes >> 20)
        + element("RequiresDuplicateDetection", p.requires_duplicate_detection)
        + element("DuplicateDetectionHistoryTimeWindow", format_duration(p.duplicate_detection_window))
        + element("EnableBatchedOperations", meta.enable_batched_operations)
        + element("SizeInBytes", counts.size)
        + element("FilteringMessagesBeforePublishing", False)
        + element("IsAnonymousAccessible", False)
        + authorization_rules_xml(authorization)
        + element("Status", "Active")
        + _times(meta)
        + element("SupportOrdering", meta.support_ordering)
        + counts.xml()
        + element("SubscriptionCount", subscriptions)
        + element("SqlFilterCount", filters.get("Sql", 0))
        + element("CorrelationFilterCount", filters.get("Correlation", 0))
        + element("AutoDeleteOnIdle", meta.auto_delete_on_idle)
        + element("EnablePartitioning", p.enable_partitioning)
        + element("EntityAvailabilityStatus", "Available")
        + element("EnableSubscriptionPartitioning", False)
        + element("EnableExpress", meta.enable_express)
        + element("UserMetadata", meta.user_metadata)
        + element("MaxMessageSizeInKilobytes", p.max_message_size >> 10)
        + "</TopicDescription>"
    )


def subscription_description(p: EntityProperties, meta: EntityMeta, counts: Counts) -> str:
    """A ``SubscriptionDescription``, elements in the service's order."""
    return (
        _open("SubscriptionDescription")
        + element("LockDuration", format_duration(p.lock_duration))
        + element("RequiresSession", p.requires_session)
        + element("DefaultMessageTimeToLive", format_duration(p.default_message_ttl))
        + element("DeadLetteringOnMessageExpiration", p.dead_lettering_on_message_expiration)
        + element("DeadLetteringOnFilterEvaluationExceptions", False)
        + element("MessageCount", counts.total)
        + element("MaxDeliveryCount", p.max_delivery_count)
        + element("EnableBatchedOperations", meta.enable_batched_operations)
        + element("Status", "Active")
        + _forward(p.forward_to)
        + _times(meta)
        + counts.xml()
        + element("UserMetadata", meta.user_metadata)
        + _forward_dead_letters(p.forward_dead_lettered_messages_to)
        + element("AutoDeleteOnIdle", meta.auto_delete_on_idle)
        + element("EntityAvailabilityStatus", "Available")
        + "</SubscriptionDescription>"
    )


def _sql(kind: str, expression: str | None, tag: str = "Filter", parameters: Mapping[str, Any] | None = None) -> str:
    return (
        f'<{tag} i:type="{kind}">'
        + element("SqlExpression", expression or "")
        + element("CompatibilityLevel", 20)
        + (key_values_xml("Parameters", parameters) if parameters else "")
        + "</"
        + tag
        + ">"
    )


def _filter(rule: RuleConfig) -> str:
    if rule.filter_type == "True":
        return _sql("TrueFilter", "1=1")
    if rule.filter_type == "False":
        return _sql("FalseFilter", "1=0")
    if rule.filter_type == "Sql":
        return _sql("SqlFilter", rule.sql_expression, parameters=rule.parameters)
    c = rule.correlation or CorrelationFilter()
    inner = "".join(element(key, getattr(c, attr)) for key, attr in _CORRELATION if getattr(c, attr) is not None)
    return f'<Filter i:type="CorrelationFilter">{inner}{key_values_xml("Properties", c.properties)}</Filter>'


def rule_description(rule: RuleConfig, created: float) -> str:
    """A ``RuleDescription``: filter, action, creation time, name."""
    if rule.action_expression is None:
        action = '<Action i:type="EmptyRuleAction"/>'
    else:
        action = _sql("SqlRuleAction", rule.action_expression, "Action", rule.action_parameters)
    return (
        _open("RuleDescription")
        + _filter(rule)
        + action
        + element("CreatedAt", format_time(created))
        + element("Name", rule.name)
        + "</RuleDescription>"
    )
