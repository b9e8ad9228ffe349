"""The blocking Service Bus API (``azure.servicebus``'s classes): the asyncio objects run
on :mod:`amqplink.sync`'s event loop, and each call waits for its result (running the
loop on the calling thread while calls come back to back: :mod:`amqplink.sync.loop`).

Lock renewal therefore never waits for user code: between calls the keeper thread runs
the loop, so an :class:`AutoLockRenewer` renews while the calling thread is busy, even
with CPU-bound work (its failure callback runs in a worker thread, so a slow callback
cannot hold the loop either).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any

from amqplink.servicebus import client as aio_client
from amqplink.servicebus import lock_renewer as aio_renewer
from amqplink.servicebus import receiver as aio_receiver
from amqplink.servicebus import sender as aio_sender
from amqplink.servicebus import session as aio_session
from amqplink.servicebus import transaction as aio_transaction
from amqplink.servicebus.localqueue.queue import LocalQueueState
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusMessageBatch, ServiceBusReceivedMessage
from amqplink.servicebus.paging import ItemPaged
from amqplink.servicebus.paired.pairing import PairedState
from amqplink.servicebus.session_list import SessionLister
from amqplink.sync import _Outcome, _run, _submit, _wait

__all__ = [
    "AutoLockRenewer",
    "ServiceBusClient",
    "ServiceBusReceiver",
    "ServiceBusSender",
    "ServiceBusSession",
    "ServiceBusTransaction",
]


class _Closable:
    """What the blocking handlers share: close, ``with``, the handler's name."""

    _aio: (
        aio_client.ServiceBusClient
        | aio_sender.ServiceBusSender
        | aio_receiver.ServiceBusReceiver
        | (aio_renewer.AutoLockRenewer)
    )

    def close(self) -> None:
        """Close (and wait until closed)."""
        _run(self._aio.close())

    @property
    def client_identifier(self) -> str:
        """The handler's unique name (in its link names)."""
        inner = self._aio
        return (
            inner.client_identifier
            if isinstance(inner, aio_sender.ServiceBusSender | aio_receiver.ServiceBusReceiver)
            else ""
        )

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _Named(_Closable):
    """The client and its handlers: they name their namespace."""

    _aio: aio_client.ServiceBusClient | aio_sender.ServiceBusSender | aio_receiver.ServiceBusReceiver

    @property
    def fully_qualified_namespace(self) -> str:
        """The namespace (its host, and the port when one was given), as the SDK reports it."""
        return self._aio.fully_qualified_namespace


class ServiceBusClient(_Named):
    """Blocking twin of :class:`amqplink.servicebus.aio.ServiceBusClient`; same arguments."""

    _aio: aio_client.ServiceBusClient

    def __init__(self, fully_qualified_namespace: str, credential: Any, **kwargs: Any) -> None:
        self._aio = aio_client.ServiceBusClient(fully_qualified_namespace, credential, **kwargs)

    @classmethod
    def from_connection_string(cls, conn_str: str, **kwargs: Any) -> ServiceBusClient:
        """A client from a connection string (the SDK's retry options accepted)."""
        obj = cls.__new__(cls)
        obj._aio = aio_client.ServiceBusClient.from_connection_string(conn_str, **kwargs)
        return obj

    def __repr__(self) -> str:
        return repr(self._aio)

    def __enter__(self) -> ServiceBusClient:
        _run(self._aio.__aenter__())
        return self

    @property
    def paired_state(self) -> PairedState | None:
        """A snapshot of the paired-namespace failover (None without ``paired_namespace``)."""
        return _run(_paired_state(self._aio))

    @property
    def local_queue_state(self) -> LocalQueueState | None:
        """A snapshot of the local queue (None without ``local_queue``)."""
        return _run(_local_queue_state(self._aio))

    def get_queue_sender(self, queue_name: str, **kwargs: Any) -> ServiceBusSender:
        """A sender to ``queue_name``."""
        return ServiceBusSender(self._aio.get_queue_sender(queue_name, **kwargs))

    def get_topic_sender(self, topic_name: str, **kwargs: Any) -> ServiceBusSender:
        """A sender to ``topic_name``."""
        return ServiceBusSender(self._aio.get_topic_sender(topic_name, **kwargs))

    def get_queue_receiver(self, queue_name: str, **kwargs: Any) -> ServiceBusReceiver:
        """A receiver from ``queue_name`` (same options as the asyncio client)."""
        renewer = kwargs.pop("auto_lock_renewer", None)
        inner = self._aio.get_queue_receiver(queue_name, auto_lock_renewer=_inner_renewer(renewer), **kwargs)
        return ServiceBusReceiver(inner, renewer)

    def get_subscription_receiver(self, topic_name: str, subscription_name: str, **kwargs: Any) -> ServiceBusReceiver:
        """A receiver from ``topic_name/Subscriptions/subscription_name``."""
        renewer = kwargs.pop("auto_lock_renewer", None)
        inner = self._aio.get_subscription_receiver(
            topic_name, subscription_name, auto_lock_renewer=_inner_renewer(renewer), **kwargs
        )
        return ServiceBusReceiver(inner, renewer)

    def transaction(self) -> ServiceBusTransaction:
        """A transaction on this client's connection, to use as ``with`` (docs/transactions.md)."""
        return ServiceBusTransaction(self._aio.transaction())

    def list_queue_sessions(self, queue_name: str, **kwargs: Any) -> ItemPaged[str]:
        """The session ids of a session queue (``state_updated_after``, ``timeout`` as the SDK's);
        iterate, or ``by_page(continuation_token)``."""
        return _sessions(self._aio.session_lister(queue_name, **kwargs))

    def list_subscription_sessions(self, topic_name: str, subscription_name: str, **kwargs: Any) -> ItemPaged[str]:
        """The session ids of a session subscription."""
        return _sessions(self._aio.session_lister(topic_name, subscription_name, **kwargs))


