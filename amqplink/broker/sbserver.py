"""The broker's Service Bus connections: links to namespace entities, ``$cbs`` and ``$management``.

One :class:`ServiceBusHost` per broker holds the namespace, the SAS keys and the
clock task; :meth:`ServiceBusHost.accept` gives each connection its event handler.

* A peer's receiving link on ``ENTITY`` (``amqps://HOST/ENTITY`` as the SDK writes
  it) takes messages: peek-lock (snd-settle-mode ``unsettled``) sends each message
  unsettled with its lock token as delivery-tag (.NET GUID byte order, 16 bytes);
  receive-and-delete (snd-settle-mode ``settled``) sends it settled, its delivery-tag
  empty (the SDK reads no lock token from it).
* Its outcomes map as docs/protocol.md#settlement-mapping says: ``accepted`` = complete,
  ``modified(undeliverable-here=false)`` = abandon, ``modified(undeliverable-here=true)``
  = defer, ``rejected(com.microsoft:dead-letter)`` = dead-letter; the broker settles
  with the same outcome, or with ``rejected(com.microsoft:message-lock-lost)`` when the
  lock had gone.
* A source filter ``com.microsoft:session-filter`` asks for a session (a given id, or
  none for the next available); the attach answers with the id in the filter and
  ``com.microsoft:locked-until-utc`` (.NET ticks) in its properties. With no session
  free, a next-available receiver waits (:mod:`amqplink.broker.session_wait`).
* A dropped link or connection leaves its message locks held until they expire (as
  Service Bus: no one can settle them meanwhile); a session receiver's going frees its
  session and brings its messages back with their delivery count unchanged.
* Auth: on loopback (``require_auth=False``) a put token is verified and a refused
  one makes the links under its audience fail with ``amqp:unauthorized-access``; a
  client that puts none may use every entity. With ``require_auth`` a link needs a
  live token covering its entity, a connection without any token is closed after
  ``cbs_deadline`` seconds, and an expired token detaches the links under it.
  Either way a token grants its rule's rights (:mod:`amqplink.broker.rights`): a
  receiver needs Listen, a sender Send, a ``$management`` operation the right of its
  kind; without it the link (or the request) is refused with ``amqp:unauthorized-access``
  naming the entity and the right.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping

from amqplink.aio.transport import EngineProtocol
from amqplink.broker.audience import NamespaceNames
from amqplink.broker.connection.attach import TRANSFER_SIZE_CAP
from amqplink.broker.connection.connection import ServiceBusConnection
from amqplink.broker.connection.dispatch import DISPATCH_BATCH
from amqplink.broker.durable import Persistence
from amqplink.broker.faults import Faults
from amqplink.broker.namespace.namespace import Namespace
from amqplink.broker.rights import AccessRule, AccessRules
from amqplink.broker.session_wait import NEXT_SESSION_WAIT
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import (
    Event,
)
from amqplink.protocol.definitions import Error

__all__ = [
    "CBS_DEADLINE",
    "DISPATCH_BATCH",
    "EMULATOR_KEY",
    "EMULATOR_KEY_NAME",
    "MAX_PENDING_REPLIES",
    "TICK_INTERVAL",
    "TRANSFER_SIZE_CAP",
    "ServiceBusHost",
]

log = logging.getLogger(__name__)

EMULATOR_KEY_NAME = "RootManageSharedAccessKey"
EMULATOR_KEY = "SAS_KEY_VALUE"
"""The Service Bus emulator's well-known key: existing emulator connection strings work."""
CBS_DEADLINE = 20.0
"""Seconds a connection has to put a token in strict mode ("within 20 s or the connection is closed")."""
TICK_INTERVAL = 0.05
"""Seconds between the clock task's passes (lock expiry, schedules, TTL, token expiry)."""

MAX_PENDING_REPLIES = 1000
"""Responses one reply link may hold for want of credit; beyond it the request link is
detached with ``amqp:resource-limit-exceeded``."""

