"""Shared Access Signature tokens: signing and minting (client) and verification (broker).

docs/protocol.md#sas-tokens: ``SharedAccessSignature sr=<enc(uri)>&sig=<enc(b64(HMAC-SHA256(key,
enc(uri) + "\\n" + se)))>&se=<unix seconds>&skn=<key name>``; the key is its text as
UTF-8 (not base64-decoded), ``enc`` is ``quote_plus``-style URL-encoding, and a verifier
signs the ``sr`` value exactly as transmitted. A token is valid for everything under
its URI. No key, signature or token appears in a repr, an exception or a log line.

Tokens from a credential object (``AzureNamedKeyCredential``...) are minted by the client,
:func:`amqplink.servicebus.sas.mint_token`; this module knows no credential class.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote_plus, unquote, unquote_plus

from amqplink import AMQPLinkError

__all__ = [
    "MAX_SAS_TOKEN_CHARS",
    "SAS_PREFIX",
    "ParsedSasToken",
    "SasClaims",
    "SasFailure",
    "SasTokenError",
    "audience_covers",
    "generate_sas_token",
    "parse_sas_token",
    "sign",
    "verify_sas_token",
]

SAS_PREFIX = "SharedAccessSignature"
MAX_SAS_TOKEN_CHARS = 8192
"""A longer token is refused as malformed before any parsing (a peer must not make us hash megabytes)."""

_FIELDS = frozenset(("sr", "sig", "se", "skn"))
_SECONDS = re.compile(r"[0-9]{1,15}")
_AUDIENCE_SCHEMES = frozenset(("sb", "amqp", "amqps", "http", "https"))


class SasFailure(enum.Enum):
    """Why a token was refused (``SasTokenError.reason``)."""

    MALFORMED = "malformed"
    UNKNOWN_KEY_NAME = "unknown key name"
    BAD_SIGNATURE = "bad signature"
    EXPIRED = "expired"
    AUDIENCE_NOT_COVERED = "audience not covered"


class SasTokenError(AMQPLinkError):
    """A token failed verification; ``reason`` says why. The message never holds the token."""

    def __init__(self, reason: SasFailure, detail: str) -> None:
        super().__init__(f"SAS token refused ({reason.value}): {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ParsedSasToken:
    """The fields of a token as transmitted; ``signature`` is hidden from ``repr``."""

    encoded_audience: str
    """``sr`` exactly as transmitted (what the signature covers)."""
    expiry_text: str
    """``se`` exactly as transmitted (what the signature covers)."""
    key_name: str
    signature: str = field(repr=False)
    """``sig`` URL-decoded: the base64 text of the HMAC."""

    @property
    def audience(self) -> str:
        """``sr`` URL-decoded."""
        return unquote_plus(self.encoded_audience)

    @property
    def expires_at(self) -> int:
        """``se``: expiry in Unix seconds."""
        return int(self.expiry_text)


@dataclass(frozen=True, slots=True)
class SasClaims:
    """What a verified token grants: the URI it covers, the key that signed it, until when."""

    audience: str
    key_name: str
    expires_at: int


def sign(encoded_audience: str, expiry_text: str, key: str) -> str:
    """Base64 of HMAC-SHA256(key as UTF-8, ``encoded_audience + "\\n" + expiry_text``)."""
    digest = hmac.digest(key.encode("utf-8"), f"{encoded_audience}\n{expiry_text}".encode(), hashlib.sha256)
    return base64.b64encode(digest).decode("ascii")


def generate_sas_token(audience: str, key_name: str, key: str, expiry: int) -> str:
    """Mint ``SharedAccessSignature sr=..&sig=..&se=..&skn=..`` for ``audience`` until ``expiry``."""
    encoded = quote_plus(audience)
    expiry_text = str(int(expiry))
    signature = quote_plus(sign(encoded, expiry_text, key))
    return f"{SAS_PREFIX} sr={encoded}&sig={signature}&se={expiry_text}&skn={quote_plus(key_name)}"


def _malformed(detail: str) -> SasTokenError:
    return SasTokenError(SasFailure.MALFORMED, detail)


def parse_sas_token(token: str) -> ParsedSasToken:
    """Split a token into its fields; raise ``SasTokenError(MALFORMED)`` naming the fault."""
    if not isinstance(token, str):
        raise _malformed(f"a token is a string, not {type(token).__name__}")
    if len(token) > MAX_SAS_TOKEN_CHARS:
        raise _malformed(f"longer than {MAX_SAS_TOKEN_CHARS} characters")
    prefix, sep, rest = token.strip().partition(" ")
    if prefix != SAS_PREFIX or not sep:
        raise _malformed(f"does not start with {SAS_PREFIX!r}")
    fields: dict[str, str] = {}
    for part in rest.strip().split("&"):
        name, eq, value = part.partition("=")
        if not eq or name not in _FIELDS:
            raise _malformed("expected only sr=, sig=, se= and skn= fields joined by '&'")
        if name in fields:
            raise _malformed(f"field {name} appears twice")
        fields[name] = value
    missing = sorted(_FIELDS - fields.keys())
    if missing:
        raise _malformed(f"missing field(s) {', '.join(missing)}")
    if not _SECONDS.fullmatch(fields["se"]):
        raise _malformed("se is not a whole number of Unix seconds")
    if not fields["sr"] or not fields["sig"] or not fields["skn"]:
        raise _malformed("sr, sig and skn must not be empty")
    return ParsedSasToken(
        encoded_audience=fields["sr"],
        expiry_text=fields["se"],
        key_name=unquote_plus(fields["skn"]),
        # unquote, not unquote_plus: a literal '+' in base64 stays a '+'
        signature=unquote(fields["sig"]),
    )


def _normalise_uri(uri: str) -> str:
    lowered = uri.strip().lower()
    scheme, sep, rest = lowered.partition("://")
    if sep and scheme in _AUDIENCE_SCHEMES:
        lowered = rest
    return lowered.rstrip("/")


def audience_covers(token_audience: str, address: str) -> bool:
    """True when ``token_audience`` (decoded ``sr``) is ``address`` or a path-segment prefix of it.

    Case-insensitive, ignoring a trailing slash and the scheme (sb, amqp, amqps, http, https).
    """
    covered = _normalise_uri(token_audience)
    target = _normalise_uri(address)
    if not covered:
        return False
    return target == covered or target.startswith(covered + "/")


def _short(text: str) -> str:
    return repr(text if len(text) <= 64 else text[:61] + "...")


def verify_sas_token(token: str, *, keys: Mapping[str, str], audience: str, now: float) -> SasClaims:
    """Check ``token`` against ``keys`` (key name -> key) for ``audience`` at ``now`` (Unix seconds).

    Raises :class:`SasTokenError` with the first failing reason, in this order: malformed,
    unknown key name, bad signature, expired, audience not covered. The signature is
    compared in constant time.
    """
    parsed = parse_sas_token(token)
    key = keys.get(parsed.key_name)
    if key is None:
        raise SasTokenError(SasFailure.UNKNOWN_KEY_NAME, f"no key named {_short(parsed.key_name)}")
    expected = sign(parsed.encoded_audience, parsed.expiry_text, key).encode("ascii")
    if not hmac.compare_digest(expected, parsed.signature.encode("utf-8", "replace")):
        raise SasTokenError(SasFailure.BAD_SIGNATURE, f"signature does not match key {_short(parsed.key_name)}")
    if now >= parsed.expires_at:
        raise SasTokenError(SasFailure.EXPIRED, f"expired at {parsed.expires_at} (now {int(now)})")
    token_audience = parsed.audience
    if not audience_covers(token_audience, audience):
        raise SasTokenError(
            SasFailure.AUDIENCE_NOT_COVERED, f"token for {_short(token_audience)} does not cover {_short(audience)}"
        )
    return SasClaims(audience=token_audience, key_name=parsed.key_name, expires_at=parsed.expires_at)
