# GENERATED FILE -- DO NOT EDIT.
# Written by specs/generate.py from specs/amqp-1.0.json.
# To change it, edit the JSON (or the generator) and run:  python specs/generate.py
# To check it is up to date:  python specs/generate.py --check
"""AMQP 1.0 composite and restricted types as Python classes (generated).

Contents: 33 composite types, 7 message sections, 13 restricted types with choices, the spec's constants and
lookup tables by descriptor code.

Conventions:

* Class names are the spec names in CamelCase (``sasl-init`` -> ``SaslInit``); the
  error-condition types get a ``Condition`` suffix (``AmqpErrorCondition``).
  Field names are the spec names with ``-`` replaced by ``_``.
* Constructor parameters follow the spec's field order and may be given by
  position or keyword. The leading run of mandatory fields are required
  parameters; every later parameter has a default: the spec default, or ``None``.
  A mandatory field that follows an optional one (``Begin.next_outgoing_id``,
  ``Flow.incoming_window``...) defaults to ``None`` in the signature and the
  constructor raises ``TypeError`` if it is left ``None``.
* Each field is encoded with the encoder of the primitive type its spec type
  resolves to (``handle`` -> uint, ``delivery-tag`` -> binary, ...); fields of type
  ``*`` or of a composite type use the generic encoder; ``multiple`` fields take a
  list (encoded as an array). Trailing fields that are ``None`` or equal to their
  default are left off the wire.
* Decoding (``_amqp_decode``, registered with the codec) fills missing or null
  fields with their defaults, normalises a single value of a ``multiple`` field to
  a one-item list, ignores extra trailing fields and raises ``DecodeError`` when a
  mandatory field is missing or null, or when a field (each item of a ``multiple``
  one) is not of the type its spec type resolves to: the decoder's Python type of
  that primitive (``UInt`` for a handle, ``str`` for a string, ``Symbol`` for a
  symbol...) or an instance of that composite. Fields of type ``*`` are not checked.
* Restricted types with choices are classes of typed constants
  (``SenderSettleMode.MIXED == UByte(2)``), with ``CHOICES`` mapping spec names
  to values. Message sections (restricted types with a descriptor) hold one
  ``value``.
* ``repr`` shows every field, except credentials (SASL responses), which show
  only their length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, NoReturn, TypeAlias

from amqplink.codec.decode import register_composite
from amqplink.codec.encode import (
    encode_binary,
    encode_boolean,
    encode_composite,
    encode_list,
    encode_map,
    encode_string,
    encode_symbol,
    encode_timestamp,
    encode_ubyte,
    encode_uint,
    encode_ulong,
    encode_ushort,
    encode_value,
    multiple,
)
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Symbol, Timestamp, UByte, UInt, ULong, UShort

# -- constants of the specification ----------------------------------------------------

PORT: Final = 5672  # transport: definitions
SECURE_PORT: Final = 5671  # transport: definitions
MAJOR: Final = 1  # transport: definitions
MINOR: Final = 0  # transport: definitions
REVISION: Final = 0  # transport: definitions
MIN_MAX_FRAME_SIZE: Final = 512  # transport: definitions
MESSAGE_FORMAT: Final = 0  # messaging: message-format
TLS_MAJOR: Final = 1  # security: tls
TLS_MINOR: Final = 0  # security: tls
TLS_REVISION: Final = 0  # security: tls
SASL_MAJOR: Final = 1  # security: sasl
SASL_MINOR: Final = 0  # security: sasl
SASL_REVISION: Final = 0  # security: sasl


# -- restricted types with choices -----------------------------------------------------


class Role:
    """role: Which side of a link an endpoint plays: false for sender, true for receiver.

    Restricted type over boolean; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "role"
    SENDER: Final[bool] = False
    RECEIVER: Final[bool] = True
    CHOICES: ClassVar[Mapping[str, bool]] = {
        "sender": SENDER,
        "receiver": RECEIVER,
    }


class SenderSettleMode:
    """sender-settle-mode: The settlement policy the sender applies to its deliveries.

    Restricted type over ubyte; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "sender-settle-mode"
    UNSETTLED: Final[UByte] = UByte(0)
    SETTLED: Final[UByte] = UByte(1)
    MIXED: Final[UByte] = UByte(2)
    CHOICES: ClassVar[Mapping[str, UByte]] = {
        "unsettled": UNSETTLED,
        "settled": SETTLED,
        "mixed": MIXED,
    }


class ReceiverSettleMode:
    """receiver-settle-mode: When the receiver settles: on first receipt or after the sender settles.

    Restricted type over ubyte; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "receiver-settle-mode"
    FIRST: Final[UByte] = UByte(0)
    SECOND: Final[UByte] = UByte(1)
    CHOICES: ClassVar[Mapping[str, UByte]] = {
        "first": FIRST,
        "second": SECOND,
    }


class AmqpErrorCondition:
    """amqp-error: Error conditions that may occur at any level of the protocol.

    Restricted type over symbol; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "amqp-error"
    INTERNAL_ERROR: Final[Symbol] = Symbol("amqp:internal-error")
    NOT_FOUND: Final[Symbol] = Symbol("amqp:not-found")
    UNAUTHORIZED_ACCESS: Final[Symbol] = Symbol("amqp:unauthorized-access")
    DECODE_ERROR: Final[Symbol] = Symbol("amqp:decode-error")
    RESOURCE_LIMIT_EXCEEDED: Final[Symbol] = Symbol("amqp:resource-limit-exceeded")
    NOT_ALLOWED: Final[Symbol] = Symbol("amqp:not-allowed")
    INVALID_FIELD: Final[Symbol] = Symbol("amqp:invalid-field")
    NOT_IMPLEMENTED: Final[Symbol] = Symbol("amqp:not-implemented")
    RESOURCE_LOCKED: Final[Symbol] = Symbol("amqp:resource-locked")
    PRECONDITION_FAILED: Final[Symbol] = Symbol("amqp:precondition-failed")
    RESOURCE_DELETED: Final[Symbol] = Symbol("amqp:resource-deleted")
    ILLEGAL_STATE: Final[Symbol] = Symbol("amqp:illegal-state")
    FRAME_SIZE_TOO_SMALL: Final[Symbol] = Symbol("amqp:frame-size-too-small")
    CHOICES: ClassVar[Mapping[str, Symbol]] = {
        "internal-error": INTERNAL_ERROR,
        "not-found": NOT_FOUND,
        "unauthorized-access": UNAUTHORIZED_ACCESS,
        "decode-error": DECODE_ERROR,
        "resource-limit-exceeded": RESOURCE_LIMIT_EXCEEDED,
        "not-allowed": NOT_ALLOWED,
        "invalid-field": INVALID_FIELD,
        "not-implemented": NOT_IMPLEMENTED,
        "resource-locked": RESOURCE_LOCKED,
        "precondition-failed": PRECONDITION_FAILED,
        "resource-deleted": RESOURCE_DELETED,
        "illegal-state": ILLEGAL_STATE,
        "frame-size-too-small": FRAME_SIZE_TOO_SMALL,
    }


class ConnectionErrorCondition:
    """connection-error: Error conditions specific to a connection.

    Restricted type over symbol; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "connection-error"
    CONNECTION_FORCED: Final[Symbol] = Symbol("amqp:connection:forced")
    FRAMING_ERROR: Final[Symbol] = Symbol("amqp:connection:framing-error")
    REDIRECT: Final[Symbol] = Symbol("amqp:connection:redirect")
    CHOICES: ClassVar[Mapping[str, Symbol]] = {
        "connection-forced": CONNECTION_FORCED,
        "framing-error": FRAMING_ERROR,
        "redirect": REDIRECT,
    }


class SessionErrorCondition:
    """session-error: Error conditions specific to a session.

    Restricted type over symbol; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "session-error"
    WINDOW_VIOLATION: Final[Symbol] = Symbol("amqp:session:window-violation")
    ERRANT_LINK: Final[Symbol] = Symbol("amqp:session:errant-link")
    HANDLE_IN_USE: Final[Symbol] = Symbol("amqp:session:handle-in-use")
    UNATTACHED_HANDLE: Final[Symbol] = Symbol("amqp:session:unattached-handle")
    CHOICES: ClassVar[Mapping[str, Symbol]] = {
        "window-violation": WINDOW_VIOLATION,
        "errant-link": ERRANT_LINK,
        "handle-in-use": HANDLE_IN_USE,
        "unattached-handle": UNATTACHED_HANDLE,
    }


class LinkErrorCondition:
    """link-error: Error conditions specific to a link.

    Restricted type over symbol; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "link-error"
    DETACH_FORCED: Final[Symbol] = Symbol("amqp:link:detach-forced")
    TRANSFER_LIMIT_EXCEEDED: Final[Symbol] = Symbol("amqp:link:transfer-limit-exceeded")
    MESSAGE_SIZE_EXCEEDED: Final[Symbol] = Symbol("amqp:link:message-size-exceeded")
    REDIRECT: Final[Symbol] = Symbol("amqp:link:redirect")
    STOLEN: Final[Symbol] = Symbol("amqp:link:stolen")
    CHOICES: ClassVar[Mapping[str, Symbol]] = {
        "detach-forced": DETACH_FORCED,
        "transfer-limit-exceeded": TRANSFER_LIMIT_EXCEEDED,
        "message-size-exceeded": MESSAGE_SIZE_EXCEEDED,
        "redirect": REDIRECT,
        "stolen": STOLEN,
    }


class TerminusDurability:
    """terminus-durability: Which terminus state survives a restart.

    Restricted type over uint; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "terminus-durability"
    NONE: Final[UInt] = UInt(0)
    CONFIGURATION: Final[UInt] = UInt(1)
    UNSETTLED_STATE: Final[UInt] = UInt(2)
    CHOICES: ClassVar[Mapping[str, UInt]] = {
        "none": NONE,
        "configuration": CONFIGURATION,
        "unsettled-state": UNSETTLED_STATE,
    }


class TerminusExpiryPolicy:
    """terminus-expiry-policy: The event that starts a terminus's expiry timer.

    Restricted type over symbol; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "terminus-expiry-policy"
    LINK_DETACH: Final[Symbol] = Symbol("link-detach")
    SESSION_END: Final[Symbol] = Symbol("session-end")
    CONNECTION_CLOSE: Final[Symbol] = Symbol("connection-close")
    NEVER: Final[Symbol] = Symbol("never")
    CHOICES: ClassVar[Mapping[str, Symbol]] = {
        "link-detach": LINK_DETACH,
        "session-end": SESSION_END,
        "connection-close": CONNECTION_CLOSE,
        "never": NEVER,
    }


class StdDistMode:
    """std-dist-mode: The standard distribution modes: move or copy messages to the link.

    Restricted type over symbol; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "std-dist-mode"
    MOVE: Final[Symbol] = Symbol("move")
    COPY: Final[Symbol] = Symbol("copy")
    CHOICES: ClassVar[Mapping[str, Symbol]] = {
        "move": MOVE,
        "copy": COPY,
    }


class SaslCode:
    """sasl-code: The result codes of a SASL exchange.

    Restricted type over ubyte; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "sasl-code"
    OK: Final[UByte] = UByte(0)
    AUTH: Final[UByte] = UByte(1)
    SYS: Final[UByte] = UByte(2)
    SYS_PERM: Final[UByte] = UByte(3)
    SYS_TEMP: Final[UByte] = UByte(4)
    CHOICES: ClassVar[Mapping[str, UByte]] = {
        "ok": OK,
        "auth": AUTH,
        "sys": SYS,
        "sys-perm": SYS_PERM,
        "sys-temp": SYS_TEMP,
    }


