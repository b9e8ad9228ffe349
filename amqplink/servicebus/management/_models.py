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
from dataclasses import KW_ONLY, dataclass, field

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

Duration = dt.timedelta | str
"""A duration as given: a timedelta or ISO-8601 text (``PT300S``)."""


class EntityStatus(enum.StrEnum):
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
    AVAILABLE = "Available"
    LIMITED = "Limited"
    RENAMING = "Renaming"
    RESTORING = "Restoring"
    UNKNOWN = "Unknown"


class MessagingSku(enum.StrEnum):
    BASIC = "Basic"
    STANDARD = "Standard"
    PREMIUM = "Premium"


class NamespaceType(enum.StrEnum):
    MESSAGING = "Messaging"
    NOTIFICATION_HUB = "NotificationHub"
    MIXED = "Mixed"
    EVENT_HUB = "EventHub"
    RELAY = "Relay"


class AccessRights(enum.StrEnum):
    MANAGE = "Manage"
    SEND = "Send"
    LISTEN = "Listen"


class ApiVersion(enum.StrEnum):
    V2024_05 = "2024-05"
    V2021_05 = "2021-05"
    V2017_04 = "2017-04"


@dataclass
class AuthorizationRule:
    """An entity's own SAS rule (read only here: this client does not send keys it did not get)."""

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
class MessageCountDetails:
    _: KW_ONLY
    active_message_count: int | None = None
    dead_letter_message_count: int | None = None
    scheduled_message_count: int | None = None
    transfer_dead_letter_message_count: int | None = None
    transfer_message_count: int | None = None


@dataclass
class QueueProperties:
    """A queue's settings (``QueueDescription``)."""

    name: str
    _: KW_ONLY
    authorization_rules: list[AuthorizationRule] | None = None
    auto_delete_on_idle: Duration | None = None
    dead_lettering_on_message_expiration: bool | None = None
    default_message_time_to_live: Duration | None = None
    duplicate_detection_history_time_window: Duration | None = None
    availability_status: EntityAvailabilityStatus | str | None = None
    enable_batched_operations: bool | None = None
    enable_express: bool | None = None
    enable_partitioning: bool | None = None
    lock_duration: Duration | None = None
    max_delivery_count: int | None = None
    max_size_in_megabytes: int | None = None
    requires_duplicate_detection: bool | None = None
    requires_session: bool | None = None
    status: EntityStatus | str | None = None
    forward_to: str | None = None
    user_metadata: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    max_message_size_in_kilobytes: int | None = None


@dataclass
class TopicProperties:
    """A topic's settings (``TopicDescription``)."""

    name: str
    _: KW_ONLY
    default_message_time_to_live: Duration | None = None
    max_size_in_megabytes: int | None = None
    requires_duplicate_detection: bool | None = None
    duplicate_detection_history_time_window: Duration | None = None
    enable_batched_operations: bool | None = None
    size_in_bytes: int | None = None
    filtering_messages_before_publishing: bool | None = None
    authorization_rules: list[AuthorizationRule] | None = None
    status: EntityStatus | str | None = None
    support_ordering: bool | None = None
    auto_delete_on_idle: Duration | None = None
    enable_partitioning: bool | None = None
    availability_status: EntityAvailabilityStatus | str | None = None
    enable_express: bool | None = None
    user_metadata: str | None = None
    max_message_size_in_kilobytes: int | None = None


@dataclass
class SubscriptionProperties:
    """A subscription's settings (``SubscriptionDescription``)."""

    name: str
    _: KW_ONLY
    lock_duration: Duration | None = None
    requires_session: bool | None = None
    default_message_time_to_live: Duration | None = None
    dead_lettering_on_message_expiration: bool | None = None
    dead_lettering_on_filter_evaluation_exceptions: bool | None = None
    max_delivery_count: int | None = None
    enable_batched_operations: bool | None = None
    status: EntityStatus | str | None = None
    forward_to: str | None = None
    user_metadata: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    auto_delete_on_idle: Duration | None = None
    availability_status: EntityAvailabilityStatus | str | None = None


@dataclass(frozen=True)
class QueueRuntimeProperties:
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
class TopicRuntimeProperties:
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
class SubscriptionRuntimeProperties:
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

    __hash__ = None  # type: ignore[assignment]

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
class CorrelationRuleFilter:
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
class SqlRuleAction:
    """A SQL action (``SET``/``REMOVE``) applied to a matching message; ``parameters`` fill ``@name``."""

    sql_expression: str | None = None
    parameters: dict[str, KeyValue] | None = None
    requires_preprocessing: bool = True


@dataclass
class RuleProperties:
    """A subscription rule: its filter, its action, when it was made."""

    name: str
    _: KW_ONLY
    filter: SqlRuleFilter | CorrelationRuleFilter | None = None
    action: SqlRuleAction | None = None
    created_at_utc: dt.datetime | None = None


@dataclass(frozen=True)
class NamespaceProperties:
    """The namespace's name, tier and times (``NamespaceInfo``)."""

    name: str
    _: KW_ONLY
    alias: str | None = None
    created_at_utc: dt.datetime | None = None
    messaging_sku: MessagingSku | str | None = None
    messaging_units: int | None = None
    modified_at_utc: dt.datetime | None = None
    namespace_type: NamespaceType | str | None = None

