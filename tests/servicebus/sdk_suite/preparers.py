"""What the SDK's data-plane tests import from ``servicebus_preparer``, made on the embedded broker.

The SDK's own ``tests/servicebus_preparer.py`` creates a resource group, a namespace, queues,
topics, subscriptions and authorization rules through Azure Resource Manager (the
``azure-mgmt-*`` clients). Here every namespace preparer gives the one namespace the broker
serves (:data:`shim.NAMESPACE`), and the entity preparers create their entity through the
broker's management REST API with the SDK's own ``ServiceBusAdministrationClient``, with the
properties the ARM preparer sets (lock duration, sessions, duplicate detection, dead-lettering
on expiry, partitioning). As in the Azure SDK's test tooling (``devtools_testutils``'
``AbstractPreparer``), a ``Cached...`` preparer with the same options under the same parents
reuses its entity for every test that asks for it, and an uncached one makes a fresh entity per
test and deletes it after; each preparer hands the test ``parameter_name`` (an object with
``.name``) and the same extra keywords as the SDK's preparers.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import inspect
import sys
import types
import uuid
from collections.abc import Callable
from typing import Any

ENDPOINT_SUFFIX = ".servicebus.windows.net"
"""``SERVICEBUS_ENDPOINT_SUFFIX``: the namespace's name plus this is its host name."""

NAMESPACE_NAME = "sbemulatorns"

_cache: dict[tuple[Any, ...], dict[str, Any]] = {}
"""Created resources by aggregate key (own class and options, then the parents')."""

VALUES: dict[str, Any] = {}
"""Set by the shim once the broker runs: ``connection_str``, ``key_name``, ``key``, ``rules``
(access rights as a frozenset of names -> (rule name, key)), ``admin`` (a callable returning
the SDK's administration client)."""


class AccessRights(enum.StrEnum):
    """``azure.mgmt.servicebus.models.AccessRights``, the only name the tests take from it."""

    manage = "Manage"
    send = "Send"
    listen = "Listen"


