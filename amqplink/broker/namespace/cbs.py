"""``$cbs`` put-token: verify a SAS token for real and remember what it grants, per connection.

Request: application-properties ``operation="put-token"``,
``type="servicebus.windows.net:sastoken"``, ``name=<audience>``, ``expiration``;
body amqp-value = token string. Response: application-properties ``status-code``
(2xx ok, 202 common) and ``status-description``; correlation-id = the request's
message-id" (docs/protocol.md#claims-based-security-cbs). A bad token gets 401. The checks (rule, signature, expiry,
audience host and path) are :meth:`amqplink.broker.rights.AccessRules.verify`'s; a valid
token grants its rule's rights on its audience (a Send-only token is accepted, and a
receiver under it is then refused for want of Listen, as Service Bus does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import Any

from amqplink.broker.audience import NamespaceNames
from amqplink.broker.namespace.envelope import as_text
from amqplink.broker.namespace.nodes import entity_path
from amqplink.broker.rights import AccessRule, AccessRules, Right, path_covers
from amqplink.message import Message
from amqplink.sbwire.nodes import JWT_TOKEN_TYPE, SAS_TOKEN_TYPE
from amqplink.sbwire.sas import SasFailure, SasTokenError

__all__ = [
    "MAX_TOKENS_PER_CONNECTION",
    "SAS_TOKEN_TYPE",
    "Authorizations",
    "handle_put_token",
    "path_covers",
    "status_response",
]

log = logging.getLogger(__name__)

_UNVERIFIABLE_JWT = (
    "a jwt token (Microsoft Entra ID) cannot be verified by this broker, which requires auth:"
    " use a SAS key (AzureNamedKeyCredential, AzureSasCredential or a connection string)"
)
MAX_TOKENS_PER_CONNECTION = 1000
"""Audiences one connection may hold tokens for; the oldest is forgotten beyond it."""


@dataclass
class Authorizations:
    """The entity paths a connection holds valid tokens for, until when (Unix seconds) and
    with which rights.

    Audiences are kept as lower-case entity paths (``sb://host/q`` -> ``q``) once their
    host was checked to be one of the namespace's names.
    """

    granted: dict[str, tuple[float, Right]] = field(default_factory=dict)
    ever_granted: bool = False
    """Whether any token was accepted on this connection (strict mode's 20 s rule)."""
    sources: dict[str, AccessRule] = field(default_factory=dict)
    """The rule that signed each granted path's token, where known (:meth:`revoke`)."""

    def grant(
        self,
        audience: str,
        expires_at: float,
        rights: Right = Right.LISTEN | Right.SEND | Right.MANAGE,
        source: AccessRule | None = None,
    ) -> None:
        """Remember a token for ``audience`` (a URI or an entity path), signed with rule
        ``source`` if known; a later one for the same audience replaces it."""
        self.ever_granted = True
        path = entity_path(audience).lower()
        self.granted.pop(path, None)
        self.sources.pop(path, None)
        self.granted[path] = (expires_at, rights)
        if source is not None:
            self.sources[path] = source
        while len(self.granted) > MAX_TOKENS_PER_CONNECTION:
            self._forget(next(iter(self.granted)))

    def _forget(self, path: str) -> None:
        del self.granted[path]
        self.sources.pop(path, None)

    def revoke(self, live: Container[AccessRule]) -> list[str]:
        """Forget and return the paths whose token's rule is no longer one of ``live`` (removed,
        or changed over the management API): new links there need a token of a rule that holds."""
        gone = [path for path, rule in self.sources.items() if rule not in live]
        for path in gone:
            self._forget(path)
        return gone

    def rights(self, path: str, now: float) -> Right | None:
        """The rights live tokens grant on the entity ``path`` (lower case); None: no live token covers it."""
        found: Right | None = None
        for granted, (until, rights) in self.granted.items():
            if until > now and path_covers(granted, path):
                found = rights if found is None else found | rights
        return found

    def covers(self, path: str, now: float, need: Right | None = None) -> bool:
        """Whether a live token covers the entity ``path`` (lower case), with right ``need`` if given."""
        rights = self.rights(path, now)
        return rights is not None and (need is None or need in rights)

    def expire(self, now: float) -> list[str]:
        """Forget and return the entity paths whose tokens ran out."""
        gone = [aud for aud, (until, _) in self.granted.items() if until <= now]
        for aud in gone:
            self._forget(aud)
        return gone


def status_response(request: Message, status: int, description: str, body: Any = None) -> Message:
    """The answer to a ``$cbs`` (or ``$control``) request: ``status-code`` and
    ``status-description`` application properties, correlated by the request's message-id."""
    return Message(
        body,
        application_properties={"status-code": status, "status-description": description},
        correlation_id=request.message_id,
    )


def handle_put_token(
    request: Message,
    *,
    keys: Mapping[str, str] | AccessRules,
    now: float,
    authorizations: Authorizations,
    names: NamespaceNames | None = None,
    local: object = None,
    strict: bool = True,
    names_entity: Callable[[str], bool] | None = None,
) -> Message:
    """Answer a CBS request: 202 and a grant for a valid SAS token, 401 (or 400) otherwise.

    ``keys``: the namespace's rules (a key map: each a namespace Manage rule); ``names``
    and ``local`` (the socket address the connection reached): the audience's host must
    name this namespace (None: not checked). ``names_entity``: whether the audience names
    something of the namespace (:meth:`~.namespace.Namespace.names_entity`); a valid token
    for an entity that does not exist is answered 404, as Service Bus answers it (the SDK
    raises ``ServiceBusAuthenticationError``), not accepted for a link that would then fail.

    A ``jwt`` token that is not a SAS token (a Microsoft Entra ID token from a token
    credential) cannot be verified here (no tenant to check its signature against): with
    ``strict`` (``require_auth``) it is refused with 401, which fails the links under its
    audience with ``amqp:unauthorized-access``; otherwise it is answered 202 without a grant,
    which gives no more than putting no token does on a broker that does not require auth."""
    app = {str(as_text(k)): as_text(v) for k, v in (request.application_properties or {}).items()}
    if app.get("operation") != "put-token":
        return status_response(request, 400, f"operation {app.get('operation')!r} is not supported on $cbs")
    audience = app.get("name")
    token = as_text(request.body)
    if not isinstance(audience, str) or not isinstance(token, str):
        return status_response(request, 400, "put-token needs a 'name' (the audience) and the token as the body")
    # The Python SDK labels its SAS tokens "jwt": the token itself says what it is.
    if app.get("type") == JWT_TOKEN_TYPE and not token.startswith("SharedAccessSignature "):
        if strict:
            return status_response(request, 401, _UNVERIFIABLE_JWT)
        log.info("$cbs: a jwt token for %s taken unverified (this broker does not require auth)", audience)
        return status_response(request, 202, "Accepted (jwt not verified: this broker does not require auth)")
    if app.get("type") not in (SAS_TOKEN_TYPE, JWT_TOKEN_TYPE) or not token.startswith("SharedAccessSignature "):
        return status_response(request, 401, "only SAS tokens (SharedAccessSignature sr=...) are accepted")
    try:
        if names is not None and not names.allows(audience, local):
            raise SasTokenError(SasFailure.AUDIENCE_NOT_COVERED, f"{audience[:80]!r} does not name this namespace")
        grant = AccessRules.of(keys).verify(token, now=now, names=names, local=local)
        if not path_covers(grant.path, entity_path(audience).lower()):
            raise SasTokenError(
                SasFailure.AUDIENCE_NOT_COVERED, f"the token for {grant.path!r} does not cover {audience[:80]!r}"
            )
    except SasTokenError as exc:
        log.info("$cbs: token for %s refused: %s", audience[:200], exc)
        return status_response(request, 401, f"InvalidSignature: {exc}")
    if names_entity is not None and not names_entity(audience):
        path = entity_path(audience)
        log.info("$cbs: token for %s refused: no such entity", audience[:200])
        return status_response(
            request, 404, f"The messaging entity {path[:200]!r} could not be found: create it first (or check its name)"
        )
    authorizations.grant(audience, grant.expires_at, grant.rights, grant.source)
    return status_response(request, 202, "Accepted")
