"""The two ways the commands talk to a broker, behind one small interface each.

:func:`open_client` gives a :class:`Client` for a :class:`~amqplink.commands.target.Target`:
a connection string goes through the Service Bus client (``ServiceBusClient``: SAS over
``$cbs``, sessions, ``$management`` peek), a URL through the plain AMQP 1.0 client
(:func:`amqplink.aio.connect`). A sender's :meth:`SendLink.send` gives a future of the
failure reason (None when the broker accepted the message), so a command can stop at the
first refusal and say why.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Protocol

from amqplink import AMQPLinkError
from amqplink.aio import AMQPError, Connection, connect
from amqplink.aio.receiver import ReceiverMode
from amqplink.aio.sender import SettleMode
from amqplink.commands.target import Target, split_subscription
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Rejected, Released
from amqplink.sbwire.conditions import MESSAGE_SIZE_EXCEEDED

__all__ = ["Client", "ReceiveLink", "SendLink", "open_client"]

UNAUTHORIZED = "amqp:unauthorized-access"


class SendLink(Protocol):
    """A sending link; ``send`` waits only for room under the in-flight bound."""

    async def send(self, message: Message) -> asyncio.Future[str | None]:
        """Hand ``message`` over; a future of why it was not accepted (None: accepted)."""

    async def close(self) -> None:
        """Wait for every outcome, then detach the link."""


class ReceiveLink(Protocol):
    """A receiving link; items are the backend's own messages, read with :meth:`message`."""

    async def receive(self, count: int, timeout: float) -> list[Any]:
        """Up to ``count`` messages, waiting at most ``timeout`` seconds for the first."""

    async def settle(self, items: list[Any]) -> None:
        """Settle ``items`` as processed (peek-lock: complete; receive-and-delete: nothing to do)."""

    def message(self, item: Any) -> Message:
        """The AMQP message an item carries (what ``--show`` prints)."""

    async def close(self) -> None:
        """Detach the link."""


class Client(Protocol):
    """Makes the links of one command run."""

    async def sender(self, address: str, *, settled: bool, in_flight: int) -> SendLink:
        """A sending link to ``address`` (``settled``: pre-settled; ``in_flight``: outcomes awaited at most)."""

    async def receiver(
        self, address: str, *, mode: ReceiverMode, prefetch: int, session_id: str | None
    ) -> ReceiveLink:
        """A receiving link from ``address`` (a queue or ``TOPIC/Subscriptions/NAME``; ``session_id``: that session)."""

    async def peek(self, address: str, count: int, *, from_sequence: int, session_id: str | None) -> list[Message]:
        """Up to ``count`` messages from sequence number ``from_sequence`` on, not locked ($management)."""


def _reason(outcome: Any) -> str | None:
    """None for an accepted (or pre-settled) message, else why the broker did not take it."""
    if outcome is None or isinstance(outcome, Accepted):
        return None
    if isinstance(outcome, Rejected):
        error = outcome.error
        if error is None:
            return "rejected (no reason given)"
        return f"rejected: {error.condition}: {error.description or 'no description'}"
    if isinstance(outcome, Released):
        return "released by the broker (not delivered; it may be sent again)"
    return f"{type(outcome).__name__.lower()} by the broker (not delivered)"


async def _outcome_or_refusal(send: Any, message: Message) -> asyncio.Future[Any] | str:
    """``send(message)``'s outcome future, or why it was refused before it was sent: a
    message larger than the peer takes is refused by either client before it leaves
    (``amqp:link:message-size-exceeded``), and is a refusal as the broker's are: one text and
    one exit status, whichever client sent it."""
    try:
        future: asyncio.Future[Any] = await send(message)
    except AMQPLinkError as exc:
        if getattr(exc, "condition", None) != MESSAGE_SIZE_EXCEEDED:
            raise
        description = getattr(exc, "description", None) or str(exc)
        return f"{description} [{MESSAGE_SIZE_EXCEEDED}] {getattr(exc, 'hint', '')}".rstrip()
    return future


def _refused(reason: str) -> asyncio.Future[str | None]:
    refused: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    refused.set_result(reason)
    return refused


