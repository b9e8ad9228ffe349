"""Service Bus authorization rules: a name, its keys, its rights, and what it covers.

"Authorization rules: ``Listen``, ``Send``, ``Manage``; Manage implies the others", on the
namespace (covering every entity) or on one queue or topic (covering it, its
subscriptions, its dead-letter queue). A SAS token names its rule (``skn``); it is valid
when one of the rule's keys (primary or secondary) signed it, it has not expired, its
audience's host is one of the namespace's own names (:mod:`amqplink.broker.audience`)
and its audience lies within the rule's entity. It then grants the rule's rights on
its audience: :class:`Grant`.

What needs which right (as Service Bus): a sender link Send, a receiver link Listen,
``$management`` operations by their kind (schedule and cancel Send, the rest Listen),
``$control`` and the management REST API (runtime counts included) Manage.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from amqplink.broker.audience import NamespaceNames, split_audience
from amqplink.sbwire.sas import SasFailure, SasTokenError, parse_sas_token, verify_sas_token

__all__ = [
    "MAX_ENTITY_RULES",
    "MAX_KEY_LENGTH",
    "RULE_NAME",
    "AccessRule",
    "AccessRules",
    "Grant",
    "Right",
    "check_key",
    "describe_rights",
    "new_key",
    "parse_rights",
    "path_covers",
    "right_names",
]

RULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,255}", re.ASCII)
"""A rule's name (``KeyName``): letters, digits, periods, hyphens and underscores, 256 at most."""
MAX_ENTITY_RULES = 12
"""Shared access rules one queue or topic holds at most (Service Bus's quota: "Number of SAS
authorization rules per namespace, queue, or topic: 12")."""
MAX_KEY_LENGTH = 256
"""Characters of a key given over the management API at most (a generated one has 44)."""


class Right(enum.Flag):
    """A claim a rule grants."""

    LISTEN = 1
    SEND = 2
    MANAGE = 4


_BY_NAME = {"listen": Right.LISTEN, "send": Right.SEND, "manage": Right.MANAGE}
_EVERY = Right.LISTEN | Right.SEND | Right.MANAGE


def parse_rights(names: Iterable[object], where: str = "rights", *, strict: bool = False) -> Right:
    """The rights named (``["Listen", "Send"]``, any case); Manage brings Listen and Send.
    ``ValueError`` naming ``where`` for an empty list or an unknown name; ``strict`` (a rule
    sent over the management API, as Service Bus checks it): also for a right named twice, and
    for Manage without both Listen and Send ("Manage permission should also include Send and
    Listen")."""
    rights = Right(0)
    for name in names:
        right = _BY_NAME.get(name.lower()) if isinstance(name, str) else None
        if right is None:
            raise ValueError(f"{where}: {name!r} is not a right (Listen, Send or Manage)")
        if strict and right in rights:
            raise ValueError(f"{where}: {name!r} is named twice (each right once)")
        rights |= right
    if not rights:
        raise ValueError(f"{where}: a rule needs at least one right (Listen, Send or Manage)")
    if strict and Right.MANAGE in rights and rights != _EVERY:
        raise ValueError(f"{where}: Manage must come with Listen and Send (Manage, Listen, Send)")
    return _EVERY if Right.MANAGE in rights else rights


def right_names(rights: Right) -> tuple[str, ...]:
    """``("Listen", "Send")``: the rights as Service Bus names them, in its order."""
    return tuple(name.title() for name, right in _BY_NAME.items() if right in rights)


def describe_rights(rights: Right) -> str:
    """``"Listen, Send"``: the rights as Service Bus names them."""
    return ", ".join(right_names(rights)) or "none"


