"""Models <-> the Atom XML of the management API (one mapping for the blocking and asyncio clients).

Writing: an Atom ``entry`` whose ``content`` holds the description, its settable elements
in the order of the service's data contracts (as the SDK's generated models give them),
those left ``None`` out. Reading: entries and feeds as the service writes them, element
names in the Service Bus namespace or none, unknown elements ignored.
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from dataclasses import fields
from typing import Any, TypeVar

from amqplink.atom.authorization import (
    SHARED_ACCESS_RULE,
    SharedAccessRule,
    authorization_rules_xml,
    read_authorization_rules,
)
from amqplink.atom.document import (
    ATOM_NS,
    SB_NS,
    XSI_NS,
    duration_seconds,
    duration_timedelta,
    element,
    format_duration,
)
from amqplink.atom.values import CORRELATION_FIELDS, key_values_xml, parse_time, read_key_values
from amqplink.atom.xmlsafe import local_name, parse_xml
from amqplink.servicebus.management._models import (
    AccessRights,
    AuthorizationRule,
    CorrelationRuleFilter,
    DataclassModel,
    FalseRuleFilter,
    NamespaceProperties,
    QueueProperties,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    SubscriptionProperties,
    TopicProperties,
    TrueRuleFilter,
)

__all__ = [
    "entries",
    "entry_description",
    "error_detail",
    "namespace_properties",
    "properties_entry",
    "read_properties",
    "read_rule",
    "read_runtime",
    "rule_description",
    "rule_entry",
    "subscription_entry",
]

M = TypeVar("M", bound=DataclassModel)
_XSI_TYPE = f"{{{XSI_NS}}}type"

# (element, attribute, kind); kinds: bool, int, str, duration, rules (a list of AuthorizationRule)
_QUEUE = (
    ("LockDuration", "lock_duration", "duration"),
    ("MaxSizeInMegabytes", "max_size_in_megabytes", "int"),
    ("RequiresDuplicateDetection", "requires_duplicate_detection", "bool"),
    ("RequiresSession", "requires_session", "bool"),
    ("DefaultMessageTimeToLive", "default_message_time_to_live", "duration"),
    ("DeadLetteringOnMessageExpiration", "dead_lettering_on_message_expiration", "bool"),
    ("DuplicateDetectionHistoryTimeWindow", "duplicate_detection_history_time_window", "duration"),
    ("MaxDeliveryCount", "max_delivery_count", "int"),
    ("EnableBatchedOperations", "enable_batched_operations", "bool"),
    ("AuthorizationRules", "authorization_rules", "rules"),
    ("Status", "status", "str"),
    ("AutoDeleteOnIdle", "auto_delete_on_idle", "duration"),
    ("EnablePartitioning", "enable_partitioning", "bool"),
    ("EnableExpress", "enable_express", "bool"),
    ("ForwardTo", "forward_to", "str"),
    ("UserMetadata", "user_metadata", "str"),
    ("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_messages_to", "str"),
    ("MaxMessageSizeInKilobytes", "max_message_size_in_kilobytes", "int"),
)
_TOPIC = (
    ("DefaultMessageTimeToLive", "default_message_time_to_live", "duration"),
    ("MaxSizeInMegabytes", "max_size_in_megabytes", "int"),
    ("RequiresDuplicateDetection", "requires_duplicate_detection", "bool"),
    ("DuplicateDetectionHistoryTimeWindow", "duplicate_detection_history_time_window", "duration"),
    ("EnableBatchedOperations", "enable_batched_operations", "bool"),
    ("FilteringMessagesBeforePublishing", "filtering_messages_before_publishing", "bool"),
    ("AuthorizationRules", "authorization_rules", "rules"),
    ("Status", "status", "str"),
    ("SupportOrdering", "support_ordering", "bool"),
    ("AutoDeleteOnIdle", "auto_delete_on_idle", "duration"),
    ("EnablePartitioning", "enable_partitioning", "bool"),
    ("EnableExpress", "enable_express", "bool"),
    ("UserMetadata", "user_metadata", "str"),
    ("MaxMessageSizeInKilobytes", "max_message_size_in_kilobytes", "int"),
)
_SUBSCRIPTION = (
    ("LockDuration", "lock_duration", "duration"),
    ("RequiresSession", "requires_session", "bool"),
    ("DefaultMessageTimeToLive", "default_message_time_to_live", "duration"),
    ("DeadLetteringOnMessageExpiration", "dead_lettering_on_message_expiration", "bool"),
    ("DeadLetteringOnFilterEvaluationExceptions", "dead_lettering_on_filter_evaluation_exceptions", "bool"),
    ("MaxDeliveryCount", "max_delivery_count", "int"),
    ("EnableBatchedOperations", "enable_batched_operations", "bool"),
    ("Status", "status", "str"),
    ("ForwardTo", "forward_to", "str"),
    ("UserMetadata", "user_metadata", "str"),
    ("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_messages_to", "str"),
    ("AutoDeleteOnIdle", "auto_delete_on_idle", "duration"),
)
_READ_ONLY = (
    ("EntityAvailabilityStatus", "availability_status", "str"),
    ("SizeInBytes", "size_in_bytes", "int"),
)
_TABLES: dict[type, tuple[str, tuple[tuple[str, str, str], ...]]] = {
    QueueProperties: ("QueueDescription", _QUEUE),
    TopicProperties: ("TopicDescription", _TOPIC),
    SubscriptionProperties: ("SubscriptionDescription", _SUBSCRIPTION),
}
_COUNTS = (
    ("ActiveMessageCount", "active_message_count"),
    ("DeadLetterMessageCount", "dead_letter_message_count"),
    ("ScheduledMessageCount", "scheduled_message_count"),
    ("TransferDeadLetterMessageCount", "transfer_dead_letter_message_count"),
    ("TransferMessageCount", "transfer_message_count"),
)
_RUNTIME = (
    ("AccessedAt", "accessed_at_utc", "time"),
    ("CreatedAt", "created_at_utc", "time"),
    ("UpdatedAt", "updated_at_utc", "time"),
    ("SizeInBytes", "size_in_bytes", "int"),
    ("MessageCount", "total_message_count", "int"),
    ("SubscriptionCount", "subscription_count", "int"),
    ("SqlFilterCount", "sql_filter_count", "int"),
    ("CorrelationFilterCount", "correlation_filter_count", "int"),
)


# -- writing -------------------------------------------------------------------------
def _text(kind: str, value: Any, where: str) -> str:
    if kind == "duration":
        if isinstance(value, dt.timedelta):
            return format_duration(value.total_seconds())
        if isinstance(value, str):
            duration_seconds(value)  # ValueError saying why
            return value
        raise TypeError(f"{where}: expected a timedelta or an ISO-8601 duration, not {type(value).__name__}")
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{where}: expected a bool, not {type(value).__name__}")
        return "true" if value else "false"
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where}: expected an int, not {type(value).__name__}")
        return str(value)
    return str(value)


def _entry(content: str) -> bytes:
    document = (
        f'<?xml version="1.0" encoding="utf-8"?><entry xmlns="{ATOM_NS}">'
        f'<content type="application/xml">{content}</content></entry>'
    )
    return document.encode("utf-8")


def _description(model: Any, extra: str = "") -> str:
    tag, table = _TABLES[type(model)]
    inner = ""
    for name, attr, kind in table:
        value = getattr(model, attr)
        if value is not None and kind == "rules":
            inner += authorization_rules_xml(_shared_access_rule(rule) for rule in value)
        elif value is not None:
            inner += element(name, _text(kind, value, f"{type(model).__name__}.{attr}"))
    return f'<{tag} xmlns="{SB_NS}" xmlns:i="{XSI_NS}">{inner}{extra}</{tag}>'


def _shared_access_rule(rule: AuthorizationRule) -> SharedAccessRule:
    if not isinstance(rule, AuthorizationRule):
        raise TypeError(f"authorization_rules: expected AuthorizationRule items, not {type(rule).__name__}")
    return SharedAccessRule(
        rule.key_name or "",
        tuple(str(right) for right in rule.rights or ()),
        rule.primary_key,
        rule.secondary_key,
        rule.created_at_utc,
        rule.modified_at_utc,
        type=rule.type or SHARED_ACCESS_RULE,
        claim_type=rule.claim_type or "SharedAccessKey",
        claim_value=rule.claim_value or "None",
    )


def _authorization_rule(rule: SharedAccessRule) -> AuthorizationRule:
    rights: list[AccessRights | str] = [_right(right) for right in rule.rights]
    return AuthorizationRule(
        type=rule.type or None,
        claim_type=rule.claim_type or None,
        claim_value=rule.claim_value or None,
        rights=rights,
        created_at_utc=rule.created,
        modified_at_utc=rule.modified,
        key_name=rule.key_name,
        primary_key=rule.primary_key,
        secondary_key=rule.secondary_key,
    )


def _right(name: str) -> AccessRights | str:
    try:
        return AccessRights(name)
    except ValueError:
        return name


def properties_entry(model: QueueProperties | TopicProperties | SubscriptionProperties) -> bytes:
    """The request body creating or updating the entity ``model`` describes."""
    return _entry(_description(model))


def _sql(kind: str, expression: str | None, parameters: dict[str, Any] | None, tag: str) -> str:
    return (
        f'<{tag} i:type="{kind}">'
        + element("SqlExpression", expression or "")
        + element("CompatibilityLevel", 20)
        + (key_values_xml("Parameters", parameters) if parameters else "")
        + f"</{tag}>"
    )


def _filter_xml(flt: SqlRuleFilter | CorrelationRuleFilter | None) -> str:
    if flt is None or isinstance(flt, TrueRuleFilter):
        return _sql("TrueFilter", "1=1", None, "Filter")
    if isinstance(flt, FalseRuleFilter):
        return _sql("FalseFilter", "1=0", None, "Filter")
    if isinstance(flt, SqlRuleFilter):
        return _sql("SqlFilter", flt.sql_expression, flt.parameters, "Filter")
    inner = "".join(element(key, getattr(flt, attr)) for key, attr in CORRELATION_FIELDS if getattr(flt, attr))
    props = key_values_xml("Properties", flt.properties) if flt.properties else ""
    return f'<Filter i:type="CorrelationFilter">{inner}{props}</Filter>'


def rule_description(rule: RuleProperties, tag: str = "RuleDescription") -> str:
    """A ``RuleDescription`` (or, with ``tag``, a subscription's ``DefaultRuleDescription``)."""
    if rule.action is None:
        action = '<Action i:type="EmptyRuleAction"/>'
    else:
        action = _sql("SqlRuleAction", rule.action.sql_expression, rule.action.parameters, "Action")
    namespaces = f' xmlns="{SB_NS}" xmlns:i="{XSI_NS}"'
    return f"<{tag}{namespaces}>{_filter_xml(rule.filter)}{action}{element('Name', rule.name)}</{tag}>"


def rule_entry(rule: RuleProperties) -> bytes:
    """The request body creating or updating ``rule``."""
    return _entry(rule_description(rule))


def subscription_entry(sub: SubscriptionProperties, default_rule: RuleProperties | None) -> bytes:
    """A subscription's body, with the ``$Default`` rule it starts with when ``default_rule`` is given."""
    extra = "" if default_rule is None else rule_description(default_rule, "DefaultRuleDescription")
    return _entry(_description(sub, extra))


# -- reading -------------------------------------------------------------------------
def _children(node: ET.Element) -> dict[str, ET.Element]:
    return {local_name(child.tag): child for child in node}


def _value(kind: str, text: str) -> Any:
    if kind == "bool":
        return text.strip().lower() == "true"
    if kind == "int":
        return int(text)
    if kind == "duration":
        return duration_timedelta(text.strip())
    if kind == "time":
        return parse_time(text)
    return text


def entry_description(root: ET.Element) -> tuple[str, ET.Element]:
    """``(title, description element)`` of an Atom entry; :class:`ValueError` if it holds none."""
    if local_name(root.tag) != "entry":
        raise ValueError(f"expected an Atom entry, not <{local_name(root.tag)}>")
    parts = _children(root)
    title = (parts["title"].text or "") if "title" in parts else ""
    content = parts.get("content")
    if content is None or not len(content):
        raise ValueError("the entry has no content")
    return title, content[0]


def entries(body: bytes) -> tuple[list[ET.Element], str | None]:
    """The entries of a feed and its ``next`` link (None: no more)."""
    root = parse_xml(body)
    if local_name(root.tag) != "feed":
        raise ValueError(f"expected an Atom feed, not <{local_name(root.tag)}>")
    found = [child for child in root if local_name(child.tag) == "entry"]
    links = (c.attrib.get("href") for c in root if local_name(c.tag) == "link" and c.attrib.get("rel") == "next")
    return found, next(links, None)


def _read(desc: ET.Element, table: tuple[tuple[str, str, str], ...]) -> dict[str, Any]:
    parts = _children(desc)
    out: dict[str, Any] = {}
    for name, attr, kind in table:
        node = parts.get(name)
        if node is not None and kind == "rules":
            # none reads back None, as the SDK's models give it
            out[attr] = [_authorization_rule(rule) for rule in read_authorization_rules(node)] or None
        elif node is not None and (node.text is not None or kind == "str"):
            out[attr] = _value(kind, node.text or "")
    return out


def read_properties(cls: type[M], entry: ET.Element) -> M:
    """``cls`` (``QueueProperties``...) from an entry: name from the title, fields from the description."""
    title, desc = entry_description(entry)
    _, table = _TABLES[cls]
    values = _read(desc, table + _READ_ONLY)
    names = [f.name for f in fields(cls) if f.name != "name"]
    return cls(title, **{k: values.get(k) for k in names})


def read_runtime(cls: type[M], entry: ET.Element) -> M:
    """``cls`` (``QueueRuntimeProperties``...) from an entry's counts and times."""
    title, desc = entry_description(entry)
    values = _read(desc, _RUNTIME)
    details = _children(desc).get("CountDetails")
    if details is not None:
        values.update(_read(details, tuple((name, attr, "int") for name, attr in _COUNTS)))
    known = {f.name for f in fields(cls)}
    return cls(title, **{k: v for k, v in values.items() if k in known})


def _read_filter(node: ET.Element | None) -> SqlRuleFilter | CorrelationRuleFilter | None:
    if node is None:
        return None
    kind = node.attrib.get(_XSI_TYPE, "").rsplit(":", 1)[-1]
    parts = _children(node)
    if kind in ("TrueFilter", "FalseFilter"):
        flt = TrueRuleFilter() if kind == "TrueFilter" else FalseRuleFilter()
        flt.parameters = {}  # as the SDK reads any SQL filter
        return flt
    if kind == "SqlFilter":
        expression = parts["SqlExpression"].text if "SqlExpression" in parts else None
        parameters = read_key_values(parts.get("Parameters"), "SqlFilter.Parameters")
        return SqlRuleFilter(expression, parameters)
    if kind == "CorrelationFilter":
        values: dict[str, Any] = {attr: parts[key].text for key, attr in CORRELATION_FIELDS if key in parts}
        properties = read_key_values(parts.get("Properties"), "CorrelationFilter.Properties")
        return CorrelationRuleFilter(**values, properties=properties)
    raise ValueError(f"a rule filter of type {kind!r} is not known")


def read_rule(entry: ET.Element) -> RuleProperties:
    """A rule from its entry."""
    title, desc = entry_description(entry)
    parts = _children(desc)
    action_node = parts.get("Action")
    action = None
    if action_node is not None and action_node.attrib.get(_XSI_TYPE, "").endswith("SqlRuleAction"):
        a = _children(action_node)
        action = SqlRuleAction(
            a["SqlExpression"].text if "SqlExpression" in a else None,
            read_key_values(a.get("Parameters"), "SqlRuleAction.Parameters"),
        )
    created = parse_time(parts["CreatedAt"].text or "") if "CreatedAt" in parts else None
    name = (parts["Name"].text or title) if "Name" in parts else title
    return RuleProperties(name, filter=_read_filter(parts.get("Filter")), action=action, created_at_utc=created)


def namespace_properties(entry: ET.Element) -> NamespaceProperties:
    """The namespace's properties from the ``$namespaceinfo`` entry."""
    title, desc = entry_description(entry)
    values = _read(
        desc,
        (
            ("Alias", "alias", "str"),
            ("CreatedTime", "created_at_utc", "time"),
            ("MessagingSKU", "messaging_sku", "str"),
            ("MessagingUnits", "messaging_units", "int"),
            ("ModifiedTime", "modified_at_utc", "time"),
            ("Name", "name", "str"),
            ("NamespaceType", "namespace_type", "str"),
        ),
    )
    name = values.pop("name", title)
    return NamespaceProperties(
        name, **{f.name: values.get(f.name) for f in fields(NamespaceProperties) if f.name != "name"}
    )


def error_detail(body: bytes) -> str:
    """The ``Detail`` of an ``<Error>`` document, or the body's text when it is not one."""
    try:
        root = parse_xml(body)
    except ValueError:
        return body[:300].decode("utf-8", "replace")
    detail = _children(root).get("Detail")
    return (detail.text or "") if detail is not None else body[:300].decode("utf-8", "replace")