class ServiceBusTransaction:
    """Blocking twin of :class:`amqplink.servicebus.aio.ServiceBusTransaction`: as ``with``,
    committed when the block ends, rolled back when it raises."""

    def __init__(self, inner: aio_transaction.ServiceBusTransaction) -> None:
        self._aio = inner

    def __repr__(self) -> str:
        return repr(self._aio)

    @property
    def state(self) -> Any:
        """Where it is (a ``TransactionState``)."""
        return self._aio.state

    @property
    def is_active(self) -> bool:
        """Begun and not yet committed or rolled back."""
        return self._aio.is_active

    @property
    def transaction_id(self) -> bytes | None:
        """The id the broker gave it (None until begun)."""
        return self._aio.transaction_id

    def begin(self) -> ServiceBusTransaction:
        """Declare it on the client's connection."""
        _run(self._aio.begin())
        return self

    def commit(self) -> None:
        """Apply all of it together (``TransactionRolledBackError`` when Service Bus rolled it back)."""
        _run(self._aio.commit())

    def rollback(self) -> None:
        """Undo all of it."""
        _run(self._aio.rollback())

    def __enter__(self) -> ServiceBusTransaction:
        return self.begin()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _run(self._aio.__aexit__(exc_type, exc, tb))


def _inner_transaction(transaction: ServiceBusTransaction | None) -> aio_transaction.ServiceBusTransaction | None:
    return None if transaction is None else transaction._aio


def _sessions(lister: SessionLister) -> ItemPaged[str]:
    """The ids page by page, each page fetched on the loop thread when the caller gets to it."""
    return ItemPaged(lambda token: _run(lister.fetch(token)))


async def _paired_state(client: aio_client.ServiceBusClient) -> PairedState | None:
    return client.paired_state  # read on the loop thread, where it changes


async def _local_queue_state(client: aio_client.ServiceBusClient) -> LocalQueueState | None:
    return client.local_queue_state


def _inner_renewer(renewer: AutoLockRenewer | None) -> aio_renewer.AutoLockRenewer | None:
    return None if renewer is None else renewer._aio


