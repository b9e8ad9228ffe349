"""SAS tokens for the client: :func:`mint_token` from a credential, and (re-exported from
:mod:`amqplink.sbwire.sas`, where the broker also finds them) signing, parsing and verifying.
"""

from __future__ import annotations

from typing import NamedTuple

from amqplink.sbwire.sas import (
    MAX_SAS_TOKEN_CHARS,
    SAS_PREFIX,
    ParsedSasToken,
    SasClaims,
    SasFailure,
    SasTokenError,
    audience_covers,
    generate_sas_token,
    parse_sas_token,
    sign,
    verify_sas_token,
)
from amqplink.servicebus.credentials import AzureNamedKeyCredential, AzureSasCredential

__all__ = [
    "DEFAULT_TOKEN_TTL",
    "MAX_SAS_TOKEN_CHARS",
    "SAS_PREFIX",
    "AccessToken",
    "ParsedSasToken",
    "SasClaims",
    "SasFailure",
    "SasTokenError",
    "audience_covers",
    "generate_sas_token",
    "mint_token",
    "parse_sas_token",
    "sign",
    "verify_sas_token",
]

DEFAULT_TOKEN_TTL = 3600
"""Seconds a minted token lives (the official SDKs' default)."""


class AccessToken(NamedTuple):
    """A token and its expiry (Unix seconds), as azure-core's ``AccessToken``; repr hides the token."""

    token: str
    expires_on: int

    def __repr__(self) -> str:
        return f"AccessToken(token=<hidden>, expires_on={self.expires_on})"


def mint_token(
    credential: AzureNamedKeyCredential | AzureSasCredential,
    audience: str,
    *,
    now: float,
    ttl: int = DEFAULT_TOKEN_TTL,
) -> AccessToken:
    """A token for ``audience``: minted from a named key, or the SAS credential's own token."""
    if isinstance(credential, AzureSasCredential):
        token = credential.signature
        try:
            expires_on = parse_sas_token(token).expires_at
        except SasTokenError:
            # A token we cannot read is passed on as is; the broker is the judge. It cannot be renewed.
            expires_on = int(now) + ttl
        return AccessToken(token, expires_on)
    name, key = credential.named_key
    expiry = int(now) + ttl
    return AccessToken(generate_sas_token(audience, name, key, expiry), expiry)
