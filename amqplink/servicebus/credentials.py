"""Credentials with azure-core's names: a named key, or a ready-made SAS.

``AzureNamedKeyCredential(name, key)`` and ``AzureSasCredential(signature)`` behave as
azure-core's classes do (``named_key``, ``signature``, ``update``), except that no repr
shows the key or the signature.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["AzureNamedKey", "AzureNamedKeyCredential", "AzureSasCredential"]


class AzureNamedKey(NamedTuple):
    """A key name and its key; the key is hidden from ``repr``."""

    name: str
    key: str

    def __repr__(self) -> str:
        return f"AzureNamedKey(name={self.name!r}, key=<hidden>)"


class AzureNamedKeyCredential:
    """A Shared Access key name and key (the token is minted per audience from them)."""

    __slots__ = ("_credential",)

    def __init__(self, name: str, key: str) -> None:
        self._credential = _named_key(name, key)

    @property
    def named_key(self) -> AzureNamedKey:
        """The current name and key."""
        return self._credential

    def update(self, name: str, key: str) -> None:
        """Replace the name and key (e.g. after a key rotation); both are required."""
        self._credential = _named_key(name, key)

    def __repr__(self) -> str:
        return f"AzureNamedKeyCredential(name={self._credential.name!r})"


class AzureSasCredential:
    """A ready-made ``SharedAccessSignature sr=...&sig=...&se=...&skn=...`` token."""

    __slots__ = ("_signature",)

    def __init__(self, signature: str) -> None:
        self._signature = _signature(signature)

    @property
    def signature(self) -> str:
        """The current token."""
        return self._signature

    def update(self, signature: str) -> None:
        """Replace the token (e.g. with a freshly minted one)."""
        self._signature = _signature(signature)

    def __repr__(self) -> str:
        return "AzureSasCredential(signature=<hidden>)"


def _named_key(name: str, key: str) -> AzureNamedKey:
    if not isinstance(name, str) or not isinstance(key, str):
        raise TypeError("both the key name and the key must be strings")
    if not name or not key:
        raise ValueError("the key name and the key must not be empty")
    return AzureNamedKey(name, key)


def _signature(signature: str) -> str:
    if not isinstance(signature, str):
        raise TypeError("the shared access signature must be a string")
    if not signature:
        raise ValueError("the shared access signature must not be empty")
    return signature
