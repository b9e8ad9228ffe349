"""Claims-based security: put a token per audience on ``$cbs`` and refresh it before expiry.

docs/protocol.md#claims-based-security-cbs: request application-properties ``operation="put-token"``,
``type="servicebus.windows.net:sastoken"`` (or ``"jwt"``), ``name=<audience>``,
``expiration=<timestamp>``; body amqp-value = the token; the response carries
``status-code`` (2xx = ok, 202 is common) and ``status-description``. A token is put
again before it expires, as the SDKs do: when 10% of its lifetime is left or 10 minutes
before expiry, whichever is first. A refusal raises
:class:`~amqplink.servicebus.errors.ServiceBusAuthenticationError` with the status
description. The refresh time is computed purely (:func:`refresh_at`); the timers run
on the connection's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from amqplink.aio.connection import Connection
from amqplink.aio.errors import AMQPError
from amqplink.aio.request_response import RequestResponseLink
from amqplink.codec.types import Timestamp
from amqplink.message import Message
from amqplink.sbwire.conditions import NOT_FOUND
from amqplink.sbwire.nodes import CBS_NODE
from amqplink.servicebus.errors import from_amqp_error
from amqplink.servicebus.exceptions import ServiceBusAuthenticationError, ServiceBusError
from amqplink.servicebus.response import read_status
from amqplink.servicebus.sas import DEFAULT_TOKEN_TTL, AccessToken
from amqplink.servicebus.tokens import JWT_TOKEN_TYPE, SAS_TOKEN_TYPE, access_token

__all__ = [
    "CBS_NODE",
    "JWT_TOKEN_TYPE",
    "REFRESH_FRACTION",
    "REFRESH_MARGIN",
    "SAS_TOKEN_TYPE",
    "CbsAuthorizer",
    "check_put_token_response",
    "put_token_request",
    "refresh_at",
]

log = logging.getLogger(__name__)

REFRESH_FRACTION = 0.1
"""Refresh once this fraction of the token's lifetime is left ..."""
REFRESH_MARGIN = 600.0
"""... or this many seconds before expiry, whichever comes first (when it is after issue)."""
RETRY_FLOOR = 1.0
"""A failed refresh is retried halfway to expiry, but not sooner than this (seconds)."""


def put_token_request(audience: str, token: AccessToken, *, token_type: str = SAS_TOKEN_TYPE) -> Message:
    """The ``put-token`` request for ``audience``."""
    return Message(
        token.token,
        application_properties={
            "operation": "put-token",
            "type": token_type,
            "name": audience,
            "expiration": Timestamp(token.expires_on * 1000),
        },
    )


def check_put_token_response(response: Message, audience: str) -> None:
    """Raise ``ServiceBusAuthenticationError`` (with the status description) unless 2xx."""
    status = read_status(response)
    if status.ok:
        return
    if status.code is None:
        description = "the $cbs response carries no status-code"
    else:
        description = status.description or f"put-token refused with status {status.code}"
    missing = status.code == 404  # the token names an entity the namespace does not have
    raise ServiceBusAuthenticationError(
        description=description,
        condition=status.condition or (NOT_FOUND if missing else None),
        entity=audience,
        status_code=status.code,
        retryable=status.code is not None and status.code >= 500,
        hint="Create the entity first, or check its name." if missing else None,
    )


def refresh_at(issued_at: float, expires_on: float) -> float:
    """When to put a fresh token: at <=10% of the lifetime left or 10 min before expiry,
    whichever is first; if 10 min before expiry is not after issue, the 10% rule alone."""
    lifetime = max(0.0, expires_on - issued_at)
    by_fraction = expires_on - REFRESH_FRACTION * lifetime
    by_margin = expires_on - REFRESH_MARGIN
    return min(by_fraction, by_margin) if by_margin > issued_at else by_fraction


@dataclass(slots=True)
class _Grant:
    token: AccessToken
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[None] | None = None
    last_error: ServiceBusError | None = None


