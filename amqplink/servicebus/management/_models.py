"""The administration client's models, with the SDK's names and fields.

As ``azure.servicebus.management``: ``QueueProperties``/``TopicProperties``/
``SubscriptionProperties`` are what a user reads, changes and passes to ``update_*``;
the ``*RuntimeProperties`` are read-only counts and times; durations are
:class:`datetime.timedelta` when read (a ``timedelta`` or an ISO-8601 string when
given), times aware UTC datetimes. ``TrueRuleFilter``/``FalseRuleFilter`` are
``SqlRuleFilter("1=1")``/``SqlRuleFilter("1=0")``, as in the SDK.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import KW_ONLY, Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from amqplink.atom.values import KeyValue

__all__ = [
    "AccessRights",
    "ApiVersion",
    "AuthorizationRule",
    "CorrelationRuleFilter",
    "EntityAvailabilityStatus",
    "EntityStatus",
    "FalseRuleFilter",
    "MessageCountDetails",
    "MessagingSku",
    "NamespaceProperties",
    "NamespaceType",
    "QueueProperties",
    "QueueRuntimeProperties",
    "RuleProperties",
    "SqlRuleAction",
    "SqlRuleFilter",
    "SubscriptionProperties",
    "SubscriptionRuntimeProperties",
    "TopicProperties",
    "TopicRuntimeProperties",
    "TrueRuleFilter",
]


class DataclassModel(Protocol):
    """A model class as the readers (``_xml``) and copies (``_operations``) of models are
    generic over: a dataclass, made from its fields' values."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def __init__(self, *args: Any, **values: Any) -> None: ...


class DictMixin:
    """Mapping access to a model's fields (``dict(props)``, ``props["name"]``), as the SDK's models have."""

    if TYPE_CHECKING:  # each class that mixes it in is a dataclass
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def keys(self) -> list[str]:
        """The field names, in the model's order (as a mapping's keys)."""
        return [f.name for f in fields(self)]

    def values(self) -> list[Any]:
        """The fields' values, in the model's order."""
        return [getattr(self, k) for k in self.keys()]

    def items(self) -> list[tuple[str, Any]]:
        """``(name, value)`` of each field, in the model's order."""
        return [(k, getattr(self, k)) for k in self.keys()]

    def get(self, key: str, default: Any = None) -> Any:
        """A field's value, or ``default`` for a name that is not a field."""
        return getattr(self, key, default) if key in self.keys() else default

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self.keys():
            raise KeyError(key)
        setattr(self, key, value)

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __len__(self) -> int:
        return len(self.keys())


Duration = dt.timedelta | str
"""A duration as given: a timedelta or ISO-8601 text (``PT300S``)."""


class EntityStatus(enum.StrEnum):
    """An entity's status (``Status``): active, disabled, or disabled for sends or receives only."""

    ACTIVE = "Active"
    CREATING = "Creating"
    DELETING = "Deleting"
    DISABLED = "Disabled"
    RECEIVE_DISABLED = "ReceiveDisabled"
    RENAMING = "Renaming"
    RESTORING = "Restoring"
    SEND_DISABLED = "SendDisabled"
    UNKNOWN = "Unknown"


class EntityAvailabilityStatus(enum.StrEnum):
    """A subscription's or entity's availability (``EntityAvailabilityStatus``), read only."""

    AVAILABLE = "Available"
    LIMITED = "Limited"
    RENAMING = "Renaming"
    RESTORING = "Restoring"
    UNKNOWN = "Unknown"


class MessagingSku(enum.StrEnum):
    """The namespace's tier (``MessagingSKU`` of ``$namespaceinfo``)."""

    BASIC = "Basic"
    STANDARD = "Standard"
    PREMIUM = "Premium"


class NamespaceType(enum.StrEnum):
    """The kind of namespace (``NamespaceType`` of ``$namespaceinfo``): ``Messaging`` for Service Bus."""

    MESSAGING = "Messaging"
    NOTIFICATION_HUB = "NotificationHub"
    MIXED = "Mixed"
    EVENT_HUB = "EventHub"
    RELAY = "Relay"


