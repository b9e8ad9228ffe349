"""The Service Bus management REST client, with ``azure.servicebus.management``'s names.

``ServiceBusAdministrationClient`` here is blocking (standard library only); the asyncio
twin is :mod:`amqplink.servicebus.aio.management` (on aiohttp, imported when first used).
Both send and read the same Atom XML (:mod:`._xml`, :mod:`amqplink.atom`) and raise the
errors of :mod:`._errors` (azure-core's names; derived from azure-core's where installed).
"""

from __future__ import annotations

from amqplink.servicebus.management._client import ServiceBusAdministrationClient
from amqplink.servicebus.management._errors import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
    ServiceRequestError,
)
from amqplink.servicebus.management._models import (
    AccessRights,
    ApiVersion,
    AuthorizationRule,
    CorrelationRuleFilter,
    EntityAvailabilityStatus,
    EntityStatus,
    FalseRuleFilter,
    MessageCountDetails,
    MessagingSku,
    NamespaceProperties,
    NamespaceType,
    QueueProperties,
    QueueRuntimeProperties,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    SubscriptionProperties,
    SubscriptionRuntimeProperties,
    TopicProperties,
    TopicRuntimeProperties,
    TrueRuleFilter,
)

__all__ = [
    "AccessRights",
    "ApiVersion",
    "AuthorizationRule",
    "ClientAuthenticationError",
    "CorrelationRuleFilter",
    "EntityAvailabilityStatus",
    "EntityStatus",
    "FalseRuleFilter",
    "HttpResponseError",
    "MessageCountDetails",
    "MessagingSku",
    "NamespaceProperties",
    "NamespaceType",
    "QueueProperties",
    "QueueRuntimeProperties",
    "ResourceExistsError",
    "ResourceNotFoundError",
    "RuleProperties",
    "ServiceBusAdministrationClient",
    "ServiceRequestError",
    "SqlRuleAction",
    "SqlRuleFilter",
    "SubscriptionProperties",
    "SubscriptionRuntimeProperties",
    "TopicProperties",
    "TopicRuntimeProperties",
    "TrueRuleFilter",
]
