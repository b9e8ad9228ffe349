"""Backlog queues: checked and created if missing through the secondary's management REST
API (Atom XML over HTTPS, a SAS token), and the rotation a client picks them from.

Seed 001: "Each backlog queue is then created with the following properties explicitly set
(all other values are set to the QueueDescription defaults)": MaxSizeInMegabytes 5120,
MaxDeliveryCount int.MaxValue, DefaultMessageTimeToLive and AutoDeleteOnIdle the maximum
TimeSpan, LockDuration 1 minute, DeadLetteringOnMessageExpiration and
EnableBatchedOperations true. "When creating the queues, the code first checks to see if
such a queue exists. If the queue does not exist, then the queue is created. The code does
not clean up 'extra' backlog queues." Nothing here deletes a queue.

The few calls are made with the standard library (``http.client`` + ``ssl``) in a worker
thread, each bounded by ``management_timeout``: a missing or failing endpoint is a clear
error at start, never a hang.
"""

from __future__ import annotations

import http.client
import logging
import random
import ssl
import time
import urllib.parse
from collections.abc import Sequence

from amqplink.servicebus.connection_string import ServiceBusConnectionString
from amqplink.servicebus.exceptions import ServiceBusError
from amqplink.servicebus.sas import generate_sas_token

__all__ = [
    "BACKLOG_QUEUE_DESCRIPTION",
    "BacklogQueueError",
    "BacklogRotation",
    "ensure_backlog_queues_sync",
    "management_ssl_context",
    "unreachable",
]

log = logging.getLogger(__name__)

API_VERSION = "2021-05"
MAX_TIMESPAN = "P10675199DT2H48M5.4775807S"
"""TimeSpan.MaxValue, as Service Bus writes it."""
INT_MAX = 2**31 - 1

BACKLOG_QUEUE_DESCRIPTION = (
    '<?xml version="1.0" encoding="utf-8"?>'
    '<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">'
    '<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"'
    ' xmlns:i="http://www.w3.org/2001/XMLSchema-instance">'
    "<LockDuration>PT1M</LockDuration>"
    "<MaxSizeInMegabytes>5120</MaxSizeInMegabytes>"
    f"<DefaultMessageTimeToLive>{MAX_TIMESPAN}</DefaultMessageTimeToLive>"
    "<DeadLetteringOnMessageExpiration>true</DeadLetteringOnMessageExpiration>"
    f"<MaxDeliveryCount>{INT_MAX}</MaxDeliveryCount>"
    "<EnableBatchedOperations>true</EnableBatchedOperations>"
    f"<AutoDeleteOnIdle>{MAX_TIMESPAN}</AutoDeleteOnIdle>"
    "</QueueDescription></content></entry>"
)
"""The seed's backlog queue properties (all others the defaults), in data-contract order."""

TOKEN_TTL = 3600


class BacklogQueueError(ServiceBusError):
    """The backlog queues could not be checked or created, or none takes messages."""


