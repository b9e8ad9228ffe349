"""The asyncio ``ServiceBusClient`` (azure-servicebus's ``aio.ServiceBusClient``).

One AMQP connection per client, shared by its senders and receivers (each on links of
its own), authenticated per entity over CBS. ``from_connection_string`` accepts the
SDK's retry options; ``ServiceBusClient(fully_qualified_namespace, credential)`` takes
:class:`AzureNamedKeyCredential`, :class:`AzureSasCredential` (ours or azure-core's) or a
token credential (anything with ``get_token``: :mod:`amqplink.servicebus.tokens`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from types import TracebackType
from typing import Any, TypeVar

from amqplink.servicebus.client_options import ignore_unknown
from amqplink.servicebus.connection_args import check_entity_path, connection_arguments
from amqplink.servicebus.holder import Credential, connection_holder
from amqplink.servicebus.localqueue.options import LocalQueueOptions
from amqplink.servicebus.localqueue.queue import LocalQueue, LocalQueueState
from amqplink.servicebus.localqueue.sender import LocalQueueSender
from amqplink.servicebus.message import ServiceBusMessage
from amqplink.servicebus.paging import AsyncItemPaged
from amqplink.servicebus.paired.options import PairedNamespaceOptions
from amqplink.servicebus.paired.pairing import PairedState, Pairing
from amqplink.servicebus.paired.sender import PairedSender
from amqplink.servicebus.receiver import ServiceBusReceiver
from amqplink.servicebus.retry import RetryMode
from amqplink.servicebus.sender import DEFAULT_MAX_IN_FLIGHT, ServiceBusSender
from amqplink.servicebus.session_list import SessionLister
from amqplink.servicebus.transaction import ServiceBusTransaction

__all__ = ["ServiceBusClient"]

H = TypeVar("H", ServiceBusSender, ServiceBusReceiver)

HANDLER_OPTIONS = ("client_identifier", "socket_timeout")
"""The SDK's keywords of ``get_queue_sender``/``get_queue_receiver``... that a handler takes."""


