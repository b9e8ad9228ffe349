"""Credentials recognised by what they offer (duck typing, no azure-core needed), and the
token each gives CBS for an audience.

As azure-servicebus 7.x (``_base_handler.BaseHandler`` and ``_common.utils.create_authentication``):

* a *named key* (``.named_key`` -> ``(name, key)``: ours or ``azure.core.credentials.
  AzureNamedKeyCredential``): a SAS token is minted per audience, type
  ``servicebus.windows.net:sastoken``;
* a *SAS credential* (``.signature``: ours or azure-core's ``AzureSasCredential``): its
  token as it is, expiring at its ``se=``;
* a *token credential* (any object with ``get_token(*scopes)``, e.g. azure-identity's):
  if it says ``token_type`` is the SAS type (the SDK's own ``ServiceBusSharedKeyCredential``)
  ``get_token(audience)``, else ``get_token("https://servicebus.azure.net/.default")`` put
  with type ``jwt``. ``get_token`` may be a coroutine function (azure-identity's ``aio``
  credentials); a plain one runs in a worker thread, so a credential that calls Microsoft
  Entra ID over HTTP never blocks the event loop. The token is refreshed before its
  ``expires_on`` like any other (:func:`amqplink.servicebus.cbs.refresh_at`).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from typing import Any

from amqplink.sbwire.nodes import JWT_TOKEN_TYPE, SAS_TOKEN_TYPE
from amqplink.servicebus.credentials import AzureSasCredential
from amqplink.servicebus.sas import AccessToken, mint_token

__all__ = ["JWT_SCOPE", "JWT_TOKEN_TYPE", "SAS_TOKEN_TYPE", "CredentialKind", "access_token", "credential_kind"]

JWT_SCOPE = "https://servicebus.azure.net/.default"
"""The scope Microsoft documents for Service Bus (the SDK 7.15 asks for
``https://servicebus.azure.net//.default``; Microsoft Entra ID treats both as this resource)."""


class CredentialKind(enum.Enum):
    """How a credential yields tokens."""

    NAMED_KEY = "named key"
    SAS = "shared access signature"
    TOKEN = "token credential"


def credential_kind(credential: object) -> CredentialKind:
    """The kind of ``credential``, by the attributes it has; ``TypeError`` if it has none of them.

    Checked in the SDK's order: a named key, a SAS credential, then ``get_token``.
    """
    if hasattr(credential, "named_key"):
        return CredentialKind.NAMED_KEY
    if hasattr(credential, "signature"):
        return CredentialKind.SAS
    if callable(getattr(credential, "get_token", None)):
        return CredentialKind.TOKEN
    raise TypeError(
        "credential must be an AzureNamedKeyCredential, an AzureSasCredential (from amqplink.servicebus or"
        " azure.core.credentials) or a token credential with get_token(*scopes) (e.g. from azure.identity);"
        f" not {type(credential).__name__}"
    )


def _sas_typed(credential: object) -> bool:
    """Whether a token credential says its tokens are SAS tokens (the SDK's ``token_type``)."""
    declared = getattr(credential, "token_type", None)
    if isinstance(declared, bytes):
        declared = declared.decode("utf-8", "replace")
    return declared == SAS_TOKEN_TYPE


async def access_token(credential: Any, audience: str, *, now: float, ttl: int) -> tuple[AccessToken, str]:
    """A token for ``audience`` and its CBS type; a minted SAS token lives ``ttl`` seconds from ``now``."""
    kind = credential_kind(credential)
    if kind is CredentialKind.NAMED_KEY:
        return mint_token(credential, audience, now=now, ttl=ttl), SAS_TOKEN_TYPE
    if kind is CredentialKind.SAS:
        sas = credential if isinstance(credential, AzureSasCredential) else AzureSasCredential(credential.signature)
        return mint_token(sas, audience, now=now, ttl=ttl), SAS_TOKEN_TYPE
    sas_typed = _sas_typed(credential)
    scope = audience if sas_typed else JWT_SCOPE
    get_token = credential.get_token
    if inspect.iscoroutinefunction(get_token):
        result = await get_token(scope)
    else:
        result = await asyncio.to_thread(get_token, scope)
        if inspect.isawaitable(result):
            result = await result
    token, expires_on = getattr(result, "token", None), getattr(result, "expires_on", None)
    if not isinstance(token, str | bytes) or not isinstance(expires_on, int | float):
        raise TypeError(
            f"{type(credential).__name__}.get_token returned {type(result).__name__}; expected an AccessToken"
            " with .token (str) and .expires_on (Unix seconds)"
        )
    text = token.decode("utf-8") if isinstance(token, bytes) else token
    return AccessToken(text, int(expires_on)), SAS_TOKEN_TYPE if sas_typed else JWT_TOKEN_TYPE
