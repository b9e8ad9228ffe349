"""An entity's ``<AuthorizationRules>``: its shared access rules as a queue's or topic's
description carries them (the SDK's ``_generated`` ``AuthorizationRule``).

Each is ``<AuthorizationRule i:type="SharedAccessAuthorizationRule">`` with, in this order,
``ClaimType`` (``SharedAccessKey``), ``ClaimValue`` (``None``), ``Rights`` (one
``<AccessRights>`` per right: ``Listen``, ``Send``, ``Manage``), ``CreatedTime``,
``ModifiedTime``, ``KeyName``, ``PrimaryKey``, ``SecondaryKey``. This module writes and reads
that shape only; what a valid rule is (names, rights, keys, how many) is the broker's
(:mod:`amqplink.broker.rights`). Keys never appear in a repr.
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field

from amqplink.atom.document import XSI_NS, element, format_time
from amqplink.atom.values import parse_time
from amqplink.atom.xmlsafe import local_name

__all__ = ["SHARED_ACCESS_RULE", "SharedAccessRule", "authorization_rules_xml", "read_authorization_rules"]

SHARED_ACCESS_RULE = "SharedAccessAuthorizationRule"
"""The one ``i:type`` of rule Service Bus keeps on an entity."""
_XSI_TYPE = f"{{{XSI_NS}}}type"


@dataclass(frozen=True)
class SharedAccessRule:
    """One ``<AuthorizationRule>`` as written or read (no check of its values)."""

    key_name: str
    rights: tuple[str, ...]
    primary_key: str | None = field(default=None, repr=False)
    secondary_key: str | None = field(default=None, repr=False)
    created: dt.datetime | None = None
    modified: dt.datetime | None = None
    type: str = SHARED_ACCESS_RULE
    """The ``i:type`` read (``""`` when the element has none)."""
    claim_type: str = "SharedAccessKey"
    claim_value: str = "None"


def _rule_xml(rule: SharedAccessRule) -> str:
    rights = "".join(element("AccessRights", right) for right in rule.rights)
    times = ""
    if rule.created is not None:
        times += element("CreatedTime", format_time(rule.created.timestamp()))
    if rule.modified is not None:
        times += element("ModifiedTime", format_time(rule.modified.timestamp()))
    keys = "".join(
        element(name, key)
        for name, key in (("PrimaryKey", rule.primary_key), ("SecondaryKey", rule.secondary_key))
        if key is not None
    )
    return (
        f'<AuthorizationRule i:type="{rule.type or SHARED_ACCESS_RULE}">'
        + element("ClaimType", rule.claim_type)
        + element("ClaimValue", rule.claim_value)
        + f"<Rights>{rights}</Rights>"
        + times
        + element("KeyName", rule.key_name)
        + keys
        + "</AuthorizationRule>"
    )


def authorization_rules_xml(rules: Iterable[SharedAccessRule]) -> str:
    """``<AuthorizationRules>`` holding ``rules`` (the ``i`` prefix: the enclosing description's XSI namespace)."""
    inner = "".join(_rule_xml(rule) for rule in rules)
    return f"<AuthorizationRules>{inner}</AuthorizationRules>" if inner else "<AuthorizationRules/>"


def read_authorization_rules(node: ET.Element, where: str = "AuthorizationRules") -> list[SharedAccessRule]:
    """The rules an ``<AuthorizationRules>`` element holds; :class:`ValueError` naming ``where``
    for a child that is not an ``<AuthorizationRule>`` or a time that does not parse."""
    rules = []
    for i, child in enumerate(node):
        at = f"{where}[{i}]"
        if local_name(child.tag) != "AuthorizationRule":
            raise ValueError(f"{at}: expected <AuthorizationRule>, not <{local_name(child.tag)}>")
        parts = {local_name(part.tag): part for part in child}
        rights_node = parts.get("Rights")
        rights = () if rights_node is None else tuple((r.text or "").strip() for r in rights_node)
        times: dict[str, dt.datetime | None] = {}
        for name, attr in (("CreatedTime", "created"), ("ModifiedTime", "modified")):
            text = (parts[name].text or "").strip() if name in parts else ""
            try:
                times[attr] = parse_time(text) if text else None
            except ValueError:
                raise ValueError(f"{at}.{name}: {text[:40]!r} is not a time") from None
        texts = {name: (part.text or "").strip() for name, part in parts.items()}
        rules.append(
            SharedAccessRule(
                texts.get("KeyName", ""),
                rights,
                texts.get("PrimaryKey") or None,
                texts.get("SecondaryKey") or None,
                type=child.attrib.get(_XSI_TYPE, "").rsplit(":", 1)[-1],
                claim_type=texts.get("ClaimType", ""),
                claim_value=texts.get("ClaimValue", ""),
                created=times["created"],
                modified=times["modified"],
            )
        )
    return rules