class TxnCapability:
    """txn-capability: Capabilities a transaction coordinator can offer.

    Restricted type over symbol; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "txn-capability"
    LOCAL_TRANSACTIONS: Final[Symbol] = Symbol("amqp:local-transactions")
    DISTRIBUTED_TRANSACTIONS: Final[Symbol] = Symbol("amqp:distributed-transactions")
    PROMOTABLE_TRANSACTIONS: Final[Symbol] = Symbol("amqp:promotable-transactions")
    MULTI_TXNS_PER_SSN: Final[Symbol] = Symbol("amqp:multi-txns-per-ssn")
    MULTI_SSNS_PER_TXN: Final[Symbol] = Symbol("amqp:multi-ssns-per-txn")
    CHOICES: ClassVar[Mapping[str, Symbol]] = {
        "local-transactions": LOCAL_TRANSACTIONS,
        "distributed-transactions": DISTRIBUTED_TRANSACTIONS,
        "promotable-transactions": PROMOTABLE_TRANSACTIONS,
        "multi-txns-per-ssn": MULTI_TXNS_PER_SSN,
        "multi-ssns-per-txn": MULTI_SSNS_PER_TXN,
    }


class TransactionErrorCondition:
    """transaction-error: Error conditions specific to transactions.

    Restricted type over symbol; each attribute is one choice.
    """

    SPEC_NAME: ClassVar[str] = "transaction-error"
    UNKNOWN_ID: Final[Symbol] = Symbol("amqp:transaction:unknown-id")
    TRANSACTION_ROLLBACK: Final[Symbol] = Symbol("amqp:transaction:rollback")
    TRANSACTION_TIMEOUT: Final[Symbol] = Symbol("amqp:transaction:timeout")
    CHOICES: ClassVar[Mapping[str, Symbol]] = {
        "unknown-id": UNKNOWN_ID,
        "transaction-rollback": TRANSACTION_ROLLBACK,
        "transaction-timeout": TRANSACTION_TIMEOUT,
    }


# -- described types (composites and message sections) --------------------------------

_Encoder = Callable[[bytearray, Any], None]
_encode_symbol_multiple = multiple(encode_symbol)


_OPEN_ENCODERS: tuple[_Encoder, ...] = (
    encode_string,  # container_id
    encode_string,  # hostname
    encode_uint,  # max_frame_size
    encode_ushort,  # channel_max
    encode_uint,  # idle_time_out
    _encode_symbol_multiple,  # outgoing_locales
    _encode_symbol_multiple,  # incoming_locales
    _encode_symbol_multiple,  # offered_capabilities
    _encode_symbol_multiple,  # desired_capabilities
    encode_map,  # properties
)
_OPEN_DEFAULTS: tuple[Any, ...] = (None, None, 4294967295, 65535, None, None, None, None, None, None)


class Open:
    """open (amqp:open:list, 0x00000000:0x00000010): First frame on a connection; negotiates container id,
    frame size, channels and idle timeout.

    Composite (list); provides: frame.
    """

    __slots__ = (
        "channel_max", "container_id", "desired_capabilities", "hostname", "idle_time_out",
        "incoming_locales", "max_frame_size", "offered_capabilities", "outgoing_locales", "properties",
    )
    __match_args__ = (
        "container_id", "hostname", "max_frame_size", "channel_max", "idle_time_out", "outgoing_locales",
        "incoming_locales", "offered_capabilities", "desired_capabilities", "properties",
    )

    SPEC_NAME: ClassVar[str] = "open"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = (
        "container-id", "hostname", "max-frame-size", "channel-max", "idle-time-out", "outgoing-locales",
        "incoming-locales", "offered-capabilities", "desired-capabilities", "properties",
    )
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000010
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:open:list")

    container_id: str  # string, mandatory
    hostname: str | None  # string
    max_frame_size: int  # uint, default 4294967295
    channel_max: int  # ushort, default 65535
    idle_time_out: int | None  # milliseconds
    outgoing_locales: list[Symbol] | None  # ietf-language-tag, multiple
    incoming_locales: list[Symbol] | None  # ietf-language-tag, multiple
    offered_capabilities: list[Symbol] | None  # symbol, multiple
    desired_capabilities: list[Symbol] | None  # symbol, multiple
    properties: dict[Any, Any] | None  # fields

    def __init__(
        self,
        container_id: str,
        hostname: str | None = None,
        max_frame_size: int = 4294967295,
        channel_max: int = 65535,
        idle_time_out: int | None = None,
        outgoing_locales: list[Symbol] | None = None,
        incoming_locales: list[Symbol] | None = None,
        offered_capabilities: list[Symbol] | None = None,
        desired_capabilities: list[Symbol] | None = None,
        properties: dict[Any, Any] | None = None,
    ) -> None:
        if container_id is None:
            raise TypeError("open: mandatory field 'container-id' must not be None")
        self.container_id = container_id
        self.hostname = hostname
        self.max_frame_size = max_frame_size
        self.channel_max = channel_max
        self.idle_time_out = idle_time_out
        self.outgoing_locales = outgoing_locales
        self.incoming_locales = incoming_locales
        self.offered_capabilities = offered_capabilities
        self.desired_capabilities = desired_capabilities
        self.properties = properties

    def _amqp_encode(self, out: bytearray) -> None:
        values = (
            self.container_id, self.hostname, self.max_frame_size, self.channel_max, self.idle_time_out,
            self.outgoing_locales, self.incoming_locales, self.offered_capabilities,
            self.desired_capabilities, self.properties,
        )
        encode_composite(out, 0x00000010, values, _OPEN_ENCODERS, _OPEN_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Open:
        if not isinstance(fields, list):
            raise DecodeError(f"open: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 10 else fields + [None] * (10 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("open: mandatory field 'container-id' is missing", 0)
        if type(v) is not str:
            _wrong_type("open", "container-id", "string", v)
        obj.container_id = v
        v = f[1]
        if v is not None and type(v) is not str:
            _wrong_type("open", "hostname", "string", v)
        obj.hostname = v
        v = f[2]
        if v is None:
            v = 4294967295
        elif type(v) is not UInt:
            _wrong_type("open", "max-frame-size", "uint", v)
        obj.max_frame_size = v
        v = f[3]
        if v is None:
            v = 65535
        elif type(v) is not UShort:
            _wrong_type("open", "channel-max", "ushort", v)
        obj.channel_max = v
        v = f[4]
        if v is not None and type(v) is not UInt:
            _wrong_type("open", "idle-time-out", "uint", v)
        obj.idle_time_out = v
        v = f[5]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("open", "outgoing-locales", "symbol", e)
        obj.outgoing_locales = v
        v = f[6]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("open", "incoming-locales", "symbol", e)
        obj.incoming_locales = v
        v = f[7]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("open", "offered-capabilities", "symbol", e)
        obj.offered_capabilities = v
        v = f[8]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("open", "desired-capabilities", "symbol", e)
        obj.desired_capabilities = v
        v = f[9]
        if v is not None and type(v) is not dict:
            _wrong_type("open", "properties", "map", v)
        obj.properties = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Open):
            return NotImplemented
        return bool(
            self.container_id == other.container_id
            and self.hostname == other.hostname
            and self.max_frame_size == other.max_frame_size
            and self.channel_max == other.channel_max
            and self.idle_time_out == other.idle_time_out
            and self.outgoing_locales == other.outgoing_locales
            and self.incoming_locales == other.incoming_locales
            and self.offered_capabilities == other.offered_capabilities
            and self.desired_capabilities == other.desired_capabilities
            and self.properties == other.properties
        )

    def __repr__(self) -> str:
        return (
            f"Open(container_id={self.container_id!r}, hostname={self.hostname!r}, "
            f"max_frame_size={self.max_frame_size!r}, channel_max={self.channel_max!r}, "
            f"idle_time_out={self.idle_time_out!r}, outgoing_locales={self.outgoing_locales!r}, "
            f"incoming_locales={self.incoming_locales!r}, "
            f"offered_capabilities={self.offered_capabilities!r}, "
            f"desired_capabilities={self.desired_capabilities!r}, properties={self.properties!r})"
        )


register_composite(0x00000010, "amqp:open:list", Open._amqp_decode)


_BEGIN_ENCODERS: tuple[_Encoder, ...] = (
    encode_ushort,  # remote_channel
    encode_uint,  # next_outgoing_id
    encode_uint,  # incoming_window
    encode_uint,  # outgoing_window
    encode_uint,  # handle_max
    _encode_symbol_multiple,  # offered_capabilities
    _encode_symbol_multiple,  # desired_capabilities
    encode_map,  # properties
)
_BEGIN_DEFAULTS: tuple[Any, ...] = (None, None, None, None, 4294967295, None, None, None)


class Begin:
    """begin (amqp:begin:list, 0x00000000:0x00000011): Starts a session on a channel and sets up its transfer
    windows.

    Composite (list); provides: frame.
    """

    __slots__ = (
        "desired_capabilities", "handle_max", "incoming_window", "next_outgoing_id", "offered_capabilities",
        "outgoing_window", "properties", "remote_channel",
    )
    __match_args__ = (
        "remote_channel", "next_outgoing_id", "incoming_window", "outgoing_window", "handle_max",
        "offered_capabilities", "desired_capabilities", "properties",
    )

    SPEC_NAME: ClassVar[str] = "begin"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = (
        "remote-channel", "next-outgoing-id", "incoming-window", "outgoing-window", "handle-max",
        "offered-capabilities", "desired-capabilities", "properties",
    )
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000011
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:begin:list")

    remote_channel: int | None  # ushort
    next_outgoing_id: int  # transfer-number, mandatory
    incoming_window: int  # uint, mandatory
    outgoing_window: int  # uint, mandatory
    handle_max: int  # handle, default 4294967295
    offered_capabilities: list[Symbol] | None  # symbol, multiple
    desired_capabilities: list[Symbol] | None  # symbol, multiple
    properties: dict[Any, Any] | None  # fields

    def __init__(
        self,
        remote_channel: int | None = None,
        next_outgoing_id: int | None = None,
        incoming_window: int | None = None,
        outgoing_window: int | None = None,
        handle_max: int = 4294967295,
        offered_capabilities: list[Symbol] | None = None,
        desired_capabilities: list[Symbol] | None = None,
        properties: dict[Any, Any] | None = None,
    ) -> None:
        if next_outgoing_id is None:
            raise TypeError("begin: mandatory field 'next-outgoing-id' must not be None")
        if incoming_window is None:
            raise TypeError("begin: mandatory field 'incoming-window' must not be None")
        if outgoing_window is None:
            raise TypeError("begin: mandatory field 'outgoing-window' must not be None")
        self.remote_channel = remote_channel
        self.next_outgoing_id = next_outgoing_id
        self.incoming_window = incoming_window
        self.outgoing_window = outgoing_window
        self.handle_max = handle_max
        self.offered_capabilities = offered_capabilities
        self.desired_capabilities = desired_capabilities
        self.properties = properties

    def _amqp_encode(self, out: bytearray) -> None:
        values = (
            self.remote_channel, self.next_outgoing_id, self.incoming_window, self.outgoing_window,
            self.handle_max, self.offered_capabilities, self.desired_capabilities, self.properties,
        )
        encode_composite(out, 0x00000011, values, _BEGIN_ENCODERS, _BEGIN_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Begin:
        if not isinstance(fields, list):
            raise DecodeError(f"begin: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 8 else fields + [None] * (8 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is not None and type(v) is not UShort:
            _wrong_type("begin", "remote-channel", "ushort", v)
        obj.remote_channel = v
        v = f[1]
        if v is None:
            raise DecodeError("begin: mandatory field 'next-outgoing-id' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("begin", "next-outgoing-id", "uint", v)
        obj.next_outgoing_id = v
        v = f[2]
        if v is None:
            raise DecodeError("begin: mandatory field 'incoming-window' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("begin", "incoming-window", "uint", v)
        obj.incoming_window = v
        v = f[3]
        if v is None:
            raise DecodeError("begin: mandatory field 'outgoing-window' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("begin", "outgoing-window", "uint", v)
        obj.outgoing_window = v
        v = f[4]
        if v is None:
            v = 4294967295
        elif type(v) is not UInt:
            _wrong_type("begin", "handle-max", "uint", v)
        obj.handle_max = v
        v = f[5]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("begin", "offered-capabilities", "symbol", e)
        obj.offered_capabilities = v
        v = f[6]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("begin", "desired-capabilities", "symbol", e)
        obj.desired_capabilities = v
        v = f[7]
        if v is not None and type(v) is not dict:
            _wrong_type("begin", "properties", "map", v)
        obj.properties = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Begin):
            return NotImplemented
        return bool(
            self.remote_channel == other.remote_channel
            and self.next_outgoing_id == other.next_outgoing_id
            and self.incoming_window == other.incoming_window
            and self.outgoing_window == other.outgoing_window
            and self.handle_max == other.handle_max
            and self.offered_capabilities == other.offered_capabilities
            and self.desired_capabilities == other.desired_capabilities
            and self.properties == other.properties
        )

    def __repr__(self) -> str:
        return (
            f"Begin(remote_channel={self.remote_channel!r}, next_outgoing_id={self.next_outgoing_id!r}, "
            f"incoming_window={self.incoming_window!r}, outgoing_window={self.outgoing_window!r}, "
            f"handle_max={self.handle_max!r}, offered_capabilities={self.offered_capabilities!r}, "
            f"desired_capabilities={self.desired_capabilities!r}, properties={self.properties!r})"
        )


register_composite(0x00000011, "amqp:begin:list", Begin._amqp_decode)


_ATTACH_ENCODERS: tuple[_Encoder, ...] = (
    encode_string,  # name
    encode_uint,  # handle
    encode_boolean,  # role
    encode_ubyte,  # snd_settle_mode
    encode_ubyte,  # rcv_settle_mode
    encode_value,  # source
    encode_value,  # target
    encode_map,  # unsettled
    encode_boolean,  # incomplete_unsettled
    encode_uint,  # initial_delivery_count
    encode_ulong,  # max_message_size
    _encode_symbol_multiple,  # offered_capabilities
    _encode_symbol_multiple,  # desired_capabilities
    encode_map,  # properties
)
_ATTACH_DEFAULTS: tuple[Any, ...] = (
    None, None, None, SenderSettleMode.MIXED, ReceiverSettleMode.FIRST, None, None, None, False, None, None,
    None, None, None,
)


class Attach:
    """attach (amqp:attach:list, 0x00000000:0x00000012): Attaches a named link endpoint to a session with a
    handle, role and termini.

    Composite (list); provides: frame.
    """

    __slots__ = (
        "desired_capabilities", "handle", "incomplete_unsettled", "initial_delivery_count",
        "max_message_size", "name", "offered_capabilities", "properties", "rcv_settle_mode", "role",
        "snd_settle_mode", "source", "target", "unsettled",
    )
    __match_args__ = (
        "name", "handle", "role", "snd_settle_mode", "rcv_settle_mode", "source", "target", "unsettled",
        "incomplete_unsettled", "initial_delivery_count", "max_message_size", "offered_capabilities",
        "desired_capabilities", "properties",
    )

    SPEC_NAME: ClassVar[str] = "attach"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = (
        "name", "handle", "role", "snd-settle-mode", "rcv-settle-mode", "source", "target", "unsettled",
        "incomplete-unsettled", "initial-delivery-count", "max-message-size", "offered-capabilities",
        "desired-capabilities", "properties",
    )
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000012
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:attach:list")

    name: str  # string, mandatory
    handle: int  # handle, mandatory
    role: bool  # role, mandatory
    snd_settle_mode: int  # sender-settle-mode, default mixed
    rcv_settle_mode: int  # receiver-settle-mode, default first
    source: Any  # *, requires source
    target: Any  # *, requires target
    unsettled: dict[Any, Any] | None  # map
    incomplete_unsettled: bool  # boolean, default false
    initial_delivery_count: int | None  # sequence-no
    max_message_size: int | None  # ulong
    offered_capabilities: list[Symbol] | None  # symbol, multiple
    desired_capabilities: list[Symbol] | None  # symbol, multiple
    properties: dict[Any, Any] | None  # fields

    def __init__(
        self,
        name: str,
        handle: int,
        role: bool,
        snd_settle_mode: int = SenderSettleMode.MIXED,
        rcv_settle_mode: int = ReceiverSettleMode.FIRST,
        source: Any = None,
        target: Any = None,
        unsettled: dict[Any, Any] | None = None,
        incomplete_unsettled: bool = False,
        initial_delivery_count: int | None = None,
        max_message_size: int | None = None,
        offered_capabilities: list[Symbol] | None = None,
        desired_capabilities: list[Symbol] | None = None,
        properties: dict[Any, Any] | None = None,
    ) -> None:
        if name is None:
            raise TypeError("attach: mandatory field 'name' must not be None")
        if handle is None:
            raise TypeError("attach: mandatory field 'handle' must not be None")
        if role is None:
            raise TypeError("attach: mandatory field 'role' must not be None")
        self.name = name
        self.handle = handle
        self.role = role
        self.snd_settle_mode = snd_settle_mode
        self.rcv_settle_mode = rcv_settle_mode
        self.source = source
        self.target = target
        self.unsettled = unsettled
        self.incomplete_unsettled = incomplete_unsettled
        self.initial_delivery_count = initial_delivery_count
        self.max_message_size = max_message_size
        self.offered_capabilities = offered_capabilities
        self.desired_capabilities = desired_capabilities
        self.properties = properties

    def _amqp_encode(self, out: bytearray) -> None:
        values = (
            self.name, self.handle, self.role, self.snd_settle_mode, self.rcv_settle_mode, self.source,
            self.target, self.unsettled, self.incomplete_unsettled, self.initial_delivery_count,
            self.max_message_size, self.offered_capabilities, self.desired_capabilities, self.properties,
        )
        encode_composite(out, 0x00000012, values, _ATTACH_ENCODERS, _ATTACH_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Attach:
        if not isinstance(fields, list):
            raise DecodeError(f"attach: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 14 else fields + [None] * (14 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("attach: mandatory field 'name' is missing", 0)
        if type(v) is not str:
            _wrong_type("attach", "name", "string", v)
        obj.name = v
        v = f[1]
        if v is None:
            raise DecodeError("attach: mandatory field 'handle' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("attach", "handle", "uint", v)
        obj.handle = v
        v = f[2]
        if v is None:
            raise DecodeError("attach: mandatory field 'role' is missing", 0)
        if type(v) is not bool:
            _wrong_type("attach", "role", "boolean", v)
        obj.role = v
        v = f[3]
        if v is None:
            v = SenderSettleMode.MIXED
        elif type(v) is not UByte:
            _wrong_type("attach", "snd-settle-mode", "ubyte", v)
        obj.snd_settle_mode = v
        v = f[4]
        if v is None:
            v = ReceiverSettleMode.FIRST
        elif type(v) is not UByte:
            _wrong_type("attach", "rcv-settle-mode", "ubyte", v)
        obj.rcv_settle_mode = v
        v = f[5]
        obj.source = v
        v = f[6]
        obj.target = v
        v = f[7]
        if v is not None and type(v) is not dict:
            _wrong_type("attach", "unsettled", "map", v)
        obj.unsettled = v
        v = f[8]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("attach", "incomplete-unsettled", "boolean", v)
        obj.incomplete_unsettled = v
        v = f[9]
        if v is not None and type(v) is not UInt:
            _wrong_type("attach", "initial-delivery-count", "uint", v)
        obj.initial_delivery_count = v
        v = f[10]
        if v is not None and type(v) is not ULong:
            _wrong_type("attach", "max-message-size", "ulong", v)
        obj.max_message_size = v
        v = f[11]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("attach", "offered-capabilities", "symbol", e)
        obj.offered_capabilities = v
        v = f[12]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("attach", "desired-capabilities", "symbol", e)
        obj.desired_capabilities = v
        v = f[13]
        if v is not None and type(v) is not dict:
            _wrong_type("attach", "properties", "map", v)
        obj.properties = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attach):
            return NotImplemented
        return bool(
            self.name == other.name
            and self.handle == other.handle
            and self.role == other.role
            and self.snd_settle_mode == other.snd_settle_mode
            and self.rcv_settle_mode == other.rcv_settle_mode
            and self.source == other.source
            and self.target == other.target
            and self.unsettled == other.unsettled
            and self.incomplete_unsettled == other.incomplete_unsettled
            and self.initial_delivery_count == other.initial_delivery_count
            and self.max_message_size == other.max_message_size
            and self.offered_capabilities == other.offered_capabilities
            and self.desired_capabilities == other.desired_capabilities
            and self.properties == other.properties
        )

    def __repr__(self) -> str:
        return (
            f"Attach(name={self.name!r}, handle={self.handle!r}, role={self.role!r}, "
            f"snd_settle_mode={self.snd_settle_mode!r}, rcv_settle_mode={self.rcv_settle_mode!r}, "
            f"source={self.source!r}, target={self.target!r}, unsettled={self.unsettled!r}, "
            f"incomplete_unsettled={self.incomplete_unsettled!r}, "
            f"initial_delivery_count={self.initial_delivery_count!r}, "
            f"max_message_size={self.max_message_size!r}, "
            f"offered_capabilities={self.offered_capabilities!r}, "
            f"desired_capabilities={self.desired_capabilities!r}, properties={self.properties!r})"
        )


register_composite(0x00000012, "amqp:attach:list", Attach._amqp_decode)


_FLOW_ENCODERS: tuple[_Encoder, ...] = (
    encode_uint,  # next_incoming_id
    encode_uint,  # incoming_window
    encode_uint,  # next_outgoing_id
    encode_uint,  # outgoing_window
    encode_uint,  # handle
    encode_uint,  # delivery_count
    encode_uint,  # link_credit
    encode_uint,  # available
    encode_boolean,  # drain
    encode_boolean,  # echo
    encode_map,  # properties
)
_FLOW_DEFAULTS: tuple[Any, ...] = (None, None, None, None, None, None, None, None, False, False, None)


class Flow:
    """flow (amqp:flow:list, 0x00000000:0x00000013): Updates session windows and, with a handle, link credit
    and delivery count.

    Composite (list); provides: frame.
    """

    __slots__ = (
        "available", "delivery_count", "drain", "echo", "handle", "incoming_window", "link_credit",
        "next_incoming_id", "next_outgoing_id", "outgoing_window", "properties",
    )
    __match_args__ = (
        "next_incoming_id", "incoming_window", "next_outgoing_id", "outgoing_window", "handle",
        "delivery_count", "link_credit", "available", "drain", "echo", "properties",
    )

    SPEC_NAME: ClassVar[str] = "flow"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = (
        "next-incoming-id", "incoming-window", "next-outgoing-id", "outgoing-window", "handle",
        "delivery-count", "link-credit", "available", "drain", "echo", "properties",
    )
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000013
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:flow:list")

    next_incoming_id: int | None  # transfer-number
    incoming_window: int  # uint, mandatory
    next_outgoing_id: int  # transfer-number, mandatory
    outgoing_window: int  # uint, mandatory
    handle: int | None  # handle
    delivery_count: int | None  # sequence-no
    link_credit: int | None  # uint
    available: int | None  # uint
    drain: bool  # boolean, default false
    echo: bool  # boolean, default false
    properties: dict[Any, Any] | None  # fields

    def __init__(
        self,
        next_incoming_id: int | None = None,
        incoming_window: int | None = None,
        next_outgoing_id: int | None = None,
        outgoing_window: int | None = None,
        handle: int | None = None,
        delivery_count: int | None = None,
        link_credit: int | None = None,
        available: int | None = None,
        drain: bool = False,
        echo: bool = False,
        properties: dict[Any, Any] | None = None,
    ) -> None:
        if incoming_window is None:
            raise TypeError("flow: mandatory field 'incoming-window' must not be None")
        if next_outgoing_id is None:
            raise TypeError("flow: mandatory field 'next-outgoing-id' must not be None")
        if outgoing_window is None:
            raise TypeError("flow: mandatory field 'outgoing-window' must not be None")
        self.next_incoming_id = next_incoming_id
        self.incoming_window = incoming_window
        self.next_outgoing_id = next_outgoing_id
        self.outgoing_window = outgoing_window
        self.handle = handle
        self.delivery_count = delivery_count
        self.link_credit = link_credit
        self.available = available
        self.drain = drain
        self.echo = echo
        self.properties = properties

    def _amqp_encode(self, out: bytearray) -> None:
        values = (
            self.next_incoming_id, self.incoming_window, self.next_outgoing_id, self.outgoing_window,
            self.handle, self.delivery_count, self.link_credit, self.available, self.drain, self.echo,
            self.properties,
        )
        encode_composite(out, 0x00000013, values, _FLOW_ENCODERS, _FLOW_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Flow:
        if not isinstance(fields, list):
            raise DecodeError(f"flow: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 11 else fields + [None] * (11 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is not None and type(v) is not UInt:
            _wrong_type("flow", "next-incoming-id", "uint", v)
        obj.next_incoming_id = v
        v = f[1]
        if v is None:
            raise DecodeError("flow: mandatory field 'incoming-window' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("flow", "incoming-window", "uint", v)
        obj.incoming_window = v
        v = f[2]
        if v is None:
            raise DecodeError("flow: mandatory field 'next-outgoing-id' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("flow", "next-outgoing-id", "uint", v)
        obj.next_outgoing_id = v
        v = f[3]
        if v is None:
            raise DecodeError("flow: mandatory field 'outgoing-window' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("flow", "outgoing-window", "uint", v)
        obj.outgoing_window = v
        v = f[4]
        if v is not None and type(v) is not UInt:
            _wrong_type("flow", "handle", "uint", v)
        obj.handle = v
        v = f[5]
        if v is not None and type(v) is not UInt:
            _wrong_type("flow", "delivery-count", "uint", v)
        obj.delivery_count = v
        v = f[6]
        if v is not None and type(v) is not UInt:
            _wrong_type("flow", "link-credit", "uint", v)
        obj.link_credit = v
        v = f[7]
        if v is not None and type(v) is not UInt:
            _wrong_type("flow", "available", "uint", v)
        obj.available = v
        v = f[8]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("flow", "drain", "boolean", v)
        obj.drain = v
        v = f[9]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("flow", "echo", "boolean", v)
        obj.echo = v
        v = f[10]
        if v is not None and type(v) is not dict:
            _wrong_type("flow", "properties", "map", v)
        obj.properties = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Flow):
            return NotImplemented
        return bool(
            self.next_incoming_id == other.next_incoming_id
            and self.incoming_window == other.incoming_window
            and self.next_outgoing_id == other.next_outgoing_id
            and self.outgoing_window == other.outgoing_window
            and self.handle == other.handle
            and self.delivery_count == other.delivery_count
            and self.link_credit == other.link_credit
            and self.available == other.available
            and self.drain == other.drain
            and self.echo == other.echo
            and self.properties == other.properties
        )

    def __repr__(self) -> str:
        return (
            f"Flow(next_incoming_id={self.next_incoming_id!r}, incoming_window={self.incoming_window!r}, "
            f"next_outgoing_id={self.next_outgoing_id!r}, outgoing_window={self.outgoing_window!r}, "
            f"handle={self.handle!r}, delivery_count={self.delivery_count!r}, "
            f"link_credit={self.link_credit!r}, available={self.available!r}, drain={self.drain!r}, "
            f"echo={self.echo!r}, properties={self.properties!r})"
        )


register_composite(0x00000013, "amqp:flow:list", Flow._amqp_decode)


_TRANSFER_ENCODERS: tuple[_Encoder, ...] = (
    encode_uint,  # handle
    encode_uint,  # delivery_id
    encode_binary,  # delivery_tag
    encode_uint,  # message_format
    encode_boolean,  # settled
    encode_boolean,  # more
    encode_ubyte,  # rcv_settle_mode
    encode_value,  # state
    encode_boolean,  # resume
    encode_boolean,  # aborted
    encode_boolean,  # batchable
)
_TRANSFER_DEFAULTS: tuple[Any, ...] = (None, None, None, None, None, False, None, None, False, False, False)


class Transfer:
    """transfer (amqp:transfer:list, 0x00000000:0x00000014): Carries (part of) a message on a link.

    Composite (list); provides: frame.
    """

    __slots__ = (
        "aborted", "batchable", "delivery_id", "delivery_tag", "handle", "message_format", "more",
        "rcv_settle_mode", "resume", "settled", "state",
    )
    __match_args__ = (
        "handle", "delivery_id", "delivery_tag", "message_format", "settled", "more", "rcv_settle_mode",
        "state", "resume", "aborted", "batchable",
    )

    SPEC_NAME: ClassVar[str] = "transfer"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = (
        "handle", "delivery-id", "delivery-tag", "message-format", "settled", "more", "rcv-settle-mode",
        "state", "resume", "aborted", "batchable",
    )
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000014
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:transfer:list")

    handle: int  # handle, mandatory
    delivery_id: int | None  # delivery-number
    delivery_tag: bytes | None  # delivery-tag
    message_format: int | None  # message-format
    settled: bool | None  # boolean
    more: bool  # boolean, default false
    rcv_settle_mode: int | None  # receiver-settle-mode
    state: Any  # *, requires delivery-state
    resume: bool  # boolean, default false
    aborted: bool  # boolean, default false
    batchable: bool  # boolean, default false

    def __init__(
        self,
        handle: int,
        delivery_id: int | None = None,
        delivery_tag: bytes | None = None,
        message_format: int | None = None,
        settled: bool | None = None,
        more: bool = False,
        rcv_settle_mode: int | None = None,
        state: Any = None,
        resume: bool = False,
        aborted: bool = False,
        batchable: bool = False,
    ) -> None:
        if handle is None:
            raise TypeError("transfer: mandatory field 'handle' must not be None")
        self.handle = handle
        self.delivery_id = delivery_id
        self.delivery_tag = delivery_tag
        self.message_format = message_format
        self.settled = settled
        self.more = more
        self.rcv_settle_mode = rcv_settle_mode
        self.state = state
        self.resume = resume
        self.aborted = aborted
        self.batchable = batchable

    def _amqp_encode(self, out: bytearray) -> None:
        values = (
            self.handle, self.delivery_id, self.delivery_tag, self.message_format, self.settled, self.more,
            self.rcv_settle_mode, self.state, self.resume, self.aborted, self.batchable,
        )
        encode_composite(out, 0x00000014, values, _TRANSFER_ENCODERS, _TRANSFER_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Transfer:
        if not isinstance(fields, list):
            raise DecodeError(f"transfer: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 11 else fields + [None] * (11 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("transfer: mandatory field 'handle' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("transfer", "handle", "uint", v)
        obj.handle = v
        v = f[1]
        if v is not None and type(v) is not UInt:
            _wrong_type("transfer", "delivery-id", "uint", v)
        obj.delivery_id = v
        v = f[2]
        if v is not None and type(v) is not bytes:
            _wrong_type("transfer", "delivery-tag", "binary", v)
        obj.delivery_tag = v
        v = f[3]
        if v is not None and type(v) is not UInt:
            _wrong_type("transfer", "message-format", "uint", v)
        obj.message_format = v
        v = f[4]
        if v is not None and type(v) is not bool:
            _wrong_type("transfer", "settled", "boolean", v)
        obj.settled = v
        v = f[5]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("transfer", "more", "boolean", v)
        obj.more = v
        v = f[6]
        if v is not None and type(v) is not UByte:
            _wrong_type("transfer", "rcv-settle-mode", "ubyte", v)
        obj.rcv_settle_mode = v
        v = f[7]
        obj.state = v
        v = f[8]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("transfer", "resume", "boolean", v)
        obj.resume = v
        v = f[9]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("transfer", "aborted", "boolean", v)
        obj.aborted = v
        v = f[10]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("transfer", "batchable", "boolean", v)
        obj.batchable = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Transfer):
            return NotImplemented
        return bool(
            self.handle == other.handle
            and self.delivery_id == other.delivery_id
            and self.delivery_tag == other.delivery_tag
            and self.message_format == other.message_format
            and self.settled == other.settled
            and self.more == other.more
            and self.rcv_settle_mode == other.rcv_settle_mode
            and self.state == other.state
            and self.resume == other.resume
            and self.aborted == other.aborted
            and self.batchable == other.batchable
        )

    def __repr__(self) -> str:
        return (
            f"Transfer(handle={self.handle!r}, delivery_id={self.delivery_id!r}, "
            f"delivery_tag={self.delivery_tag!r}, message_format={self.message_format!r}, "
            f"settled={self.settled!r}, more={self.more!r}, rcv_settle_mode={self.rcv_settle_mode!r}, "
            f"state={self.state!r}, resume={self.resume!r}, aborted={self.aborted!r}, "
            f"batchable={self.batchable!r})"
        )


register_composite(0x00000014, "amqp:transfer:list", Transfer._amqp_decode)


_DISPOSITION_ENCODERS: tuple[_Encoder, ...] = (
    encode_boolean,  # role
    encode_uint,  # first
    encode_uint,  # last
    encode_boolean,  # settled
    encode_value,  # state
    encode_boolean,  # batchable
)
_DISPOSITION_DEFAULTS: tuple[Any, ...] = (None, None, None, False, None, False)


class Disposition:
    """disposition (amqp:disposition:list, 0x00000000:0x00000015): Reports the state and settlement of a range
    of deliveries.

    Composite (list); provides: frame.
    """

    __slots__ = ("batchable", "first", "last", "role", "settled", "state")
    __match_args__ = ("role", "first", "last", "settled", "state", "batchable")

    SPEC_NAME: ClassVar[str] = "disposition"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("role", "first", "last", "settled", "state", "batchable")
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000015
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:disposition:list")

    role: bool  # role, mandatory
    first: int  # delivery-number, mandatory
    last: int | None  # delivery-number
    settled: bool  # boolean, default false
    state: Any  # *, requires delivery-state
    batchable: bool  # boolean, default false

    def __init__(
        self,
        role: bool,
        first: int,
        last: int | None = None,
        settled: bool = False,
        state: Any = None,
        batchable: bool = False,
    ) -> None:
        if role is None:
            raise TypeError("disposition: mandatory field 'role' must not be None")
        if first is None:
            raise TypeError("disposition: mandatory field 'first' must not be None")
        self.role = role
        self.first = first
        self.last = last
        self.settled = settled
        self.state = state
        self.batchable = batchable

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.role, self.first, self.last, self.settled, self.state, self.batchable)
        encode_composite(out, 0x00000015, values, _DISPOSITION_ENCODERS, _DISPOSITION_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Disposition:
        if not isinstance(fields, list):
            raise DecodeError(f"disposition: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 6 else fields + [None] * (6 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("disposition: mandatory field 'role' is missing", 0)
        if type(v) is not bool:
            _wrong_type("disposition", "role", "boolean", v)
        obj.role = v
        v = f[1]
        if v is None:
            raise DecodeError("disposition: mandatory field 'first' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("disposition", "first", "uint", v)
        obj.first = v
        v = f[2]
        if v is not None and type(v) is not UInt:
            _wrong_type("disposition", "last", "uint", v)
        obj.last = v
        v = f[3]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("disposition", "settled", "boolean", v)
        obj.settled = v
        v = f[4]
        obj.state = v
        v = f[5]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("disposition", "batchable", "boolean", v)
        obj.batchable = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Disposition):
            return NotImplemented
        return bool(
            self.role == other.role
            and self.first == other.first
            and self.last == other.last
            and self.settled == other.settled
            and self.state == other.state
            and self.batchable == other.batchable
        )

    def __repr__(self) -> str:
        return (
            f"Disposition(role={self.role!r}, first={self.first!r}, last={self.last!r}, "
            f"settled={self.settled!r}, state={self.state!r}, batchable={self.batchable!r})"
        )


register_composite(0x00000015, "amqp:disposition:list", Disposition._amqp_decode)


_DETACH_ENCODERS: tuple[_Encoder, ...] = (
    encode_uint,  # handle
    encode_boolean,  # closed
    encode_value,  # error
)
_DETACH_DEFAULTS: tuple[Any, ...] = (None, False, None)


class Detach:
    """detach (amqp:detach:list, 0x00000000:0x00000016): Detaches a link endpoint from its session, optionally
    closing the link.

    Composite (list); provides: frame.
    """

    __slots__ = ("closed", "error", "handle")
    __match_args__ = ("handle", "closed", "error")

    SPEC_NAME: ClassVar[str] = "detach"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("handle", "closed", "error")
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000016
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:detach:list")

    handle: int  # handle, mandatory
    closed: bool  # boolean, default false
    error: Error | None  # error

    def __init__(
        self,
        handle: int,
        closed: bool = False,
        error: Error | None = None,
    ) -> None:
        if handle is None:
            raise TypeError("detach: mandatory field 'handle' must not be None")
        self.handle = handle
        self.closed = closed
        self.error = error

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.handle, self.closed, self.error)
        encode_composite(out, 0x00000016, values, _DETACH_ENCODERS, _DETACH_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Detach:
        if not isinstance(fields, list):
            raise DecodeError(f"detach: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 3 else fields + [None] * (3 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("detach: mandatory field 'handle' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("detach", "handle", "uint", v)
        obj.handle = v
        v = f[1]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("detach", "closed", "boolean", v)
        obj.closed = v
        v = f[2]
        if v is not None and not isinstance(v, Error):
            _wrong_type("detach", "error", "error", v)
        obj.error = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Detach):
            return NotImplemented
        return bool(
            self.handle == other.handle
            and self.closed == other.closed
            and self.error == other.error
        )

    def __repr__(self) -> str:
        return f"Detach(handle={self.handle!r}, closed={self.closed!r}, error={self.error!r})"


register_composite(0x00000016, "amqp:detach:list", Detach._amqp_decode)


_END_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # error
)
_END_DEFAULTS: tuple[Any, ...] = (None,)


class End:
    """end (amqp:end:list, 0x00000000:0x00000017): Ends a session.

    Composite (list); provides: frame.
    """

    __slots__ = ("error",)
    __match_args__ = ("error",)

    SPEC_NAME: ClassVar[str] = "end"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("error",)
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000017
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:end:list")

    error: Error | None  # error

    def __init__(
        self,
        error: Error | None = None,
    ) -> None:
        self.error = error

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000017, (self.error,), _END_ENCODERS, _END_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> End:
        if not isinstance(fields, list):
            raise DecodeError(f"end: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 1 else fields + [None] * (1 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is not None and not isinstance(v, Error):
            _wrong_type("end", "error", "error", v)
        obj.error = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, End):
            return NotImplemented
        return bool(self.error == other.error)

    def __repr__(self) -> str:
        return f"End(error={self.error!r})"


register_composite(0x00000017, "amqp:end:list", End._amqp_decode)


_CLOSE_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # error
)
_CLOSE_DEFAULTS: tuple[Any, ...] = (None,)


class Close:
    """close (amqp:close:list, 0x00000000:0x00000018): Closes the connection.

    Composite (list); provides: frame.
    """

    __slots__ = ("error",)
    __match_args__ = ("error",)

    SPEC_NAME: ClassVar[str] = "close"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("error",)
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000018
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:close:list")

    error: Error | None  # error

    def __init__(
        self,
        error: Error | None = None,
    ) -> None:
        self.error = error

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000018, (self.error,), _CLOSE_ENCODERS, _CLOSE_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Close:
        if not isinstance(fields, list):
            raise DecodeError(f"close: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 1 else fields + [None] * (1 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is not None and not isinstance(v, Error):
            _wrong_type("close", "error", "error", v)
        obj.error = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Close):
            return NotImplemented
        return bool(self.error == other.error)

    def __repr__(self) -> str:
        return f"Close(error={self.error!r})"


register_composite(0x00000018, "amqp:close:list", Close._amqp_decode)


_ERROR_ENCODERS: tuple[_Encoder, ...] = (
    encode_symbol,  # condition
    encode_string,  # description
    encode_map,  # info
)
_ERROR_DEFAULTS: tuple[Any, ...] = (None, None, None)


class Error:
    """error (amqp:error:list, 0x00000000:0x0000001d): Describes an error with a condition symbol, text and
    extra info.

    Composite (list); provides: nothing.
    """

    __slots__ = ("condition", "description", "info")
    __match_args__ = ("condition", "description", "info")

    SPEC_NAME: ClassVar[str] = "error"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("condition", "description", "info")
    DESCRIPTOR_CODE: ClassVar[int] = 0x0000001d
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:error:list")

    condition: Symbol  # symbol, requires error-condition, mandatory
    description: str | None  # string
    info: dict[Any, Any] | None  # fields

    def __init__(
        self,
        condition: Symbol,
        description: str | None = None,
        info: dict[Any, Any] | None = None,
    ) -> None:
        if condition is None:
            raise TypeError("error: mandatory field 'condition' must not be None")
        self.condition = condition
        self.description = description
        self.info = info

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.condition, self.description, self.info)
        encode_composite(out, 0x0000001d, values, _ERROR_ENCODERS, _ERROR_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Error:
        if not isinstance(fields, list):
            raise DecodeError(f"error: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 3 else fields + [None] * (3 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("error: mandatory field 'condition' is missing", 0)
        if type(v) is not Symbol:
            _wrong_type("error", "condition", "symbol", v)
        obj.condition = v
        v = f[1]
        if v is not None and type(v) is not str:
            _wrong_type("error", "description", "string", v)
        obj.description = v
        v = f[2]
        if v is not None and type(v) is not dict:
            _wrong_type("error", "info", "map", v)
        obj.info = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Error):
            return NotImplemented
        return bool(
            self.condition == other.condition
            and self.description == other.description
            and self.info == other.info
        )

    def __repr__(self) -> str:
        return f"Error(condition={self.condition!r}, description={self.description!r}, info={self.info!r})"


register_composite(0x0000001d, "amqp:error:list", Error._amqp_decode)


_HEADER_ENCODERS: tuple[_Encoder, ...] = (
    encode_boolean,  # durable
    encode_ubyte,  # priority
    encode_uint,  # ttl
    encode_boolean,  # first_acquirer
    encode_uint,  # delivery_count
)
_HEADER_DEFAULTS: tuple[Any, ...] = (None, None, None, None, None)


class Header:
    """header (amqp:header:list, 0x00000000:0x00000070): Delivery details for a message: durability, priority,
    time to live, first acquirer, delivery count.

    Composite (list); provides: section.
    """

    __slots__ = ("delivery_count", "durable", "first_acquirer", "priority", "ttl")
    __match_args__ = ("durable", "priority", "ttl", "first_acquirer", "delivery_count")

    SPEC_NAME: ClassVar[str] = "header"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = (
        "durable", "priority", "ttl", "first-acquirer", "delivery-count",
    )
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000070
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:header:list")

    durable: bool | None  # boolean
    priority: int | None  # ubyte
    ttl: int | None  # milliseconds
    first_acquirer: bool | None  # boolean
    delivery_count: int | None  # uint

    def __init__(
        self,
        durable: bool | None = None,
        priority: int | None = None,
        ttl: int | None = None,
        first_acquirer: bool | None = None,
        delivery_count: int | None = None,
    ) -> None:
        self.durable = durable
        self.priority = priority
        self.ttl = ttl
        self.first_acquirer = first_acquirer
        self.delivery_count = delivery_count

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.durable, self.priority, self.ttl, self.first_acquirer, self.delivery_count)
        encode_composite(out, 0x00000070, values, _HEADER_ENCODERS, _HEADER_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Header:
        if not isinstance(fields, list):
            raise DecodeError(f"header: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 5 else fields + [None] * (5 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is not None and type(v) is not bool:
            _wrong_type("header", "durable", "boolean", v)
        obj.durable = v
        v = f[1]
        if v is not None and type(v) is not UByte:
            _wrong_type("header", "priority", "ubyte", v)
        obj.priority = v
        v = f[2]
        if v is not None and type(v) is not UInt:
            _wrong_type("header", "ttl", "uint", v)
        obj.ttl = v
        v = f[3]
        if v is not None and type(v) is not bool:
            _wrong_type("header", "first-acquirer", "boolean", v)
        obj.first_acquirer = v
        v = f[4]
        if v is not None and type(v) is not UInt:
            _wrong_type("header", "delivery-count", "uint", v)
        obj.delivery_count = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Header):
            return NotImplemented
        return bool(
            self.durable == other.durable
            and self.priority == other.priority
            and self.ttl == other.ttl
            and self.first_acquirer == other.first_acquirer
            and self.delivery_count == other.delivery_count
        )

    def __repr__(self) -> str:
        return (
            f"Header(durable={self.durable!r}, priority={self.priority!r}, ttl={self.ttl!r}, "
            f"first_acquirer={self.first_acquirer!r}, delivery_count={self.delivery_count!r})"
        )


register_composite(0x00000070, "amqp:header:list", Header._amqp_decode, data=True)


_DELIVERY_ANNOTATIONS_PREFIX = b"\x00\x53\x71"  # descriptor constructor, smallulong 0x71


class DeliveryAnnotations:
    """delivery-annotations (amqp:delivery-annotations:map, 0x00000000:0x00000071): Annotations for the
    receiving node only, not kept with the message.

    Restricted type over annotations with a descriptor; provides: section.
    """

    __slots__ = ("value",)
    __match_args__ = ("value",)

    SPEC_NAME: ClassVar[str] = "delivery-annotations"
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000071
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:delivery-annotations:map")

    value: dict[Any, Any]  # annotations

    def __init__(self, value: dict[Any, Any]) -> None:
        self.value = value

    def _amqp_encode(self, out: bytearray) -> None:
        out += _DELIVERY_ANNOTATIONS_PREFIX
        encode_map(out, self.value)

    @classmethod
    def _amqp_decode(cls, value: Any) -> DeliveryAnnotations:
        if not isinstance(value, dict):
            raise DecodeError(f"delivery-annotations: expected map, got {type(value).__name__}", 0)
        obj = cls.__new__(cls)
        obj.value = value
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeliveryAnnotations):
            return NotImplemented
        return bool(self.value == other.value)

    def __repr__(self) -> str:
        return f"DeliveryAnnotations({self.value!r})"


register_composite(0x00000071, "amqp:delivery-annotations:map", DeliveryAnnotations._amqp_decode, data=True)


_MESSAGE_ANNOTATIONS_PREFIX = b"\x00\x53\x72"  # descriptor constructor, smallulong 0x72


class MessageAnnotations:
    """message-annotations (amqp:message-annotations:map, 0x00000000:0x00000072): Annotations that travel with
    the message to intermediaries and consumers.

    Restricted type over annotations with a descriptor; provides: section.
    """

    __slots__ = ("value",)
    __match_args__ = ("value",)

    SPEC_NAME: ClassVar[str] = "message-annotations"
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000072
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:message-annotations:map")

    value: dict[Any, Any]  # annotations

    def __init__(self, value: dict[Any, Any]) -> None:
        self.value = value

    def _amqp_encode(self, out: bytearray) -> None:
        out += _MESSAGE_ANNOTATIONS_PREFIX
        encode_map(out, self.value)

    @classmethod
    def _amqp_decode(cls, value: Any) -> MessageAnnotations:
        if not isinstance(value, dict):
            raise DecodeError(f"message-annotations: expected map, got {type(value).__name__}", 0)
        obj = cls.__new__(cls)
        obj.value = value
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageAnnotations):
            return NotImplemented
        return bool(self.value == other.value)

    def __repr__(self) -> str:
        return f"MessageAnnotations({self.value!r})"


register_composite(0x00000072, "amqp:message-annotations:map", MessageAnnotations._amqp_decode, data=True)


_PROPERTIES_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # message_id
    encode_binary,  # user_id
    encode_value,  # to
    encode_string,  # subject
    encode_value,  # reply_to
    encode_value,  # correlation_id
    encode_symbol,  # content_type
    encode_symbol,  # content_encoding
    encode_timestamp,  # absolute_expiry_time
    encode_timestamp,  # creation_time
    encode_string,  # group_id
    encode_uint,  # group_sequence
    encode_string,  # reply_to_group_id
)
_PROPERTIES_DEFAULTS: tuple[Any, ...] = (
    None, None, None, None, None, None, None, None, None, None, None, None, None,
)


class Properties:
    """properties (amqp:properties:list, 0x00000000:0x00000073): The immutable standard properties of a
    message (ids, addresses, content type, grouping).

    Composite (list); provides: section.
    """

    __slots__ = (
        "absolute_expiry_time", "content_encoding", "content_type", "correlation_id", "creation_time",
        "group_id", "group_sequence", "message_id", "reply_to", "reply_to_group_id", "subject", "to",
        "user_id",
    )
    __match_args__ = (
        "message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
        "content_encoding", "absolute_expiry_time", "creation_time", "group_id", "group_sequence",
        "reply_to_group_id",
    )

    SPEC_NAME: ClassVar[str] = "properties"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = (
        "message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
        "content-encoding", "absolute-expiry-time", "creation-time", "group-id", "group-sequence",
        "reply-to-group-id",
    )
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000073
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:properties:list")

    message_id: Any  # *, requires message-id
    user_id: bytes | None  # binary
    to: Any  # *, requires address
    subject: str | None  # string
    reply_to: Any  # *, requires address
    correlation_id: Any  # *, requires message-id
    content_type: Symbol | None  # symbol
    content_encoding: Symbol | None  # symbol
    absolute_expiry_time: int | None  # timestamp
    creation_time: int | None  # timestamp
    group_id: str | None  # string
    group_sequence: int | None  # sequence-no
    reply_to_group_id: str | None  # string

    def __init__(
        self,
        message_id: Any = None,
        user_id: bytes | None = None,
        to: Any = None,
        subject: str | None = None,
        reply_to: Any = None,
        correlation_id: Any = None,
        content_type: Symbol | None = None,
        content_encoding: Symbol | None = None,
        absolute_expiry_time: int | None = None,
        creation_time: int | None = None,
        group_id: str | None = None,
        group_sequence: int | None = None,
        reply_to_group_id: str | None = None,
    ) -> None:
        self.message_id = message_id
        self.user_id = user_id
        self.to = to
        self.subject = subject
        self.reply_to = reply_to
        self.correlation_id = correlation_id
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.absolute_expiry_time = absolute_expiry_time
        self.creation_time = creation_time
        self.group_id = group_id
        self.group_sequence = group_sequence
        self.reply_to_group_id = reply_to_group_id

    def _amqp_encode(self, out: bytearray) -> None:
        values = (
            self.message_id, self.user_id, self.to, self.subject, self.reply_to, self.correlation_id,
            self.content_type, self.content_encoding, self.absolute_expiry_time, self.creation_time,
            self.group_id, self.group_sequence, self.reply_to_group_id,
        )
        encode_composite(out, 0x00000073, values, _PROPERTIES_ENCODERS, _PROPERTIES_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Properties:
        if not isinstance(fields, list):
            raise DecodeError(f"properties: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 13 else fields + [None] * (13 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        obj.message_id = v
        v = f[1]
        if v is not None and type(v) is not bytes:
            _wrong_type("properties", "user-id", "binary", v)
        obj.user_id = v
        v = f[2]
        obj.to = v
        v = f[3]
        if v is not None and type(v) is not str:
            _wrong_type("properties", "subject", "string", v)
        obj.subject = v
        v = f[4]
        obj.reply_to = v
        v = f[5]
        obj.correlation_id = v
        v = f[6]
        if v is not None and type(v) is not Symbol:
            _wrong_type("properties", "content-type", "symbol", v)
        obj.content_type = v
        v = f[7]
        if v is not None and type(v) is not Symbol:
            _wrong_type("properties", "content-encoding", "symbol", v)
        obj.content_encoding = v
        v = f[8]
        if v is not None and type(v) is not Timestamp:
            _wrong_type("properties", "absolute-expiry-time", "timestamp", v)
        obj.absolute_expiry_time = v
        v = f[9]
        if v is not None and type(v) is not Timestamp:
            _wrong_type("properties", "creation-time", "timestamp", v)
        obj.creation_time = v
        v = f[10]
        if v is not None and type(v) is not str:
            _wrong_type("properties", "group-id", "string", v)
        obj.group_id = v
        v = f[11]
        if v is not None and type(v) is not UInt:
            _wrong_type("properties", "group-sequence", "uint", v)
        obj.group_sequence = v
        v = f[12]
        if v is not None and type(v) is not str:
            _wrong_type("properties", "reply-to-group-id", "string", v)
        obj.reply_to_group_id = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Properties):
            return NotImplemented
        return bool(
            self.message_id == other.message_id
            and self.user_id == other.user_id
            and self.to == other.to
            and self.subject == other.subject
            and self.reply_to == other.reply_to
            and self.correlation_id == other.correlation_id
            and self.content_type == other.content_type
            and self.content_encoding == other.content_encoding
            and self.absolute_expiry_time == other.absolute_expiry_time
            and self.creation_time == other.creation_time
            and self.group_id == other.group_id
            and self.group_sequence == other.group_sequence
            and self.reply_to_group_id == other.reply_to_group_id
        )

    def __repr__(self) -> str:
        return (
            f"Properties(message_id={self.message_id!r}, user_id={self.user_id!r}, to={self.to!r}, "
            f"subject={self.subject!r}, reply_to={self.reply_to!r}, correlation_id={self.correlation_id!r}, "
            f"content_type={self.content_type!r}, content_encoding={self.content_encoding!r}, "
            f"absolute_expiry_time={self.absolute_expiry_time!r}, creation_time={self.creation_time!r}, "
            f"group_id={self.group_id!r}, group_sequence={self.group_sequence!r}, "
            f"reply_to_group_id={self.reply_to_group_id!r})"
        )


register_composite(0x00000073, "amqp:properties:list", Properties._amqp_decode, data=True)


_APPLICATION_PROPERTIES_PREFIX = b"\x00\x53\x74"  # descriptor constructor, smallulong 0x74


class ApplicationProperties:
    """application-properties (amqp:application-properties:map, 0x00000000:0x00000074): Application-defined
    properties of a message with simple-typed values.

    Restricted type over map with a descriptor; provides: section.
    """

    __slots__ = ("value",)
    __match_args__ = ("value",)

    SPEC_NAME: ClassVar[str] = "application-properties"
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000074
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:application-properties:map")

    value: dict[Any, Any]  # map

    def __init__(self, value: dict[Any, Any]) -> None:
        self.value = value

    def _amqp_encode(self, out: bytearray) -> None:
        out += _APPLICATION_PROPERTIES_PREFIX
        encode_map(out, self.value)

    @classmethod
    def _amqp_decode(cls, value: Any) -> ApplicationProperties:
        if not isinstance(value, dict):
            raise DecodeError(f"application-properties: expected map, got {type(value).__name__}", 0)
        obj = cls.__new__(cls)
        obj.value = value
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApplicationProperties):
            return NotImplemented
        return bool(self.value == other.value)

    def __repr__(self) -> str:
        return f"ApplicationProperties({self.value!r})"


register_composite(
    0x00000074, "amqp:application-properties:map", ApplicationProperties._amqp_decode, data=True
)


_DATA_PREFIX = b"\x00\x53\x75"  # descriptor constructor, smallulong 0x75


class Data:
    """data (amqp:data:binary, 0x00000000:0x00000075): A message body section holding opaque binary data.

    Restricted type over binary with a descriptor; provides: section.
    """

    __slots__ = ("value",)
    __match_args__ = ("value",)

    SPEC_NAME: ClassVar[str] = "data"
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000075
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:data:binary")

    value: bytes  # binary

    def __init__(self, value: bytes) -> None:
        self.value = value

    def _amqp_encode(self, out: bytearray) -> None:
        out += _DATA_PREFIX
        encode_binary(out, self.value)

    @classmethod
    def _amqp_decode(cls, value: Any) -> Data:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DecodeError(f"data: expected binary, got {type(value).__name__}", 0)
        obj = cls.__new__(cls)
        obj.value = bytes(value)
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Data):
            return NotImplemented
        return bool(self.value == other.value)

    def __repr__(self) -> str:
        return f"Data({self.value!r})"


register_composite(0x00000075, "amqp:data:binary", Data._amqp_decode, data=True)


_AMQP_SEQUENCE_PREFIX = b"\x00\x53\x76"  # descriptor constructor, smallulong 0x76


class AmqpSequence:
    """amqp-sequence (amqp:amqp-sequence:list, 0x00000000:0x00000076): A message body section holding a list
    of AMQP values.

    Restricted type over list with a descriptor; provides: section.
    """

    __slots__ = ("value",)
    __match_args__ = ("value",)

    SPEC_NAME: ClassVar[str] = "amqp-sequence"
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000076
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:amqp-sequence:list")

    value: list[Any]  # list

    def __init__(self, value: list[Any]) -> None:
        self.value = value

    def _amqp_encode(self, out: bytearray) -> None:
        out += _AMQP_SEQUENCE_PREFIX
        encode_list(out, self.value)

    @classmethod
    def _amqp_decode(cls, value: Any) -> AmqpSequence:
        if not isinstance(value, list):
            raise DecodeError(f"amqp-sequence: expected list, got {type(value).__name__}", 0)
        obj = cls.__new__(cls)
        obj.value = value
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AmqpSequence):
            return NotImplemented
        return bool(self.value == other.value)

    def __repr__(self) -> str:
        return f"AmqpSequence({self.value!r})"


register_composite(0x00000076, "amqp:amqp-sequence:list", AmqpSequence._amqp_decode, data=True)


_AMQP_VALUE_PREFIX = b"\x00\x53\x77"  # descriptor constructor, smallulong 0x77


class AmqpValue:
    """amqp-value (amqp:amqp-value:*, 0x00000000:0x00000077): A message body section holding exactly one AMQP
    value.

    Restricted type over * with a descriptor; provides: section.
    """

    __slots__ = ("value",)
    __match_args__ = ("value",)

    SPEC_NAME: ClassVar[str] = "amqp-value"
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000077
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:amqp-value:*")

    value: Any  # *

    def __init__(self, value: Any) -> None:
        self.value = value

    def _amqp_encode(self, out: bytearray) -> None:
        out += _AMQP_VALUE_PREFIX
        encode_value(out, self.value)

    @classmethod
    def _amqp_decode(cls, value: Any) -> AmqpValue:
        obj = cls.__new__(cls)
        obj.value = value
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AmqpValue):
            return NotImplemented
        return bool(self.value == other.value)

    def __repr__(self) -> str:
        return f"AmqpValue({self.value!r})"


register_composite(0x00000077, "amqp:amqp-value:*", AmqpValue._amqp_decode, data=True)


_FOOTER_PREFIX = b"\x00\x53\x78"  # descriptor constructor, smallulong 0x78


class Footer:
    """footer (amqp:footer:map, 0x00000000:0x00000078): Annotations computed after the body, e.g. hashes or
    signatures.

    Restricted type over annotations with a descriptor; provides: section.
    """

    __slots__ = ("value",)
    __match_args__ = ("value",)

    SPEC_NAME: ClassVar[str] = "footer"
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000078
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:footer:map")

    value: dict[Any, Any]  # annotations

    def __init__(self, value: dict[Any, Any]) -> None:
        self.value = value

    def _amqp_encode(self, out: bytearray) -> None:
        out += _FOOTER_PREFIX
        encode_map(out, self.value)

    @classmethod
    def _amqp_decode(cls, value: Any) -> Footer:
        if not isinstance(value, dict):
            raise DecodeError(f"footer: expected map, got {type(value).__name__}", 0)
        obj = cls.__new__(cls)
        obj.value = value
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Footer):
            return NotImplemented
        return bool(self.value == other.value)

    def __repr__(self) -> str:
        return f"Footer({self.value!r})"


register_composite(0x00000078, "amqp:footer:map", Footer._amqp_decode, data=True)


_RECEIVED_ENCODERS: tuple[_Encoder, ...] = (
    encode_uint,  # section_number
    encode_ulong,  # section_offset
)
_RECEIVED_DEFAULTS: tuple[Any, ...] = (None, None)


class Received:
    """received (amqp:received:list, 0x00000000:0x00000023): Non-terminal state: how far into the message
    (section and offset) has arrived.

    Composite (list); provides: delivery-state.
    """

    __slots__ = ("section_number", "section_offset")
    __match_args__ = ("section_number", "section_offset")

    SPEC_NAME: ClassVar[str] = "received"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("section-number", "section-offset")
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000023
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:received:list")

    section_number: int  # uint, mandatory
    section_offset: int  # ulong, mandatory

    def __init__(
        self,
        section_number: int,
        section_offset: int,
    ) -> None:
        if section_number is None:
            raise TypeError("received: mandatory field 'section-number' must not be None")
        if section_offset is None:
            raise TypeError("received: mandatory field 'section-offset' must not be None")
        self.section_number = section_number
        self.section_offset = section_offset

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.section_number, self.section_offset)
        encode_composite(out, 0x00000023, values, _RECEIVED_ENCODERS, _RECEIVED_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Received:
        if not isinstance(fields, list):
            raise DecodeError(f"received: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 2 else fields + [None] * (2 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("received: mandatory field 'section-number' is missing", 0)
        if type(v) is not UInt:
            _wrong_type("received", "section-number", "uint", v)
        obj.section_number = v
        v = f[1]
        if v is None:
            raise DecodeError("received: mandatory field 'section-offset' is missing", 0)
        if type(v) is not ULong:
            _wrong_type("received", "section-offset", "ulong", v)
        obj.section_offset = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Received):
            return NotImplemented
        return bool(
            self.section_number == other.section_number
            and self.section_offset == other.section_offset
        )

    def __repr__(self) -> str:
        return f"Received(section_number={self.section_number!r}, section_offset={self.section_offset!r})"


register_composite(0x00000023, "amqp:received:list", Received._amqp_decode)


class Accepted:
    """accepted (amqp:accepted:list, 0x00000000:0x00000024): Terminal outcome: the message was processed
    successfully.

    Composite (list); provides: delivery-state, outcome.
    """

    __slots__ = ()
    __match_args__ = ()

    SPEC_NAME: ClassVar[str] = "accepted"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ()
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000024
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:accepted:list")

    def __init__(self) -> None:
        pass

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000024, (), (), ())

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Accepted:
        if not isinstance(fields, list):
            raise DecodeError(f"accepted: expected a list of fields, got {type(fields).__name__}", 0)
        return cls()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Accepted):
            return NotImplemented
        return True

    def __repr__(self) -> str:
        return "Accepted()"


register_composite(0x00000024, "amqp:accepted:list", Accepted._amqp_decode)


_REJECTED_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # error
)
_REJECTED_DEFAULTS: tuple[Any, ...] = (None,)


class Rejected:
    """rejected (amqp:rejected:list, 0x00000000:0x00000025): Terminal outcome: the message is invalid and
    cannot be processed.

    Composite (list); provides: delivery-state, outcome.
    """

    __slots__ = ("error",)
    __match_args__ = ("error",)

    SPEC_NAME: ClassVar[str] = "rejected"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("error",)
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000025
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:rejected:list")

    error: Error | None  # error

    def __init__(
        self,
        error: Error | None = None,
    ) -> None:
        self.error = error

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000025, (self.error,), _REJECTED_ENCODERS, _REJECTED_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Rejected:
        if not isinstance(fields, list):
            raise DecodeError(f"rejected: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 1 else fields + [None] * (1 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is not None and not isinstance(v, Error):
            _wrong_type("rejected", "error", "error", v)
        obj.error = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Rejected):
            return NotImplemented
        return bool(self.error == other.error)

    def __repr__(self) -> str:
        return f"Rejected(error={self.error!r})"


register_composite(0x00000025, "amqp:rejected:list", Rejected._amqp_decode)


class Released:
    """released (amqp:released:list, 0x00000000:0x00000026): Terminal outcome: the message was not processed
    and may be redelivered.

    Composite (list); provides: delivery-state, outcome.
    """

    __slots__ = ()
    __match_args__ = ()

    SPEC_NAME: ClassVar[str] = "released"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ()
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000026
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:released:list")

    def __init__(self) -> None:
        pass

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000026, (), (), ())

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Released:
        if not isinstance(fields, list):
            raise DecodeError(f"released: expected a list of fields, got {type(fields).__name__}", 0)
        return cls()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Released):
            return NotImplemented
        return True

    def __repr__(self) -> str:
        return "Released()"


register_composite(0x00000026, "amqp:released:list", Released._amqp_decode)


_MODIFIED_ENCODERS: tuple[_Encoder, ...] = (
    encode_boolean,  # delivery_failed
    encode_boolean,  # undeliverable_here
    encode_map,  # message_annotations
)
_MODIFIED_DEFAULTS: tuple[Any, ...] = (None, None, None)


class Modified:
    """modified (amqp:modified:list, 0x00000000:0x00000027): Terminal outcome: the message was not processed
    and its annotations are changed.

    Composite (list); provides: delivery-state, outcome.
    """

    __slots__ = ("delivery_failed", "message_annotations", "undeliverable_here")
    __match_args__ = ("delivery_failed", "undeliverable_here", "message_annotations")

    SPEC_NAME: ClassVar[str] = "modified"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("delivery-failed", "undeliverable-here", "message-annotations")
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000027
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:modified:list")

    delivery_failed: bool | None  # boolean
    undeliverable_here: bool | None  # boolean
    message_annotations: dict[Any, Any] | None  # fields

    def __init__(
        self,
        delivery_failed: bool | None = None,
        undeliverable_here: bool | None = None,
        message_annotations: dict[Any, Any] | None = None,
    ) -> None:
        self.delivery_failed = delivery_failed
        self.undeliverable_here = undeliverable_here
        self.message_annotations = message_annotations

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.delivery_failed, self.undeliverable_here, self.message_annotations)
        encode_composite(out, 0x00000027, values, _MODIFIED_ENCODERS, _MODIFIED_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Modified:
        if not isinstance(fields, list):
            raise DecodeError(f"modified: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 3 else fields + [None] * (3 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is not None and type(v) is not bool:
            _wrong_type("modified", "delivery-failed", "boolean", v)
        obj.delivery_failed = v
        v = f[1]
        if v is not None and type(v) is not bool:
            _wrong_type("modified", "undeliverable-here", "boolean", v)
        obj.undeliverable_here = v
        v = f[2]
        if v is not None and type(v) is not dict:
            _wrong_type("modified", "message-annotations", "map", v)
        obj.message_annotations = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Modified):
            return NotImplemented
        return bool(
            self.delivery_failed == other.delivery_failed
            and self.undeliverable_here == other.undeliverable_here
            and self.message_annotations == other.message_annotations
        )

    def __repr__(self) -> str:
        return (
            f"Modified(delivery_failed={self.delivery_failed!r}, "
            f"undeliverable_here={self.undeliverable_here!r}, "
            f"message_annotations={self.message_annotations!r})"
        )


register_composite(0x00000027, "amqp:modified:list", Modified._amqp_decode)


_SOURCE_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # address
    encode_uint,  # durable
    encode_symbol,  # expiry_policy
    encode_uint,  # timeout
    encode_boolean,  # dynamic
    encode_map,  # dynamic_node_properties
    encode_symbol,  # distribution_mode
    encode_map,  # filter
    encode_value,  # default_outcome
    _encode_symbol_multiple,  # outcomes
    _encode_symbol_multiple,  # capabilities
)
_SOURCE_DEFAULTS: tuple[Any, ...] = (
    None, TerminusDurability.NONE, TerminusExpiryPolicy.SESSION_END, 0, False, None, None, None, None, None,
    None,
)


class Source:
    """source (amqp:source:list, 0x00000000:0x00000028): The source terminus of a link: the node messages come
    from.

    Composite (list); provides: source.
    """

    __slots__ = (
        "address", "capabilities", "default_outcome", "distribution_mode", "durable", "dynamic",
        "dynamic_node_properties", "expiry_policy", "filter", "outcomes", "timeout",
    )
    __match_args__ = (
        "address", "durable", "expiry_policy", "timeout", "dynamic", "dynamic_node_properties",
        "distribution_mode", "filter", "default_outcome", "outcomes", "capabilities",
    )

    SPEC_NAME: ClassVar[str] = "source"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = (
        "address", "durable", "expiry-policy", "timeout", "dynamic", "dynamic-node-properties",
        "distribution-mode", "filter", "default-outcome", "outcomes", "capabilities",
    )
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000028
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:source:list")

    address: Any  # *, requires address
    durable: int  # terminus-durability, default none
    expiry_policy: Symbol  # terminus-expiry-policy, default session-end
    timeout: int  # seconds, default 0
    dynamic: bool  # boolean, default false
    dynamic_node_properties: dict[Any, Any] | None  # node-properties
    distribution_mode: Symbol | None  # symbol, requires distribution-mode
    filter: dict[Any, Any] | None  # filter-set
    default_outcome: Any  # *, requires outcome
    outcomes: list[Symbol] | None  # symbol, multiple
    capabilities: list[Symbol] | None  # symbol, multiple

    def __init__(
        self,
        address: Any = None,
        durable: int = TerminusDurability.NONE,
        expiry_policy: Symbol = TerminusExpiryPolicy.SESSION_END,
        timeout: int = 0,
        dynamic: bool = False,
        dynamic_node_properties: dict[Any, Any] | None = None,
        distribution_mode: Symbol | None = None,
        filter: dict[Any, Any] | None = None,
        default_outcome: Any = None,
        outcomes: list[Symbol] | None = None,
        capabilities: list[Symbol] | None = None,
    ) -> None:
        self.address = address
        self.durable = durable
        self.expiry_policy = expiry_policy
        self.timeout = timeout
        self.dynamic = dynamic
        self.dynamic_node_properties = dynamic_node_properties
        self.distribution_mode = distribution_mode
        self.filter = filter
        self.default_outcome = default_outcome
        self.outcomes = outcomes
        self.capabilities = capabilities

    def _amqp_encode(self, out: bytearray) -> None:
        values = (
            self.address, self.durable, self.expiry_policy, self.timeout, self.dynamic,
            self.dynamic_node_properties, self.distribution_mode, self.filter, self.default_outcome,
            self.outcomes, self.capabilities,
        )
        encode_composite(out, 0x00000028, values, _SOURCE_ENCODERS, _SOURCE_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Source:
        if not isinstance(fields, list):
            raise DecodeError(f"source: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 11 else fields + [None] * (11 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        obj.address = v
        v = f[1]
        if v is None:
            v = TerminusDurability.NONE
        elif type(v) is not UInt:
            _wrong_type("source", "durable", "uint", v)
        obj.durable = v
        v = f[2]
        if v is None:
            v = TerminusExpiryPolicy.SESSION_END
        elif type(v) is not Symbol:
            _wrong_type("source", "expiry-policy", "symbol", v)
        obj.expiry_policy = v
        v = f[3]
        if v is None:
            v = 0
        elif type(v) is not UInt:
            _wrong_type("source", "timeout", "uint", v)
        obj.timeout = v
        v = f[4]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("source", "dynamic", "boolean", v)
        obj.dynamic = v
        v = f[5]
        if v is not None and type(v) is not dict:
            _wrong_type("source", "dynamic-node-properties", "map", v)
        obj.dynamic_node_properties = v
        v = f[6]
        if v is not None and type(v) is not Symbol:
            _wrong_type("source", "distribution-mode", "symbol", v)
        obj.distribution_mode = v
        v = f[7]
        if v is not None and type(v) is not dict:
            _wrong_type("source", "filter", "map", v)
        obj.filter = v
        v = f[8]
        obj.default_outcome = v
        v = f[9]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("source", "outcomes", "symbol", e)
        obj.outcomes = v
        v = f[10]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("source", "capabilities", "symbol", e)
        obj.capabilities = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Source):
            return NotImplemented
        return bool(
            self.address == other.address
            and self.durable == other.durable
            and self.expiry_policy == other.expiry_policy
            and self.timeout == other.timeout
            and self.dynamic == other.dynamic
            and self.dynamic_node_properties == other.dynamic_node_properties
            and self.distribution_mode == other.distribution_mode
            and self.filter == other.filter
            and self.default_outcome == other.default_outcome
            and self.outcomes == other.outcomes
            and self.capabilities == other.capabilities
        )

    def __repr__(self) -> str:
        return (
            f"Source(address={self.address!r}, durable={self.durable!r}, "
            f"expiry_policy={self.expiry_policy!r}, timeout={self.timeout!r}, dynamic={self.dynamic!r}, "
            f"dynamic_node_properties={self.dynamic_node_properties!r}, "
            f"distribution_mode={self.distribution_mode!r}, filter={self.filter!r}, "
            f"default_outcome={self.default_outcome!r}, outcomes={self.outcomes!r}, "
            f"capabilities={self.capabilities!r})"
        )


register_composite(0x00000028, "amqp:source:list", Source._amqp_decode)


_TARGET_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # address
    encode_uint,  # durable
    encode_symbol,  # expiry_policy
    encode_uint,  # timeout
    encode_boolean,  # dynamic
    encode_map,  # dynamic_node_properties
    _encode_symbol_multiple,  # capabilities
)
_TARGET_DEFAULTS: tuple[Any, ...] = (
    None, TerminusDurability.NONE, TerminusExpiryPolicy.SESSION_END, 0, False, None, None,
)


class Target:
    """target (amqp:target:list, 0x00000000:0x00000029): The target terminus of a link: the node messages go
    to.

    Composite (list); provides: target.
    """

    __slots__ = (
        "address", "capabilities", "durable", "dynamic", "dynamic_node_properties", "expiry_policy",
        "timeout",
    )
    __match_args__ = (
        "address", "durable", "expiry_policy", "timeout", "dynamic", "dynamic_node_properties",
        "capabilities",
    )

    SPEC_NAME: ClassVar[str] = "target"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = (
        "address", "durable", "expiry-policy", "timeout", "dynamic", "dynamic-node-properties",
        "capabilities",
    )
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000029
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:target:list")

    address: Any  # *, requires address
    durable: int  # terminus-durability, default none
    expiry_policy: Symbol  # terminus-expiry-policy, default session-end
    timeout: int  # seconds, default 0
    dynamic: bool  # boolean, default false
    dynamic_node_properties: dict[Any, Any] | None  # node-properties
    capabilities: list[Symbol] | None  # symbol, multiple

    def __init__(
        self,
        address: Any = None,
        durable: int = TerminusDurability.NONE,
        expiry_policy: Symbol = TerminusExpiryPolicy.SESSION_END,
        timeout: int = 0,
        dynamic: bool = False,
        dynamic_node_properties: dict[Any, Any] | None = None,
        capabilities: list[Symbol] | None = None,
    ) -> None:
        self.address = address
        self.durable = durable
        self.expiry_policy = expiry_policy
        self.timeout = timeout
        self.dynamic = dynamic
        self.dynamic_node_properties = dynamic_node_properties
        self.capabilities = capabilities

    def _amqp_encode(self, out: bytearray) -> None:
        values = (
            self.address, self.durable, self.expiry_policy, self.timeout, self.dynamic,
            self.dynamic_node_properties, self.capabilities,
        )
        encode_composite(out, 0x00000029, values, _TARGET_ENCODERS, _TARGET_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Target:
        if not isinstance(fields, list):
            raise DecodeError(f"target: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 7 else fields + [None] * (7 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        obj.address = v
        v = f[1]
        if v is None:
            v = TerminusDurability.NONE
        elif type(v) is not UInt:
            _wrong_type("target", "durable", "uint", v)
        obj.durable = v
        v = f[2]
        if v is None:
            v = TerminusExpiryPolicy.SESSION_END
        elif type(v) is not Symbol:
            _wrong_type("target", "expiry-policy", "symbol", v)
        obj.expiry_policy = v
        v = f[3]
        if v is None:
            v = 0
        elif type(v) is not UInt:
            _wrong_type("target", "timeout", "uint", v)
        obj.timeout = v
        v = f[4]
        if v is None:
            v = False
        elif type(v) is not bool:
            _wrong_type("target", "dynamic", "boolean", v)
        obj.dynamic = v
        v = f[5]
        if v is not None and type(v) is not dict:
            _wrong_type("target", "dynamic-node-properties", "map", v)
        obj.dynamic_node_properties = v
        v = f[6]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("target", "capabilities", "symbol", e)
        obj.capabilities = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return bool(
            self.address == other.address
            and self.durable == other.durable
            and self.expiry_policy == other.expiry_policy
            and self.timeout == other.timeout
            and self.dynamic == other.dynamic
            and self.dynamic_node_properties == other.dynamic_node_properties
            and self.capabilities == other.capabilities
        )

    def __repr__(self) -> str:
        return (
            f"Target(address={self.address!r}, durable={self.durable!r}, "
            f"expiry_policy={self.expiry_policy!r}, timeout={self.timeout!r}, dynamic={self.dynamic!r}, "
            f"dynamic_node_properties={self.dynamic_node_properties!r}, capabilities={self.capabilities!r})"
        )


register_composite(0x00000029, "amqp:target:list", Target._amqp_decode)


class DeleteOnClose:
    """delete-on-close (amqp:delete-on-close:list, 0x00000000:0x0000002b): Lifetime policy: delete the node
    when the creating link closes.

    Composite (list); provides: lifetime-policy.
    """

    __slots__ = ()
    __match_args__ = ()

    SPEC_NAME: ClassVar[str] = "delete-on-close"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ()
    DESCRIPTOR_CODE: ClassVar[int] = 0x0000002b
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:delete-on-close:list")

    def __init__(self) -> None:
        pass

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x0000002b, (), (), ())

    @classmethod
    def _amqp_decode(cls, fields: Any) -> DeleteOnClose:
        if not isinstance(fields, list):
            raise DecodeError(f"delete-on-close: expected a list of fields, got {type(fields).__name__}", 0)
        return cls()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeleteOnClose):
            return NotImplemented
        return True

    def __repr__(self) -> str:
        return "DeleteOnClose()"


register_composite(0x0000002b, "amqp:delete-on-close:list", DeleteOnClose._amqp_decode)


class DeleteOnNoLinks:
    """delete-on-no-links (amqp:delete-on-no-links:list, 0x00000000:0x0000002c): Lifetime policy: delete the
    node when no links remain attached.

    Composite (list); provides: lifetime-policy.
    """

    __slots__ = ()
    __match_args__ = ()

    SPEC_NAME: ClassVar[str] = "delete-on-no-links"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ()
    DESCRIPTOR_CODE: ClassVar[int] = 0x0000002c
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:delete-on-no-links:list")

    def __init__(self) -> None:
        pass

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x0000002c, (), (), ())

    @classmethod
    def _amqp_decode(cls, fields: Any) -> DeleteOnNoLinks:
        if not isinstance(fields, list):
            raise DecodeError(
                f"delete-on-no-links: expected a list of fields, got {type(fields).__name__}", 0
            )
        return cls()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeleteOnNoLinks):
            return NotImplemented
        return True

    def __repr__(self) -> str:
        return "DeleteOnNoLinks()"


register_composite(0x0000002c, "amqp:delete-on-no-links:list", DeleteOnNoLinks._amqp_decode)


class DeleteOnNoMessages:
    """delete-on-no-messages (amqp:delete-on-no-messages:list, 0x00000000:0x0000002d): Lifetime policy: delete
    the node when it holds no messages.

    Composite (list); provides: lifetime-policy.
    """

    __slots__ = ()
    __match_args__ = ()

    SPEC_NAME: ClassVar[str] = "delete-on-no-messages"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ()
    DESCRIPTOR_CODE: ClassVar[int] = 0x0000002d
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:delete-on-no-messages:list")

    def __init__(self) -> None:
        pass

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x0000002d, (), (), ())

    @classmethod
    def _amqp_decode(cls, fields: Any) -> DeleteOnNoMessages:
        if not isinstance(fields, list):
            raise DecodeError(
                f"delete-on-no-messages: expected a list of fields, got {type(fields).__name__}", 0
            )
        return cls()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeleteOnNoMessages):
            return NotImplemented
        return True

    def __repr__(self) -> str:
        return "DeleteOnNoMessages()"


register_composite(0x0000002d, "amqp:delete-on-no-messages:list", DeleteOnNoMessages._amqp_decode)


class DeleteOnNoLinksOrMessages:
    """delete-on-no-links-or-messages (amqp:delete-on-no-links-or-messages:list, 0x00000000:0x0000002e):
    Lifetime policy: delete the node when it has no links and no messages.

    Composite (list); provides: lifetime-policy.
    """

    __slots__ = ()
    __match_args__ = ()

    SPEC_NAME: ClassVar[str] = "delete-on-no-links-or-messages"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ()
    DESCRIPTOR_CODE: ClassVar[int] = 0x0000002e
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:delete-on-no-links-or-messages:list")

    def __init__(self) -> None:
        pass

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x0000002e, (), (), ())

    @classmethod
    def _amqp_decode(cls, fields: Any) -> DeleteOnNoLinksOrMessages:
        if not isinstance(fields, list):
            raise DecodeError(
                f"delete-on-no-links-or-messages: expected a list of fields, got {type(fields).__name__}", 0
            )
        return cls()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeleteOnNoLinksOrMessages):
            return NotImplemented
        return True

    def __repr__(self) -> str:
        return "DeleteOnNoLinksOrMessages()"


register_composite(
    0x0000002e, "amqp:delete-on-no-links-or-messages:list", DeleteOnNoLinksOrMessages._amqp_decode
)


_SASL_MECHANISMS_ENCODERS: tuple[_Encoder, ...] = (
    _encode_symbol_multiple,  # sasl_server_mechanisms
)
_SASL_MECHANISMS_DEFAULTS: tuple[Any, ...] = (None,)


class SaslMechanisms:
    """sasl-mechanisms (amqp:sasl-mechanisms:list, 0x00000000:0x00000040): Server's list of the SASL
    mechanisms it supports.

    Composite (list); provides: sasl-frame.
    """

    __slots__ = ("sasl_server_mechanisms",)
    __match_args__ = ("sasl_server_mechanisms",)

    SPEC_NAME: ClassVar[str] = "sasl-mechanisms"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("sasl-server-mechanisms",)
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000040
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:sasl-mechanisms:list")

    sasl_server_mechanisms: list[Symbol]  # symbol, multiple, mandatory

    def __init__(
        self,
        sasl_server_mechanisms: list[Symbol],
    ) -> None:
        if sasl_server_mechanisms is None:
            raise TypeError("sasl-mechanisms: mandatory field 'sasl-server-mechanisms' must not be None")
        self.sasl_server_mechanisms = sasl_server_mechanisms

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.sasl_server_mechanisms,)
        encode_composite(out, 0x00000040, values, _SASL_MECHANISMS_ENCODERS, _SASL_MECHANISMS_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> SaslMechanisms:
        if not isinstance(fields, list):
            raise DecodeError(f"sasl-mechanisms: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 1 else fields + [None] * (1 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("sasl-mechanisms: mandatory field 'sasl-server-mechanisms' is missing", 0)
        if not isinstance(v, list):
            v = [v]
        for e in v:
            if type(e) is not Symbol:
                _wrong_type("sasl-mechanisms", "sasl-server-mechanisms", "symbol", e)
        obj.sasl_server_mechanisms = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaslMechanisms):
            return NotImplemented
        return bool(self.sasl_server_mechanisms == other.sasl_server_mechanisms)

    def __repr__(self) -> str:
        return f"SaslMechanisms(sasl_server_mechanisms={self.sasl_server_mechanisms!r})"


register_composite(0x00000040, "amqp:sasl-mechanisms:list", SaslMechanisms._amqp_decode)


_SASL_INIT_ENCODERS: tuple[_Encoder, ...] = (
    encode_symbol,  # mechanism
    encode_binary,  # initial_response
    encode_string,  # hostname
)
_SASL_INIT_DEFAULTS: tuple[Any, ...] = (None, None, None)


class SaslInit:
    """sasl-init (amqp:sasl-init:list, 0x00000000:0x00000041): Client's chosen SASL mechanism with an optional
    first response.

    Composite (list); provides: sasl-frame.
    """

    __slots__ = ("hostname", "initial_response", "mechanism")
    __match_args__ = ("mechanism", "initial_response", "hostname")

    SPEC_NAME: ClassVar[str] = "sasl-init"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("mechanism", "initial-response", "hostname")
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000041
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:sasl-init:list")

    mechanism: Symbol  # symbol, mandatory
    initial_response: bytes | None  # binary
    hostname: str | None  # string

    def __init__(
        self,
        mechanism: Symbol,
        initial_response: bytes | None = None,
        hostname: str | None = None,
    ) -> None:
        if mechanism is None:
            raise TypeError("sasl-init: mandatory field 'mechanism' must not be None")
        self.mechanism = mechanism
        self.initial_response = initial_response
        self.hostname = hostname

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.mechanism, self.initial_response, self.hostname)
        encode_composite(out, 0x00000041, values, _SASL_INIT_ENCODERS, _SASL_INIT_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> SaslInit:
        if not isinstance(fields, list):
            raise DecodeError(f"sasl-init: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 3 else fields + [None] * (3 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("sasl-init: mandatory field 'mechanism' is missing", 0)
        if type(v) is not Symbol:
            _wrong_type("sasl-init", "mechanism", "symbol", v)
        obj.mechanism = v
        v = f[1]
        if v is not None and type(v) is not bytes:
            _wrong_type("sasl-init", "initial-response", "binary", v)
        obj.initial_response = v
        v = f[2]
        if v is not None and type(v) is not str:
            _wrong_type("sasl-init", "hostname", "string", v)
        obj.hostname = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaslInit):
            return NotImplemented
        return bool(
            self.mechanism == other.mechanism
            and self.initial_response == other.initial_response
            and self.hostname == other.hostname
        )

    def __repr__(self) -> str:
        return (
            f"SaslInit(mechanism={self.mechanism!r}, initial_response={_redacted(self.initial_response)}, "
            f"hostname={self.hostname!r})"
        )


register_composite(0x00000041, "amqp:sasl-init:list", SaslInit._amqp_decode)


_SASL_CHALLENGE_ENCODERS: tuple[_Encoder, ...] = (
    encode_binary,  # challenge
)
_SASL_CHALLENGE_DEFAULTS: tuple[Any, ...] = (None,)


class SaslChallenge:
    """sasl-challenge (amqp:sasl-challenge:list, 0x00000000:0x00000042): A security challenge from the server.

    Composite (list); provides: sasl-frame.
    """

    __slots__ = ("challenge",)
    __match_args__ = ("challenge",)

    SPEC_NAME: ClassVar[str] = "sasl-challenge"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("challenge",)
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000042
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:sasl-challenge:list")

    challenge: bytes  # binary, mandatory

    def __init__(
        self,
        challenge: bytes,
    ) -> None:
        if challenge is None:
            raise TypeError("sasl-challenge: mandatory field 'challenge' must not be None")
        self.challenge = challenge

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.challenge,)
        encode_composite(out, 0x00000042, values, _SASL_CHALLENGE_ENCODERS, _SASL_CHALLENGE_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> SaslChallenge:
        if not isinstance(fields, list):
            raise DecodeError(f"sasl-challenge: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 1 else fields + [None] * (1 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("sasl-challenge: mandatory field 'challenge' is missing", 0)
        if type(v) is not bytes:
            _wrong_type("sasl-challenge", "challenge", "binary", v)
        obj.challenge = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaslChallenge):
            return NotImplemented
        return bool(self.challenge == other.challenge)

    def __repr__(self) -> str:
        return f"SaslChallenge(challenge={self.challenge!r})"


register_composite(0x00000042, "amqp:sasl-challenge:list", SaslChallenge._amqp_decode)


_SASL_RESPONSE_ENCODERS: tuple[_Encoder, ...] = (
    encode_binary,  # response
)
_SASL_RESPONSE_DEFAULTS: tuple[Any, ...] = (None,)


class SaslResponse:
    """sasl-response (amqp:sasl-response:list, 0x00000000:0x00000043): The client's answer to a security
    challenge.

    Composite (list); provides: sasl-frame.
    """

    __slots__ = ("response",)
    __match_args__ = ("response",)

    SPEC_NAME: ClassVar[str] = "sasl-response"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("response",)
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000043
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:sasl-response:list")

    response: bytes  # binary, mandatory

    def __init__(
        self,
        response: bytes,
    ) -> None:
        if response is None:
            raise TypeError("sasl-response: mandatory field 'response' must not be None")
        self.response = response

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000043, (self.response,), _SASL_RESPONSE_ENCODERS, _SASL_RESPONSE_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> SaslResponse:
        if not isinstance(fields, list):
            raise DecodeError(f"sasl-response: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 1 else fields + [None] * (1 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("sasl-response: mandatory field 'response' is missing", 0)
        if type(v) is not bytes:
            _wrong_type("sasl-response", "response", "binary", v)
        obj.response = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaslResponse):
            return NotImplemented
        return bool(self.response == other.response)

    def __repr__(self) -> str:
        return f"SaslResponse(response={_redacted(self.response)})"


register_composite(0x00000043, "amqp:sasl-response:list", SaslResponse._amqp_decode)


_SASL_OUTCOME_ENCODERS: tuple[_Encoder, ...] = (
    encode_ubyte,  # code
    encode_binary,  # additional_data
)
_SASL_OUTCOME_DEFAULTS: tuple[Any, ...] = (None, None)


class SaslOutcome:
    """sasl-outcome (amqp:sasl-outcome:list, 0x00000000:0x00000044): Result of the SASL exchange, with
    optional extra data.

    Composite (list); provides: sasl-frame.
    """

    __slots__ = ("additional_data", "code")
    __match_args__ = ("code", "additional_data")

    SPEC_NAME: ClassVar[str] = "sasl-outcome"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("code", "additional-data")
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000044
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:sasl-outcome:list")

    code: int  # sasl-code, mandatory
    additional_data: bytes | None  # binary

    def __init__(
        self,
        code: int,
        additional_data: bytes | None = None,
    ) -> None:
        if code is None:
            raise TypeError("sasl-outcome: mandatory field 'code' must not be None")
        self.code = code
        self.additional_data = additional_data

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.code, self.additional_data)
        encode_composite(out, 0x00000044, values, _SASL_OUTCOME_ENCODERS, _SASL_OUTCOME_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> SaslOutcome:
        if not isinstance(fields, list):
            raise DecodeError(f"sasl-outcome: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 2 else fields + [None] * (2 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("sasl-outcome: mandatory field 'code' is missing", 0)
        if type(v) is not UByte:
            _wrong_type("sasl-outcome", "code", "ubyte", v)
        obj.code = v
        v = f[1]
        if v is not None and type(v) is not bytes:
            _wrong_type("sasl-outcome", "additional-data", "binary", v)
        obj.additional_data = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaslOutcome):
            return NotImplemented
        return bool(
            self.code == other.code
            and self.additional_data == other.additional_data
        )

    def __repr__(self) -> str:
        return f"SaslOutcome(code={self.code!r}, additional_data={self.additional_data!r})"


register_composite(0x00000044, "amqp:sasl-outcome:list", SaslOutcome._amqp_decode)


_COORDINATOR_ENCODERS: tuple[_Encoder, ...] = (
    _encode_symbol_multiple,  # capabilities
)
_COORDINATOR_DEFAULTS: tuple[Any, ...] = (None,)


class Coordinator:
    """coordinator (amqp:coordinator:list, 0x00000000:0x00000030): The target of a link to a transaction
    coordinator.

    Composite (list); provides: target.
    """

    __slots__ = ("capabilities",)
    __match_args__ = ("capabilities",)

    SPEC_NAME: ClassVar[str] = "coordinator"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("capabilities",)
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000030
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:coordinator:list")

    capabilities: list[Symbol] | None  # symbol, requires txn-capability, multiple

    def __init__(
        self,
        capabilities: list[Symbol] | None = None,
    ) -> None:
        self.capabilities = capabilities

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000030, (self.capabilities,), _COORDINATOR_ENCODERS, _COORDINATOR_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Coordinator:
        if not isinstance(fields, list):
            raise DecodeError(f"coordinator: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 1 else fields + [None] * (1 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is not None:
            if not isinstance(v, list):
                v = [v]
            for e in v:
                if type(e) is not Symbol:
                    _wrong_type("coordinator", "capabilities", "symbol", e)
        obj.capabilities = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Coordinator):
            return NotImplemented
        return bool(self.capabilities == other.capabilities)

    def __repr__(self) -> str:
        return f"Coordinator(capabilities={self.capabilities!r})"


register_composite(0x00000030, "amqp:coordinator:list", Coordinator._amqp_decode)


_DECLARE_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # global_id
)
_DECLARE_DEFAULTS: tuple[Any, ...] = (None,)


class Declare:
    """declare (amqp:declare:list, 0x00000000:0x00000031): Message body asking the coordinator to start a
    transaction.

    Composite (list); provides: nothing.
    """

    __slots__ = ("global_id",)
    __match_args__ = ("global_id",)

    SPEC_NAME: ClassVar[str] = "declare"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("global-id",)
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000031
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:declare:list")

    global_id: Any  # *, requires global-tx-id

    def __init__(
        self,
        global_id: Any = None,
    ) -> None:
        self.global_id = global_id

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000031, (self.global_id,), _DECLARE_ENCODERS, _DECLARE_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Declare:
        if not isinstance(fields, list):
            raise DecodeError(f"declare: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 1 else fields + [None] * (1 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        obj.global_id = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Declare):
            return NotImplemented
        return bool(self.global_id == other.global_id)

    def __repr__(self) -> str:
        return f"Declare(global_id={self.global_id!r})"


register_composite(0x00000031, "amqp:declare:list", Declare._amqp_decode)


_DISCHARGE_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # txn_id
    encode_boolean,  # fail
)
_DISCHARGE_DEFAULTS: tuple[Any, ...] = (None, None)


class Discharge:
    """discharge (amqp:discharge:list, 0x00000000:0x00000032): Message body asking the coordinator to commit
    or roll back a transaction.

    Composite (list); provides: nothing.
    """

    __slots__ = ("fail", "txn_id")
    __match_args__ = ("txn_id", "fail")

    SPEC_NAME: ClassVar[str] = "discharge"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("txn-id", "fail")
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000032
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:discharge:list")

    txn_id: Any  # *, requires txn-id, mandatory
    fail: bool | None  # boolean

    def __init__(
        self,
        txn_id: Any,
        fail: bool | None = None,
    ) -> None:
        if txn_id is None:
            raise TypeError("discharge: mandatory field 'txn-id' must not be None")
        self.txn_id = txn_id
        self.fail = fail

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000032, (self.txn_id, self.fail), _DISCHARGE_ENCODERS, _DISCHARGE_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Discharge:
        if not isinstance(fields, list):
            raise DecodeError(f"discharge: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 2 else fields + [None] * (2 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("discharge: mandatory field 'txn-id' is missing", 0)
        obj.txn_id = v
        v = f[1]
        if v is not None and type(v) is not bool:
            _wrong_type("discharge", "fail", "boolean", v)
        obj.fail = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Discharge):
            return NotImplemented
        return bool(
            self.txn_id == other.txn_id
            and self.fail == other.fail
        )

    def __repr__(self) -> str:
        return f"Discharge(txn_id={self.txn_id!r}, fail={self.fail!r})"


register_composite(0x00000032, "amqp:discharge:list", Discharge._amqp_decode)


_DECLARED_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # txn_id
)
_DECLARED_DEFAULTS: tuple[Any, ...] = (None,)


class Declared:
    """declared (amqp:declared:list, 0x00000000:0x00000033): Outcome of a declare: carries the new
    transaction's id.

    Composite (list); provides: delivery-state, outcome.
    """

    __slots__ = ("txn_id",)
    __match_args__ = ("txn_id",)

    SPEC_NAME: ClassVar[str] = "declared"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("txn-id",)
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000033
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:declared:list")

    txn_id: Any  # *, requires txn-id, mandatory

    def __init__(
        self,
        txn_id: Any,
    ) -> None:
        if txn_id is None:
            raise TypeError("declared: mandatory field 'txn-id' must not be None")
        self.txn_id = txn_id

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, 0x00000033, (self.txn_id,), _DECLARED_ENCODERS, _DECLARED_DEFAULTS)

    @classmethod
    def _amqp_decode(cls, fields: Any) -> Declared:
        if not isinstance(fields, list):
            raise DecodeError(f"declared: expected a list of fields, got {type(fields).__name__}", 0)
        f = fields if len(fields) >= 1 else fields + [None] * (1 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("declared: mandatory field 'txn-id' is missing", 0)
        obj.txn_id = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Declared):
            return NotImplemented
        return bool(self.txn_id == other.txn_id)

    def __repr__(self) -> str:
        return f"Declared(txn_id={self.txn_id!r})"


register_composite(0x00000033, "amqp:declared:list", Declared._amqp_decode)


_TRANSACTIONAL_STATE_ENCODERS: tuple[_Encoder, ...] = (
    encode_value,  # txn_id
    encode_value,  # outcome
)
_TRANSACTIONAL_STATE_DEFAULTS: tuple[Any, ...] = (None, None)


class TransactionalState:
    """transactional-state (amqp:transactional-state:list, 0x00000000:0x00000034): Delivery state tying a
    delivery and its provisional outcome to a transaction.

    Composite (list); provides: delivery-state.
    """

    __slots__ = ("outcome", "txn_id")
    __match_args__ = ("txn_id", "outcome")

    SPEC_NAME: ClassVar[str] = "transactional-state"
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("txn-id", "outcome")
    DESCRIPTOR_CODE: ClassVar[int] = 0x00000034
    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol("amqp:transactional-state:list")

    txn_id: Any  # *, requires txn-id, mandatory
    outcome: Any  # *, requires outcome

    def __init__(
        self,
        txn_id: Any,
        outcome: Any = None,
    ) -> None:
        if txn_id is None:
            raise TypeError("transactional-state: mandatory field 'txn-id' must not be None")
        self.txn_id = txn_id
        self.outcome = outcome

    def _amqp_encode(self, out: bytearray) -> None:
        values = (self.txn_id, self.outcome)
        encode_composite(
            out, 0x00000034, values, _TRANSACTIONAL_STATE_ENCODERS, _TRANSACTIONAL_STATE_DEFAULTS
        )

    @classmethod
    def _amqp_decode(cls, fields: Any) -> TransactionalState:
        if not isinstance(fields, list):
            raise DecodeError(
                f"transactional-state: expected a list of fields, got {type(fields).__name__}", 0
            )
        f = fields if len(fields) >= 2 else fields + [None] * (2 - len(fields))
        obj = cls.__new__(cls)
        v = f[0]
        if v is None:
            raise DecodeError("transactional-state: mandatory field 'txn-id' is missing", 0)
        obj.txn_id = v
        v = f[1]
        obj.outcome = v
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransactionalState):
            return NotImplemented
        return bool(
            self.txn_id == other.txn_id
            and self.outcome == other.outcome
        )

    def __repr__(self) -> str:
        return f"TransactionalState(txn_id={self.txn_id!r}, outcome={self.outcome!r})"


register_composite(0x00000034, "amqp:transactional-state:list", TransactionalState._amqp_decode)


# -- lookup tables --------------------------------------------------------------------

COMPOSITES: Final[dict[int, type[Any]]] = {
    # every composite type, by descriptor code
    0x00000010: Open,
    0x00000011: Begin,
    0x00000012: Attach,
    0x00000013: Flow,
    0x00000014: Transfer,
    0x00000015: Disposition,
    0x00000016: Detach,
    0x00000017: End,
    0x00000018: Close,
    0x0000001d: Error,
    0x00000070: Header,
    0x00000073: Properties,
    0x00000023: Received,
    0x00000024: Accepted,
    0x00000025: Rejected,
    0x00000026: Released,
    0x00000027: Modified,
    0x00000028: Source,
    0x00000029: Target,
    0x0000002b: DeleteOnClose,
    0x0000002c: DeleteOnNoLinks,
    0x0000002d: DeleteOnNoMessages,
    0x0000002e: DeleteOnNoLinksOrMessages,
    0x00000040: SaslMechanisms,
    0x00000041: SaslInit,
    0x00000042: SaslChallenge,
    0x00000043: SaslResponse,
    0x00000044: SaslOutcome,
    0x00000030: Coordinator,
    0x00000031: Declare,
    0x00000032: Discharge,
    0x00000033: Declared,
    0x00000034: TransactionalState,
}
SECTIONS: Final[dict[int, type[Any]]] = {
    # the sections of a message, in the order they appear in one
    0x00000070: Header,
    0x00000071: DeliveryAnnotations,
    0x00000072: MessageAnnotations,
    0x00000073: Properties,
    0x00000074: ApplicationProperties,
    0x00000075: Data,
    0x00000076: AmqpSequence,
    0x00000077: AmqpValue,
    0x00000078: Footer,
}
PERFORMATIVES: Final[dict[int, type[Any]]] = {
    # the transport performatives (frame bodies)
    0x00000010: Open,
    0x00000011: Begin,
    0x00000012: Attach,
    0x00000013: Flow,
    0x00000014: Transfer,
    0x00000015: Disposition,
    0x00000016: Detach,
    0x00000017: End,
    0x00000018: Close,
}
SASL_FRAMES: Final[dict[int, type[Any]]] = {
    # the SASL frame bodies
    0x00000040: SaslMechanisms,
    0x00000041: SaslInit,
    0x00000042: SaslChallenge,
    0x00000043: SaslResponse,
    0x00000044: SaslOutcome,
}
DELIVERY_STATES: Final[dict[int, type[Any]]] = {
    # every delivery state, terminal or not
    0x00000023: Received,
    0x00000024: Accepted,
    0x00000025: Rejected,
    0x00000026: Released,
    0x00000027: Modified,
    0x00000033: Declared,
    0x00000034: TransactionalState,
}
OUTCOMES: Final[dict[int, type[Any]]] = {
    # the terminal outcomes of the messaging layer
    0x00000024: Accepted,
    0x00000025: Rejected,
    0x00000026: Released,
    0x00000027: Modified,
}
LIFETIME_POLICIES: Final[dict[int, type[Any]]] = {
    # the lifetime policies of dynamic nodes
    0x0000002b: DeleteOnClose,
    0x0000002c: DeleteOnNoLinks,
    0x0000002d: DeleteOnNoMessages,
    0x0000002e: DeleteOnNoLinksOrMessages,
}

Performative: TypeAlias = Open | Begin | Attach | Flow | Transfer | Disposition | Detach | End | Close
SaslFrame: TypeAlias = SaslMechanisms | SaslInit | SaslChallenge | SaslResponse | SaslOutcome
DeliveryState: TypeAlias = (
    Received | Accepted | Rejected | Released | Modified | Declared | TransactionalState
)
Outcome: TypeAlias = Accepted | Rejected | Released | Modified
Section: TypeAlias = (
    Header | DeliveryAnnotations | MessageAnnotations | Properties | ApplicationProperties | Data |
    AmqpSequence | AmqpValue | Footer
)


def _wrong_type(composite: str, field: str, expected: str, value: Any) -> NoReturn:
    """A decoded field does not carry its spec type: the frame cannot be read."""
    raise DecodeError(f"{composite}: field {field!r} must be {expected}, got {type(value).__name__}", 0)


def _redacted(value: bytes | None) -> str:
    """What a repr shows instead of a credential."""
    return "None" if value is None else f"<{len(value)} bytes redacted>"


__all__ = [
    "Accepted",
    "AmqpErrorCondition",
    "AmqpSequence",
    "AmqpValue",
    "ApplicationProperties",
    "Attach",
    "Begin",
    "COMPOSITES",
    "Close",
    "ConnectionErrorCondition",
    "Coordinator",
    "DELIVERY_STATES",
    "Data",
    "Declare",
    "Declared",
    "DeleteOnClose",
    "DeleteOnNoLinks",
    "DeleteOnNoLinksOrMessages",
    "DeleteOnNoMessages",
    "DeliveryAnnotations",
    "DeliveryState",
    "Detach",
    "Discharge",
    "Disposition",
    "End",
    "Error",
    "Flow",
    "Footer",
    "Header",
    "LIFETIME_POLICIES",
    "LinkErrorCondition",
    "MAJOR",
    "MESSAGE_FORMAT",
    "MINOR",
    "MIN_MAX_FRAME_SIZE",
    "MessageAnnotations",
    "Modified",
    "OUTCOMES",
    "Open",
    "Outcome",
    "PERFORMATIVES",
    "PORT",
    "Performative",
    "Properties",
    "REVISION",
    "Received",
    "ReceiverSettleMode",
    "Rejected",
    "Released",
    "Role",
    "SASL_FRAMES",
    "SASL_MAJOR",
    "SASL_MINOR",
    "SASL_REVISION",
    "SECTIONS",
    "SECURE_PORT",
    "SaslChallenge",
    "SaslCode",
    "SaslFrame",
    "SaslInit",
    "SaslMechanisms",
    "SaslOutcome",
    "SaslResponse",
    "Section",
    "SenderSettleMode",
    "SessionErrorCondition",
    "Source",
    "StdDistMode",
    "TLS_MAJOR",
    "TLS_MINOR",
    "TLS_REVISION",
    "Target",
    "TerminusDurability",
    "TerminusExpiryPolicy",
    "TransactionErrorCondition",
    "TransactionalState",
    "Transfer",
    "TxnCapability",
]
