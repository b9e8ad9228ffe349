"""The Service Bus management REST API (Atom XML over HTTPS, SAS authorised), served by the broker.

The names are loaded on first use (PEP 562): ``amqplink.broker.http.tls`` (the certificate)
imports without aiohttp, so a process can make the certificate, and point its TLS trust at
it, before anything imports aiohttp (whose default TLS context is made at import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqplink import _lazy_names

if TYPE_CHECKING:
    from amqplink.broker.http.server import MAX_BODY, MAX_PAGE, ManagementApi, NamespaceApi
    from amqplink.broker.http.tls import Certificate, self_signed, server_context

__all__ = [
    "MAX_BODY",
    "MAX_PAGE",
    "Certificate",
    "ManagementApi",
    "NamespaceApi",
    "self_signed",
    "server_context",
]

_SERVER = "amqplink.broker.http.server"
_TLS = "amqplink.broker.http.tls"
_LAZY = {
    "MAX_BODY": _SERVER,
    "MAX_PAGE": _SERVER,
    "ManagementApi": _SERVER,
    "NamespaceApi": _SERVER,
    "Certificate": _TLS,
    "self_signed": _TLS,
    "server_context": _TLS,
}
__getattr__, __dir__ = _lazy_names(__name__, _LAZY)
