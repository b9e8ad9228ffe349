"""Answering requests: ``$cbs`` (put-token), ``$control`` (faults) and ``<entity>/$management``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from amqplink.broker.control import CONTROL_NODE, handle_control
from amqplink.broker.namespace.cbs import handle_put_token
from amqplink.broker.namespace.decimals import in_response
from amqplink.broker.namespace.envelope import as_text
from amqplink.broker.namespace.errors import NOT_ALLOWED
from amqplink.broker.namespace.management import OPERATION_RIGHTS, handle_management
from amqplink.broker.namespace.management import response as status_response
from amqplink.broker.namespace.nodes import entity_path
from amqplink.codec.errors import DecodeError
from amqplink.message import Message
from amqplink.sbwire.nodes import CBS_NODE

if TYPE_CHECKING:
    from amqplink.broker.connection.connection import ServiceBusConnection

__all__ = ["Answers"]

log = logging.getLogger("amqplink.broker.sbserver")


class Answers:
    """Answers one connection's requests on its reply links."""

    def __init__(self, conn: ServiceBusConnection) -> None:
        self.conn = conn

    def on_request(self, node: str, data: bytes, now: float, *, transactional: bool = False) -> bool:
        """Answer one request; False when its reply link has too many answers waiting. One sent
        in a transaction is refused: "Mixing management and messaging operations in a
        transaction isn't supported" (Service Bus)."""
        try:
            request = Message.decode(data)
        except DecodeError as exc:
            log.info("%s: undecodable request dropped (%s)", node, exc)
            return True
        conn = self.conn
        host = conn.host
        if transactional:
            why = f"{node}: management operations cannot be part of a transaction; make the request outside it"
            response = status_response(request, 400, description=why, condition=NOT_ALLOWED)
        elif node == CBS_NODE:
            access = conn.access
            response = handle_put_token(
                request,
                keys=host.rules,
                now=now,
                authorizations=access.auth,
                names=host.names,
                local=conn.local,
                strict=bool(host.require_auth),
                names_entity=host.namespace.names_entity,
            )
            access.note_put_token(request, response)
        elif node == CONTROL_NODE:
            response = handle_control(host.faults, host.rules, conn.access.auth, request, now, host.names, conn.local)
        else:
            response = self._management(node, request, now)
        reply_to = request.reply_to
        link = conn.replies.get(entity_path(str(reply_to)).lower()) if reply_to else None
        if link is None:
            link = conn.replies.get(node.lower())
        if link is None or link.is_detached:
            log.info("%s: no reply link for a response; dropped", node)
            return True
        if len(link.queue) >= host.max_pending_replies:
            return False
        if reply_to:
            response.to = reply_to
        stored = host.persistence
        if stored is None:
            link.send(response.encode())
        else:
            reply = response
            stored.after_commit(lambda exc: conn.settlement.reply_stored(link, request, reply, exc))
        return True

    def _management(self, node: str, request: Message, now: float) -> Message:
        """Answer a ``$management`` request once its operation's right is held."""
        conn = self.conn
        operation = as_text((request.application_properties or {}).get("operation"))
        need = OPERATION_RIGHTS.get(operation) if isinstance(operation, str) else None
        if need is not None:
            path = node.lower().removesuffix("/$management")
            denied = conn.access.authorized(path, now, need)
            if denied is not None:
                log.info("%s: %s refused: %s", node, operation, denied.description)
                description, condition = str(denied.description), str(denied.condition)
                return status_response(request, 401, description=description, condition=condition)
        answer = handle_management(conn.host.namespace, node, request, now)
        return in_response(answer) if conn.reads_servicebus_decimals() else answer