class ServiceBusClient:
    """Creates senders and receivers for one Service Bus namespace.

    Beyond the SDK's keyword arguments: ``token_ttl`` (seconds a minted SAS token lives,
    default 3600; tokens are refreshed before expiry), ``timeout`` (the overall operation
    timeout, default 60 s), ``idle_timeout``, ``ssl_context``, ``paired_namespace``
    (a :class:`PairedNamespaceOptions`: failover of sends to backlog queues in a secondary
    namespace, see :mod:`amqplink.servicebus.paired`) and ``local_queue`` (a
    :class:`LocalQueueOptions`: a durable client-side queue for what no namespace takes,
    see :mod:`amqplink.servicebus.localqueue`). The SDK's ``transport_type``,
    ``http_proxy``, ``custom_endpoint_address`` and ``connection_verify`` are
    :mod:`amqplink.servicebus.transport`'s.
    """

    def __init__(
        self,
        fully_qualified_namespace: str,
        credential: Credential,
        *,
        retry_total: int = 3,
        retry_backoff_factor: float = 0.8,
        retry_backoff_max: float = 120,
        retry_mode: str | RetryMode = "exponential",
        **kwargs: Any,
    ) -> None:
        self._holder = connection_holder(
            fully_qualified_namespace,
            credential,
            retry_total=retry_total,
            retry_backoff_factor=retry_backoff_factor,
            retry_backoff_max=retry_backoff_max,
            retry_mode=retry_mode,
            **kwargs,
        )
        self._policy = self._holder.policy
        self.fully_qualified_namespace = self._holder.namespace
        self._entity_name: str | None = kwargs.get("entity_name")
        self._handlers: list[ServiceBusSender | ServiceBusReceiver] = []
        paired = kwargs.get("paired_namespace")
        if paired is not None and not isinstance(paired, PairedNamespaceOptions):
            raise TypeError(f"paired_namespace must be a PairedNamespaceOptions, not {type(paired).__name__}")
        local = kwargs.get("local_queue")
        if local is not None and not isinstance(local, LocalQueueOptions):
            raise TypeError(f"local_queue must be a LocalQueueOptions, not {type(local).__name__}")
        self._pairing: Pairing | None = None
        if paired is not None:
            secondary = self._secondary(paired, kwargs)
            self._pairing = Pairing(self._holder, paired, secondary, local_queue=local is not None)
        self._forwarders: dict[str, ServiceBusSender] = {}
        self._local: LocalQueue | None = None
        if local is not None:
            self._local = LocalQueue(local, self._forward, close_forwarding=self._close_forwarders)

    def _secondary(self, paired: PairedNamespaceOptions, kwargs: dict[str, Any]) -> ServiceBusClient:
        """The paired namespace's client (its connection opened only when the pairing first uses
        it): this client's retry policy, reached the same way (``transport_type``, ``http_proxy``)."""
        network = {name: kwargs[name] for name in ("transport_type", "http_proxy") if name in kwargs}
        return ServiceBusClient.from_connection_string(
            paired.secondary_connection_string,
            retry_total=self._policy.retry_total,
            retry_backoff_factor=self._policy.retry_backoff_factor,
            retry_backoff_max=self._policy.retry_backoff_max,
            timeout=self._policy.timeout,
            **network,
        )

    def __repr__(self) -> str:
        return f"<ServiceBusClient {self.fully_qualified_namespace}>"

    @classmethod
    def from_connection_string(
        cls,
        conn_str: str,
        *,
        retry_total: int = 3,
        retry_backoff_factor: float = 0.8,
        retry_backoff_max: float = 120,
        retry_mode: str | RetryMode = "exponential",
        **kwargs: Any,
    ) -> ServiceBusClient:
        """A client from ``Endpoint=sb://...;SharedAccessKeyName=...;SharedAccessKey=...[;EntityPath=...]``."""
        args = connection_arguments(conn_str)
        return cls(
            args.namespace,
            args.credential,
            retry_total=retry_total,
            retry_backoff_factor=retry_backoff_factor,
            retry_backoff_max=retry_backoff_max,
            retry_mode=retry_mode,
            use_tls=args.use_tls,
            entity_name=args.entity_path,
            **kwargs,
        )

    async def __aenter__(self) -> ServiceBusClient:
        if self._local is not None:
            await self._local.start()  # a damaged or busy directory: an error now, not at the first send
        if self._pairing is not None:
            # the backlog queues checked (created if missing) before the first send; a secondary
            # that fails the check is logged and shown in paired_state, never raised here
            await self._pairing.backlog_checked()
        return self

    @property
    def paired_state(self) -> PairedState | None:
        """A snapshot of the paired-namespace failover (None for a client without
        ``paired_namespace``): entities failed over, backlog queues in rotation, counters."""
        return None if self._pairing is None else self._pairing.state()

    @property
    def local_queue_state(self) -> LocalQueueState | None:
        """A snapshot of the local queue (None for a client without ``local_queue``): messages
        stored and not yet forwarded, the oldest one's age, forwarding per entity, counters."""
        return None if self._local is None else self._local.state()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every sender and receiver made here, then the connection."""
        handlers, self._handlers = self._handlers, []
        for handler in handlers:
            await handler.close()
        if self._local is not None:  # (what it holds stays on disk for the next client)
            await self._local.close()
        if self._pairing is not None:
            await self._pairing.close()
        await self._holder.close()

    def _check_entity(self, name: str) -> None:
        check_entity_path(self._entity_name, name)

    def _track(self, handler: H) -> H:
        self._handlers = [h for h in self._handlers if not h._closed]
        self._handlers.append(handler)
        return handler

    # -- senders ----------------------------------------------------------------------
    def _sender(
        self,
        entity: str,
        max_in_flight: int,
        options: dict[str, Any],
        *,
        queue_name: str | None = None,
        topic_name: str | None = None,
        via: str | None = None,
    ) -> ServiceBusSender:
        self._check_entity(entity)
        ignore_unknown("get_queue_sender" if queue_name else "get_topic_sender", options, HANDLER_OPTIONS)
        chosen = {name: options[name] for name in HANDLER_OPTIONS if name in options}
        common: dict[str, Any] = {"policy": self._policy, "max_in_flight": max_in_flight, "queue_name": queue_name,
                                  "topic_name": topic_name, **chosen}  # fmt: skip
        sender: ServiceBusSender
        if via is not None and (self._pairing is not None or self._local is not None):
            raise ValueError(
                "via= (send-via) is not available on a client with paired_namespace or local_queue: a message"
                " parked in a backlog queue or stored locally cannot keep its transfer route; use a client"
                " without them"
            )
        if self._pairing is not None:
            sender = PairedSender(self._holder, entity, pairing=self._pairing, local=self._local, **common)
        elif self._local is not None:
            sender = LocalQueueSender(self._holder, entity, local=self._local, **common)
        else:
            sender = ServiceBusSender(self._holder, entity, via=via, **common)
        return self._track(sender)

    # -- the local queue's forwarding ------------------------------------------------------
    async def _forward(self, entity: str, messages: list[ServiceBusMessage]) -> None:
        """Send what the local queue holds for ``entity`` by the client's route without it (the
        primary, or a backlog queue when paired), one attempt: the local queue waits and tries
        again itself."""
        sender = self._forwarders.get(entity)
        if sender is None or sender._closed:
            policy = dataclasses.replace(self._policy, retry_total=0)
            if self._pairing is not None:
                sender = PairedSender(self._holder, entity, pairing=self._pairing, policy=policy)
            else:
                sender = ServiceBusSender(self._holder, entity, policy=policy)
            self._forwarders[entity] = sender
        await sender.send_messages(messages)

    async def _close_forwarders(self) -> None:
        senders, self._forwarders = self._forwarders, {}
        for sender in senders.values():
            await sender.close()

    def get_queue_sender(
        self, queue_name: str, *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, via: str | None = None, **kwargs: Any
    ) -> ServiceBusSender:
        """A sender to ``queue_name``; ``max_in_flight`` bounds the transfers awaiting an outcome;
        ``via``: through that entity (send-via: a transaction working on ``via`` may send here,
        docs/transactions.md)."""
        return self._sender(queue_name, max_in_flight, kwargs, queue_name=queue_name, via=via)

    def get_topic_sender(
        self, topic_name: str, *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, via: str | None = None, **kwargs: Any
    ) -> ServiceBusSender:
        """A sender to ``topic_name`` (``via`` as :meth:`get_queue_sender`'s)."""
        return self._sender(topic_name, max_in_flight, kwargs, topic_name=topic_name, via=via)

    # -- transactions -------------------------------------------------------------------
    def transaction(self) -> ServiceBusTransaction:
        """A transaction on this client's connection, to use as ``async with`` (docs/transactions.md):
        the sends and settlements given ``transaction=`` take effect together when it commits."""
        return ServiceBusTransaction(self._holder, self._policy.timeout)

    # -- receivers --------------------------------------------------------------------
    def _receiver(
        self,
        checked: str,
        entity: str,
        options: dict[str, Any],
        *,
        queue_name: str | None = None,
        topic_name: str | None = None,
        subscription_name: str | None = None,
    ) -> ServiceBusReceiver:
        self._check_entity(checked)
        known = ("session_id", "sub_queue", "receive_mode", "max_wait_time", "auto_lock_renewer", "prefetch_count",
                 *HANDLER_OPTIONS)  # fmt: skip
        ignore_unknown("get_queue_receiver" if queue_name else "get_subscription_receiver", options, known)
        chosen: dict[str, Any] = {name: options[name] for name in known if name in options}
        receiver = ServiceBusReceiver(
            self._holder,
            entity,
            policy=self._policy,
            queue_name=queue_name,
            topic_name=topic_name,
            subscription_name=subscription_name,
            **chosen,
        )
        return self._track(receiver)

    def get_queue_receiver(self, queue_name: str, **kwargs: Any) -> ServiceBusReceiver:
        """A receiver from ``queue_name``. Keywords as the SDK's: ``receive_mode`` (PEEK_LOCK),
        ``prefetch_count`` (0: credit per call), ``max_wait_time`` (None: wait for ever),
        ``sub_queue`` (DEAD_LETTER...), ``session_id`` (an id or ``NEXT_AVAILABLE_SESSION``),
        ``auto_lock_renewer``."""
        return self._receiver(queue_name, queue_name, kwargs, queue_name=queue_name)

    def get_subscription_receiver(self, topic_name: str, subscription_name: str, **kwargs: Any) -> ServiceBusReceiver:
        """A receiver from ``topic_name/Subscriptions/subscription_name`` (keywords as
        :meth:`get_queue_receiver`)."""
        entity = f"{topic_name}/Subscriptions/{subscription_name}"
        return self._receiver(topic_name, entity, kwargs, topic_name=topic_name, subscription_name=subscription_name)

    # -- sessions -----------------------------------------------------------------------
    def list_queue_sessions(
        self, queue_name: str, *, state_updated_after: dt.datetime | None = None, timeout: float | None = None
    ) -> AsyncItemPaged[str]:
        """The session ids of a session queue with active messages or stored state (with
        ``state_updated_after``: whose state was set after it), as ``async for`` or
        ``by_page()``; ``timeout`` bounds the whole listing (the SDK's ``list_queue_sessions``)."""
        return self.session_lister(queue_name, state_updated_after=state_updated_after, timeout=timeout).paged()

    def list_subscription_sessions(
        self,
        topic_name: str,
        subscription_name: str,
        *,
        state_updated_after: dt.datetime | None = None,
        timeout: float | None = None,
    ) -> AsyncItemPaged[str]:
        """As :meth:`list_queue_sessions`, for a session subscription."""
        lister = self.session_lister(
            topic_name, subscription_name, state_updated_after=state_updated_after, timeout=timeout
        )
        return lister.paged()

    def session_lister(
        self,
        queue_or_topic: str,
        subscription_name: str | None = None,
        *,
        state_updated_after: dt.datetime | None = None,
        timeout: float | None = None,
    ) -> SessionLister:
        """The pages of a queue's (or a topic's subscription's) session ids, on this client's
        connection and retry policy."""
        self._check_entity(queue_or_topic)
        entity = queue_or_topic if subscription_name is None else f"{queue_or_topic}/Subscriptions/{subscription_name}"
        return SessionLister(
            self._holder, entity, self._policy, state_updated_after=state_updated_after, timeout=timeout
        )