class ServiceBusSender(_Named):
    """Blocking twin of :class:`amqplink.servicebus.aio.ServiceBusSender`."""

    _aio: aio_sender.ServiceBusSender

    def __init__(self, inner: aio_sender.ServiceBusSender | str, credential: Any = None, **kwargs: Any) -> None:
        """From a client, or as the SDK's ``ServiceBusSender(fully_qualified_namespace, credential,
        queue_name=... | topic_name=..., **client_options)`` (a connection of its own)."""
        if not isinstance(inner, aio_sender.ServiceBusSender):
            inner = aio_sender.ServiceBusSender(inner, credential, **kwargs)
        self._aio = inner

    @classmethod
    def from_connection_string(cls, conn_str: str, **kwargs: Any) -> ServiceBusSender:
        """As :meth:`amqplink.servicebus.aio.ServiceBusSender.from_connection_string` (the SDK's
        ``_from_connection_string``): a sender with a connection of its own."""
        return cls(aio_sender.ServiceBusSender.from_connection_string(conn_str, **kwargs))

    _from_connection_string = from_connection_string

    def __repr__(self) -> str:
        return repr(self._aio)

    def __enter__(self) -> ServiceBusSender:
        _run(self._aio._open_for_context())
        return self

    @property
    def entity_name(self) -> str:
        """The queue or topic."""
        return self._aio.entity_name

    def send_messages(
        self,
        message: Any,
        *,
        timeout: float | None = None,
        transaction: ServiceBusTransaction | None = None,
        **kwargs: Any,
    ) -> None:
        """Send one message, a list, a batch or an iterable (pipelined in batches); waits for
        the broker's acceptance (retried under the retry policy). ``transaction``: stored only
        if it commits."""
        if transaction is not None:
            _run(self._aio.send_messages(message, timeout=timeout, transaction=transaction._aio))
        elif timeout is None:
            _wait(partial(self._aio._send_soon, message))  # one message: no Task on the loop thread
        else:
            _run(self._aio.send_messages(message, timeout=timeout))

    def send_nowait(self, message: ServiceBusMessage | Mapping[str, Any]) -> concurrent.futures.Future[None]:
        """Hand one message over (blocking only for room under ``max_in_flight``); a future for its outcome."""

        async def hand_over() -> concurrent.futures.Future[None]:
            return _Outcome(await self._aio.send_nowait(message))

        return _run(hand_over())

    def create_message_batch(self, max_size_in_bytes: int | None = None) -> ServiceBusMessageBatch:
        """An empty batch bounded by the link's max-message-size."""
        return _run(self._aio.create_message_batch(max_size_in_bytes))

    def schedule_messages(
        self, messages: Any, schedule_time_utc: dt.datetime, *, timeout: float | None = None, **kwargs: Any
    ) -> list[int]:
        """Schedule messages; their sequence numbers."""
        return _run(self._aio.schedule_messages(messages, schedule_time_utc, timeout=timeout))

    def cancel_scheduled_messages(
        self, sequence_numbers: int | Iterable[int], *, timeout: float | None = None, **kwargs: Any
    ) -> None:
        """Cancel scheduled messages."""
        _run(self._aio.cancel_scheduled_messages(sequence_numbers, timeout=timeout))


class ServiceBusSession:
    """Blocking twin of :class:`amqplink.servicebus.aio.ServiceBusSession`."""

    def __init__(self, inner: aio_session.ServiceBusSession) -> None:
        self._aio = inner

    def __repr__(self) -> str:
        return repr(self._aio)

    @property
    def session_id(self) -> str:
        """The id of the locked session."""
        return self._aio.session_id

    @property
    def locked_until_utc(self) -> dt.datetime | None:
        """When the session lock ends (UTC), as the broker last said."""
        return self._aio.locked_until_utc

    @property
    def auto_renew_error(self) -> BaseException | None:
        """Why automatic renewal of the session lock stopped, if it did."""
        return self._aio.auto_renew_error

    def get_state(self, *, timeout: float | None = None, **kwargs: Any) -> bytes | None:
        """The session state."""
        return _run(self._aio.get_state(timeout=timeout))

    def set_state(self, state: str | bytes | bytearray | None, *, timeout: float | None = None, **kwargs: Any) -> None:
        """Replace the session state."""
        _run(self._aio.set_state(state, timeout=timeout))

    def renew_lock(self, *, timeout: float | None = None, **kwargs: Any) -> dt.datetime:
        """Extend the session lock."""
        return _run(self._aio.renew_lock(timeout=timeout))