def _relay(inner: asyncio.Future[Any], reason: Any) -> asyncio.Future[str | None]:
    """A future of ``reason(inner's result)``, or of the text of inner's error."""
    outer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    def done(future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            outer.set_result("cancelled")
        elif (exc := future.exception()) is not None:
            outer.set_result(str(exc) or type(exc).__name__)
        else:
            outer.set_result(reason(future.result()))

    inner.add_done_callback(done)
    return outer


# -- plain AMQP 1.0 (a URL) ---------------------------------------------------------------
class _AmqpSender:
    def __init__(self, link: Any) -> None:
        self._link = link

    async def send(self, message: Message) -> asyncio.Future[str | None]:
        outcome = await _outcome_or_refusal(self._link.send_nowait, message)
        return _refused(outcome) if isinstance(outcome, str) else _relay(outcome, _reason)

    async def close(self) -> None:
        await self._link.wait_settled()
        await self._link.close()


class _AmqpReceiver:
    def __init__(self, link: Any, mode: ReceiverMode) -> None:
        self._link = link
        self._mode = mode

    async def receive(self, count: int, timeout: float) -> list[Any]:
        result: list[Any] = await self._link.receive(count, timeout=timeout)
        return result

    async def settle(self, items: list[Any]) -> None:
        if self._mode == "peek-lock":
            await self._link.accept(*items)

    def message(self, item: Any) -> Message:
        assert isinstance(item, Message)
        return item

    async def close(self) -> None:
        await self._link.close()


class _AmqpClient:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    async def sender(self, address: str, *, settled: bool, in_flight: int) -> SendLink:
        mode: SettleMode = "settled" if settled else "unsettled"
        return _AmqpSender(await self._conn.create_sender(address, settle_mode=mode, max_in_flight=in_flight))

    async def receiver(
        self, address: str, *, mode: ReceiverMode, prefetch: int, session_id: str | None
    ) -> ReceiveLink:
        if session_id is not None:
            raise ValueError("--session-id receives from a Service Bus session: give the connection string")
        return _AmqpReceiver(await self._conn.create_receiver(address, mode=mode, prefetch=prefetch), mode)

    async def peek(self, address: str, count: int, *, from_sequence: int, session_id: str | None) -> list[Message]:
        raise ValueError(
            "peek asks the Service Bus $management node: give the connection string the broker prints"
        )


# -- Service Bus (a connection string) ------------------------------------------------------
class _ServiceBusSender:
    def __init__(self, sender: Any) -> None:
        self._sender = sender

    async def send(self, message: Message) -> asyncio.Future[str | None]:
        outcome = await _outcome_or_refusal(self._sender.send_nowait, message)
        return _refused(outcome) if isinstance(outcome, str) else _relay(outcome, lambda _: None)

    async def close(self) -> None:
        await self._sender.close()


class _ServiceBusReceiver:
    def __init__(self, receiver: Any, complete: bool) -> None:
        self._receiver = receiver
        self._complete = complete

    async def receive(self, count: int, timeout: float) -> list[Any]:
        result: list[Any] = await self._receiver.receive_messages(max_message_count=count, max_wait_time=timeout)
        return result

    async def settle(self, items: list[Any]) -> None:
        if self._complete:  # each call starts its settlement; gathered, they go out together
            await asyncio.gather(*(self._receiver.complete_message(item) for item in items))

    def message(self, item: Any) -> Message:
        raw: Message = item.amqplink_message
        return raw

    async def close(self) -> None:
        await self._receiver.close()


class _ServiceBusClient:
    def __init__(self, client: Any) -> None:
        self._client = client

    def _receiver_of(self, address: str, **options: Any) -> Any:
        topic, subscription = split_subscription(address)
        if subscription is not None:
            return self._client.get_subscription_receiver(topic, subscription, **options)
        return self._client.get_queue_receiver(address, **options)

    async def sender(self, address: str, *, settled: bool, in_flight: int) -> SendLink:
        if settled:
            raise ValueError("--settled sends pre-settled over plain AMQP: give an amqp:// URL")
        sender = self._client.get_queue_sender(address, max_in_flight=in_flight)
        await sender.__aenter__()  # attach now: a refused attach is the command's error
        return _ServiceBusSender(sender)

    async def receiver(
        self, address: str, *, mode: ReceiverMode, prefetch: int, session_id: str | None
    ) -> ReceiveLink:
        from amqplink.servicebus.constants import ServiceBusReceiveMode

        peek_lock = mode == "peek-lock"
        receive_mode = ServiceBusReceiveMode.PEEK_LOCK if peek_lock else ServiceBusReceiveMode.RECEIVE_AND_DELETE
        receiver = self._receiver_of(address, receive_mode=receive_mode, prefetch_count=prefetch, session_id=session_id)
        await receiver.__aenter__()
        return _ServiceBusReceiver(receiver, peek_lock)

    async def peek(self, address: str, count: int, *, from_sequence: int, session_id: str | None) -> list[Message]:
        async with self._receiver_of(address, session_id=session_id) as receiver:
            found = await receiver.peek_messages(max_message_count=count, sequence_number=from_sequence)
        return [item.amqplink_message for item in found]


@contextlib.asynccontextmanager
async def open_client(target: Target) -> AsyncIterator[Client]:
    """A :class:`Client` for ``target``, closed (with every link) on exit."""
    if target.servicebus:
        from amqplink.servicebus.client import ServiceBusClient

        async with ServiceBusClient.from_connection_string(target.text, retry_total=0) as client:
            yield _ServiceBusClient(client)
        return
    try:
        async with await connect(target.text) as conn:
            yield _AmqpClient(conn)
    except AMQPError as exc:
        if exc.condition != UNAUTHORIZED:
            raise
        hint = "; this broker wants a SAS token: give the connection string it prints instead of a URL"
        raise AMQPError(f"{exc}{hint}", condition=exc.condition, description=exc.description) from None
