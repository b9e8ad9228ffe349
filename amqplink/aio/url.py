"""Parse ``amqp://[user:pass@]host[:port]`` and ``amqps://`` URLs into a picklable endpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

__all__ = ["Endpoint", "parse_url"]

DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where to connect and as whom; the password never appears in ``repr``."""

    host: str
    port: int
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The URL without credentials (safe to log)."""
        scheme = "amqps" if self.tls else "amqp"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"


def parse_url(url: str) -> Endpoint:
    """Split an AMQP URL; raise ``ValueError`` naming what is wrong (never echoing a password)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a valid AMQP URL ({exc}); expected amqp://[user:pass@]host[:port]") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"unsupported URL scheme {parts.scheme!r}: use amqp:// or amqps://")
    if not parts.hostname:
        raise ValueError("the AMQP URL names no host: expected amqp://[user:pass@]host[:port]")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(
            "the AMQP URL must not carry a path or query: pass the entity address to create_sender/create_receiver"
        )
    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return Endpoint(
        host=parts.hostname,
        port=port if port is not None else DEFAULT_PORTS[scheme],
        tls=scheme == "amqps",
        username=username,
        password=password,
    )
