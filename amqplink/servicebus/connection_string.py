"""Parse a Service Bus connection string into a frozen, picklable value.

The format (docs/protocol.md#connection-strings): ``Endpoint=sb://HOST[:PORT];SharedAccessKeyName=NAME;SharedAccessKey=KEY
[;EntityPath=E][;UseDevelopmentEmulator=true]``; ``UseDevelopmentEmulator=true`` means
plain AMQP (no TLS) to HOST, port 5672 unless given. A ``SharedAccessSignature=...``
may stand in for the key pair. Keys are case-insensitive, as in the official SDK.
Errors name the part that is wrong and never echo a key or a signature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from amqplink import AMQPLinkError
from amqplink.aio.url import Endpoint

__all__ = ["ConnectionStringError", "ServiceBusConnectionString", "parse_connection_string"]

TLS_PORT = 5671
PLAIN_PORT = 5672
ENDPOINT_SCHEME = "sb"

_ENDPOINT = "endpoint"
_KEY_NAME = "sharedaccesskeyname"
_KEY = "sharedaccesskey"
_SIGNATURE = "sharedaccesssignature"
_ENTITY = "entitypath"
_EMULATOR = "usedevelopmentemulator"
# lower-case key -> the spelling used in error messages
_KNOWN = {
    _ENDPOINT: "Endpoint",
    _KEY_NAME: "SharedAccessKeyName",
    _KEY: "SharedAccessKey",
    _SIGNATURE: "SharedAccessSignature",
    _ENTITY: "EntityPath",
    _EMULATOR: "UseDevelopmentEmulator",
}
_EXPECTED = "expected Endpoint=sb://HOST[:PORT];SharedAccessKeyName=NAME;SharedAccessKey=KEY[;EntityPath=E]"


class ConnectionStringError(AMQPLinkError, ValueError):
    """The connection string is malformed; the message names the bad part (never a secret)."""


@dataclass(frozen=True, slots=True)
class ServiceBusConnectionString:
    """A parsed connection string; the key and the signature never appear in ``repr``."""

    fully_qualified_namespace: str
    port: int
    use_tls: bool
    shared_access_key_name: str | None = None
    shared_access_key: str | None = field(default=None, repr=False)
    shared_access_signature: str | None = field(default=None, repr=False)
    entity_path: str | None = None
    port_given: bool = field(default=True, compare=False)
    """Whether the Endpoint named the port (the SDK then shows it in the namespace, without TLS)."""

    @property
    def use_development_emulator(self) -> bool:
        """True when the string asked for the local emulator (plain AMQP)."""
        return not self.use_tls

    @property
    def endpoint(self) -> Endpoint:
        """Where to open the AMQP connection (no credentials: Service Bus authenticates over CBS)."""
        return Endpoint(host=self.fully_qualified_namespace, port=self.port, tls=self.use_tls)

    @property
    def amqp_url(self) -> str:
        """``amqps://HOST:PORT`` (``amqp://`` for the emulator); safe to log."""
        return self.endpoint.url

    def audience(self, entity: str | None = None) -> str:
        """The SAS audience ``sb://HOST/ENTITY`` (docs/protocol.md#sas-tokens) for ``entity`` or the EntityPath."""
        path = entity if entity is not None else self.entity_path
        host = self.fully_qualified_namespace
        if ":" in host:
            host = f"[{host}]"  # an IPv6 literal
        return f"{ENDPOINT_SCHEME}://{host}/{path or ''}"


def _segments(conn_str: str) -> dict[str, str]:
    """Split ``k=v;k=v`` into a dict with lower-case keys; reject blanks and repeats."""
    text = conn_str.strip().rstrip(";")
    if not text:
        raise ConnectionStringError(f"the connection string is empty: {_EXPECTED}")
    settings: dict[str, str] = {}
    for index, segment in enumerate(text.split(";"), start=1):
        key, sep, value = segment.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            # The segment's text may be a secret pasted without its key: do not echo it.
            raise ConnectionStringError(f"connection string segment {index} is not of the form Key=Value")
        name = _KNOWN.get(key)
        if name is None:
            continue  # unknown settings are ignored, as the official SDK does
        if key in settings:
            raise ConnectionStringError(f"the connection string sets {name} more than once")
        if not value.strip():
            raise ConnectionStringError(f"{name} in the connection string is empty")
        settings[key] = value.strip()
    return settings


def _host_and_port(endpoint: str, emulator: bool) -> tuple[str, int, bool]:
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError:
        raise ConnectionStringError(f"Endpoint {endpoint!r} has an invalid host or port; {_EXPECTED}") from None
    if parts.scheme.lower() != ENDPOINT_SCHEME:
        raise ConnectionStringError(f"Endpoint {endpoint!r} must start with sb://")
    if not parts.hostname:
        raise ConnectionStringError(f"Endpoint {endpoint!r} names no host")
    if parts.username is not None or parts.password is not None:
        raise ConnectionStringError("Endpoint must not carry user information; use SharedAccessKeyName/Key")
    if parts.path.strip("/") or parts.query or parts.fragment:
        raise ConnectionStringError(f"Endpoint {endpoint!r} must not carry a path; put the entity in EntityPath")
    given = port is not None
    if port is None:
        port = PLAIN_PORT if emulator else TLS_PORT
    elif port == 0:
        raise ConnectionStringError(f"Endpoint {endpoint!r} has port 0")
    return parts.hostname, port, given


def _flag(value: str | None) -> bool:
    if value is None:
        return False
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise ConnectionStringError(f"UseDevelopmentEmulator must be true or false, not {value!r}")
    return lowered == "true"


def parse_connection_string(conn_str: str) -> ServiceBusConnectionString:
    """Parse ``conn_str``; raise :class:`ConnectionStringError` naming what is wrong."""
    if not isinstance(conn_str, str):
        raise ConnectionStringError(f"a connection string must be a str, not {type(conn_str).__name__}")
    settings = _segments(conn_str)
    endpoint = settings.get(_ENDPOINT)
    if endpoint is None:
        raise ConnectionStringError(f"the connection string has no Endpoint; {_EXPECTED}")
    emulator = _flag(settings.get(_EMULATOR))
    host, port, port_given = _host_and_port(endpoint, emulator)
    key_name, key, signature = settings.get(_KEY_NAME), settings.get(_KEY), settings.get(_SIGNATURE)
    if (key_name is None) != (key is None):
        raise ConnectionStringError("the connection string must have both SharedAccessKeyName and SharedAccessKey")
    if key is not None and signature is not None:
        raise ConnectionStringError("give either SharedAccessKey or SharedAccessSignature, not both")
    if key is None and signature is None:
        raise ConnectionStringError(
            "the connection string has neither SharedAccessKeyName/SharedAccessKey nor SharedAccessSignature"
        )
    entity = settings.get(_ENTITY)
    if entity is not None:
        entity = entity.strip("/")
        if not entity:
            raise ConnectionStringError("EntityPath in the connection string is empty")
    return ServiceBusConnectionString(
        fully_qualified_namespace=host,
        port=port,
        use_tls=not emulator,
        shared_access_key_name=key_name,
        shared_access_key=key,
        shared_access_signature=signature,
        entity_path=entity,
        port_given=port_given,
    )
