"""The client side of ``<entity>/$management``: operations, their body maps, their statuses.

docs/protocol.md#management-operations: application-properties ``operation="com.microsoft:<op>"``,
``com.microsoft:server-timeout`` (uint ms), ``associated-link-name`` (the receiver
link's name); the response's ``statusCode`` (200 ok, 204 no content, 410 lock lost),
``statusDescription``, ``errorCondition``. Request and response bodies are amqp-value
maps, keyed exactly as that section's table. Lock tokens travel as AMQP uuids in RFC
order. Errors become Service Bus exceptions through ``errors.from_management_status``.
"""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from amqplink.aio.connection import Connection
from amqplink.aio.errors import AMQPError
from amqplink.aio.request_response import RequestResponseLink
from amqplink.codec.types import AMQPType, Array, Int, Long, Timestamp, UInt
from amqplink.message import Message
from amqplink.sbwire.nodes import MANAGEMENT_NODE, SERVER_TIMEOUT, Operation
from amqplink.servicebus.errors import from_amqp_error, from_management_status
from amqplink.servicebus.exceptions import ServiceBusError
from amqplink.servicebus.response import read_status

__all__ = [
    "DEFAULT_SERVER_TIMEOUT",
    "DispositionStatus",
    "ManagementClient",
    "Operation",
    "ScheduledMessage",
    "management_address",
]

DEFAULT_SERVER_TIMEOUT = 60.0
"""Seconds the broker may take on one operation (sent as ``com.microsoft:server-timeout`` ms)."""


_SESSION_OPERATIONS = frozenset(
    (Operation.RENEW_SESSION_LOCK, Operation.GET_SESSION_STATE, Operation.SET_SESSION_STATE)
)


class DispositionStatus(enum.StrEnum):
    """``disposition-status`` of ``update-disposition`` (``defered`` is Service Bus's spelling)."""

    COMPLETED = "completed"
    ABANDONED = "abandoned"
    SUSPENDED = "suspended"
    DEFERRED = "defered"


class ScheduledMessage(NamedTuple):
    """One entry of ``schedule-message``: the encoded message and the ids the broker reads."""

    message_id: str
    message: bytes
    session_id: str | None = None
    partition_key: str | None = None
    via_partition_key: str | None = None


def management_address(entity: str) -> str:
    """``<entity>/$management``."""
    return f"{entity.rstrip('/')}/{MANAGEMENT_NODE}"


def _uuids(tokens: Iterable[uuid.UUID | str]) -> Array:
    return Array([t if isinstance(t, uuid.UUID) else uuid.UUID(t) for t in tokens], AMQPType.UUID)


def _longs(numbers: Iterable[int]) -> Array:
    return Array([Long(n) for n in numbers], AMQPType.LONG)


def _datetime(value: Any) -> dt.datetime:
    return Timestamp(value).to_datetime()


