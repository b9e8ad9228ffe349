"""The AMQP message as azure-servicebus 7.15 shows it (``azure.servicebus.amqp``).

:class:`AmqpAnnotatedMessage` gives the sections of an AMQP message (spec 3.2) under the
SDK's names: ``header`` (:class:`AmqpMessageHeader`), ``delivery_annotations``,
``annotations`` (message annotations), ``properties`` (:class:`AmqpMessageProperties`),
``application_properties``, the body (``body``, ``body_type``) and ``footer``. Users build
one to send a body a :class:`~amqplink.servicebus.ServiceBusMessage` cannot carry (several
data sections, an amqp-sequence, an amqp-value), and read one on any message as
``message.raw_amqp_message``.

Here it is a *view* over the :class:`amqplink.message.Message` that is sent or was
received: nothing is converted until it is read (a received message costs nothing more
unless its ``raw_amqp_message`` is used), and what is written through it (``header.priority
= 5``, ``application_properties = {...}``) is what goes on the wire.

Values read from a received message are what the SDK's decoder (pyamqp) gives: plain
Python values without AMQP type wrappers, every string and symbol as UTF-8 ``bytes``
(keys included), a timestamp as ``int`` milliseconds since the epoch, a uuid as
``uuid.UUID``, a decimal as ``decimal.Decimal`` (docs/dropin.md, "The AMQP message"). On a
message being sent, values read back are as they were given (AMQP wrappers unwrapped: a
``Symbol`` reads as ``str``, a timestamp as ``int`` milliseconds, as the SDK keeps
``creation_time``).
"""

from __future__ import annotations

import datetime as dt
import logging
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

from amqplink.codec.types import Array, Decimal32, Decimal64, Decimal128, Symbol, Timestamp, UByte, UInt
from amqplink.message import Message, _message_id
from amqplink.protocol.definitions import Header, Properties
from amqplink.sbwire.decimals import read_decimal
from amqplink.servicebus.constants import SdkStrEnum

__all__ = [
    "AmqpAnnotatedMessage",
    "AmqpMessageBodyType",
    "AmqpMessageHeader",
    "AmqpMessageProperties",
    "plain",
    "sdk_value",
]

log = logging.getLogger(__name__)


class AmqpMessageBodyType(SdkStrEnum):
    """How the body travels (the SDK's ``azure.servicebus.amqp.AmqpMessageBodyType``)."""

    DATA = "data"
    SEQUENCE = "sequence"
    VALUE = "value"


# -- values as the SDK reads them ----------------------------------------------------------
_DECIMALS = (Decimal32, Decimal64, Decimal128)


def sdk_value(value: Any) -> Any:
    """A received AMQP value as the SDK's decoder gives it: strings and symbols as UTF-8
    ``bytes``, timestamps as ``int`` milliseconds, decimals as ``decimal.Decimal`` (in either
    layout: docs/protocol.md#decimals), every other number as a plain ``int`` or ``float``,
    maps and lists (arrays too) converted throughout; bytes, booleans, uuids and None as
    they are."""
    kind = type(value)
    if kind is bytes or kind is bool or kind is int or kind is float or value is None:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict):
        return {sdk_value(k): sdk_value(v) for k, v in value.items()}
    if isinstance(value, list):  # a list, an Array
        return [sdk_value(v) for v in value]
    return plain(value)


def plain(value: Any) -> Any:
    """``value`` without its AMQP type wrapper: ``Symbol`` -> ``str``, ``Timestamp``/``UInt``/...
    -> ``int``, ``Float`` -> ``float``, ``Array`` -> ``list``, a datetime -> ``int`` milliseconds
    (the SDK keeps times as milliseconds), ``Decimal128``/... -> ``decimal.Decimal`` (read in
    either layout, :func:`amqplink.sbwire.decimals.read_decimal`); anything else as it is."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return read_decimal(value) if isinstance(value, _DECIMALS) else bytes(value)
    if isinstance(value, dt.datetime):
        return int(Timestamp.from_datetime(value))
    if isinstance(value, Array):
        return list(value)
    return value


def _text_in(value: Any) -> str | None:
    """A string field written by a user, who may give ``bytes`` as the SDK allows."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value)


def _symbol_in(value: Any) -> Symbol | None:
    text = _text_in(value)
    return None if text is None else Symbol(text)