def new_key() -> str:
    """A key as Service Bus makes one when none is given: 256 random bits in Base64 (44 characters)."""
    return base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def check_key(key: str, where: str) -> str:
    """``key`` if it is Base64 text of at most :data:`MAX_KEY_LENGTH` characters ("SharedAccessAuthorizationRule
    only supports base64 keys"); ``ValueError`` naming ``where`` (never the key) otherwise."""
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"{where}: a key is 1 to {MAX_KEY_LENGTH} characters of Base64 (this one has {len(key)})")
    try:
        base64.b64decode(key.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise ValueError(f"{where}: a key must be Base64 text (such as 32 random bytes encoded)") from None
    return key


def path_covers(granted: str, path: str) -> bool:
    """Whether a token for entity path ``granted`` covers ``path`` ("valid for everything under its URI")."""
    return not granted or path == granted or path.startswith(granted + "/")


@dataclass(frozen=True)
class AccessRule:
    """One authorization rule; its keys never appear in a repr."""

    name: str
    keys: tuple[str, ...] = field(repr=False)
    """Primary key, then the secondary one if any."""
    rights: Right = _EVERY
    entity: str = ""
    """The queue or topic it belongs to (lower case); ``""``: the namespace."""


@dataclass(frozen=True)
class Grant:
    """What a verified token grants: ``rights`` on ``path`` (lower case) until ``expires_at``."""

    path: str
    rights: Right
    rule: str
    expires_at: float
    source: AccessRule | None = field(default=None, compare=False, repr=False)
    """The rule that signed the token (whose removal or change revokes the grant)."""


def _refused(detail: str) -> SasTokenError:
    return SasTokenError(SasFailure.AUDIENCE_NOT_COVERED, detail)


class AccessRules:
    """The rules of one namespace, and the check of a token against them."""

    def __init__(self, rules: Iterable[AccessRule]) -> None:
        self.rules: tuple[AccessRule, ...] = tuple(rules)
        self._by_name: dict[str, list[AccessRule]] = {}
        for rule in self.rules:
            self._by_name.setdefault(rule.name, []).append(rule)

    @classmethod
    def of(cls, keys: Mapping[str, str] | AccessRules) -> AccessRules:
        """Rules from a key map (each a namespace Manage rule, such as ``RootManageSharedAccessKey``)."""
        if isinstance(keys, AccessRules):
            return keys
        return cls(AccessRule(name, (key,)) for name, key in keys.items())

    @property
    def keys(self) -> dict[str, str]:
        """The namespace-level rules' primary keys by name."""
        return {rule.name: rule.keys[0] for rule in self.rules if not rule.entity}

    @property
    def root(self) -> AccessRule | None:
        """The rule a printed connection string uses: the first namespace Manage rule, else
        the first namespace rule."""
        namespace = [rule for rule in self.rules if not rule.entity]
        managers = [rule for rule in namespace if Right.MANAGE in rule.rights]
        chosen = managers or namespace
        return chosen[0] if chosen else None

    def verify(self, token: str, *, now: float, names: NamespaceNames | None = None, local: object = None) -> Grant:
        """Check ``token`` (see the module): its :class:`Grant`, or :class:`SasTokenError` saying
        why not. ``names`` None: the audience's host is not checked (tests of one piece)."""
        parsed = parse_sas_token(token)
        audience = parsed.audience
        split = split_audience(audience)
        if split is None:
            raise _refused(f"the audience {audience[:80]!r} is not a URI of this namespace")
        path = split[2]
        rules = self._by_name.get(parsed.key_name)
        if not rules:
            raise SasTokenError(SasFailure.UNKNOWN_KEY_NAME, f"no key named {parsed.key_name[:64]!r}")
        # A rule covering the audience is tried first (the same name may exist on two entities).
        rules = sorted(rules, key=lambda rule: not path_covers(rule.entity, path))
        for rule in rules:
            for key in rule.keys:
                try:
                    verify_sas_token(token, keys={rule.name: key}, audience=audience, now=now)
                except SasTokenError as exc:
                    if exc.reason is SasFailure.BAD_SIGNATURE:
                        continue
                    raise
                if names is not None and not names.allows(audience, local):
                    raise _refused(f"the token is for host {split[0][:80]!r}, not this namespace ({names.describe()})")
                if not path_covers(rule.entity, path):
                    raise _refused(f"rule {rule.name!r} belongs to {rule.entity!r}; the token names {path!r}")
                return Grant(path, rule.rights, rule.name, float(parsed.expires_at), rule)
        raise SasTokenError(SasFailure.BAD_SIGNATURE, f"signature does not match rule {parsed.key_name[:64]!r}")
