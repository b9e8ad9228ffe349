"""What a connection string gives a client or a handler: namespace, credential, TLS, entity.

``ServiceBusClient.from_connection_string`` and the handlers' ``from_connection_string``
(the SDK 7.15's ``ServiceBusSender._from_connection_string`` /
``ServiceBusReceiver._from_connection_string``) read a string the same way, here; the
rules for a string's ``EntityPath`` beside a ``queue_name``/``topic_name`` keyword are the
SDK's (``BaseHandler._convert_connection_string_to_kwargs``): both given and different is a
``ValueError``, neither given is a ``ValueError``, ``queue_name`` with ``topic_name`` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amqplink.servicebus.connection_string import parse_connection_string
from amqplink.servicebus.credentials import AzureNamedKeyCredential, AzureSasCredential

__all__ = ["ConnectionArguments", "check_entity_path", "connection_arguments", "entity_of"]


@dataclass(frozen=True)
class ConnectionArguments:
    """A client's positional arguments and the keywords a connection string implies."""

    namespace: str
    """``HOST`` or ``HOST:PORT`` (the port only when the string names one, as the SDK shows it)."""
    credential: Any
    """An :class:`AzureNamedKeyCredential`, or an :class:`AzureSasCredential` for a ``SharedAccessSignature``."""
    use_tls: bool
    """False for ``UseDevelopmentEmulator=true`` (plain AMQP)."""
    entity_path: str | None
    """The string's ``EntityPath``."""


def connection_arguments(conn_str: str) -> ConnectionArguments:
    """The arguments ``conn_str`` gives (a :class:`ConnectionStringError` names what is wrong)."""
    parsed = parse_connection_string(conn_str)
    credential: Any
    if parsed.shared_access_key is not None:
        assert parsed.shared_access_key_name is not None
        credential = AzureNamedKeyCredential(parsed.shared_access_key_name, parsed.shared_access_key)
    else:
        assert parsed.shared_access_signature is not None
        credential = AzureSasCredential(parsed.shared_access_signature)
    host = parsed.fully_qualified_namespace
    namespace = f"[{host}]" if ":" in host else host
    if parsed.port_given:  # else the scheme's default port, and the SDK shows none
        namespace = f"{namespace}:{parsed.port}"
    return ConnectionArguments(namespace, credential, parsed.use_tls, parsed.entity_path)


def check_entity_path(entity_path: str | None, name: str | None) -> None:
    """A queue or topic named beside a connection string's ``EntityPath`` must be that entity."""
    if entity_path and name and name != entity_path:
        raise ValueError(
            f"The queue or topic name {name!r} does not match the EntityPath {entity_path!r} in the connection string."
        )


def entity_of(entity_path: str | None, queue_name: str | None, topic_name: str | None) -> str:
    """The queue or topic a handler made from a connection string works on: its ``EntityPath``
    or the keyword naming it (the same one when both are given)."""
    if queue_name and topic_name:
        raise ValueError("`queue_name` and `topic_name` can not be specified simultaneously.")
    named = queue_name or topic_name
    if not (named or entity_path):
        raise ValueError(
            "Entity name is missing. Please specify `queue_name` or `topic_name`"
            " or use a connection string including the entity information."
        )
    check_entity_path(entity_path, named)
    entity = entity_path or named
    assert entity is not None  # one of them is set: checked above
    return entity
