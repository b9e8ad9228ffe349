"""Service Bus messages with azure-servicebus 7.x's names, over :class:`amqplink.message.Message`.

* :class:`ServiceBusMessage` — what a sender sends: ``body`` (str, bytes or None;
  a str is sent as UTF-8 in one data section), ``application_properties``,
  ``session_id`` (properties.group-id), ``message_id``, ``partition_key``
  (``x-opt-partition-key``), ``content_type``, ``correlation_id``, ``subject``, ``to``,
  ``reply_to``, ``reply_to_session_id`` (reply-to-group-id), ``time_to_live`` (header
  ttl) and ``scheduled_enqueue_time_utc`` (``x-opt-scheduled-enqueue-time``).
* :class:`ServiceBusReceivedMessage` — what a receiver hands out, with the broker's
  annotations (docs/protocol.md#annotations-and-properties): ``x-opt-sequence-number``, ``x-opt-enqueued-time``,
  ``x-opt-locked-until``, ``x-opt-enqueue-sequence-number``,
  ``x-opt-deadletter-source``; application properties ``DeadLetterReason`` and
  ``DeadLetterErrorDescription``; the lock token is the delivery-tag (.NET GUID order).
* :class:`ServiceBusMessageBatch` — messages sent as one transfer: message-format
  ``0x80013700``, one Data section per encoded inner message.

As in the SDK, a received message's application properties come back with ``bytes``
keys and ``bytes`` string values (the SDK documents it; ported code indexes with
``b"key"``), and a data body is read as an iterable of ``bytes`` (``b"".join(msg.body)``
or ``str(msg)``).
"""

from __future__ import annotations

import bisect
import datetime as dt
import enum
import itertools
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from amqplink.codec.decode import decode
from amqplink.codec.types import Symbol, Timestamp
from amqplink.message import Message, data_section_header
from amqplink.protocol.definitions import Properties
from amqplink.sbwire.annotations import DEAD_LETTER_ERROR_DESCRIPTION, DEAD_LETTER_REASON
from amqplink.sbwire.annotations import DEADLETTER_SOURCE as X_OPT_DEAD_LETTER_SOURCE
from amqplink.sbwire.annotations import ENQUEUE_SEQUENCE_NUMBER as X_OPT_ENQUEUE_SEQUENCE_NUMBER
from amqplink.sbwire.annotations import ENQUEUED_TIME as X_OPT_ENQUEUED_TIME
from amqplink.sbwire.annotations import LOCK_TOKEN as X_OPT_LOCK_TOKEN
from amqplink.sbwire.annotations import LOCKED_UNTIL as X_OPT_LOCKED_UNTIL
from amqplink.sbwire.annotations import MESSAGE_STATE as X_OPT_MESSAGE_STATE
from amqplink.sbwire.annotations import SCHEDULED_ENQUEUE_TIME as X_OPT_SCHEDULED_ENQUEUE_TIME
from amqplink.sbwire.annotations import SEQUENCE_NUMBER as X_OPT_SEQUENCE_NUMBER
from amqplink.sbwire.formats import BATCH_FORMAT as BATCH_MESSAGE_FORMAT
from amqplink.sbwire.lock_token import lock_token_from_delivery_tag
from amqplink.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType, body_type_of, sdk_value
from amqplink.servicebus.exceptions import MessageSizeExceededError

if TYPE_CHECKING:
    from amqplink.aio.receiver import ReceivedMessage

__all__ = [
    "BATCH_MESSAGE_FORMAT",
    "MAX_MESSAGE_LENGTH_BYTES",
    "MESSAGE_PROPERTY_MAX_LENGTH",
    "AmqpMessageBodyType",
    "ServiceBusMessage",
    "ServiceBusMessageBatch",
    "ServiceBusMessageState",
    "ServiceBusReceivedMessage",
]

log = logging.getLogger(__name__)

MAX_MESSAGE_LENGTH_BYTES = 1024 * 1024
"""The SDK's batch size when neither the caller nor the link gives one."""
MESSAGE_PROPERTY_MAX_LENGTH = 128
"""Service Bus: message_id, session_id, partition_key, reply_to_session_id are at most 128 characters."""
MAX_DURATION_MS = 922337203685477
"""The SDK's "no time to live" (TimeSpan.MaxValue in ms): no absolute expiry is computed for it."""
MAX_ABSOLUTE_EXPIRY_MS = 253402243199000
"""9999-12-31: the latest absolute-expiry-time the SDK writes."""