def management_ssl_context(verify: str | bool | None) -> ssl.SSLContext:
    """``None``/``True``: the system's CAs; a path: that CA bundle; ``False``: no checks."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    return ssl.create_default_context()


class _Management:
    """One HTTPS connection to the management endpoint, with a namespace-wide SAS token."""

    def __init__(
        self, url: str, secondary: ServiceBusConnectionString, verify: str | bool | None, timeout: float
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"management_endpoint must be an https:// URL, not {url!r}")
        self.url = f"{parts.scheme}://{parts.netloc}/"
        self.base = parts.path.rstrip("/")
        self.secondary = secondary
        self.timeout = timeout
        if parts.scheme == "https":
            self.conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=timeout, context=management_ssl_context(verify)
            )
        else:
            self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)

    def _token(self) -> str:
        s = self.secondary
        if s.shared_access_signature is not None:
            return s.shared_access_signature
        assert s.shared_access_key_name is not None and s.shared_access_key is not None
        return generate_sas_token(self.url, s.shared_access_key_name, s.shared_access_key, int(time.time()) + TOKEN_TTL)

    def request(self, method: str, name: str, body: str | None = None) -> tuple[int, str]:
        path = f"{self.base}/{urllib.parse.quote(name, safe='/')}?api-version={API_VERSION}"
        headers = {"Authorization": self._token()}
        if body is not None:
            headers["Content-Type"] = "application/atom+xml;type=entry;charset=utf-8"
        started = time.monotonic()
        try:
            self.conn.request(method, path, body=body.encode() if body is not None else None, headers=headers)
            response = self.conn.getresponse()
            text = response.read(64 * 1024).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()
            what = unreachable(exc, self.timeout, time.monotonic() - started)
            raise BacklogQueueError(
                f"the secondary namespace's management endpoint {self.url} {what} ({method} {name!r};"
                f" {type(exc).__name__}: {exc}); check PairedNamespaceOptions.management_endpoint and"
                " connection_verify",
                error=exc,
            ) from None
        return response.status, text

    def close(self) -> None:
        self.conn.close()


def unreachable(exc: BaseException, timeout: float, elapsed: float) -> str:
    """What happened, in words that match the cause: a refused connection is not a silence
    (issue 32: "a refused connection in 0.1 s is not 'did not answer within 5 s'")."""
    if isinstance(exc, ConnectionRefusedError):
        return f"refused the connection (after {elapsed:.1f} s: nothing listens there)"
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
        return f"did not answer within {timeout:g} s"
    if isinstance(exc, ssl.SSLError):
        return f"failed the TLS handshake after {elapsed:.1f} s (its certificate?)"
    if isinstance(exc, ConnectionError | http.client.HTTPException):
        return f"dropped the connection after {elapsed:.1f} s"
    return f"could not be reached (after {elapsed:.1f} s)"


def _failure(status: int, text: str, what: str, url: str) -> BacklogQueueError:
    detail = text.strip().replace("\n", " ")[:300]
    hint = " (the SAS key of the secondary connection string was refused)" if status in (401, 403) else ""
    return BacklogQueueError(f"{what} failed at {url}{hint}: {detail}", status_code=status)


def ensure_backlog_queues_sync(
    names: Sequence[str],
    url: str,
    secondary: ServiceBusConnectionString,
    verify: str | bool | None,
    timeout: float,
) -> list[str]:
    """Check each of ``names`` and create those missing; the names created. Idempotent:
    a queue made meanwhile by another client (409) counts as there."""
    try:
        api = _Management(url, secondary, verify, timeout)
    except (OSError, ssl.SSLError) as exc:  # the CA bundle (connection_verify) cannot be read
        raise BacklogQueueError(
            f"the TLS settings for the secondary's management endpoint {url} cannot be used ({type(exc).__name__}:"
            f" {exc}); check PairedNamespaceOptions.connection_verify",
            error=exc,
        ) from None
    created: list[str] = []
    try:
        for name in names:
            status, text = api.request("GET", name)
            if status == 200:
                if "QueueDescription" not in text:
                    raise BacklogQueueError(
                        f"{name!r} exists in the secondary namespace but is not a queue; remove or rename it",
                        entity=name,
                    )
                continue
            if status != 404:
                raise _failure(status, text, f"checking backlog queue {name!r}", api.url)
            status, text = api.request("PUT", name, BACKLOG_QUEUE_DESCRIPTION)
            if status in (200, 201):
                created.append(name)
                log.info("paired namespace: created backlog queue %r in %s", name, api.url)
            elif status != 409:
                raise _failure(status, text, f"creating backlog queue {name!r}", api.url)
    finally:
        api.close()
    return created


class BacklogRotation:
    """The backlog queues a client may park in, and the one it uses now.

    Seed 001: "the SDK randomly picks one backlog queue" (load balancing among clients
    that do not know each other); "if a send operation to the chosen backlog queue fails,
    that queue is pulled from the rotation and a new queue is selected."
    """

    def __init__(self, names: Sequence[str], rng: random.Random) -> None:
        if not names:
            raise ValueError("at least one backlog queue is needed")
        self.all = tuple(names)
        self.rng = rng
        self.in_rotation = list(names)
        self.current: str | None = rng.choice(self.in_rotation)
        self.emptied_at: float | None = None
        """When the last queue left the rotation (None while some are left)."""

    def pull(self, name: str, now: float) -> str | None:
        """``name`` failed: out of the rotation; the next choice (None when none is left)."""
        if name in self.in_rotation:
            self.in_rotation.remove(name)
            log.warning("paired namespace: backlog queue %r pulled from rotation", name)
        if self.current == name or self.current not in self.in_rotation:
            self.current = self.rng.choice(self.in_rotation) if self.in_rotation else None
        if self.current is None and self.emptied_at is None:
            self.emptied_at = now
        return self.current

    def pull_all(self, now: float, why: str) -> None:
        """Every queue out of the rotation at once (they share the secondary's connection, and
        it failed): the next tier is tried now, not after a failure per queue."""
        if self.in_rotation:
            log.warning("paired namespace: %s; every backlog queue pulled from rotation", why)
        self.in_rotation = []
        self.current = None
        if self.emptied_at is None:
            self.emptied_at = now

    def restore_all(self) -> None:
        """Every queue back in rotation: after a failback (a fresh start for the next outage),
        or a while after all had failed (the secondary may be back)."""
        self.in_rotation = list(self.all)
        self.emptied_at = None
        if self.current is None:
            self.current = self.rng.choice(self.in_rotation)
