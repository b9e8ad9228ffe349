"""The asyncio ``ServiceBusAdministrationClient`` on aiohttp (imported when the first request is made).

The calls and their reading are :class:`~amqplink.servicebus.management._operations.AdminCore`'s,
shared with the blocking twin; this module only sends them on an ``aiohttp.ClientSession``
(made on first use, closed by :meth:`close`), so importing it needs no aiohttp.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeVar

from amqplink.servicebus.management import _operations as ops
from amqplink.servicebus.management._base import AdminClientBase, docstrings_of
from amqplink.servicebus.management._client import ServiceBusAdministrationClient as _Blocking
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
from amqplink.servicebus.paging import AsyncItemPaged

if TYPE_CHECKING:
    import aiohttp

__all__ = ["ServiceBusAdministrationClient"]

log = logging.getLogger(__name__)
T = TypeVar("T")


@docstrings_of(_Blocking)
class ServiceBusAdministrationClient(AdminClientBase):
    """The asyncio twin of :class:`amqplink.servicebus.management.ServiceBusAdministrationClient`:
    the same methods, awaited; ``list_*`` give async iterators."""

    def __init__(self, fully_qualified_namespace: str, credential: Any, **kwargs: Any) -> None:
        super().__init__(fully_qualified_namespace, credential, **kwargs)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ServiceBusAdministrationClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP session (a later call opens another)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- transport -------------------------------------------------------------------
    def _client_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp  # the client package stays importable without aiohttp

            connector = aiohttp.TCPConnector(ssl=self._context if self._context is not None else False)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self._timeout)
            )
        return self._session

    async def _run(self, call: ops.Call[T]) -> T:
        import aiohttp

        session = self._client_session()
        url = f"{self._core.endpoint}{self._core.url_path(call)}"
        try:
            async with session.request(
                call.method, url, data=call.body, headers=self._core.headers(call), skip_auto_headers=("Content-Type",)
            ) as response:
                body = await response.read()
                status, reason = response.status, response.reason or ""
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise self._core.no_answer(call, exc) from exc
        return self._core.result(call, status, reason, body)

    def _list(self, listing: ops.Listing[T], options: dict[str, Any]) -> AsyncItemPaged[T]:
        async def fetch(token: str | None) -> tuple[list[T], str | None]:
            return await self._run(self._core.list_page(listing, token, options))

        return AsyncItemPaged(fetch)

    # -- queues ----------------------------------------------------------------------
    async def get_queue(self, queue_name: str, **kwargs: Any) -> QueueProperties:
        return await self._run(self._core.get("queue", queue_name, ops.queue))

    async def get_queue_runtime_properties(self, queue_name: str, **kwargs: Any) -> QueueRuntimeProperties:
        return await self._run(self._core.get("queue", queue_name, ops.queue_runtime))

    async def create_queue(self, queue_name: str, **kwargs: Any) -> QueueProperties:
        model = ops.model_kwargs(QueueProperties, queue_name, kwargs, "create_queue")
        result: QueueProperties = await self._run(self._core.create_entity(model))
        return result

    async def update_queue(self, queue: QueueProperties | dict[str, Any], **kwargs: Any) -> None:
        await self._run(self._core.update_entity(queue, QueueProperties, kwargs))

    async def delete_queue(self, queue_name: str, **kwargs: Any) -> None:
        await self._run(self._core.delete(f"queue {queue_name!r}", queue_name))

    def list_queues(self, **kwargs: Any) -> AsyncItemPaged[QueueProperties]:
        return self._list(self._core.list_entities("queues", ops.queue), kwargs)

    def list_queues_runtime_properties(self, **kwargs: Any) -> AsyncItemPaged[QueueRuntimeProperties]:
        return self._list(self._core.list_entities("queues", ops.queue_runtime), kwargs)

    # -- topics ----------------------------------------------------------------------
    async def get_topic(self, topic_name: str, **kwargs: Any) -> TopicProperties:
        return await self._run(self._core.get("topic", topic_name, ops.topic))

    async def get_topic_runtime_properties(self, topic_name: str, **kwargs: Any) -> TopicRuntimeProperties:
        return await self._run(self._core.get("topic", topic_name, ops.topic_runtime))

    async def create_topic(self, topic_name: str, **kwargs: Any) -> TopicProperties:
        model = ops.model_kwargs(TopicProperties, topic_name, kwargs, "create_topic")
        result: TopicProperties = await self._run(self._core.create_entity(model))
        return result

    async def update_topic(self, topic: TopicProperties | dict[str, Any], **kwargs: Any) -> None:
        await self._run(self._core.update_entity(topic, TopicProperties, kwargs))

    async def delete_topic(self, topic_name: str, **kwargs: Any) -> None:
        await self._run(self._core.delete(f"topic {topic_name!r}", topic_name))

    def list_topics(self, **kwargs: Any) -> AsyncItemPaged[TopicProperties]:
        return self._list(self._core.list_entities("topics", ops.topic), kwargs)

    def list_topics_runtime_properties(self, **kwargs: Any) -> AsyncItemPaged[TopicRuntimeProperties]:
        return self._list(self._core.list_entities("topics", ops.topic_runtime), kwargs)

    # -- subscriptions ---------------------------------------------------------------
    async def get_subscription(self, topic_name: str, subscription_name: str, **kwargs: Any) -> SubscriptionProperties:
        return await self._run(self._core.get_subscription(topic_name, subscription_name, ops.subscription))

    async def get_subscription_runtime_properties(
        self, topic_name: str, subscription_name: str, **kwargs: Any
    ) -> SubscriptionRuntimeProperties:
        return await self._run(self._core.get_subscription(topic_name, subscription_name, ops.subscription_runtime))

    async def create_subscription(
        self, topic_name: str, subscription_name: str, *, default_rule: RuleProperties | None = None, **kwargs: Any
    ) -> SubscriptionProperties:
        model = ops.model_kwargs(SubscriptionProperties, subscription_name, kwargs, "create_subscription")
        return await self._run(self._core.create_subscription(topic_name, model, default_rule))

    async def update_subscription(
        self, topic_name: str, subscription: SubscriptionProperties | dict[str, Any], **kwargs: Any
    ) -> None:
        await self._run(self._core.update_subscription(topic_name, subscription, kwargs))

    async def delete_subscription(self, topic_name: str, subscription_name: str, **kwargs: Any) -> None:
        await self._run(self._core.delete_subscription(topic_name, subscription_name))

    def list_subscriptions(self, topic_name: str, **kwargs: Any) -> AsyncItemPaged[SubscriptionProperties]:
        return self._list(self._core.list_subscriptions(topic_name, ops.subscription), kwargs)

    def list_subscriptions_runtime_properties(
        self, topic_name: str, **kwargs: Any
    ) -> AsyncItemPaged[SubscriptionRuntimeProperties]:
        return self._list(self._core.list_subscriptions(topic_name, ops.subscription_runtime), kwargs)

    # -- rules -----------------------------------------------------------------------
    async def get_rule(self, topic_name: str, subscription_name: str, rule_name: str, **kwargs: Any) -> RuleProperties:
        return await self._run(self._core.get_rule(topic_name, subscription_name, rule_name))

    async def create_rule(
        self,
        topic_name: str,
        subscription_name: str,
        rule_name: str,
        *,
        filter: Any = None,
        action: SqlRuleAction | None = None,
        **kwargs: Any,
    ) -> RuleProperties:
        result: RuleProperties = await self._run(
            self._core.create_rule(topic_name, subscription_name, rule_name, filter, action)
        )
        return result

    async def update_rule(
        self, topic_name: str, subscription_name: str, rule: RuleProperties | dict[str, Any], **kwargs: Any
    ) -> None:
        await self._run(self._core.update_rule(topic_name, subscription_name, rule, kwargs))

    async def delete_rule(self, topic_name: str, subscription_name: str, rule_name: str, **kwargs: Any) -> None:
        await self._run(self._core.delete_rule(topic_name, subscription_name, rule_name))

    def list_rules(self, topic_name: str, subscription_name: str, **kwargs: Any) -> AsyncItemPaged[RuleProperties]:
        return self._list(self._core.list_rules(topic_name, subscription_name), kwargs)

    # -- namespace -------------------------------------------------------------------
    async def get_namespace_properties(self, **kwargs: Any) -> NamespaceProperties:
        return await self._run(self._core.namespace())