class AccessRights(enum.StrEnum):
    """A shared access rule's rights: ``Listen`` (receive), ``Send``, ``Manage`` (with the other two)."""

    MANAGE = "Manage"
    SEND = "Send"
    LISTEN = "Listen"


class ApiVersion(enum.StrEnum):
    """The management API versions (``api-version``); the SDK's default, and ours, is ``2024-05``."""

    V2024_05 = "2024-05"
    V2021_05 = "2021-05"
    V2017_04 = "2017-04"


@dataclass
class AuthorizationRule(DictMixin):
    """A queue's or topic's own shared access (SAS) rule, sent and read back in its description:
    ``key_name``, ``rights`` (Listen, Send; Manage only with both), the keys (the service makes
    those not given: 256 random bits in Base64). Keys never appear in a repr."""

    _: KW_ONLY
    type: str | None = None
    claim_type: str | None = None
    claim_value: str | None = None
    rights: list[AccessRights | str] | None = None
    created_at_utc: dt.datetime | None = None
    modified_at_utc: dt.datetime | None = None
    key_name: str | None = None
    primary_key: str | None = field(default=None, repr=False)
    secondary_key: str | None = field(default=None, repr=False)


@dataclass
class MessageCountDetails(DictMixin):
    _: KW_ONLY
    active_message_count: int | None = None
    dead_letter_message_count: int | None = None
    scheduled_message_count: int | None = None
    transfer_dead_letter_message_count: int | None = None
    transfer_message_count: int | None = None


@dataclass
class QueueProperties(DictMixin):
    """A queue's settings (``QueueDescription``)."""

    name: str
    _: KW_ONLY
    authorization_rules: list[AuthorizationRule] | None
    auto_delete_on_idle: Duration | None
    dead_lettering_on_message_expiration: bool | None
    default_message_time_to_live: Duration | None
    duplicate_detection_history_time_window: Duration | None
    availability_status: EntityAvailabilityStatus | str | None
    enable_batched_operations: bool | None
    enable_express: bool | None
    enable_partitioning: bool | None
    lock_duration: Duration | None
    max_delivery_count: int | None
    max_size_in_megabytes: int | None
    requires_duplicate_detection: bool | None
    requires_session: bool | None
    status: EntityStatus | str | None
    forward_to: str | None
    user_metadata: str | None
    forward_dead_lettered_messages_to: str | None
    max_message_size_in_kilobytes: int | None


@dataclass
class TopicProperties(DictMixin):
    """A topic's settings (``TopicDescription``)."""

    name: str
    _: KW_ONLY
    default_message_time_to_live: Duration | None
    max_size_in_megabytes: int | None
    requires_duplicate_detection: bool | None
    duplicate_detection_history_time_window: Duration | None
    enable_batched_operations: bool | None
    size_in_bytes: int | None
    filtering_messages_before_publishing: bool | None
    authorization_rules: list[AuthorizationRule] | None
    status: EntityStatus | str | None
    support_ordering: bool | None
    auto_delete_on_idle: Duration | None
    enable_partitioning: bool | None
    availability_status: EntityAvailabilityStatus | str | None
    enable_express: bool | None
    user_metadata: str | None
    max_message_size_in_kilobytes: int | None


@dataclass
class SubscriptionProperties(DictMixin):
    """A subscription's settings (``SubscriptionDescription``)."""

    name: str
    _: KW_ONLY
    lock_duration: Duration | None
    requires_session: bool | None
    default_message_time_to_live: Duration | None
    dead_lettering_on_message_expiration: bool | None
    dead_lettering_on_filter_evaluation_exceptions: bool | None
    max_delivery_count: int | None
    enable_batched_operations: bool | None
    status: EntityStatus | str | None
    forward_to: str | None
    user_metadata: str | None
    forward_dead_lettered_messages_to: str | None
    auto_delete_on_idle: Duration | None
    availability_status: EntityAvailabilityStatus | str | None