class ServiceBusReceiver(_Named):
    """Blocking twin of :class:`amqplink.servicebus.aio.ServiceBusReceiver`."""

    _aio: aio_receiver.ServiceBusReceiver

    def __init__(
        self,
        inner: aio_receiver.ServiceBusReceiver | str,
        renewer: AutoLockRenewer | Any = None,
        **kwargs: Any,
    ) -> None:
        """From a client, or as the SDK's ``ServiceBusReceiver(fully_qualified_namespace, credential,
        queue_name=... | topic_name=..., subscription_name=..., **options)`` (a connection of its own)."""
        if not isinstance(inner, aio_receiver.ServiceBusReceiver):
            credential, renewer = renewer, kwargs.pop("auto_lock_renewer", None)
            inner = aio_receiver.ServiceBusReceiver(
                inner, credential, auto_lock_renewer=_inner_renewer(renewer), **kwargs
            )
        self._aio = inner
        self._renewer = renewer
        self._session: ServiceBusSession | None = None

    @classmethod
    def from_connection_string(cls, conn_str: str, **kwargs: Any) -> ServiceBusReceiver:
        """As :meth:`amqplink.servicebus.aio.ServiceBusReceiver.from_connection_string` (the SDK's
        ``_from_connection_string``): a receiver with a connection of its own."""
        renewer = kwargs.pop("auto_lock_renewer", None)
        inner = aio_receiver.ServiceBusReceiver.from_connection_string(
            conn_str, auto_lock_renewer=_inner_renewer(renewer), **kwargs
        )
        return cls(inner, renewer)

    _from_connection_string = from_connection_string

    def __repr__(self) -> str:
        return repr(self._aio)

    def __enter__(self) -> ServiceBusReceiver:
        _run(self._aio._open_for_context())
        return self

    @property
    def entity_name(self) -> str:
        """The queue, subscription or dead-letter queue path it receives from."""
        return self._aio.entity_name

    @property
    def receive_mode(self) -> Any:
        """PEEK_LOCK or RECEIVE_AND_DELETE."""
        return self._aio.receive_mode

    @property
    def entity_path(self) -> str:
        """The path received from (``topic/Subscriptions/sub``, a ``/$DeadLetterQueue`` suffix)."""
        return self._aio.entity_path

    @property
    def session(self) -> ServiceBusSession | None:
        """The locked session (session receivers); None on a receiver without a session, as the SDK's."""
        inner = self._aio.session
        if inner is None:
            return None
        if self._session is None or self._session._aio is not inner:
            self._session = ServiceBusSession(inner)
            if self._renewer is not None:
                self._renewer._sessions[inner] = self._session
        return self._session

    def receive_messages(
        self, max_message_count: int | None = 1, max_wait_time: float | None = None
    ) -> list[ServiceBusReceivedMessage]:
        """Up to ``max_message_count`` messages, waiting up to ``max_wait_time`` s for the first."""
        return _run(self._aio.receive_messages(max_message_count, max_wait_time))

    def __iter__(self) -> Iterator[ServiceBusReceivedMessage]:
        return self

    def __next__(self) -> ServiceBusReceivedMessage:
        """The next message; the iteration ends after ``max_wait_time`` seconds without one, when given."""
        message = _run(_next(self._aio))
        if message is None:
            raise StopIteration
        return message

    next = __next__  # the SDK's name too

    def peek_messages(self, max_message_count: int = 1, **kwargs: Any) -> list[ServiceBusReceivedMessage]:
        """Browse messages without locking them."""
        return _run(self._aio.peek_messages(max_message_count, **kwargs))

    def receive_deferred_messages(
        self, sequence_numbers: int | Iterable[int], **kwargs: Any
    ) -> list[ServiceBusReceivedMessage]:
        """Deferred messages by sequence number."""
        return _run(self._aio.receive_deferred_messages(sequence_numbers, **kwargs))

    # The settle methods are called on the loop thread (``_wait``): there, a settlement on the
    # receive link is a future the caller waits for as it is (no Task per call). ``transaction``:
    # the settlement takes effect only if it commits (docs/transactions.md).
    def complete_message(
        self, message: ServiceBusReceivedMessage, *, transaction: ServiceBusTransaction | None = None
    ) -> None:
        """Settle as done: the broker removes the message (outcome ``accepted``; a deferred
        message is settled over ``$management``); waits for the broker's confirmation.
        ``MessageLockLostError`` if the lock is gone."""
        _wait(lambda _: self._aio.complete_message(message, transaction=_inner_transaction(transaction)))

    def complete_messages(self, messages: Sequence[ServiceBusReceivedMessage]) -> list[Exception | None]:
        """Complete ``messages`` together (an amqplink extension: one disposition per run of
        consecutive deliveries, the confirmations awaited together); each one's outcome, None
        if it was completed, else the error ``complete_message`` raises for it."""
        return _run(self._aio.complete_messages(list(messages)))

    def abandon_message(
        self, message: ServiceBusReceivedMessage, *, transaction: ServiceBusTransaction | None = None
    ) -> None:
        """Give the message back for redelivery, its delivery count + 1 (outcome
        ``modified``); waits for the broker's confirmation."""
        _wait(lambda _: self._aio.abandon_message(message, transaction=_inner_transaction(transaction)))

    def defer_message(
        self, message: ServiceBusReceivedMessage, *, transaction: ServiceBusTransaction | None = None
    ) -> None:
        """Set the message aside: it is then received only by sequence number
        (:meth:`receive_deferred_messages`); waits for the broker's confirmation."""
        _wait(lambda _: self._aio.defer_message(message, transaction=_inner_transaction(transaction)))

    def dead_letter_message(
        self,
        message: ServiceBusReceivedMessage,
        reason: str | None = None,
        error_description: str | None = None,
        *,
        transaction: ServiceBusTransaction | None = None,
    ) -> None:
        """Move the message to the dead-letter queue with ``reason`` and
        ``error_description`` (outcome ``rejected``); waits for the broker's confirmation."""
        inner = _inner_transaction(transaction)
        _wait(lambda _: self._aio.dead_letter_message(message, reason, error_description, transaction=inner))

    def renew_message_lock(
        self, message: ServiceBusReceivedMessage, *, timeout: float | None = None, **kwargs: Any
    ) -> dt.datetime:
        """Extend the message's lock (``$management`` ``renew-lock``); the new expiry, UTC."""
        return _run(self._aio.renew_message_lock(message, timeout=timeout))


