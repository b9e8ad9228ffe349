"""The Service Bus management REST API (Atom XML over HTTPS, SAS authorised), served by the broker."""

from amqplink.broker.http.server import MAX_BODY, MAX_PAGE, ManagementApi, NamespaceApi
from amqplink.broker.http.tls import Certificate, self_signed, server_context

__all__ = ["MAX_BODY", "MAX_PAGE", "Certificate", "ManagementApi", "NamespaceApi", "self_signed", "server_context"]