class ServiceBusHost:
    """What every Service Bus connection of one broker shares."""

    def __init__(
        self,
        namespace: Namespace,
        *,
        keys: Mapping[str, str] | None = None,
        rules: Iterable[AccessRule] = (),
        host_names: Iterable[str] = (),
        require_auth: bool | None = False,
        credit_window: int = 1000,
        cbs_deadline: float = CBS_DEADLINE,
        max_pending_replies: int = MAX_PENDING_REPLIES,
        clock: Callable[[], float] = time.time,
        persistence: Persistence | None = None,
        session_wait: float = NEXT_SESSION_WAIT,
    ) -> None:
        self.namespace = namespace
        self.session_wait = session_wait
        """Seconds a next-available-session receiver waits when its attach tells no
        ``com.microsoft:timeout`` (:mod:`amqplink.broker.session_wait`)."""
        self.persistence = persistence
        """The durable store (``--data-dir``): transfers are settled once what they caused is written."""
        given = [*rules, *AccessRules.of(keys or {}).rules]
        self.emulator_key = not any(not rule.entity for rule in given)
        """True while the namespace's only rule is the emulator's well-known key (no namespace
        rule was given: fine on loopback only)."""
        if self.emulator_key:
            given.insert(0, AccessRule(EMULATOR_KEY_NAME, (EMULATOR_KEY,)))
        self._given = given
        self._rules: tuple[int, AccessRules] | None = None
        namespace.on_access_rules_changed = self._access_rules_changed
        self.names = NamespaceNames.of(host_names)
        """The host names a token's audience may name (the listen address is added at start)."""
        self.require_auth = require_auth
        """Strict mode; ``None`` until the broker decides by its address (strict unless loopback)."""
        self.credit_window = credit_window
        self.cbs_deadline = cbs_deadline
        self.max_pending_replies = max_pending_replies
        self.clock = clock
        self.connections: set[ServiceBusConnection] = set()
        self.faults = Faults(self)
        """Fault injection (:mod:`amqplink.broker.faults`), also reachable through ``$control``."""
        self.others: list[ServiceBusHost] = []
        """The hosts of the other namespaces the broker serves (on this one, the first: see
        :meth:`route`)."""
        self._task: asyncio.Task[None] | None = None

    @property
    def hosts(self) -> list[ServiceBusHost]:
        """This host and :attr:`others`."""
        return [self, *self.others]

    def route(self, hostname: object) -> ServiceBusHost:
        """The host of the namespace a connection's open names in its ``hostname``: the
        namespace called so, or whose name is its first label (``ns2`` for ``ns2.localhost``
        or ``ns2.servicebus.windows.net``), else this one (the first namespace)."""
        if not self.others or not isinstance(hostname, str) or not hostname:
            return self
        host = hostname.strip().rstrip(".").lower()
        if host.startswith("[") or host.count(":") > 1:
            return self  # an IPv6 address names no namespace
        host = host.split(":", 1)[0]
        label = host.split(".", 1)[0]
        for other in self.others:
            name = other.namespace.name.lower()
            if host == name or label == name:
                return other
        return self

    @property
    def rules(self) -> AccessRules:
        """The authorization rules (:mod:`amqplink.broker.rights`): ``keys`` as namespace Manage
        rules, ``rules`` as given, and the namespace's queues' and topics' own
        (:attr:`Namespace.access_rules`, the configuration's and the management API's), as they
        are now."""
        version = self.namespace.access_version
        if self._rules is None or self._rules[0] != version:
            self._rules = (version, AccessRules([*self._given, *self.namespace.entity_access_rules()]))
        return self._rules[1]

    def _access_rules_changed(self) -> None:
        """A queue's or topic's rules changed: each connection forgets the tokens a rule that
        no longer holds signed, so new links there are refused (links attached keep going)."""
        live = frozenset(self.rules.rules)
        for connection in self.connections:
            gone = connection.access.auth.revoke(live)
            if gone:
                log.info("revoked tokens for %s: their rule was removed or changed", ", ".join(sorted(gone))[:200])

    @property
    def keys(self) -> dict[str, str]:
        """The namespace-level rules' primary keys by name (the first: the connection string's)."""
        return self.rules.keys

    def secure_for(self, loopback: bool) -> None:
        """Off loopback: strict unless told otherwise. Strict, or off loopback, with no key
        given: a random key instead of the emulator's public one (printed once, in the
        connection string), never the public key guarding a strict namespace."""
        if self.require_auth is None:
            self.require_auth = not loopback
        if (self.require_auth or not loopback) and self.emulator_key:
            kept = [rule for rule in self._given if rule.keys != (EMULATOR_KEY,)]
            self._given = [AccessRule(EMULATOR_KEY_NAME, (secrets.token_urlsafe(32),)), *kept]
            self._rules = None
            self.emulator_key = False
            why = "strict mode" if loopback else "listening beyond loopback"
            log.warning("%s without a key: made a random SAS key (see the connection string)", why)

    def start(self) -> None:
        """Start the clock task (call from the event loop)."""
        if self._task is None:
            self.faults.loop = asyncio.get_running_loop()
            if self.persistence is not None:
                self.persistence.commits.bind()
            self._task = self.faults.loop.create_task(self._run_clock())

    async def stop(self) -> None:
        """Stop the namespace's clock (timed locks, schedules, expiries)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run_clock(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL)
            try:
                self.tick()
            except Exception:  # never let one bad pass stop the clock
                log.exception("the broker's clock pass failed")

    def tick(self) -> None:
        """Apply time: lock expiry, scheduled messages, TTL, token deadlines."""
        now = self.clock()
        self.faults.tick(now)
        self.namespace.tick(now)
        for conn in list(self.connections):
            conn.tick(now)

    def detach_links(self, nodes: set[object], error: Error) -> None:
        """Detach every link to one of ``nodes`` (entities or topics deleted at run time) with ``error``."""
        for conn in list(self.connections):
            conn.detach_entity_links(nodes, error)

    def accept(
        self, engine: EngineConnection, protocol: EngineProtocol, on_closed: Callable[[], None] | None = None
    ) -> Callable[[list[Event]], None]:
        """The event handler of one new connection; ``on_closed`` is called once it has closed."""
        conn = ServiceBusConnection(self, engine, protocol)
        conn.on_closed = on_closed
        self.connections.add(conn)
        return conn.on_events