@dataclass(frozen=True)
class QueueRuntimeProperties(DictMixin):
    """A queue's counts and times, read only."""

    name: str
    accessed_at_utc: dt.datetime | None = None
    created_at_utc: dt.datetime | None = None
    updated_at_utc: dt.datetime | None = None
    size_in_bytes: int | None = None
    total_message_count: int | None = None
    active_message_count: int | None = None
    dead_letter_message_count: int | None = None
    scheduled_message_count: int | None = None
    transfer_dead_letter_message_count: int | None = None
    transfer_message_count: int | None = None


@dataclass(frozen=True)
class TopicRuntimeProperties(DictMixin):
    """A topic's counts and times, read only."""

    name: str
    accessed_at_utc: dt.datetime | None = None
    created_at_utc: dt.datetime | None = None
    updated_at_utc: dt.datetime | None = None
    size_in_bytes: int | None = None
    subscription_count: int | None = None
    sql_filter_count: int | None = None
    correlation_filter_count: int | None = None
    scheduled_message_count: int | None = None


@dataclass(frozen=True)
class SubscriptionRuntimeProperties(DictMixin):
    """A subscription's counts and times, read only."""

    name: str
    accessed_at_utc: dt.datetime | None = None
    created_at_utc: dt.datetime | None = None
    updated_at_utc: dt.datetime | None = None
    total_message_count: int | None = None
    active_message_count: int | None = None
    dead_letter_message_count: int | None = None
    transfer_dead_letter_message_count: int | None = None
    transfer_message_count: int | None = None


class SqlRuleFilter:
    """A SQL filter; ``parameters`` fill its ``@name`` placeholders."""

    def __init__(self, sql_expression: str | None = None, parameters: dict[str, KeyValue] | None = None) -> None:
        self.sql_expression = sql_expression
        self.parameters = parameters
        self.requires_preprocessing = True

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, SqlRuleFilter)
            and (other.sql_expression, other.parameters) == (self.sql_expression, self.parameters)
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable: it defines __eq__ and is mutable

    def __repr__(self) -> str:
        return f"{type(self).__name__}(sql_expression={self.sql_expression!r}, parameters={self.parameters!r})"


class TrueRuleFilter(SqlRuleFilter):
    """Matches every message (``1=1``)."""

    def __init__(self) -> None:
        super().__init__("1=1")


class FalseRuleFilter(SqlRuleFilter):
    """Matches no message (``1=0``)."""

    def __init__(self) -> None:
        super().__init__("1=0")


@dataclass
class CorrelationRuleFilter(DictMixin):
    """Matches when every field and property given equals the message's."""

    _: KW_ONLY
    correlation_id: str | None = None
    message_id: str | None = None
    to: str | None = None
    reply_to: str | None = None
    label: str | None = None
    session_id: str | None = None
    reply_to_session_id: str | None = None
    content_type: str | None = None
    properties: dict[str, KeyValue] | None = None


@dataclass
class SqlRuleAction(DictMixin):
    """A SQL action (``SET``/``REMOVE``) applied to a matching message; ``parameters`` fill ``@name``."""

    sql_expression: str | None = None
    parameters: dict[str, KeyValue] | None = None
    requires_preprocessing: bool = True


@dataclass
class RuleProperties(DictMixin):
    """A subscription rule: its filter, its action, when it was made."""

    name: str
    _: KW_ONLY
    filter: SqlRuleFilter | CorrelationRuleFilter | None
    action: SqlRuleAction | None
    created_at_utc: dt.datetime | None


@dataclass(frozen=True)
class NamespaceProperties(DictMixin):
    """The namespace's name, tier and times (``NamespaceInfo``)."""

    name: str
    _: KW_ONLY
    alias: str | None
    created_at_utc: dt.datetime | None
    messaging_sku: MessagingSku | str | None
    messaging_units: int | None
    modified_at_utc: dt.datetime | None
    namespace_type: NamespaceType | str | None
