"""``$cbs`` put-token: verify a SAS token for real and remember what it grants, per connection.

Request: application-properties ``operation="put-token"``,
``type="servicebus.windows.net:sastoken"``, ``name=<audience>``, ``expiration``;
body amqp-value = token string. Response: application-properties ``status-code``
(2xx ok, 202 common) and ``status-description``; correlation-id = the request's
message-id (docs/protocol.md#claims-based-security-cbs). A bad token gets 401. The signature, key name, expiry
and audience checks are :func:`amqplink.servicebus.sas.verify_sas_token`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from amqplink.broker.namespace.envelope import as_text
from amqplink.broker.namespace.namespace import entity_path
from amqplink.message import Message
from amqplink.servicebus.sas import SasTokenError, verify_sas_token

__all__ = ["MAX_TOKENS_PER_CONNECTION", "SAS_TOKEN_TYPE", "Authorizations", "handle_put_token", "path_covers"]

log = logging.getLogger(__name__)

SAS_TOKEN_TYPE = "servicebus.windows.net:sastoken"
MAX_TOKENS_PER_CONNECTION = 1000
"""Audiences one connection may hold tokens for; the oldest is forgotten beyond it."""


def path_covers(granted: str, path: str) -> bool:
    """Whether a token for entity path ``granted`` covers ``path`` ("valid for everything under its URI")."""
    return not granted or path == granted or path.startswith(granted + "/")


@dataclass
class Authorizations:
    """The entity paths a connection holds valid tokens for, and until when (Unix seconds).

    Audiences are kept as lower-case entity paths (``sb://host/q`` -> ``q``): the
    broker serves one namespace under whatever host name the client used.
    """

    granted: dict[str, float] = field(default_factory=dict)
    ever_granted: bool = False
    """Whether any token was accepted on this connection (strict mode's 20 s rule)."""

    def grant(self, audience: str, expires_at: float) -> None:
        self.ever_granted = True
        path = entity_path(audience).lower()
        self.granted.pop(path, None)
        self.granted[path] = expires_at
        while len(self.granted) > MAX_TOKENS_PER_CONNECTION:
            self.granted.pop(next(iter(self.granted)))

    def covers(self, path: str, now: float) -> bool:
        """Whether a live token covers the entity ``path`` (lower case)."""
        return any(until > now and path_covers(granted, path) for granted, until in self.granted.items())

    def expire(self, now: float) -> list[str]:
        """Forget and return the entity paths whose tokens ran out."""
        gone = [aud for aud, until in self.granted.items() if until <= now]
        for aud in gone:
            del self.granted[aud]
        return gone


def _response(request: Message, status: int, description: str) -> Message:
    return Message(
        None,
        application_properties={"status-code": status, "status-description": description},
        correlation_id=request.message_id,
    )


def handle_put_token(
    request: Message, *, keys: Mapping[str, str], now: float, authorizations: Authorizations
) -> Message:
    """Answer a CBS request: 202 and a grant for a valid SAS token, 401 (or 400) otherwise."""
    app = {str(as_text(k)): as_text(v) for k, v in (request.application_properties or {}).items()}
    if app.get("operation") != "put-token":
        return _response(request, 400, f"operation {app.get('operation')!r} is not supported on $cbs")
    audience = app.get("name")
    token = as_text(request.body)
    if not isinstance(audience, str) or not isinstance(token, str):
        return _response(request, 400, "put-token needs a 'name' (the audience) and the token as the body")
    # The Python SDK labels its SAS tokens "jwt": the token itself says what it is.
    if app.get("type") not in (SAS_TOKEN_TYPE, "jwt") or not token.startswith("SharedAccessSignature "):
        return _response(request, 401, "only SAS tokens (SharedAccessSignature sr=...) are accepted")
    try:
        claims = verify_sas_token(token, keys=keys, audience=audience, now=now)
    except SasTokenError as exc:
        log.info("$cbs: token for %s refused: %s", audience, exc)
        return _response(request, 401, f"InvalidSignature: {exc}")
    authorizations.grant(audience, float(claims.expires_at))
    return _response(request, 202, "Accepted")
