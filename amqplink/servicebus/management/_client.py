"""The blocking ``ServiceBusAdministrationClient`` on the standard library (:mod:`http.client`, :mod:`ssl`).

The calls and their reading are :class:`~._operations.AdminCore`'s; this module only sends
them over one kept-alive HTTPS connection (made again once if the server closed an idle
one), under a lock so that threads may share a client.
"""

from __future__ import annotations

import http.client
import logging
import threading
from typing import Any, TypeVar

from amqplink.servicebus.management import _operations as ops
from amqplink.servicebus.management._base import AdminClientBase
from amqplink.servicebus.management._models import (
    NamespaceProperties,
    QueueProperties,
    QueueRuntimeProperties,
    RuleProperties,
    SqlRuleAction,
    SubscriptionProperties,
    SubscriptionRuntimeProperties,
    TopicProperties,
    TopicRuntimeProperties,
)
from amqplink.servicebus.paging import ItemPaged

__all__ = ["ServiceBusAdministrationClient"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class ServiceBusAdministrationClient(AdminClientBase):
    """Create, read, update, delete and list a namespace's queues, topics, subscriptions and rules.

    ``ServiceBusAdministrationClient(fully_qualified_namespace, credential)`` or
    :meth:`from_connection_string`; ``connection_verify`` is a CA bundle path, ``False`` to
    skip the check (never in production) or ``None`` for the system's CAs.
    """

    def __init__(self, fully_qualified_namespace: str, credential: Any, **kwargs: Any) -> None:
        super().__init__(fully_qualified_namespace, credential, **kwargs)
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None

    def __enter__(self) -> ServiceBusAdministrationClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (a later call opens another)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- transport -------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            host, port = self._core.host_port
            if self._context is not None:
                self._conn = http.client.HTTPSConnection(host, port, timeout=self._timeout, context=self._context)
            else:
                self._conn = http.client.HTTPConnection(host, port, timeout=self._timeout)
        return self._conn

    def _exchange(self, call: ops.Call[Any]) -> tuple[int, str, bytes]:
        conn = self._connection()
        conn.request(call.method, self._core.url_path(call), body=call.body, headers=self._core.headers(call))
        response = conn.getresponse()
        return response.status, response.reason, response.read()

    def _run(self, call: ops.Call[T]) -> T:
        with self._lock:
            reused = self._conn is not None
            try:
                try:
                    status, reason, body = self._exchange(call)
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                    if not reused:
                        raise
                    log.debug("management API: the kept-alive connection was closed; connecting again")
                    self._drop()
                    status, reason, body = self._exchange(call)
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                raise self._core.no_answer(call, exc) from exc
        return self._core.result(call, status, reason, body)

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _list(self, listing: ops.Listing[T], options: dict[str, Any]) -> ItemPaged[T]:
        return ItemPaged(lambda token: self._run(self._core.list_page(listing, token, options)))

    # -- queues ----------------------------------------------------------------------
    def get_queue(self, queue_name: str, **kwargs: Any) -> QueueProperties:
        """A queue's settings (``ResourceNotFoundError`` if there is none)."""
        return self._run(self._core.get("queue", queue_name, ops.queue))

    def get_queue_runtime_properties(self, queue_name: str, **kwargs: Any) -> QueueRuntimeProperties:
        """A queue's message counts now (total, active, dead-lettered, scheduled, transfer) and size."""
        return self._run(self._core.get("queue", queue_name, ops.queue_runtime))

    def create_queue(self, queue_name: str, **kwargs: Any) -> QueueProperties:
        """Create a queue with the settings given as keywords (``QueueProperties``' names);
        ``ResourceExistsError`` if it exists."""
        model = ops.model_kwargs(QueueProperties, queue_name, kwargs, "create_queue")
        result: QueueProperties = self._run(self._core.create_entity(model))
        return result

    def update_queue(self, queue: QueueProperties | dict[str, Any], **kwargs: Any) -> None:
        """Replace a queue's settings with ``queue`` (a ``QueueProperties`` or its mapping) and
        the keywords. As on Service Bus, the whole description is sent: a setting left out takes
        its default."""
        self._run(self._core.update_entity(queue, QueueProperties, kwargs))

    def delete_queue(self, queue_name: str, **kwargs: Any) -> None:
        """Delete a queue and its messages."""
        self._run(self._core.delete(f"queue {queue_name!r}", queue_name))

    def list_queues(self, **kwargs: Any) -> ItemPaged[QueueProperties]:
        """Every queue's settings, fetched a page (100) at a time as the iteration reaches it."""
        return self._list(self._core.list_entities("queues", ops.queue), kwargs)

    def list_queues_runtime_properties(self, **kwargs: Any) -> ItemPaged[QueueRuntimeProperties]:
        """Every queue's message counts, a page at a time."""
        return self._list(self._core.list_entities("queues", ops.queue_runtime), kwargs)

    # -- topics ----------------------------------------------------------------------
    def get_topic(self, topic_name: str, **kwargs: Any) -> TopicProperties:
        """A topic's settings (``ResourceNotFoundError`` if there is none)."""
        return self._run(self._core.get("topic", topic_name, ops.topic))

    def get_topic_runtime_properties(self, topic_name: str, **kwargs: Any) -> TopicRuntimeProperties:
        """A topic's counts now (subscriptions, SQL and correlation filters, scheduled messages) and size."""
        return self._run(self._core.get("topic", topic_name, ops.topic_runtime))

    def create_topic(self, topic_name: str, **kwargs: Any) -> TopicProperties:
        """Create a topic with the settings given as keywords (``TopicProperties``' names)."""
        model = ops.model_kwargs(TopicProperties, topic_name, kwargs, "create_topic")
        result: TopicProperties = self._run(self._core.create_entity(model))
        return result

    def update_topic(self, topic: TopicProperties | dict[str, Any], **kwargs: Any) -> None:
        """Replace a topic's settings with ``topic`` and the keywords (the whole description, as for a queue)."""
        self._run(self._core.update_entity(topic, TopicProperties, kwargs))

    def delete_topic(self, topic_name: str, **kwargs: Any) -> None:
        """Delete a topic with its subscriptions and their messages."""
        self._run(self._core.delete(f"topic {topic_name!r}", topic_name))

    def list_topics(self, **kwargs: Any) -> ItemPaged[TopicProperties]:
        """Every topic's settings, a page at a time."""
        return self._list(self._core.list_entities("topics", ops.topic), kwargs)

    def list_topics_runtime_properties(self, **kwargs: Any) -> ItemPaged[TopicRuntimeProperties]:
        """Every topic's counts, a page at a time."""
        return self._list(self._core.list_entities("topics", ops.topic_runtime), kwargs)

    # -- subscriptions ---------------------------------------------------------------
    def get_subscription(self, topic_name: str, subscription_name: str, **kwargs: Any) -> SubscriptionProperties:
        """A subscription's settings."""
        return self._run(self._core.get_subscription(topic_name, subscription_name, ops.subscription))

    def get_subscription_runtime_properties(
        self, topic_name: str, subscription_name: str, **kwargs: Any
    ) -> SubscriptionRuntimeProperties:
        """A subscription's message counts now."""
        return self._run(self._core.get_subscription(topic_name, subscription_name, ops.subscription_runtime))

    def create_subscription(
        self, topic_name: str, subscription_name: str, *, default_rule: RuleProperties | None = None, **kwargs: Any
    ) -> SubscriptionProperties:
        """Create a subscription of ``topic_name`` with the keywords' settings; ``default_rule`` replaces
        the ``$Default`` rule (a true filter) it gets otherwise."""
        model = ops.model_kwargs(SubscriptionProperties, subscription_name, kwargs, "create_subscription")
        return self._run(self._core.create_subscription(topic_name, model, default_rule))

    def update_subscription(
        self, topic_name: str, subscription: SubscriptionProperties | dict[str, Any], **kwargs: Any
    ) -> None:
        """Replace a subscription's settings with ``subscription`` and the keywords (the whole description)."""
        self._run(self._core.update_subscription(topic_name, subscription, kwargs))

    def delete_subscription(self, topic_name: str, subscription_name: str, **kwargs: Any) -> None:
        """Delete a subscription and its messages."""
        self._run(self._core.delete_subscription(topic_name, subscription_name))

    def list_subscriptions(self, topic_name: str, **kwargs: Any) -> ItemPaged[SubscriptionProperties]:
        """Every subscription of ``topic_name``, a page at a time."""
        return self._list(self._core.list_subscriptions(topic_name, ops.subscription), kwargs)

    def list_subscriptions_runtime_properties(
        self, topic_name: str, **kwargs: Any
    ) -> ItemPaged[SubscriptionRuntimeProperties]:
        """Every subscription's message counts, a page at a time."""
        return self._list(self._core.list_subscriptions(topic_name, ops.subscription_runtime), kwargs)

    # -- rules -----------------------------------------------------------------------
    def get_rule(self, topic_name: str, subscription_name: str, rule_name: str, **kwargs: Any) -> RuleProperties:
        """A subscription's rule: its filter and action."""
        return self._run(self._core.get_rule(topic_name, subscription_name, rule_name))

    def create_rule(
        self,
        topic_name: str,
        subscription_name: str,
        rule_name: str,
        *,
        filter: Any = None,
        action: SqlRuleAction | None = None,
        **kwargs: Any,
    ) -> RuleProperties:
        """Add a rule to a subscription: ``filter`` (SQL, correlation, true or false; true when None)
        and an optional ``SqlRuleAction``."""
        result: RuleProperties = self._run(
            self._core.create_rule(topic_name, subscription_name, rule_name, filter, action)
        )
        return result

    def update_rule(
        self, topic_name: str, subscription_name: str, rule: RuleProperties | dict[str, Any], **kwargs: Any
    ) -> None:
        """Replace a rule's filter and action with ``rule``'s and the keywords'."""
        self._run(self._core.update_rule(topic_name, subscription_name, rule, kwargs))

    def delete_rule(self, topic_name: str, subscription_name: str, rule_name: str, **kwargs: Any) -> None:
        """Delete a subscription's rule."""
        self._run(self._core.delete_rule(topic_name, subscription_name, rule_name))

    def list_rules(self, topic_name: str, subscription_name: str, **kwargs: Any) -> ItemPaged[RuleProperties]:
        """A subscription's rules, a page at a time."""
        return self._list(self._core.list_rules(topic_name, subscription_name), kwargs)

    # -- namespace -------------------------------------------------------------------
    def get_namespace_properties(self, **kwargs: Any) -> NamespaceProperties:
        """The namespace's name, SKU, type, creation and modification times and messaging units."""
        return self._run(self._core.namespace())