def _time_in(value: Any) -> Timestamp | None:
    """A time field (the SDK takes ``int`` milliseconds; a datetime is accepted too)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return Timestamp.from_datetime(value)
    return Timestamp(int(value))


def _opt(kind: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else kind(value)


def _bytes_in(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return str(value).encode("utf-8")


def _map_in(value: Mapping[Any, Any] | None) -> dict[Any, Any] | None:
    """A map a user gives for annotations or application properties: ``bytes`` keys (the SDK
    reads them so) become strings, as the wire needs string or symbol keys."""
    if value is None:
        return None
    return {(k.decode("utf-8") if isinstance(k, bytes) else k): v for k, v in value.items()}


# -- header and properties -------------------------------------------------------------------
class _SectionView:
    """The SDK's ``DictMixin`` (attributes that also read as a mapping) over one section
    object of a :class:`Message` (``Header`` or ``Properties``), converting on read and write.
    Standalone (built by a user), it owns a section object of its own."""

    _SECTION: ClassVar[type]
    _FIELDS: ClassVar[dict[str, tuple[str, Callable[[Any], Any]]]]
    """SDK name -> (the section's field, how a written value is stored)."""

    __slots__ = ("_received", "_section")

    def __init__(self, **kwargs: Any) -> None:
        unknown = {k: v for k, v in kwargs.items() if k not in self._FIELDS}
        if unknown:  # as the SDK: a warning, and the rest is kept
            warnings.warn(f"Unsupported keyword args: {unknown}", stacklevel=2)
        self._section = self._SECTION()
        self._received = False
        for name in self._FIELDS:
            value = kwargs.get(name)
            if value is not None:
                setattr(self, name, value)

    @classmethod
    def _over(cls, section: Any, received: bool) -> Any:
        view = cls.__new__(cls)
        view._section = section
        view._received = received
        return view

    @classmethod
    def _coerce(cls, value: Any) -> Any:
        """The section object for ``value``: one of these views, a mapping of its keywords, or None."""
        if value is None:
            return None
        if isinstance(value, cls):
            return value._section
        if isinstance(value, Mapping):
            return cls(**value)._section
        raise TypeError(f"expected {cls.__name__}, a mapping of its keywords, or None; got {type(value).__name__}")

    def _get(self, name: str) -> Any:
        value = getattr(self._section, self._FIELDS[name][0])
        return sdk_value(value) if self._received else plain(value)

    def _set(self, name: str, value: Any) -> None:
        field, store = self._FIELDS[name]
        setattr(self._section, field, store(value))

    # the SDK's DictMixin
    def keys(self) -> list[str]:
        """The section's field names (the SDK's mapping view of it)."""
        return list(self._FIELDS)

    def values(self) -> list[Any]:
        """The section's field values, in field order."""
        return [self._get(name) for name in self._FIELDS]

    def items(self) -> list[tuple[str, Any]]:
        """``(name, value)`` of each of the section's fields."""
        return [(name, self._get(name)) for name in self._FIELDS]

    def get(self, key: str, default: Any = None) -> Any:
        """A field's value, or ``default`` for a name that is not a field of the section."""
        return self._get(key) if key in self._FIELDS else default

    def has_key(self, key: str) -> bool:
        """Whether ``key`` is a field of the section."""
        return key in self._FIELDS

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Set fields from a mapping or keywords, as ``dict.update`` does (an unknown name is a ``KeyError``)."""
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __getitem__(self, key: str) -> Any:
        if key not in self._FIELDS:
            raise KeyError(key)
        return self._get(key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._FIELDS:
            raise KeyError(f"{type(self).__name__} has no field {key!r}")
        self._set(key, value)

    def __delitem__(self, key: str) -> None:
        self[key] = None

    def __contains__(self, key: object) -> bool:
        return key in self._FIELDS

    def __iter__(self) -> Iterator[str]:
        return iter(self._FIELDS)

    def __len__(self) -> int:
        return len(self._FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and self.items() == other.items()

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]  # mutable, as the SDK's

    def __str__(self) -> str:
        return str(dict(self.items()))

    def __repr__(self) -> str:
        return str(self)


def _field(name: str, doc: str) -> Any:
    return property(lambda self: self._get(name), lambda self, value: self._set(name, value), doc=doc)


class AmqpMessageHeader(_SectionView):
    """The header section (AMQP 3.2.1) with the SDK's names: ``delivery_count``,
    ``time_to_live`` (milliseconds), ``first_acquirer``, ``durable``, ``priority``."""

    _SECTION = Header
    _FIELDS: ClassVar[dict[str, tuple[str, Callable[[Any], Any]]]] = {
        "delivery_count": ("delivery_count", _opt(UInt)),
        "time_to_live": ("ttl", _opt(UInt)),
        "first_acquirer": ("first_acquirer", _opt(bool)),
        "durable": ("durable", _opt(bool)),
        "priority": ("priority", _opt(UByte)),
    }
    __slots__ = ()

    delivery_count = _field("delivery_count", "Unsuccessful delivery attempts before this one.")
    time_to_live = _field("time_to_live", "How long the message lives, in milliseconds (header ttl).")
    first_acquirer = _field("first_acquirer", "True if no other link acquired the message before.")
    durable = _field("durable", "Whether the message must survive an intermediary's restart.")
    priority = _field("priority", "The relative priority (0-255).")


class AmqpMessageProperties(_SectionView):
    """The properties section (AMQP 3.2.4) with the SDK's names; times are ``int`` milliseconds."""

    _SECTION = Properties
    _FIELDS: ClassVar[dict[str, tuple[str, Callable[[Any], Any]]]] = {
        "message_id": ("message_id", _message_id),
        "user_id": ("user_id", _bytes_in),
        "to": ("to", _text_in),
        "subject": ("subject", _text_in),
        "reply_to": ("reply_to", _text_in),
        "correlation_id": ("correlation_id", _message_id),
        "content_type": ("content_type", _symbol_in),
        "content_encoding": ("content_encoding", _symbol_in),
        "creation_time": ("creation_time", _time_in),
        "absolute_expiry_time": ("absolute_expiry_time", _time_in),
        "group_id": ("group_id", _text_in),
        "group_sequence": ("group_sequence", _opt(UInt)),
        "reply_to_group_id": ("reply_to_group_id", _text_in),
    }
    __slots__ = ()

    message_id = _field("message_id", "The message's id (str, bytes, uuid.UUID or int).")
    user_id = _field("user_id", "The producing user's identity (bytes).")
    to = _field("to", "The destination address.")
    subject = _field("subject", "The application's label.")
    reply_to = _field("reply_to", "Where replies go.")
    correlation_id = _field("correlation_id", "The id this message relates to.")
    content_type = _field("content_type", "The MIME type of the body.")
    content_encoding = _field("content_encoding", "The body's encoding, modifying content_type.")
    creation_time = _field("creation_time", "When the message was made (int milliseconds since the epoch).")
    absolute_expiry_time = _field("absolute_expiry_time", "When it expires (int milliseconds since the epoch).")
    group_id = _field("group_id", "The group (Service Bus: the session id).")
    group_sequence = _field("group_sequence", "The position in the group.")
    reply_to_group_id = _field("reply_to_group_id", "The group replies go to (reply-to session id).")


# -- the message ------------------------------------------------------------------------------
_BODY_KEYS = ("data_body", "sequence_body", "value_body")
MAX_DURATION_MS = 922337203685477
"""The SDK's "no time to live": no absolute expiry is computed for it."""
MAX_ABSOLUTE_EXPIRY_MS = 253402243199000
"""9999-12-31: the latest absolute-expiry-time the SDK writes."""


def _data_chunks(data: Any, encoding: str) -> list[bytes]:
    """The SDK's ``normalized_data_body``: a str or bytes, or a list of them; str encoded."""
    items = data if isinstance(data, list) else [data]
    return [item.encode(encoding) if isinstance(item, str) else item for item in items]


def _sequence_sections(sequence: Any) -> list[list[Any]]:
    """The SDK's ``normalized_sequence_body``: a list of lists is several sections, a list one."""
    if not isinstance(sequence, list):
        raise TypeError(f"sequence_body must be a list (one section) or a list of lists, not {type(sequence).__name__}")
    if sequence and all(isinstance(item, list) for item in sequence):
        return sequence
    return [sequence]


class AmqpAnnotatedMessage:
    """An AMQP message's sections under the SDK's names (``azure.servicebus.amqp.AmqpAnnotatedMessage``).

    Built with exactly one of ``data_body`` (str, bytes, or a list of them: one data section
    each), ``sequence_body`` (a list: one amqp-sequence section; a list of lists: one each)
    or ``value_body`` (any AMQP value), and optionally ``header``, ``properties`` (the
    classes here or mappings of their keywords), ``application_properties``, ``annotations``,
    ``delivery_annotations``, ``footer``; ``send_messages`` and ``add_message`` take it as
    they take a :class:`~amqplink.servicebus.ServiceBusMessage`.
    """

    __slots__ = ("_annotations", "_app", "_delivery_annotations", "_encoding", "_footer", "_message", "_received")

    def __init__(
        self,
        *,
        header: AmqpMessageHeader | Mapping[str, Any] | None = None,
        footer: dict[Any, Any] | None = None,
        properties: AmqpMessageProperties | Mapping[str, Any] | None = None,
        application_properties: dict[Any, Any] | None = None,
        annotations: dict[Any, Any] | None = None,
        delivery_annotations: dict[Any, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._encoding: str = kwargs.pop("encoding", "UTF-8")
        given = [key for key in _BODY_KEYS if key in kwargs]
        if len(given) != 1:
            raise ValueError(
                "There should be one and only one of either data_body, sequence_body "
                "or value_body being set as the body of the AmqpAnnotatedMessage."
            )
        if "data_body" in kwargs:
            message = Message(_data_chunks(kwargs["data_body"], self._encoding), body_type="data")
        elif "sequence_body" in kwargs:
            sections = _sequence_sections(kwargs["sequence_body"])
            if len(sections) == 1:
                message = Message(sections[0], body_type="sequence")
            else:
                message = Message(sections, body_type="sequences")
        else:
            message = Message(kwargs["value_body"], body_type="value")
        self._message = message
        self._received = False
        self._clear_cache()
        self.header = header
        self.properties = properties
        self.application_properties = application_properties
        self.annotations = annotations
        self.delivery_annotations = delivery_annotations
        self.footer = footer

    @classmethod
    def _view(cls, message: Message, *, received: bool) -> AmqpAnnotatedMessage:
        """The view over ``message`` (``received``: read its values as the SDK's decoder does)."""
        view = cls.__new__(cls)
        view._message = message
        view._received = received
        view._encoding = "UTF-8"
        view._clear_cache()
        return view

    def _clear_cache(self) -> None:
        self._app: dict[Any, Any] | None = None
        self._annotations: dict[Any, Any] | None = None
        self._delivery_annotations: dict[Any, Any] | None = None
        self._footer: dict[Any, Any] | None = None

    def __str__(self) -> str:
        kind = self.body_type
        if kind is AmqpMessageBodyType.DATA:
            return "".join(chunk.decode(self._encoding) for chunk in self._chunks())
        if kind is AmqpMessageBodyType.SEQUENCE:
            return str(self._sections())
        return str(self.body)

    def __repr__(self) -> str:
        shown = (
            f"body={self}, body_type={self.body_type.value}, header={self.header}, footer={self.footer}, "
            f"properties={self.properties}, application_properties={self.application_properties}, "
            f"delivery_annotations={self.delivery_annotations}, annotations={self.annotations}"
        )
        return f"AmqpAnnotatedMessage({shown})"[:1024]

    # -- the body ------------------------------------------------------------------------
    def _chunks(self) -> list[bytes]:
        body = self._message.body
        if body is None:
            return []
        return body if isinstance(body, list) else [body]

    def _sections(self) -> list[Any]:
        message = self._message
        sections = [message.body] if message.body_type == "sequence" else list(message.body)
        return [self._read(section) for section in sections]

    def _read(self, value: Any) -> Any:
        return sdk_value(value) if self._received else value

    @property
    def body(self) -> Any:
        """Data: a generator of the sections' ``bytes``; sequence: a generator of the sections'
        lists; value: the value (as the SDK's ``AmqpAnnotatedMessage.body``)."""
        kind = self.body_type
        if kind is AmqpMessageBodyType.DATA:
            return (chunk for chunk in self._chunks())
        if kind is AmqpMessageBodyType.SEQUENCE:
            return (section for section in self._sections())
        return self._read(self._message.body)

    @property
    def body_type(self) -> AmqpMessageBodyType:
        """DATA, SEQUENCE or VALUE."""
        return body_type_of(self._message)

    # -- header and properties -------------------------------------------------------------
    @property
    def header(self) -> AmqpMessageHeader | None:
        """The header section (None on a received message without one)."""
        message = self._message
        if message.header is None:
            if self._received:
                return None
            message.header = Header()  # as the SDK's: a message being sent always has one to write to
        view: AmqpMessageHeader = AmqpMessageHeader._over(message.header, self._received)
        return view

    @header.setter
    def header(self, value: AmqpMessageHeader | Mapping[str, Any] | None) -> None:
        self._message.header = AmqpMessageHeader._coerce(value)

    @property
    def properties(self) -> AmqpMessageProperties | None:
        """The properties section (None on a received message without one)."""
        message = self._message
        if message.properties is None:
            if self._received:
                return None
            message.properties = Properties()
        view: AmqpMessageProperties = AmqpMessageProperties._over(message.properties, self._received)
        return view

    @properties.setter
    def properties(self, value: AmqpMessageProperties | Mapping[str, Any] | None) -> None:
        self._message.properties = AmqpMessageProperties._coerce(value)

    # -- the maps ----------------------------------------------------------------------------
    @property
    def application_properties(self) -> dict[Any, Any] | None:
        """The application properties (received: ``bytes`` keys and strings, as the SDK's)."""
        props = self._message.application_properties
        if not self._received or props is None:
            return props
        if self._app is None:
            self._app = sdk_value(props)
        return self._app

    @application_properties.setter
    def application_properties(self, value: Mapping[Any, Any] | None) -> None:
        self._app = None
        self._message.application_properties = _map_in(value)

    @property
    def annotations(self) -> dict[Any, Any] | None:
        """The message annotations (received: ``bytes`` keys, plain values, as the SDK's)."""
        anns = self._message.message_annotations
        if not self._received or anns is None:
            return anns
        if self._annotations is None:
            self._annotations = sdk_value(anns)
        return self._annotations

    @annotations.setter
    def annotations(self, value: Mapping[Any, Any] | None) -> None:
        self._annotations = None
        self._message.message_annotations = _map_in(value)

    @property
    def delivery_annotations(self) -> dict[Any, Any] | None:
        """The delivery annotations (received: ``bytes`` keys, plain values)."""
        anns = self._message.delivery_annotations
        if not self._received or anns is None:
            return anns
        if self._delivery_annotations is None:
            self._delivery_annotations = sdk_value(anns)
        return self._delivery_annotations

    @delivery_annotations.setter
    def delivery_annotations(self, value: Mapping[Any, Any] | None) -> None:
        self._delivery_annotations = None
        self._message.delivery_annotations = _map_in(value)

    @property
    def footer(self) -> dict[Any, Any] | None:
        """The footer (received: ``bytes`` keys, plain values)."""
        footer = self._message.footer
        if not self._received or footer is None:
            return footer
        if self._footer is None:
            self._footer = sdk_value(footer)
        return self._footer

    @footer.setter
    def footer(self, value: Mapping[Any, Any] | None) -> None:
        self._footer = None
        self._message.footer = _map_in(value)

    # -- sending --------------------------------------------------------------------------
    def _outgoing(self) -> Message:
        """The message to send. As the SDK's ``to_outgoing_amqp_message``: a header
        ``time_to_live`` (other than "forever") sets ``creation_time`` to now and
        ``absolute_expiry_time`` to now + ttl (whole seconds, capped at 9999-12-31)."""
        message = self._message
        header = message.header
        ttl = None if header is None else header.ttl
        if ttl and ttl != MAX_DURATION_MS:
            now_ms = int(dt.datetime.now(dt.UTC).timestamp()) * 1000
            message.creation_time = Timestamp(now_ms)
            message.absolute_expiry_time = Timestamp(min(MAX_ABSOLUTE_EXPIRY_MS, now_ms + int(ttl)))
        return message


def body_type_of(message: Message) -> AmqpMessageBodyType:
    """The SDK's body type of an amqplink :class:`Message`."""
    kind = message.body_type
    if kind == "data":
        return AmqpMessageBodyType.DATA
    if kind in ("sequence", "sequences"):
        return AmqpMessageBodyType.SEQUENCE
    return AmqpMessageBodyType.VALUE