# A data section's constructor and size: 5 bytes up to 255 bytes of data, else 8.
_SMALL_OVERHEAD, _LARGE_OVERHEAD = 5, 8


class ServiceBusMessageState(int, enum.Enum):
    """``x-opt-message-state``: active, deferred or scheduled."""

    ACTIVE = 0
    DEFERRED = 1
    SCHEDULED = 2


def _check_length(name: str, value: Any) -> None:
    if value and len(str(value)) > MESSAGE_PROPERTY_MAX_LENGTH:
        raise ValueError(f"{name} cannot be longer than {MESSAGE_PROPERTY_MAX_LENGTH} characters.")


def _text(value: Any) -> str | None:
    """Strings as the SDK returns them (bytes decoded as UTF-8; other ids, e.g. a uuid, as text)."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _id_value(value: Any) -> Any:
    """A message id as the SDK's ``message_id`` gives it: binary decoded when it is UTF-8
    (else the bytes), a ulong a plain ``int``, anything else (str, ``uuid.UUID``) as it is."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    if isinstance(value, int) and type(value) is not int:
        return int(value)  # (the codec's ULong)
    return value


class _MessageIds:
    """Unique message ids in UUID form: a random prefix per process ("xxxxxxxx-xxxx-4xxx-yxxx-",
    74 random bits, drawn again in a forked child) and a 48-bit counter; a fraction of
    ``uuid4``'s cost, for the default id every message gets."""

    def __init__(self) -> None:
        self.prefix = ""
        self.counter = itertools.count()
        self.reseed()

    def reseed(self) -> None:
        self.prefix = str(uuid.uuid4())[:24]
        self.counter = itertools.count()

    def next(self) -> str:
        return f"{self.prefix}{next(self.counter) & 0xFFFFFFFFFFFF:012x}"


_IDS = _MessageIds()
os.register_at_fork(after_in_child=_IDS.reseed)
new_message_id = _IDS.next


def _utc(ms: Any) -> dt.datetime | None:
    if ms is None:
        return None
    return Timestamp(int(ms)).to_datetime()


def _text_field(name: str, doc: str, *, limit: bool = False) -> Any:
    """A str property over the :class:`Message` field ``name``; ``limit``: at most 128 characters."""

    def get(self: ServiceBusMessage) -> str | None:
        return _text(getattr(self._message, name))

    def set_(self: ServiceBusMessage, value: str | None) -> None:
        if limit:
            _check_length(name, value)
        setattr(self._message, name, value)

    return property(get, set_, doc=doc)


