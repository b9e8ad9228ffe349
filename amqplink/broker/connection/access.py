"""What one connection may reach: the tokens put on ``$cbs``, those refused, the rights a
link or request needs, the deadline for a first token and the expiry of each
(:mod:`amqplink.broker.rights`, :mod:`amqplink.broker.namespace.cbs`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from amqplink.broker.connection.settle import error
from amqplink.broker.namespace.cbs import MAX_TOKENS_PER_CONNECTION, Authorizations
from amqplink.broker.namespace.nodes import entity_path
from amqplink.broker.rights import Right, describe_rights, path_covers
from amqplink.message import Message
from amqplink.protocol.definitions import Error
from amqplink.sbwire.conditions import UNAUTHORIZED

if TYPE_CHECKING:
    from amqplink.broker.connection.connection import ServiceBusConnection

__all__ = ["Access"]

log = logging.getLogger("amqplink.broker.sbserver")


class Access:
    """One connection's tokens and what they allow."""

    def __init__(self, conn: ServiceBusConnection) -> None:
        self.conn = conn
        self.auth = Authorizations()
        self.refused: dict[str, None] = {}
        """Entity paths a put token was refused for (oldest first, bounded)."""

    def authorized(self, path: str, now: float, need: Right | None) -> Error | None:
        """Why a link (or request) on ``path`` needing right ``need`` (None: any) is refused."""
        rights = self.auth.rights(path, now)
        if rights is not None:
            if need is None or need in rights:
                return None
            return error(
                UNAUTHORIZED,
                f"Unauthorized access: '{describe_rights(need)}' claim is required on {path!r};"
                f" the token put for it grants {describe_rights(rights)}",
            )
        if self.conn.host.require_auth:
            return error(UNAUTHORIZED, f"no valid token for {path!r}: put one on $cbs first")
        if any(path_covers(refused, path) for refused in self.refused):
            return error(UNAUTHORIZED, f"the token put for {path!r} was refused")
        return None

    def note_put_token(self, request: Message, response: Message) -> None:
        """Remember the audience of a put-token that was refused (its links fail on loopback too)."""
        status = (response.application_properties or {}).get("status-code")
        audience = (request.application_properties or {}).get("name")
        if status != 202 and isinstance(audience, str | bytes):
            text = audience.decode("utf-8", "replace") if isinstance(audience, bytes) else audience
            self.refused[entity_path(text).lower()] = None
            if len(self.refused) > MAX_TOKENS_PER_CONNECTION:
                del self.refused[next(iter(self.refused))]

    def tick(self, now: float) -> None:
        """Strict mode: close a connection that put no token in time; detach the links whose token expired."""
        conn = self.conn
        host = conn.host
        late = now - conn.opened_at >= host.cbs_deadline
        if late and not self.auth.ever_granted and not conn.engine.close_sent:
            log.info("closing a connection that put no token within %s s", host.cbs_deadline)
            conn.engine.close(error(UNAUTHORIZED, "no token was put on $cbs in time"))
            conn.protocol.schedule_flush()
            return
        if self.auth.expire(now):
            for link, path in conn.entity_links():
                if not self.auth.covers(path, now):
                    link.detach(error(UNAUTHORIZED, f"the token for {path!r} expired"))
                    conn.drop(link)
            conn.protocol.schedule_flush()