async def _next(receiver: aio_receiver.ServiceBusReceiver) -> ServiceBusReceivedMessage | None:
    try:
        return await receiver.__anext__()
    except StopAsyncIteration:
        return None


SyncFailureCallback = Callable[[Any, BaseException | None], None]


class AutoLockRenewer(_Closable):
    """Blocking twin of the renewer: the renewals run on the loop thread, the failure callback
    in a worker thread (of ``executor`` when given). ``max_workers`` is accepted for the SDK's
    signature and not used: no thread of its own is made per renewal."""

    _aio: aio_renewer.AutoLockRenewer

    def __init__(
        self,
        max_lock_renewal_duration: float = 300,
        on_lock_renew_failure: SyncFailureCallback | None = None,
        executor: concurrent.futures.ThreadPoolExecutor | None = None,
        max_workers: int | None = None,
    ) -> None:
        self._executor = executor
        self._sessions: dict[aio_session.ServiceBusSession, ServiceBusSession] = {}
        self._aio = aio_renewer.AutoLockRenewer(
            max_lock_renewal_duration, None if on_lock_renew_failure is None else self._threaded(on_lock_renew_failure)
        )

    def __enter__(self) -> AutoLockRenewer:
        return self

    def close(self, wait: bool = True) -> None:
        """Stop renewing every lock. ``wait=False`` returns at once (the renewals stop on the
        loop thread), as the SDK's ``close(wait=False)`` does not wait for its thread pool; the
        ``executor`` given, if any, is shut down as the SDK shuts down its own."""
        stopping = _submit(self._aio.close())
        if wait:
            stopping.result()
        if self._executor is not None:
            self._executor.shutdown(wait=wait)

    def _threaded(self, callback: SyncFailureCallback) -> aio_renewer.FailureCallback:
        async def call(renewable: Any, error: BaseException | None) -> None:
            shown = self._sessions.get(renewable, renewable)
            await asyncio.get_running_loop().run_in_executor(self._executor, callback, shown, error)

        return call

    def register(
        self,
        receiver: ServiceBusReceiver,
        renewable: ServiceBusReceivedMessage | ServiceBusSession,
        max_lock_renewal_duration: float | None = None,
        on_lock_renew_failure: SyncFailureCallback | None = None,
    ) -> None:
        """Keep ``renewable``'s lock alive (on the loop thread) for up to ``max_lock_renewal_duration`` s."""
        inner: Any = renewable
        if isinstance(renewable, ServiceBusSession):
            inner = renewable._aio
            self._sessions[inner] = renewable
        callback = None if on_lock_renew_failure is None else self._threaded(on_lock_renew_failure)

        async def register() -> None:
            self._aio.register(receiver._aio, inner, max_lock_renewal_duration, callback)

        _run(register())