def _resource(name: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(name=name, id=name)


class _Preparer:
    """One preparer decorator: creates (or reuses) a resource, passes it to the test as keywords."""

    parameter_name = ""

    def __init__(self, name_prefix: str = "", use_cache: bool = False, parameter_name: str | None = None,
                 **options: Any) -> None:  # fmt: skip
        self.name_prefix = name_prefix
        self.use_cache = use_cache
        self.parameter_name = parameter_name or self.parameter_name
        self.options = options

    def key(self) -> tuple[Any, ...]:
        return (type(self).__name__, self.parameter_name, tuple(sorted((k, repr(v)) for k, v in self.options.items())))

    def create(self, name: str, given: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def remove(self, created: dict[str, Any], given: dict[str, Any]) -> None:
        """An uncached resource is deleted after its test (the namespace-level ones are kept)."""

    def name(self) -> str:
        prefix = self.name_prefix.replace("_", "-") or "sdk"
        return f"{prefix}{uuid.uuid4().hex[:10]}"

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(test: Any, **kwargs: Any) -> Any:
            key = (self.key(), kwargs.get("__aggregate_cache_key"))
            cached = self.use_cache or getattr(fn, "__use_cache", False)
            created = _cache.get(key) if cached else None
            if created is None:
                created = self.create(self.name(), kwargs)
                if cached:
                    _cache[key] = created
            kwargs.update(created)
            kwargs["__aggregate_cache_key"] = key
            try:
                if inspect.iscoroutinefunction(fn):
                    return asyncio.run(fn(test, **kwargs))
                return fn(test, **kwargs)
            finally:
                if not cached:
                    self.remove(created, kwargs)

        if self.use_cache or getattr(fn, "__use_cache", False):
            setattr(run, "__use_cache", True)
        return run


class ResourceGroupPreparer(_Preparer):
    parameter_name = "resource_group"

    def create(self, name: str, given: dict[str, Any]) -> dict[str, Any]:
        return {self.parameter_name: _resource(f"rgpy-{name}"), "location": "westus"}


class NamespacePreparer(_Preparer):
    """Every namespace is the broker's one namespace (its name resolves to the broker)."""

    parameter_name = "servicebus_namespace"

    def create(self, name: str, given: dict[str, Any]) -> dict[str, Any]:
        return {
            self.parameter_name: _resource(NAMESPACE_NAME),
            f"{self.parameter_name}_connection_string": VALUES["connection_str"],
            f"{self.parameter_name}_key_name": VALUES["key_name"],
            f"{self.parameter_name}_primary_key": VALUES["key"],
        }


class QueuePreparer(_Preparer):
    parameter_name = "servicebus_queue"

    def create(self, name: str, given: dict[str, Any]) -> dict[str, Any]:
        o = self.options
        with VALUES["admin"]() as admin:
            admin.create_queue(
                name,
                lock_duration=o.get("lock_duration", "PT30S"),
                requires_duplicate_detection=o.get("requires_duplicate_detection", False),
                dead_lettering_on_message_expiration=o.get("dead_lettering_on_message_expiration", False),
                requires_session=o.get("requires_session", False),
                enable_partitioning=o.get("enable_partitioning", False),
            )
        return {self.parameter_name: _resource(name)}

    def remove(self, created: dict[str, Any], given: dict[str, Any]) -> None:
        with VALUES["admin"]() as admin:
            admin.delete_queue(created[self.parameter_name].name)


class TopicPreparer(_Preparer):
    parameter_name = "servicebus_topic"

    def create(self, name: str, given: dict[str, Any]) -> dict[str, Any]:
        with VALUES["admin"]() as admin:
            admin.create_topic(name)
        return {self.parameter_name: _resource(name)}

    def remove(self, created: dict[str, Any], given: dict[str, Any]) -> None:
        with VALUES["admin"]() as admin:
            admin.delete_topic(created[self.parameter_name].name)


class SubscriptionPreparer(_Preparer):
    parameter_name = "servicebus_subscription"

    def create(self, name: str, given: dict[str, Any]) -> dict[str, Any]:
        topic = given[self.options.get("servicebus_topic_parameter_name", "servicebus_topic")].name
        with VALUES["admin"]() as admin:
            admin.create_subscription(
                topic,
                name,
                requires_session=self.options.get("requires_session", False),
                lock_duration=self.options.get("lock_duration", "PT60S"),
            )
        return {self.parameter_name: _resource(name), "__topic": topic}

    def remove(self, created: dict[str, Any], given: dict[str, Any]) -> None:
        # deleted with its topic when that is not cached; otherwise on its own
        with VALUES["admin"]() as admin, contextlib.suppress(Exception):  # (the topic went first)
            admin.delete_subscription(created["__topic"], created[self.parameter_name].name)


def _rights(access_rights: Any) -> frozenset[str]:
    return frozenset(AccessRights(r).value for r in access_rights)


_EVERY = [AccessRights.manage, AccessRights.send, AccessRights.listen]


class NamespaceRulePreparer(_Preparer):
    """A namespace rule with the rights asked: one the shim gave the broker at start."""

    parameter_name = "servicebus_authorization_rule"

    def create(self, name: str, given: dict[str, Any]) -> dict[str, Any]:
        rule, key = VALUES["rules"][_rights(self.options.get("access_rights", _EVERY))]
        host = f"{NAMESPACE_NAME}{ENDPOINT_SUFFIX}"
        return {
            self.parameter_name: _resource(rule),
            f"{self.parameter_name}_connection_string": (
                f"Endpoint=sb://{host}/;SharedAccessKeyName={rule};SharedAccessKey={key}"
            ),
        }


class QueueRulePreparer(_Preparer):
    """A rule on the queue (``servicebus_queue``), added through the management API as ARM adds it."""

    parameter_name = "servicebus_queue_authorization_rule"

    def create(self, name: str, given: dict[str, Any]) -> dict[str, Any]:
        from azure.servicebus.management import AccessRights as Rights
        from azure.servicebus.management import SharedAccessAuthorizationRule

        queue_name = given[self.options.get("servicebus_queue_parameter_name", "servicebus_queue")].name
        rights = sorted(_rights(self.options.get("access_rights", _EVERY)))
        rule_name = name.replace("-", "")[:50]
        with VALUES["admin"]() as admin:
            queue = admin.get_queue(queue_name)
            rule = SharedAccessAuthorizationRule(
                claim_type="SharedAccessKey",
                claim_value="None",
                rights=[Rights(r) for r in rights],
                key_name=rule_name,
            )
            queue.authorization_rules = [*(queue.authorization_rules or []), rule]
            admin.update_queue(queue)
            rules = admin.get_queue(queue_name).authorization_rules
            key = next(r.primary_key for r in rules if r.key_name == rule_name)
        host = f"{NAMESPACE_NAME}{ENDPOINT_SUFFIX}"
        return {
            self.parameter_name: _resource(rule_name),
            f"{self.parameter_name}_connection_string": (
                f"Endpoint=sb://{host}/;SharedAccessKeyName={rule_name};SharedAccessKey={key};EntityPath={queue_name}"
            ),
        }


def _cached(cls: type[_Preparer]) -> Callable[..., _Preparer]:
    return functools.partial(cls, use_cache=True)


def install() -> None:
    """Put the stand-ins where the tests import them from (``servicebus_preparer``, and the one
    name of ``azure.mgmt.servicebus.models`` they use)."""
    module = types.ModuleType("servicebus_preparer")
    module.__dict__.update(
        SERVICEBUS_ENDPOINT_SUFFIX=ENDPOINT_SUFFIX,
        ServiceBusResourceGroupPreparer=ResourceGroupPreparer,
        CachedServiceBusResourceGroupPreparer=_cached(ResourceGroupPreparer),
        ServiceBusNamespacePreparer=NamespacePreparer,
        CachedServiceBusNamespacePreparer=_cached(NamespacePreparer),
        ServiceBusQueuePreparer=QueuePreparer,
        CachedServiceBusQueuePreparer=_cached(QueuePreparer),
        ServiceBusTopicPreparer=TopicPreparer,
        CachedServiceBusTopicPreparer=_cached(TopicPreparer),
        ServiceBusSubscriptionPreparer=SubscriptionPreparer,
        CachedServiceBusSubscriptionPreparer=_cached(SubscriptionPreparer),
        ServiceBusNamespaceAuthorizationRulePreparer=NamespaceRulePreparer,
        ServiceBusQueueAuthorizationRulePreparer=QueueRulePreparer,
    )
    sys.modules["servicebus_preparer"] = module
    for name in ("azure.mgmt", "azure.mgmt.servicebus"):
        sys.modules.setdefault(name, types.ModuleType(name))
    models = types.ModuleType("azure.mgmt.servicebus.models")
    models.AccessRights = AccessRights  # type: ignore[attr-defined]
    sys.modules["azure.mgmt.servicebus.models"] = models