class ManagementClient:
    """Requests on one entity's ``$management`` node over one link pair.

    Each method builds the body map docs/protocol.md#management-operations gives, sends it with
    ``com.microsoft:server-timeout`` and (when known) ``associated-link-name``, checks
    the status and returns the response map's payload.
    """

    def __init__(
        self,
        pair: RequestResponseLink,
        entity: str,
        *,
        associated_link_name: str | None = None,
        server_timeout: float = DEFAULT_SERVER_TIMEOUT,
    ) -> None:
        self.pair = pair
        self.entity = entity
        self.associated_link_name = associated_link_name
        self.server_timeout = server_timeout

    @classmethod
    async def open(
        cls,
        connection: Connection,
        entity: str,
        *,
        associated_link_name: str | None = None,
        server_timeout: float = DEFAULT_SERVER_TIMEOUT,
    ) -> ManagementClient:
        """Attach the link pair to ``<entity>/$management``."""
        try:
            pair = await RequestResponseLink.open(connection, management_address(entity))
        except (AMQPError, OSError, TimeoutError) as exc:
            raise from_amqp_error(exc, entity=entity) from exc
        return cls(pair, entity, associated_link_name=associated_link_name, server_timeout=server_timeout)

    @property
    def closed(self) -> bool:
        """True once the link pair is gone."""
        return self.pair.closed

    async def close(self) -> None:
        """Detach the link pair."""
        await self.pair.close()

    # -- the one request path -------------------------------------------------------------
    async def request(
        self, operation: Operation, body: Mapping[str, Any], *, timeout: float | None = None
    ) -> dict[Any, Any] | None:
        """Send ``operation`` with ``body``; return the response map (None for 204 / no body).

        ``timeout`` (default ``server_timeout``) bounds the wait and is sent to the broker
        as ``com.microsoft:server-timeout``.
        """
        wait = self.server_timeout if timeout is None else timeout
        properties: dict[str, Any] = {
            "operation": str(operation),
            SERVER_TIMEOUT: UInt(int(wait * 1000)),
        }
        if self.associated_link_name:
            properties["associated-link-name"] = self.associated_link_name
        try:
            response = await self.pair.request(Message(dict(body), application_properties=properties), timeout=wait)
        except (AMQPError, OSError, TimeoutError) as exc:
            raise from_amqp_error(exc, entity=self.entity) from exc
        status = read_status(response)
        if status.ok:
            payload = response.body
            return payload if isinstance(payload, dict) else None
        if status.code is None:
            raise ServiceBusError(
                description=f"{operation}: the $management response carries no statusCode", entity=self.entity
            )
        raise from_management_status(
            status.code,
            status.description or f"{operation} failed",
            status.condition,
            entity=self.entity,
            session=operation in _SESSION_OPERATIONS,
        )

    # -- operations -------------------------------------------------------------------------
    async def renew_lock(self, lock_tokens: Iterable[uuid.UUID | str]) -> list[dt.datetime]:
        """``renew-lock``: the new locked-until time of each token, in order."""
        result = await self.request(Operation.RENEW_LOCK, {"lock-tokens": _uuids(lock_tokens)})
        return [_datetime(t) for t in (result or {}).get("expirations", [])]

    async def peek_messages(
        self, from_sequence_number: int, message_count: int, *, session_id: str | None = None
    ) -> list[bytes]:
        """``peek-message``: the encoded messages from ``from_sequence_number`` on ([] on 204);
        ``session_id`` peeks into one session."""
        body: dict[str, Any] = {"from-sequence-number": Long(from_sequence_number), "message-count": Int(message_count)}
        if session_id is not None:
            body["session-id"] = session_id
        result = await self.request(Operation.PEEK_MESSAGE, body)
        return [bytes(m["message"]) for m in (result or {}).get("messages", [])]

    async def schedule_messages(self, messages: Iterable[ScheduledMessage]) -> list[int]:
        """``schedule-message``: the sequence numbers the broker gave the scheduled messages."""
        entries = []
        for m in messages:
            entry: dict[str, Any] = {"message-id": m.message_id, "message": m.message}
            if m.session_id is not None:
                entry["session-id"] = m.session_id
            if m.partition_key is not None:
                entry["partition-key"] = m.partition_key
            if m.via_partition_key is not None:
                entry["via-partition-key"] = m.via_partition_key
            entries.append(entry)
        result = await self.request(Operation.SCHEDULE_MESSAGE, {"messages": entries})
        return [int(n) for n in (result or {}).get("sequence-numbers", [])]

    async def cancel_scheduled_messages(self, sequence_numbers: Iterable[int]) -> None:
        """``cancel-scheduled-message``."""
        await self.request(Operation.CANCEL_SCHEDULED_MESSAGE, {"sequence-numbers": _longs(sequence_numbers)})

    async def receive_by_sequence_number(
        self, sequence_numbers: Iterable[int], *, receiver_settle_mode: int, session_id: str | None = None
    ) -> list[tuple[uuid.UUID | None, bytes]]:
        """``receive-by-sequence-number`` (deferred messages): (lock token, encoded message) pairs."""
        body: dict[str, Any] = {
            "sequence-numbers": _longs(sequence_numbers),
            "receiver-settle-mode": UInt(receiver_settle_mode),
        }
        if session_id is not None:
            body["session-id"] = session_id
        result = await self.request(Operation.RECEIVE_BY_SEQUENCE_NUMBER, body)
        return [(m.get("lock-token"), bytes(m["message"])) for m in (result or {}).get("messages", [])]

    async def update_disposition(
        self,
        status: DispositionStatus,
        lock_tokens: Iterable[uuid.UUID | str],
        *,
        dead_letter_reason: str | None = None,
        dead_letter_description: str | None = None,
        properties_to_modify: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> None:
        """``update-disposition``: settle messages by lock token (deferred ones, or without a link)."""
        body: dict[str, Any] = {"disposition-status": str(status), "lock-tokens": _uuids(lock_tokens)}
        if dead_letter_reason is not None:
            body["deadletter-reason"] = dead_letter_reason
        if dead_letter_description is not None:
            body["deadletter-description"] = dead_letter_description
        if properties_to_modify:
            body["properties-to-modify"] = dict(properties_to_modify)
        if session_id is not None:
            body["session-id"] = session_id
        await self.request(Operation.UPDATE_DISPOSITION, body)

    async def renew_session_lock(self, session_id: str) -> dt.datetime:
        """``renew-session-lock``: the session's new locked-until time."""
        result = await self.request(Operation.RENEW_SESSION_LOCK, {"session-id": session_id})
        if not result or result.get("expiration") is None:
            raise ServiceBusError(description="renew-session-lock answered without an expiration", entity=self.entity)
        return _datetime(result["expiration"])

    async def get_session_state(self, session_id: str) -> bytes | None:
        """``get-session-state``: the session's state (None when it has none)."""
        result = await self.request(Operation.GET_SESSION_STATE, {"session-id": session_id})
        state = (result or {}).get("session-state")
        return None if state is None else bytes(state)

    async def set_session_state(self, session_id: str, state: bytes | None) -> None:
        """``set-session-state`` (None clears it)."""
        await self.request(Operation.SET_SESSION_STATE, {"session-id": session_id, "session-state": state})

    async def get_message_sessions(self, last_updated_ms: int, skip: int, top: int) -> list[str]:
        """``get-message-sessions``: one page of session ids ([] on 204). ``last_updated_ms``
        is a raw AMQP timestamp (the SDK's sentinel for "all" is past ``datetime``'s range)."""
        body = {"last-updated-time": Timestamp(last_updated_ms), "skip": Int(skip), "top": Int(top)}
        result = await self.request(Operation.GET_MESSAGE_SESSIONS, body)
        ids = (result or {}).get("sessions-ids") or []
        return [i.decode("utf-8") if isinstance(i, bytes) else str(i) for i in ids]
