"""``*.localhost`` names resolve to loopback in this process (RFC 6761, "localhost." names, as
systemd-resolved and browsers resolve them), for the tests that reach a namespace by its name."""

from __future__ import annotations

import socket
from typing import Any

import pytest


def resolve_localhost_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``socket.getaddrinfo`` map every ``<name>.localhost`` to 127.0.0.1 until the test ends."""
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.lower().endswith(".localhost"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