class CbsAuthorizer:
    """Puts tokens on one connection's ``$cbs`` node and keeps them fresh.

    ``await authorizer.authorize(audience)`` before attaching links for that audience;
    each token is refreshed on the event loop at :func:`refresh_at`; a failed refresh is
    logged, kept (:meth:`last_refresh_error`), reported to ``on_refresh_failure`` and
    retried halfway to expiry. After a reconnect, :meth:`reauthorize` puts every
    audience again on the new connection.
    """

    def __init__(
        self,
        connection: Connection,
        credential: Any,
        *,
        token_ttl: int = DEFAULT_TOKEN_TTL,
        token_type: str | None = None,
        timeout: float | None = None,
        clock: Callable[[], float] = time.time,
        on_refresh_failure: Callable[[str, ServiceBusError], None] | None = None,
    ) -> None:
        self.connection = connection
        self.on_refresh_failure = on_refresh_failure
        self.credential = credential
        self.token_ttl = token_ttl
        self.token_type = token_type
        self.timeout = timeout
        self.clock = clock
        self._pair: RequestResponseLink | None = None
        self._opening: asyncio.Lock = asyncio.Lock()
        self._grants: dict[str, _Grant] = {}
        self._closed = False

    @property
    def audiences(self) -> list[str]:
        """The audiences with a token on the current connection."""
        return list(self._grants)

    def expires_on(self, audience: str) -> int | None:
        """Unix seconds when the current token for ``audience`` expires."""
        grant = self._grants.get(audience)
        return None if grant is None else grant.token.expires_on

    def last_refresh_error(self, audience: str) -> ServiceBusError | None:
        """The error of the last failed background refresh for ``audience`` (None after a success)."""
        grant = self._grants.get(audience)
        return None if grant is None else grant.last_error

    async def _link(self) -> RequestResponseLink:
        async with self._opening:
            if self._pair is None or self._pair.closed:
                self._pair = await RequestResponseLink.open(self.connection, CBS_NODE, timeout=self.timeout)
            return self._pair

    async def _put(self, audience: str) -> AccessToken:
        issued = self.clock()
        token, token_type = await access_token(self.credential, audience, now=issued, ttl=self.token_ttl)
        try:
            pair = await self._link()
            response = await pair.request(
                put_token_request(audience, token, token_type=self.token_type or token_type), timeout=self.timeout
            )
        except (AMQPError, OSError, TimeoutError) as exc:
            raise from_amqp_error(exc, entity=audience) from exc
        check_put_token_response(response, audience)
        return token

    async def authorize(self, audience: str) -> AccessToken:
        """Put a token for ``audience`` now and schedule its refresh."""
        if self._closed:
            raise ServiceBusError(description="the CBS authorizer is closed", entity=audience)
        token = await self._put(audience)
        self._granted(audience, token)
        log.debug("put-token accepted for %s (expires %d)", audience, token.expires_on)
        return token

    def _granted(self, audience: str, token: AccessToken) -> None:
        grant = self._grants.get(audience)
        if grant is None:
            grant = self._grants[audience] = _Grant(token)
        else:
            grant.token = token
            grant.last_error = None
            if grant.timer is not None:
                grant.timer.cancel()
        now = self.clock()
        self._schedule(audience, grant, refresh_at(now, token.expires_on) - now)

    def _schedule(self, audience: str, grant: _Grant, delay: float) -> None:
        loop = asyncio.get_running_loop()
        grant.timer = loop.call_later(max(0.0, delay), self._start_refresh, audience)

    def _start_refresh(self, audience: str) -> None:
        grant = self._grants.get(audience)
        if grant is None or self._closed:
            return
        grant.task = asyncio.get_running_loop().create_task(self._refresh(audience, grant))

    async def _refresh(self, audience: str, grant: _Grant) -> None:
        try:
            token = await self._put(audience)
        except ServiceBusError as exc:
            grant.last_error = exc
            left = grant.token.expires_on - self.clock()
            if left > RETRY_FLOOR:
                log.warning("token refresh for %s failed (%s); retrying, %.0f s before it expires", audience, exc, left)
                self._schedule(audience, grant, max(RETRY_FLOOR, left / 2))
            else:
                log.warning("token refresh for %s failed (%s); the token expires now", audience, exc)
            if self.on_refresh_failure is not None:
                self.on_refresh_failure(audience, exc)
            return
        if self._grants.get(audience) is grant:
            self._granted(audience, token)

    async def reauthorize(self, connection: Connection) -> None:
        """Use ``connection`` from now on and put a token for every known audience on it."""
        self._cancel_timers()
        old, self._pair = self._pair, None
        self.connection = connection
        if old is not None:
            await old.close()
        for audience in list(self._grants):
            await self.authorize(audience)

    def forget(self, audience: str) -> None:
        """Stop refreshing ``audience`` (its links are closed)."""
        grant = self._grants.pop(audience, None)
        if grant is not None and grant.timer is not None:
            grant.timer.cancel()

    def _cancel_timers(self) -> None:
        for grant in self._grants.values():
            if grant.timer is not None:
                grant.timer.cancel()
            if grant.task is not None and not grant.task.done():
                grant.task.cancel()

    async def close(self) -> None:
        """Stop every refresh and detach from ``$cbs``."""
        self._closed = True
        self._cancel_timers()
        tasks = [g.task for g in self._grants.values() if g.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._pair is not None:
            await self._pair.close()
