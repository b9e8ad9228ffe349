"""SASL layer (spec 5.3): client and server, ANONYMOUS, PLAIN, EXTERNAL and MSSBCBS.

    "SASL is negotiated using framing. A SASL frame has a type code of 0x01."
    (5.3.1) The exchange is: mechanisms (server) -> init (client) -> [challenge /
    response]* -> outcome (server).

``MSSBCBS`` is Azure Service Bus's mechanism ("authenticate later through CBS"):
a server accepts it like ``ANONYMOUS``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from amqplink import AMQPLinkError
from amqplink.codec.types import Symbol, UByte
from amqplink.protocol.definitions import (
    SaslChallenge,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    SaslResponse,
)

__all__ = [
    "SASL_AUTH",
    "SASL_OK",
    "SASL_SYS",
    "SASL_SYS_PERM",
    "SASL_SYS_TEMP",
    "SaslClient",
    "SaslFailed",
    "SaslServer",
]

SASL_OK = 0
SASL_AUTH = 1
SASL_SYS = 2
SASL_SYS_PERM = 3
SASL_SYS_TEMP = 4
_OUTCOME_TEXT = {
    SASL_OK: "ok",
    SASL_AUTH: "authentication failed",
    SASL_SYS: "system error",
    SASL_SYS_PERM: "permanent system error",
    SASL_SYS_TEMP: "transient system error",
}

log = logging.getLogger(__name__)

ANONYMOUS = "ANONYMOUS"
PLAIN = "PLAIN"
EXTERNAL = "EXTERNAL"
MSSBCBS = "MSSBCBS"


class SaslFailed(AMQPLinkError):
    """SASL ended without success; ``code`` is the sasl-code (5.3.3.6)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"SASL {_OUTCOME_TEXT.get(code, f'code {code}')}: {reason}")
        self.code = code
        self.reason = reason


@dataclass(slots=True)
class SaslClient:
    """Client side: picks a mechanism among those the server offers.

    With ``mechanism=None`` it picks PLAIN when a user name is set, else ANONYMOUS.
    The password never appears in ``repr``.
    """

    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    authzid: str = ""
    hostname: str | None = None
    done: bool = field(default=False, init=False)
    chosen: str | None = field(default=None, init=False)

    def _choose(self, offered: Sequence[str]) -> str:
        if self.mechanism is not None:
            if self.mechanism not in offered:
                raise SaslFailed(SASL_SYS_PERM, f"server does not offer {self.mechanism} (offers {offered})")
            return self.mechanism
        if self.username is not None:
            if PLAIN in offered:
                return PLAIN
            raise SaslFailed(SASL_SYS_PERM, f"server does not offer PLAIN (offers {offered})")
        for candidate in (ANONYMOUS, EXTERNAL):
            if candidate in offered:
                return candidate
        raise SaslFailed(SASL_SYS_PERM, f"no usable mechanism among {offered}")

    def _initial_response(self, mechanism: str) -> bytes:
        if mechanism == PLAIN:
            user = self.username or ""
            return f"{self.authzid}\0{user}\0{self.password or ''}".encode()
        return b""

    def on_frame(self, frame: Any) -> list[Any]:
        """Handle one SASL frame from the server; return the frames to send back."""
        if isinstance(frame, SaslMechanisms):
            offered = [str(m) for m in (frame.sasl_server_mechanisms or [])]
            self.chosen = self._choose(offered)
            return [
                SaslInit(
                    mechanism=Symbol(self.chosen),
                    initial_response=self._initial_response(self.chosen),
                    hostname=self.hostname,
                )
            ]
        if isinstance(frame, SaslChallenge):
            # None of the supported mechanisms uses challenges: answer empty.
            return [SaslResponse(response=b"")]
        if isinstance(frame, SaslOutcome):
            code = int(frame.code)
            if code != SASL_OK:
                reason = "the server refused the credentials" if code == SASL_AUTH else "the server failed"
                raise SaslFailed(code, f"{reason} (sasl-code {code})")
            self.done = True
            return []
        raise SaslFailed(SASL_SYS_PERM, f"unexpected SASL frame {type(frame).__name__} at the client")


Authenticator = Callable[[str, str | None, str | None], bool | int]
"""``(mechanism, username, password) -> accepted``; used by :class:`SaslServer`.

It may also return a sasl-code (``SASL_SYS_TEMP`` when its user store is down, ...);
an exception it raises answers ``SASL_SYS``."""


@dataclass(slots=True)
class SaslServer:
    """Server side: offers ``mechanisms`` and checks credentials with ``authenticate``.

    Without an authenticator PLAIN accepts anyone (a test server). ``MSSBCBS`` and
    ``EXTERNAL`` are accepted like ``ANONYMOUS``: the identity is proven elsewhere
    (CBS tokens, TLS). ``code`` is the sasl-code of the outcome sent, once sent.
    """

    mechanisms: tuple[str, ...] = (PLAIN, ANONYMOUS, MSSBCBS)
    authenticate: Authenticator | None = field(default=None, repr=False)
    done: bool = field(default=False, init=False)
    chosen: str | None = field(default=None, init=False)
    identity: str | None = field(default=None, init=False)
    code: int | None = field(default=None, init=False)

    def start(self) -> list[Any]:
        """The frames the server sends after the SASL protocol header."""
        return [SaslMechanisms(sasl_server_mechanisms=[Symbol(m) for m in self.mechanisms])]

    def _verdict(self, mechanism: str, user: str | None, password: str | None) -> int:
        if self.authenticate is None:
            return SASL_OK
        try:
            verdict = self.authenticate(mechanism, user, password)
        except Exception:
            log.exception("SASL authenticator failed")
            return SASL_SYS
        if isinstance(verdict, bool):
            return SASL_OK if verdict else SASL_AUTH
        return verdict if verdict in _OUTCOME_TEXT else SASL_SYS

    def _check(self, mechanism: str, response: bytes) -> tuple[int, str | None]:
        if mechanism == PLAIN:
            parts = response.split(b"\0")
            if len(parts) != 3:
                return SASL_AUTH, None
            try:
                user, password = parts[1].decode(), parts[2].decode()
            except UnicodeDecodeError:
                return SASL_AUTH, None
            return self._verdict(mechanism, user, password), user
        return self._verdict(mechanism, None, None), None

    def accepts_without_sasl(self) -> bool:
        """Whether a client that skips SASL (its first header is the AMQP one) may go on.

        Such a client is anonymous: it is accepted when ``ANONYMOUS`` is offered and
        the authenticator (if any) accepts ``ANONYMOUS``.
        """
        return ANONYMOUS in self.mechanisms and self._verdict(ANONYMOUS, None, None) == SASL_OK

    def on_frame(self, frame: Any) -> list[Any]:
        """Handle one SASL frame from the client; return the frames to send back."""
        if isinstance(frame, SaslInit) and self.chosen is None:
            mechanism = str(frame.mechanism)
            self.chosen = mechanism
            if mechanism not in self.mechanisms:
                self.code = SASL_AUTH
            else:
                self.code, user = self._check(mechanism, bytes(frame.initial_response or b""))
                if self.code == SASL_OK:
                    self.identity = user
                    self.done = True
            return [SaslOutcome(code=UByte(self.code))]
        raise SaslFailed(SASL_SYS_PERM, f"unexpected SASL frame {type(frame).__name__} at the server")