class ServiceBusMessage:
    """A Service Bus message to send (azure-servicebus's ``ServiceBusMessage``)."""

    __slots__ = ("_message", "_raw")
    _RECEIVED: ClassVar[bool] = False
    """Whether values read through ``raw_amqp_message`` are as received (the SDK's decoder's)."""

    def __init__(
        self,
        body: str | bytes | None,
        *,
        application_properties: Mapping[str | bytes, Any] | None = None,
        session_id: str | None = None,
        message_id: str | None = None,
        scheduled_enqueue_time_utc: dt.datetime | None = None,
        time_to_live: dt.timedelta | int | None = None,
        content_type: str | None = None,
        correlation_id: str | None = None,
        subject: str | None = None,
        partition_key: str | None = None,
        to: str | None = None,
        reply_to: str | None = None,
        reply_to_session_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:  # as the SDK: keywords it does not know (e.g. the old ``label``) are ignored
            log.debug("ServiceBusMessage: ignoring unknown keyword(s) %s", ", ".join(sorted(kwargs)))
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif body is not None and not isinstance(body, bytes):
            raise TypeError(f"ServiceBusMessage body must be a string, bytes, or None.  Got instead: {type(body)}")
        # As the SDK (its scheduled_enqueue_time_utc setter runs in __init__): every message has an id,
        # a new one where the id given is empty (None, "", b"", 0).
        if not message_id and type(body) is bytes:
            message = self._message = Message.of_data(body, Properties(message_id=new_message_id()))
        else:
            message = self._message = Message(body)
            if not message_id:
                message.properties = Properties(message_id=new_message_id())
            else:
                self.message_id = message_id
        if application_properties:
            self.application_properties = application_properties
        if (
            session_id is None
            and partition_key is None
            and content_type is None
            and correlation_id is None
            and subject is None
            and to is None
            and reply_to is None
            and reply_to_session_id is None
            and scheduled_enqueue_time_utc is None
            and time_to_live is None
        ):
            return  # the common case: a body (and properties) only
        optional = (
            ("session_id", session_id),  # before partition_key, which must equal it
            ("content_type", content_type),
            ("correlation_id", correlation_id),
            ("subject", subject),
            ("to", to),
            ("reply_to", reply_to),
            ("reply_to_session_id", reply_to_session_id),
            ("scheduled_enqueue_time_utc", scheduled_enqueue_time_utc),
            ("time_to_live", time_to_live),
            ("partition_key", partition_key),
        )
        for name, value in optional:
            if value is not None:
                setattr(self, name, value)

    @classmethod
    def _wrap(cls, message: Message) -> ServiceBusMessage:
        obj = cls.__new__(cls)
        obj._message = message
        return obj

    def __str__(self) -> str:
        message = self._message
        if message.body_type == "data":
            return "".join(chunk.decode("utf-8", "replace") for chunk in _chunks(message.body))
        return str(self.raw_amqp_message)

    def __repr__(self) -> str:
        fields = ("application_properties", "session_id", "message_id", "content_type", "correlation_id", "to",
                  "reply_to", "reply_to_session_id", "subject", "time_to_live", "partition_key",
                  "scheduled_enqueue_time_utc")  # fmt: skip
        shown = ", ".join(f"{name}={getattr(self, name)}" for name in fields)
        return f"{type(self).__name__}(body={self}, {shown})"[:1024]

    # -- the AMQP message -----------------------------------------------------------
    @property
    def raw_amqp_message(self) -> AmqpAnnotatedMessage:
        """The message's AMQP sections as the SDK shows them (advanced use): a view made when
        first read, over the message itself (what is written through it is sent)."""
        raw: AmqpAnnotatedMessage | None = getattr(self, "_raw", None)
        if raw is None:
            raw = self._raw = AmqpAnnotatedMessage._view(self._message, received=self._RECEIVED)
        return raw

    @property
    def amqplink_message(self) -> Message:
        """Beyond the SDK: the underlying :class:`amqplink.message.Message`."""
        return self._message

    @property
    def body(self) -> Any:
        """As the SDK's: data, a generator of the body's ``bytes`` sections; sequence, a
        generator of its lists; value, the value (read as the SDK reads it when received)."""
        message = self._message
        if message.body_type == "data":
            return (chunk for chunk in _chunks(message.body))
        return self.raw_amqp_message.body

    @property
    def body_type(self) -> AmqpMessageBodyType:
        """DATA, SEQUENCE or VALUE."""
        return body_type_of(self._message)

    # -- properties -----------------------------------------------------------------
    @property
    def application_properties(self) -> dict[str | bytes, Any] | None:
        """The user's properties (None when there are none)."""
        return self._message.application_properties  # type: ignore[return-value]  # str keys: dict is invariant

    @application_properties.setter
    def application_properties(self, value: Mapping[str | bytes, Any] | None) -> None:
        self._set_application_properties(value)

    def _set_application_properties(self, value: Mapping[str | bytes, Any] | None) -> None:
        """The setter's work (``bytes`` keys as UTF-8 text), shared with the received message's."""
        if not value:
            self._message.application_properties = None if value is None else {}
            return
        self._message.application_properties = {
            (k.decode("utf-8") if isinstance(k, bytes) else k): v for k, v in value.items()
        }

    session_id = _text_field("session_id", "The session (properties.group-id).", limit=True)
    @property
    def message_id(self) -> Any:
        """The application's id of the message (duplicate detection uses it): as the SDK reads
        it, a string for a string or UTF-8 binary id, and any other id as its type (a
        ``uuid.UUID``, an ``int`` for a ulong, ``bytes`` that are not UTF-8)."""
        return _id_value(self._message.message_id)

    @message_id.setter
    def message_id(self, value: Any) -> None:
        _check_length("message_id", value)
        self._message.message_id = value

    @property
    def partition_key(self) -> str | None:
        """``x-opt-partition-key``; must equal ``session_id`` when both are set."""
        return _text(self._message.partition_key)

    @partition_key.setter
    def partition_key(self, value: str | None) -> None:
        _check_length("partition_key", value)
        session_id = self.session_id
        if value and session_id is not None and value != session_id:
            raise ValueError(f"partition_key:{value} cannot be set to a different value than session_id:{session_id}")
        self._message.partition_key = value

    @property
    def time_to_live(self) -> dt.timedelta | None:
        """How long the message lives after it is enqueued (header ttl)."""
        header = self._message.header
        if header is None or not header.ttl:
            return None
        return dt.timedelta(milliseconds=int(header.ttl))

    @time_to_live.setter
    def time_to_live(self, value: dt.timedelta | int | None) -> None:
        message = self._message
        if value is None:
            message.ttl = None
            if message.properties is not None:
                message.properties.absolute_expiry_time = None
            return
        seconds = int(value.total_seconds()) if isinstance(value, dt.timedelta) else int(value)
        message.ttl = seconds
        ms = seconds * 1000
        if ms and ms != MAX_DURATION_MS:
            now_ms = int(dt.datetime.now(dt.UTC).timestamp()) * 1000
            message.creation_time = Timestamp(now_ms)
            message.absolute_expiry_time = Timestamp(min(MAX_ABSOLUTE_EXPIRY_MS, now_ms + ms))

    @property
    def scheduled_enqueue_time_utc(self) -> dt.datetime | None:
        """When the broker makes the message visible (``x-opt-scheduled-enqueue-time``)."""
        anns = self._message.message_annotations
        value = anns.get(X_OPT_SCHEDULED_ENQUEUE_TIME) if anns else None
        if isinstance(value, dt.datetime):
            return value
        return _utc(value) if value else None

    @scheduled_enqueue_time_utc.setter
    def scheduled_enqueue_time_utc(self, value: dt.datetime | None) -> None:
        message = self._message
        if message.message_id is None:
            message.message_id = str(uuid.uuid4())
        # Kept as given (naive or aware, to the microsecond) and read back so, as the SDK does;
        # the codec encodes a datetime as an AMQP timestamp (a naive one taken as UTC).
        _set_annotation(message, X_OPT_SCHEDULED_ENQUEUE_TIME, value)

    content_type = _text_field("content_type", "MIME type of the body, e.g. ``application/json``.")
    correlation_id = _text_field("correlation_id", "The id this message answers or relates to.")
    subject = _text_field("subject", "The application's label.")
    to = _text_field("to", "The ``to`` address (auto-forward chaining).")
    reply_to = _text_field("reply_to", "Where replies go.")
    reply_to_session_id = _text_field(
        "reply_to_session_id", "The session replies go to (reply-to-group-id).", limit=True
    )


def _chunks(body: Any) -> list[bytes]:
    if body is None:
        return []
    return body if isinstance(body, list) else [body]


def _set_annotation(message: Message, key: Symbol, value: Any) -> None:
    anns = message.message_annotations
    if value is None:
        if anns:
            anns.pop(key, None)
        return
    if anns is None:
        anns = message.message_annotations = {}
    anns[key] = value


class ServiceBusReceivedMessage(ServiceBusMessage):
    """A message a receiver handed out (azure-servicebus's ``ServiceBusReceivedMessage``).

    ``auto_renew_error`` holds the error when an :class:`AutoLockRenewer` could not keep
    the lock (``AutoLockRenewFailed`` or ``AutoLockRenewTimeout``).
    """

    __slots__ = (
        "_app_properties",
        "_delivery",
        "_expiry",
        "_is_deferred_message",
        "_is_peeked_message",
        "_lock_lost",
        "_lock_token",
        "_receiver",
        "_settled",
        "auto_renew_error",
    )
    _RECEIVED: ClassVar[bool] = True

    def __init__(
        self,
        message: Message,
        *,
        receiver: Any = None,
        settled: bool = False,
        lock_token: uuid.UUID | None = None,
        delivery: ReceivedMessage | None = None,
        is_deferred_message: bool = False,
        is_peeked_message: bool = False,
    ) -> None:
        self._message = message
        self._receiver = receiver
        self._settled = settled
        self._delivery = delivery
        self._lock_token = lock_token
        self._expiry: dt.datetime | None = None
        self._lock_lost = False
        self._is_deferred_message = is_deferred_message
        self._is_peeked_message = is_peeked_message
        self._app_properties: dict[Any, Any] | None = None
        self.auto_renew_error: BaseException | None = None

    @classmethod
    def from_bytes(cls, message: bytes) -> ServiceBusReceivedMessage:
        """A message decoded from an encoded AMQP payload, without a receiver (it cannot be settled)."""
        if not isinstance(message, bytes):
            raise TypeError("message must be bytes.")
        if not message:
            raise ValueError("message cannot be empty.")
        return cls(Message.decode(message), settled=False)

    def __repr__(self) -> str:
        extra = ("auto_renew_error", "dead_letter_error_description", "dead_letter_reason", "dead_letter_source",
                 "delivery_count", "enqueued_sequence_number", "enqueued_time_utc", "expires_at_utc",
                 "sequence_number", "lock_token", "locked_until_utc")  # fmt: skip
        shown = ", ".join(f"{name}={getattr(self, name)}" for name in extra)
        return f"{super().__repr__()[:-1]}, {shown})"[:1024]

    def _annotation(self, key: Symbol) -> Any:
        anns = self._message.message_annotations
        return anns.get(key) if anns else None

    # -- the broker's annotations -------------------------------------------------------
    @property
    def application_properties(self) -> dict[str | bytes, Any] | None:
        """As the SDK returns them: ``bytes`` keys and ``bytes`` string values, numbers and
        times as plain ``int`` (a timestamp in milliseconds), no AMQP type wrappers."""
        props = self._message.application_properties
        if not props:
            return None
        if self._app_properties is None:
            self._app_properties = sdk_value(props)
        return self._app_properties

    @application_properties.setter
    def application_properties(self, value: Mapping[str | bytes, Any] | None) -> None:
        self._app_properties = None
        self._set_application_properties(value)

    def _app_text(self, name: str) -> str | None:
        props = self._message.application_properties
        value = props.get(name) if props else None
        return _text(value)

    @property
    def dead_letter_reason(self) -> str | None:
        """Why the message was dead-lettered (application property ``DeadLetterReason``)."""
        return self._app_text(DEAD_LETTER_REASON)

    @property
    def dead_letter_error_description(self) -> str | None:
        """Application property ``DeadLetterErrorDescription``."""
        return self._app_text(DEAD_LETTER_ERROR_DESCRIPTION)

    @property
    def dead_letter_source(self) -> str | None:
        """The entity it was dead-lettered in, once auto-forwarded (``x-opt-deadletter-source``)."""
        return _text(self._annotation(X_OPT_DEAD_LETTER_SOURCE))

    @property
    def state(self) -> ServiceBusMessageState:
        """Active, deferred or scheduled (``x-opt-message-state``)."""
        value = self._annotation(X_OPT_MESSAGE_STATE)
        try:
            return ServiceBusMessageState(int(value or 0))
        except ValueError:
            return ServiceBusMessageState.ACTIVE

    @property
    def delivery_count(self) -> int | None:
        """Deliveries attempted before this one (header delivery-count)."""
        header = self._message.header
        if header is None:
            return None
        return int(header.delivery_count or 0)

    @property
    def sequence_number(self) -> int | None:
        """The broker's number for the message (``x-opt-sequence-number``)."""
        value = self._annotation(X_OPT_SEQUENCE_NUMBER)
        return None if value is None else int(value)

    @property
    def enqueued_sequence_number(self) -> int | None:
        """The sequence number first given to an auto-forwarded message."""
        value = self._annotation(X_OPT_ENQUEUE_SEQUENCE_NUMBER)
        return None if value is None else int(value)

    @property
    def enqueued_time_utc(self) -> dt.datetime | None:
        """When the broker stored the message (``x-opt-enqueued-time``)."""
        value = self._annotation(X_OPT_ENQUEUED_TIME)
        return _utc(value) if value else None

    @property
    def expires_at_utc(self) -> dt.datetime | None:
        """``enqueued_time_utc + time_to_live``."""
        enqueued, ttl = self.enqueued_time_utc, self.time_to_live
        return enqueued + ttl if enqueued and ttl else None

    # -- the lock -------------------------------------------------------------------------
    @property
    def lock_token(self) -> uuid.UUID | str | None:
        """The lock held in PEEK_LOCK mode: the delivery-tag as a .NET GUID (None once settled)."""
        if self._settled:
            return None
        if self._lock_token is not None:
            return self._lock_token
        if self._delivery is not None:
            tag = self._delivery.delivery_tag
            if tag is not None and len(tag) == 16:
                self._lock_token = lock_token_from_delivery_tag(tag)
                return self._lock_token
        anns = self._message.delivery_annotations
        return anns.get(X_OPT_LOCK_TOKEN) if anns else None

    @property
    def locked_until_utc(self) -> dt.datetime | None:
        """Until when the lock holds (None when settled, or for a session's message: see the session)."""
        if self._settled or getattr(self._receiver, "_session", None) is not None:
            return None
        if self._expiry is None:
            value = self._annotation(X_OPT_LOCKED_UNTIL)
            if value is not None:
                self._expiry = _utc(value)
        return self._expiry

    @property
    def _lock_expired(self) -> bool:
        if self._lock_lost:
            return True
        until = self.locked_until_utc
        return until is not None and until <= dt.datetime.now(dt.UTC)


class ServiceBusMessageBatch:
    """Messages sent as one transfer (message-format ``0x80013700``); ``add_message`` raises
    :class:`MessageSizeExceededError` once the next message would pass ``max_size_in_bytes``."""

    __slots__ = ("_count", "_encoded", "_first", "_framed", "_head", "_max_size_in_bytes", "_messages_size", "_size")

    def __init__(self, max_size_in_bytes: int | None = None) -> None:
        self._max_size_in_bytes = max_size_in_bytes or MAX_MESSAGE_LENGTH_BYTES
        self._encoded: list[bytes] = []
        self._framed: list[bytes | memoryview] = []
        """Messages already framed as their data sections (:meth:`add_framed`); once there are
        some, every message goes there, so the transfer keeps the order they were added in."""
        self._first: ServiceBusMessage | None = None
        self._head: bytes | None = None
        """The envelope's sections (the first message's ids), encoded once with the first message."""
        self._size = _EMPTY_SIZE
        """The transfer's real size (envelope included): what the limit is checked against."""
        self._messages_size = 0
        self._count = 0

    def __repr__(self) -> str:
        return f"ServiceBusMessageBatch(max_size_in_bytes={self.max_size_in_bytes}, message_count={self._count})"

    def __len__(self) -> int:
        return self._count

    @property
    def max_size_in_bytes(self) -> int:
        """The largest encoded size the batch may reach."""
        return self._max_size_in_bytes

    @property
    def size_in_bytes(self) -> int:
        """The size as the SDK counts it: 0 when empty, then each message's encoded size plus 5
        bytes (8 from 256 bytes on) of batch overhead; the transfer's envelope is left out (the
        limit is still checked against the whole transfer, so a batch never outgrows the link)."""
        return self._messages_size

    def add_message(self, message: ServiceBusMessage | Mapping[str, Any] | Message) -> None:
        """Add ``message``; ``MessageSizeExceededError`` if the batch would grow past its maximum."""
        from amqplink.servicebus.partitioning import check_partition_key

        outgoing = to_outgoing(message)
        check_partition_key(outgoing)
        if not self._add(outgoing):
            raise MessageSizeExceededError(
                f"ServiceBusMessageBatch has reached its size limit: {self._max_size_in_bytes}"
            )

    def _add(self, message: ServiceBusMessage) -> bool:
        """Add a checked message; False (and nothing added) if the batch would pass its maximum."""
        return self.add_encoded(message._message.encode(), message)

    def add_encoded(self, encoded: bytes, message: ServiceBusMessage | Callable[[], ServiceBusMessage]) -> bool:
        """Beyond the SDK: add a message already encoded (``message`` is it, or a function
        making it, called only if it is the batch's first: the envelope takes its ids); False
        (and nothing added) if the batch would pass its maximum. The caller vouches that
        ``encoded`` is ``message``'s encoding (the PySpark sink writes it directly)."""
        grown = _in_batch(len(encoded))
        size_after = self._size + grown
        first = None
        head = b""
        if self._first is None:
            first = message if isinstance(message, ServiceBusMessage) else message()
            head = _envelope_head(first)
            size_after += _envelope_size(head)
        if size_after > self._max_size_in_bytes:
            return False
        if self._framed:
            self._framed += (data_section_header(len(encoded)), encoded)
        else:
            self._encoded.append(encoded)
        if first is not None:
            self._first, self._head = first, head
        self._size = size_after
        self._messages_size += grown
        self._count += 1
        return True

    def add_run(self, encoded: list[bytes], start: int, first: Callable[[int], ServiceBusMessage]) -> int:
        """Beyond the SDK: :meth:`add_encoded` of ``encoded[start:]`` in turn, until one does not
        fit: how many were added (``first(i)`` makes the message of ``encoded[i]`` when it is
        the batch's first)."""
        if start >= len(encoded):
            return 0
        if self._first is None:
            if not self.add_encoded(encoded[start], lambda: first(start)):
                return 0
            return 1 + self.add_run(encoded, start + 1, first)
        if self._framed:
            added = 0
            while start + added < len(encoded) and self.add_encoded(encoded[start + added], lambda: first(0)):
                added += 1
            return added
        size = self._size
        limit = self._max_size_in_bytes
        end = start
        for message in itertools.islice(encoded, start, None):
            grown = _in_batch(len(message))
            if size + grown > limit:
                break
            size += grown
            end += 1
        self._encoded += encoded[start:end]
        self._messages_size += size - self._size
        self._size = size
        self._count += end - start
        return end - start

    def add_framed(
        self, data: bytes | memoryview, offsets: Sequence[int], start: int, first: Callable[[int], ServiceBusMessage]
    ) -> int:
        """Beyond the SDK: add messages ``start, start + 1, ...`` of a run already framed, as many
        as fit; how many were added. ``data[offsets[i]:offsets[i + 1]]`` is message ``i`` as the
        batch carries it: its data section's head and its encoding (``data_section_header(n)``
        and the ``n`` encoded bytes), so the messages taken are one slice of ``data``, added
        without a copy. ``first(i)`` makes message ``i`` when it is the batch's first (the
        envelope takes its ids). The caller vouches for the framing (the PySpark sink makes it
        with pyarrow, a test compares it with :meth:`add_encoded`'s)."""
        last = len(offsets) - 1
        if start >= last:
            return 0
        size = self._size
        envelope = 0
        made = None
        head = b""
        if self._first is None:
            made = first(start)
            head = _envelope_head(made)
            envelope = _envelope_size(head)
        room = self._max_size_in_bytes - size - envelope
        end = bisect.bisect_right(offsets, offsets[start] + room, start, last + 1) - 1
        if end <= start:
            return 0
        if self._encoded:  # from now on every message is framed, in the order added
            for encoded in self._encoded:
                self._framed += (data_section_header(len(encoded)), encoded)
            self._encoded = []
        grown = offsets[end] - offsets[start]
        self._framed.append(memoryview(data)[offsets[start] : offsets[end]])
        if made is not None:
            self._first, self._head = made, head
        self._size = size + envelope + grown
        self._messages_size += grown
        self._count += end - start
        return end - start

    def encoded_messages(self) -> list[bytes]:
        """Beyond the SDK: each message's encoding, in the order added, however it was added
        (:meth:`add_message`, :meth:`add_encoded`, :meth:`add_run` or :meth:`add_framed`; the
        framed ones read back from their data sections), so a batch handed elsewhere (parked,
        stored locally) carries exactly what it would have sent."""
        if not self._framed:
            return list(self._encoded)
        sections = b"".join(self._framed)  # data sections only, one per message
        found: list[bytes] = []
        at = 0
        while at < len(sections):
            section, at = decode(sections, at)
            found.append(section.value)
        return found

    def _payload(self) -> bytes:
        """The transfer payload: an envelope with the first message's ids, one data section per message."""
        head = self._head
        if head is None:  # empty: an envelope alone
            return Message(None).encode_with_data([])
        if self._framed:
            return b"".join((head, *self._framed))
        parts: list[bytes] = [head]
        for encoded in self._encoded:
            parts += (data_section_header(len(encoded)), encoded)
        return b"".join(parts)


class TransferBatcher:
    """The one stage from messages to transfers (a list sent, in or out of a transaction):
    each message checked (:func:`~.partitioning.check_partition_key`) and added to a batch of
    at most ``limit`` bytes; :meth:`add` and :meth:`rest` give the ``(payload,
    message_format)`` transfers made. A message that no batch holds is its own plain
    transfer (message-format 0): the link's max-message-size check is the one that refuses
    a message too large, so every route raises the same error for it."""

    __slots__ = ("_batch", "_check", "limit")

    def __init__(self, limit: int) -> None:
        from amqplink.servicebus.partitioning import check_partition_key

        self.limit = limit
        self._check = check_partition_key
        self._batch = ServiceBusMessageBatch(limit)

    def add(self, message: ServiceBusMessage) -> tuple[tuple[bytes, int], ...]:
        """Add ``message``; the transfers this completed (none, mostly)."""
        self._check(message)
        batch = self._batch
        if batch._add(message):
            return ()
        if not len(batch):
            return ((message._message.encode(), 0),)
        full = (batch._payload(), BATCH_MESSAGE_FORMAT)
        self._batch = batch = ServiceBusMessageBatch(self.limit)
        if batch._add(message):
            return (full,)
        return full, (message._message.encode(), 0)

    def rest(self) -> tuple[tuple[bytes, int], ...]:
        """The last batch's transfer, if it holds any message."""
        batch, self._batch = self._batch, ServiceBusMessageBatch(self.limit)
        return ((batch._payload(), BATCH_MESSAGE_FORMAT),) if len(batch) else ()


def _copy_envelope(first: Message, envelope: Message) -> None:
    """The SDK puts the first message's message-id, session-id and partition key on the envelope."""
    if first.message_id is not None:
        envelope.message_id = first.message_id
    if first.session_id is not None:
        envelope.session_id = first.session_id
    if first.partition_key is not None:
        envelope.partition_key = first.partition_key


def _in_batch(size: int) -> int:
    """What a message of ``size`` encoded bytes adds to a batch: the bytes and the data
    section's head (5 bytes, 8 from 256 bytes on)."""
    return size + (_SMALL_OVERHEAD if size < 256 else _LARGE_OVERHEAD)


_EMPTY_SIZE = len(Message(None).encode())
"""An empty batch's size (a message with no sections but the null body a message needs)."""


def _envelope_head(first: ServiceBusMessage) -> bytes:
    """The envelope's sections before its data sections: the first message's ids (as the SDK)."""
    envelope = Message(None)
    _copy_envelope(first._message, envelope)
    return envelope.encode_with_data([])


def _envelope_size(head: bytes) -> int:
    """What an envelope of sections ``head`` adds to an empty batch's size."""
    return len(head) - _EMPTY_HEAD_SIZE


_EMPTY_HEAD_SIZE = len(Message(None).encode_with_data([]))


def to_outgoing(message: ServiceBusMessage | AmqpAnnotatedMessage | Mapping[str, Any] | Message) -> ServiceBusMessage:
    """A ``ServiceBusMessage`` from what the SDK accepts: itself, an ``AmqpAnnotatedMessage``,
    a dict of its keyword arguments, or (beyond the SDK) a plain :class:`amqplink.message.Message`."""
    if isinstance(message, ServiceBusMessage):
        return message
    if isinstance(message, Message):
        return ServiceBusMessage._wrap(message)
    if isinstance(message, AmqpAnnotatedMessage):
        outgoing = ServiceBusMessage._wrap(message._outgoing())
        outgoing._raw = message
        return outgoing
    if isinstance(message, Mapping):
        try:
            return ServiceBusMessage(**message)
        except TypeError:
            raise TypeError(
                "Only ServiceBusMessage, AmqpAnnotatedMessage, amqplink Message or a mapping of ServiceBusMessage"
                f" keyword arguments can be sent; this mapping has the keys {sorted(message)}"
            ) from None
    raise TypeError(f"Only AmqpAnnotatedMessage, ServiceBusMessage instances or Mappings representing messages "
                    f"are supported. Received instead: {type(message).__name__}")  # fmt: skip


SINGLE_MESSAGE_TYPES = (ServiceBusMessage, AmqpAnnotatedMessage, Message, Mapping)
"""What ``send_messages`` takes as one message (anything else: an iterable of messages)."""


def iter_outgoing(messages: Any) -> Iterator[ServiceBusMessage]:
    """Each message of a single message, a list or any iterable of them."""
    if isinstance(messages, SINGLE_MESSAGE_TYPES):
        yield to_outgoing(messages)
        return
    for message in messages:
        yield to_outgoing(message)
