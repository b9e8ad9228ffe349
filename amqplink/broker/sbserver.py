"""The broker's Service Bus connections: links to namespace entities, ``$cbs`` and ``$management``.

One :class:`ServiceBusHost` per broker holds the namespace, the SAS keys and the
clock task; :meth:`ServiceBusHost.accept` gives each connection its event handler.

* A peer's receiving link on ``ENTITY`` (``amqps://HOST/ENTITY`` as the SDK writes
  it) takes messages: peek-lock (snd-settle-mode ``unsettled``) sends each message
  unsettled with its lock token as delivery-tag (.NET GUID byte order, 16 bytes);
  receive-and-delete (snd-settle-mode ``settled``) sends it settled.
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
import functools
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from typing import Any

from amqplink.aio.transport import EngineProtocol
from amqplink.broker.audience import NamespaceNames
from amqplink.broker.control import CONTROL_NODE, handle_control
from amqplink.broker.durable import Persistence
from amqplink.broker.faults import Fault, Faults, under
from amqplink.broker.namespace.cbs import MAX_TOKENS_PER_CONNECTION, Authorizations, handle_put_token
from amqplink.broker.namespace.decimals import in_response, servicebus_decimals
from amqplink.broker.namespace.envelope import as_text
from amqplink.broker.namespace.errors import NOT_ALLOWED, EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.management import OPERATION_RIGHTS, handle_management
from amqplink.broker.namespace.management import response as status_response
from amqplink.broker.namespace.namespace import Namespace, Topic, entity_path
from amqplink.broker.namespace.unwritable import unwritable
from amqplink.broker.outcomes import apply_outcome
from amqplink.broker.rights import AccessRule, AccessRules, Right, describe_rights, path_covers
from amqplink.broker.session_wait import NEXT_SESSION_WAIT, SessionWaits, Waiter, requested_wait
from amqplink.broker.transactions import ConnectionTransactions
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Long, Symbol
from amqplink.engine import errors as engine_errors
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import (
    ConnectionClosed,
    ConnectionOpened,
    DeclareRequested,
    DeliveriesReceived,
    DeliveriesUpdated,
    DischargeRequested,
    Event,
    LinkAttachRequested,
    LinkCreditChanged,
    LinkDetached,
    SessionEnded,
    StatefulDeliveriesReceived,
    TransactionEnded,
)
from amqplink.engine.link import RCV_FIRST, SND_SETTLED, Delivery, Link, ReceiverLink, SenderLink
from amqplink.engine.transactions import UNKNOWN_ID, CoordinatorLink
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Error, Rejected, Source, TransactionalState
from amqplink.sbwire.conditions import ARGUMENT_ERROR, INTERNAL_ERROR, NOT_FOUND, UNAUTHORIZED
from amqplink.sbwire.decimals import reads_servicebus_decimals
from amqplink.sbwire.formats import dotnet_ticks
from amqplink.sbwire.nodes import CBS_NODE as _CBS
from amqplink.sbwire.nodes import LOCKED_UNTIL_UTC, SESSION_FILTER, TRANSFER_DESTINATION_ADDRESS

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

_SETTLED = attrgetter("settled")
"""Whether a delivery is settled (a run of them checked with no Python code per delivery)."""

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
TRANSFER_SIZE_CAP = 16 << 20
"""Bytes of one transfer the broker reads at most; beyond it the link is detached."""
DISPATCH_BATCH = 128
"""Messages a receiving link is handed per step (taken, locked and encoded together; fewer
when its credit is lower)."""

_ACCEPTED = Accepted()
_TRANSACTION_EVENTS: frozenset[type[Event]] = frozenset((DeclareRequested, DischargeRequested, TransactionEnded))
"""The coordinator's events (:meth:`_ServiceBusConnection._on_transaction_event`), by exact type."""
_REJECTED = Rejected()


def _error(condition: str, description: str) -> Error:
    # info as an empty map, not left out: the SDK reads an error as a 3-item list.
    return Error(condition=Symbol(condition), description=description, info={})


@dataclass(eq=False)
class _Consumer:
    """A peer's receiving link on an entity."""

    link: SenderLink
    entity: MessagingEntity
    path: str
    lock: bool
    session_id: str | None
    flush: Callable[[], None]
    writable: Callable[[], bool]
    encode_all: Callable[[list[Any], list[bytes] | None], list[bytes]]
    """The payloads of a batch of the entity's messages for this receiver (the entity's
    ``encode_all``, or with decimals as Service Bus writes them: :mod:`.namespace.decimals`)."""
    held: dict[bytes, Delivery] = field(default_factory=dict)
    """The unsettled deliveries by lock token (the delivery tag)."""
    busy: bool = False
    again: bool = False
    woken: bool = False
    """A dispatch is scheduled on the event loop (wakes coalesce into it)."""


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
        self.connections: set[_ServiceBusConnection] = set()
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
            gone = connection.auth.revoke(live)
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
        conn = _ServiceBusConnection(self, engine, protocol)
        conn.on_closed = on_closed
        self.connections.add(conn)
        return conn.on_events


class _ServiceBusConnection:
    def __init__(self, host: ServiceBusHost, engine: EngineConnection, protocol: EngineProtocol) -> None:
        self.host = host
        self.engine = engine
        self.protocol = protocol
        self.auth = Authorizations()
        self.refused: dict[str, None] = {}
        """Entity paths a put token was refused for (oldest first, bounded)."""
        # The tables of links are keyed by ``Link``, the type an event's link and ``_drop``
        # look them up by (each holds one kind only: senders, or receivers).
        self.consumers: dict[Link, _Consumer] = {}
        self.producers: dict[Link, tuple[MessagingEntity | Topic, str]] = {}
        self.via: dict[Link, tuple[MessagingEntity | Topic, str]] = {}
        """The producer links that send via their target to another entity (send via): the via
        entity and its path; the producer's own entry names the destination."""
        self.requests: dict[Link, str] = {}
        self.replies: dict[str, SenderLink] = {}
        self.waits = SessionWaits(self._start_waiter, self._refuse_waiter, host.clock)
        """Receivers waiting for the next available session (attach not answered yet)."""
        self.opened_at = host.clock()
        self.refused_by: Fault | None = None
        """The refuse-connections fault active when it opened: its first link that is not
        to ``$control`` closes it (so that a controller can still undo the fault)."""
        self._to_settle: list[Any] | None = None
        """Runs of transfers (link, deliveries, outcome, ... flat) settled once the store's batch number
        :attr:`_to_settle_batch` is written."""
        self._to_settle_batch = -1
        self.transactions: ConnectionTransactions | None = None
        """Its transactions (:mod:`amqplink.broker.transactions`), once it attached a coordinator."""
        self.on_closed: Callable[[], None] | None = None
        """Called once the connection has closed (the server forgets its protocol)."""
        if hasattr(protocol, "on_writable"):
            protocol.on_writable = self._on_writable

    # -- events ---------------------------------------------------------------------
    def on_events(self, events: list[Event]) -> None:
        try:
            self._handle(events)
        except Exception:
            # A defect here must cost this connection only, never the broker.
            log.exception("closing a Service Bus connection after an internal error")
            if not self.engine.close_sent:
                self.engine.close(_error(INTERNAL_ERROR, "the broker failed handling this connection"))
                self.protocol.schedule_flush()
            if any(type(e) is ConnectionClosed for e in events):
                self._closed()  # the batch's close may not have been reached

    def _closed(self) -> None:
        self.host.connections.discard(self)
        if self.on_closed is not None:
            self.on_closed()

    def _handle(self, events: list[Event]) -> None:
        now = self.host.clock()  # one read per batch of events: they arrived together
        moved = False
        for event in events:
            # One exact-type test per branch (``type(x) is C`` narrows for mypy), the
            # frequent events first: no subclass is taken for its base (a
            # StatefulDeliveriesReceived is not a DeliveriesReceived here).
            if type(event) is DeliveriesReceived:
                self._on_received(event.link, event.deliveries, now)
                moved = True
            elif type(event) is DeliveriesUpdated:
                consumer = self.consumers.get(event.link)
                if consumer is not None:
                    self._on_outcomes(consumer, event.deliveries, event.state, now)
                    moved = True
            elif type(event) is LinkCreditChanged:
                link = event.link
                consumer = self.consumers.get(link)
                if consumer is not None:
                    self._dispatch(consumer)
                if link.hold_drain:
                    link.drained()
            elif type(event) is LinkAttachRequested:
                self._on_attach(event.link)
            elif type(event) is LinkDetached:
                detached = event.link
                if not detached.detach_sent:
                    detached.detach()
                self._drop(detached)
            elif type(event) is ConnectionOpened:
                self._choose_namespace()
                self.refused_by = self.host.faults.refusing
            elif type(event) is SessionEnded:
                # "a link lives within its session" (2.6.1): its locks and its waits end with it.
                for ended in self._links():
                    if ended.session is event.session:
                        self._drop(ended)
            elif type(event) is ConnectionClosed:
                for closed in self._links():
                    self._drop(closed)
                self._closed()
            elif type(event) is StatefulDeliveriesReceived:
                self._on_posted(event.link, event.deliveries, now)
                moved = True
            elif type(event) in _TRANSACTION_EVENTS:
                self._on_transaction_event(event, now)
                moved = True
        if moved:
            self.protocol.schedule_flush()  # once for the batch: settlements, credit, answers

    def _choose_namespace(self) -> None:
        """Serve the namespace the client's open names (:meth:`ServiceBusHost.route`): the
        connection moves to its host before any link is attached."""
        remote = self.engine.remote_open
        chosen = self.host.route(None if remote is None else remote.hostname)
        if chosen is not self.host:
            self.host.connections.discard(self)
            chosen.connections.add(self)
            log.info("connection for host %r: namespace %r", remote and remote.hostname, chosen.namespace.name)
            self.host = chosen

    def _links(self) -> list[Link]:
        """Every link of the connection the broker keeps something for."""
        return [*self.consumers, *self.producers, *self.requests, *self.replies.values(), *self.waits.waiters]

    def tick(self, now: float) -> None:
        if self.waits.waiters and self.waits.expire(now):
            self.protocol.schedule_flush()
        if self.transactions is not None and self.transactions.open:
            self.transactions.tick(now)
        if self.host.require_auth:
            late = now - self.opened_at >= self.host.cbs_deadline
            if late and not self.auth.ever_granted and not self.engine.close_sent:
                log.info("closing a connection that put no token within %s s", self.host.cbs_deadline)
                self.engine.close(_error(UNAUTHORIZED, "no token was put on $cbs in time"))
                self.protocol.schedule_flush()
                return
            if self.auth.expire(now):
                for link, path in [*((c.link, c.path) for c in self.consumers.values()),
                                   *((p, path) for p, (_, path) in self.producers.items()),
                                   *((w.link, w.path.lower()) for w in self.waits.waiters.values())]:  # fmt: skip
                    if not self.auth.covers(path, now):
                        link.detach(_error(UNAUTHORIZED, f"the token for {path!r} expired"))
                        self._drop(link)
                self.protocol.schedule_flush()

    def _on_writable(self) -> None:
        for consumer in list(self.consumers.values()):
            self._dispatch(consumer)

    # -- attach ---------------------------------------------------------------------
    @property
    def local(self) -> object:
        """The socket address the client reached (one of the namespace's names)."""
        transport = getattr(self.protocol, "transport", None)
        return None if transport is None else transport.get_extra_info("sockname")

    def _authorized(self, path: str, now: float, need: Right | None) -> Error | None:
        """Why a link (or request) on ``path`` needing right ``need`` (None: any) is refused."""
        rights = self.auth.rights(path, now)
        if rights is not None:
            if need is None or need in rights:
                return None
            return _error(
                UNAUTHORIZED,
                f"Unauthorized access: '{describe_rights(need)}' claim is required on {path!r};"
                f" the token put for it grants {describe_rights(rights)}",
            )
        if self.host.require_auth:
            return _error(UNAUTHORIZED, f"no valid token for {path!r}: put one on $cbs first")
        if any(path_covers(refused, path) for refused in self.refused):
            return _error(UNAUTHORIZED, f"the token put for {path!r} was refused")
        return None

    def _on_attach(self, link: Link) -> None:
        remote = link.remote_attach
        assert remote is not None
        if link.is_detached:
            return
        now = self.host.clock()
        if isinstance(link, CoordinatorLink):
            self._attach_coordinator(link)
            return
        if isinstance(link, SenderLink):
            address = None if remote.source is None else remote.source.address
        else:
            address = None if remote.target is None else remote.target.address
        if not address:
            self._refuse(link, _error(NOT_FOUND, "a link to the namespace needs an address"))
            return
        path = entity_path(str(address))
        if self.refused_by is not None and path.lower() != CONTROL_NODE:
            refusal = self.host.faults.refuse_connection(self.refused_by, self.protocol.peername)
            self.refused_by = None
            if refusal is not None:
                self.force_close(refusal)  # the close answers the attach too
                return
        if path.lower() == _CBS:
            self._attach_node(link, _CBS)
            return
        if path.lower() == CONTROL_NODE:  # each request carries its own authority
            self._attach_node(link, CONTROL_NODE)
            return
        if path.lower().endswith("/$management"):
            need = None  # each request's operation is checked (_on_request)
        else:
            need = Right.LISTEN if isinstance(link, SenderLink) else Right.SEND
        denied = self._authorized(path.lower(), now, need)
        if denied is not None:
            self._refuse(link, denied)
            return
        try:
            if path.lower().endswith("/$management"):
                self.host.namespace.resolve(path)
                self._attach_node(link, path)
            elif isinstance(link, SenderLink):
                self._attach_consumer(link, path, now)
            else:
                assert isinstance(link, ReceiverLink)
                target = self.host.namespace.sender_target(path)
                destination = _transfer_destination(remote.properties)
                if destination is not None:  # send via ``path`` to ``destination``
                    denied = self._authorized(destination.lower(), now, Right.SEND)
                    if denied is not None:
                        self._refuse(link, denied)
                        return
                    self.via[link] = (target, path.lower())
                    target, path = self.host.namespace.sender_target(destination), destination
                    link.properties = {TRANSFER_DESTINATION_ADDRESS: destination}  # echoed, as Service Bus does
                # Advertise the entity's maximum (the SDK sizes its batches by it) ...
                link.max_message_size = target.properties.max_message_size
                link.answer_rcv_settle_mode = RCV_FIRST
                link.attach()
                # ... but read up to the hard cap, so that a message above the maximum is
                # rejected with message-size-exceeded, as Service Bus does, not detached.
                link.max_message_size = max(TRANSFER_SIZE_CAP, target.properties.max_message_size)
                self.producers[link] = (target, path.lower())
                link.flow(self.host.credit_window)
        except EntityError as exc:
            self._refuse(link, _error(exc.condition, exc.description))

    def _attach_coordinator(self, link: CoordinatorLink) -> None:
        """A transaction controller's control link (AMQP 1.0 part 4): answered with the
        coordinator's capabilities and credit; its declares and discharges come as events."""
        if self.transactions is None:
            host, flush = self.host, self.protocol.schedule_flush
            self.transactions = ConnectionTransactions(
                host.namespace, self.engine, host.persistence, self._settle_retired, flush
            )
        link.answer_rcv_settle_mode = RCV_FIRST
        link.accept_attach()
        link.flow(self.host.credit_window)

    def _attach_node(self, link: Link, path: str) -> None:
        """``$cbs`` or ``<entity>/$management``: requests come on one link, replies leave on another."""
        link.attach()
        if isinstance(link, ReceiverLink):
            self.requests[link] = path
            # azure-servicebus's aio session gives concurrent requests (AutoLockRenewer's
            # renewals) one delivery-id; Service Bus answers each, so this link tolerates
            # that (docs/dropin-websockets.md); every other link keeps the engine's check.
            link.tolerate_reused_delivery_ids = path.lower().endswith("/$management")
            link.flow(self.host.credit_window)
        else:
            assert isinstance(link, SenderLink)
            remote = link.remote_attach
            target = None if remote is None or remote.target is None else remote.target.address
            self.replies[entity_path(str(target or path)).lower()] = link
            self.replies.setdefault(path.lower(), link)

    def _attach_consumer(self, link: SenderLink, path: str, now: float) -> None:
        entity = self.host.namespace.receiver_source(path)
        remote = link.remote_attach
        assert remote is not None and remote.source is not None
        filters = remote.source.filter if isinstance(remote.source.filter, dict) else {}
        if not entity.requires_session:
            if SESSION_FILTER in filters:
                raise EntityError(NOT_ALLOWED, f"{path!r} does not require sessions; receive without a session")
            self._start_consumer(link, entity, path, None)
            return
        if SESSION_FILTER not in filters:
            raise EntityError(NOT_ALLOWED, f"{path!r} requires sessions: receive with a session receiver")
        taken = entity.accept_session(_session_wanted(filters[SESSION_FILTER], path), link, now)
        if taken is not None:
            self._start_consumer(link, entity, path, taken)
            return
        # None free: Service Bus holds the attach until one is (or the receiver's wait ends).
        wait = requested_wait(remote.properties, self.host.session_wait)
        self.waits.add(Waiter(link, entity, path, now + wait))

    def _start_consumer(
        self, link: SenderLink, entity: MessagingEntity, path: str, session: tuple[str, float] | None
    ) -> None:
        """Answer a receiving link's attach (with the session it locked, if any) and serve it."""
        remote = link.remote_attach
        assert remote is not None and remote.source is not None
        source = remote.source
        session_id: str | None = None
        if session is not None:
            session_id, until = session
            filters = source.filter if isinstance(source.filter, dict) else {}
            source = Source(
                address=source.address,
                durable=source.durable,
                expiry_policy=source.expiry_policy,
                timeout=source.timeout,
                filter={**filters, SESSION_FILTER: session_id},
            )
            link.properties = {LOCKED_UNTIL_UTC: Long(dotnet_ticks(until))}
        link.attach(source, remote.target)
        link.auto_settle = False
        link.hold_drain = True
        protocol = self.protocol
        consumer = _Consumer(
            link,
            entity,
            path.lower(),
            lock=link.snd_settle_mode != SND_SETTLED,
            session_id=session_id,
            flush=protocol.schedule_flush,
            writable=lambda: not protocol.write_paused,
            encode_all=self._encoder(entity),
        )
        self.consumers[link] = consumer
        wake = self._waker(consumer)
        link.context = wake
        entity.listeners.append(wake)

    def _reads_servicebus_decimals(self) -> bool:
        """Whether the peer reads decimals only as Service Bus writes them (the Python SDK)."""
        remote = self.engine.remote_open
        return reads_servicebus_decimals(None if remote is None else remote.properties)

    def _encoder(self, entity: MessagingEntity) -> Callable[[list[Any], list[bytes] | None], list[bytes]]:
        """What writes a batch of ``entity``'s messages (and their lock tokens, None for
        receive-and-delete) for a receiver of this connection."""
        encode_all = entity.encode_all
        if not self._reads_servicebus_decimals():
            return encode_all
        return lambda batch, tags: list(
            map(servicebus_decimals, encode_all(batch, tags), [m.envelope for m in batch])
        )

    def _start_waiter(self, waiter: Waiter, session_id: str, locked_until: float) -> None:
        if waiter.link.is_detached or self.engine.close_sent:
            waiter.entity.close_session(session_id, waiter.link, self.host.clock())
            return
        log.info("%s: receiver %r got session %r after waiting", waiter.path, waiter.link.name, session_id)
        self._start_consumer(waiter.link, waiter.entity, waiter.path, (session_id, locked_until))
        self._dispatch(self.consumers[waiter.link])
        self.protocol.schedule_flush()

    def _refuse_waiter(self, waiter: Waiter, condition: str, description: str) -> None:
        if not waiter.link.detach_sent:
            self._refuse(waiter.link, _error(condition, description))
            self.protocol.schedule_flush()

    def _waker(self, consumer: _Consumer) -> Callable[[], None]:
        """The entity's listener: one dispatch on the next loop pass, however many messages
        arrive before it (a producer's whole read is stored first, then sent on in one go)."""
        loop = asyncio.get_running_loop()

        def dispatch() -> None:
            consumer.woken = False
            if self.consumers.get(consumer.link) is consumer:
                self._dispatch(consumer)

        def wake() -> None:
            # A closed loop: the connection died with it and has no one to send to.
            if not consumer.woken and not loop.is_closed():
                consumer.woken = True
                loop.call_soon(dispatch)

        return wake

    @staticmethod
    def _refuse(link: Link, error: Error) -> None:
        log.info("refusing link %r: %s (%s)", link.name, error.condition, error.description)
        link.attach(None, None, keep=False)
        link.detach(error)

    # -- sending to the peer ----------------------------------------------------------
    def _dispatch(self, consumer: _Consumer) -> None:
        """Send messages while the link has credit and the socket keeps up."""
        if consumer.busy:
            consumer.again = True  # a listener fired inside receive(): loop once more
            return
        consumer.busy = True
        link, entity, lock = consumer.link, consumer.entity, consumer.lock
        clock, send, send_all, held, encode_all = (
            self.host.clock,
            link.send,
            link.send_all,
            consumer.held,
            consumer.encode_all,
        )
        sent = False
        try:
            while True:
                consumer.again = False
                while link.credit > 0 and link.is_attached and consumer.writable():
                    wanted = min(link.credit, DISPATCH_BATCH)
                    try:
                        batch = entity.receive_many(
                            clock(),
                            wanted,
                            lock=lock,
                            session_id=consumer.session_id,
                            owner=link,
                        )
                    except EntityError as exc:  # the session lock ran out
                        link.detach(_error(exc.condition, exc.description))
                        self._drop(link)
                        break
                    if not batch:
                        break
                    sent = True
                    tokens: list[bytes] | None = [msg.lock for msg in batch] if lock else None  # type: ignore[misc]  # bytes: receive_many(lock=True) locked each
                    try:
                        payloads = encode_all(batch, tokens)
                    except Exception as exc:  # a bug (storable admits what is written back): nothing lost
                        error = unwritable(entity, batch, exc)
                        link.detach(_error(error.condition, error.description))
                        self._drop(link)
                        break
                    i = 0
                    try:
                        if tokens is not None:
                            made = send_all(payloads, tokens)
                            held.update(zip(tokens, made, strict=False))  # made: a prefix; each tag is its token
                            i = len(made)
                            while i < len(batch):  # send_all stopped before one send refuses: it raises
                                held[tokens[i]] = send(payloads[i], tag=tokens[i], settled=False)
                                i += 1
                        else:
                            for payload in payloads:
                                send(payload)
                                i += 1
                    except engine_errors.MessageSizeExceededError as exc:
                        # "Any attempt to deliver a message larger than this results in a
                        # message-size-exceeded link-error" (2.7.3): the link ends, the
                        # message (and the rest of the batch) stays for other receivers.
                        for left in batch[i:]:
                            entity.restore(left)
                        log.info("%s: detaching receiver %r: %s", consumer.path, link.name, exc)
                        link.detach(Error(condition=exc.condition, description=str(exc), info={}))
                        self._drop(link)
                        break
                    if len(batch) < wanted:
                        # The entity had no more: asking again finds none (a lock that runs
                        # out meanwhile wakes this consumer through the entity's tick).
                        break
                if not consumer.again:
                    break
        finally:
            consumer.busy = False
        if sent:
            consumer.flush()

    def _on_outcomes(self, consumer: _Consumer, deliveries: list[Delivery], state: Any, now: float) -> None:
        """One outcome for several of the consumer's deliveries (a disposition's range): what
        :meth:`_on_outcome` does for each, with ``accepted`` (complete) taken together when
        no delay is injected (with a store, settled as runs once the commit is written)."""
        if type(state) is not Accepted or self.host.faults.delays:
            for delivery in deliveries:
                self._on_outcome(consumer, delivery, state, now)
            return
        tokens: list[bytes] = [delivery.tag for delivery in deliveries]  # the lock tokens, while held
        released = list(map(consumer.held.pop, tokens, repeat(None)))  # in order: a repeat finds None
        completing = deliveries
        if None in released:  # those no longer held (settled already) are not completed
            kept = [i for i, was in enumerate(released) if was is not None]
            tokens, completing = [tokens[i] for i in kept], [deliveries[i] for i in kept]
        link = consumer.link
        refusals = consumer.entity.complete_all(tokens, now)
        stored = self.host.persistence
        if stored is not None:
            self._settle_completed_after_commit(stored, consumer, completing, state, refusals)
            return
        for i, exc in refusals.items():
            link.settle(completing[i], _refused(consumer.path, exc))
        # Echo the outcome applied (as _on_outcome does); those refused are settled already.
        link.settle_all(completing, state)

    def _settle_completed_after_commit(
        self,
        stored: Persistence,
        consumer: _Consumer,
        completing: list[Delivery],
        state: Accepted,
        refusals: dict[int, EntityError],
    ) -> None:
        """Settle a completed range once the commit is written, as :meth:`_on_outcome` would
        one at a time: in order, the completed ones in runs echoing ``state``, each refused
        one with its refusal; those the consumer settled itself are not answered."""
        link = consumer.link
        if not refusals:
            if not all(delivery.settled for delivery in completing):  # (all settled: nothing to answer)
                self._settle_run_after_commit(stored, link, completing, state)
            return
        run: list[Delivery] = []
        for i, delivery in enumerate(completing):
            exc = refusals.get(i)
            if exc is None:
                run.append(delivery)
                continue
            answer = _refused(consumer.path, exc)
            if delivery.settled:
                continue
            if run:
                self._settle_run_after_commit(stored, link, run, state)
                run = []
            self._settle_run_after_commit(stored, link, [delivery], answer)
        if run:
            self._settle_run_after_commit(stored, link, run, state)

    def _on_outcome(self, consumer: _Consumer, delivery: Delivery, state: Any, now: float) -> None:
        if type(state) is TransactionalState:  # a settlement in a transaction: applied at its commit
            self._retire(consumer, delivery, state, now)
            return
        token = delivery.tag  # the lock token, while held
        if consumer.held.pop(token, None) is None:
            return
        try:
            answer = apply_outcome(consumer.entity, token, state, now)
        except EntityError as exc:
            answer = _refused(consumer.path, exc)
        if delivery.settled:
            return
        faults = self.host.faults
        delay = faults.delay_for(consumer.path) if faults.delays else 0.0
        stored = self.host.persistence
        if stored is not None:
            self._settle_after_commit(stored, consumer.link, delivery, answer, delay)
            return
        if delay:
            self._settle_stored(consumer.link, delivery, answer, None, delay)
            return
        consumer.link.settle(delivery, answer)

    # -- transactions (amqplink.broker.transactions) ------------------------------------
    def _on_transaction_event(self, event: Event, now: float) -> None:
        transactions = self.transactions
        if transactions is None:  # (made with the first coordinator, whose events these are)
            return
        if type(event) is DeclareRequested:
            transactions.declare(event.request)
        elif type(event) is DischargeRequested:
            faults = self.host.faults  # an unavailable entity refuses the commit as it refuses a plain send
            transactions.discharge(event.request, now, faults.check_send if faults.unavailable else None)
        elif type(event) is TransactionEnded:
            transactions.ended(event.transaction)
        self._top_up_link(getattr(event, "link", None))

    def _top_up_link(self, link: object) -> None:
        if isinstance(link, ReceiverLink) and not link.is_detached:
            self._top_up(link)

    def _on_posted(self, link: ReceiverLink, deliveries: list[Delivery], now: float) -> None:
        """Transfers that carried a delivery state: a message sent in a transaction is held
        by it (:meth:`ConnectionTransactions.post`); a request in one refused (``$management``
        and ``$cbs`` operations cannot join a transaction); any other state taken as none."""
        node = self.requests.get(link)
        producer = self.producers.get(link)
        for delivery in deliveries:
            state = delivery.remote_state
            if type(state) is not TransactionalState:
                self._on_received(link, [delivery], now)
            elif node is not None:
                payload = delivery.payload
                self._on_request(node, payload if type(payload) is bytes else bytes(payload), now, transactional=True)
                if self._settle_received(link, delivery, _ACCEPTED, 0.0):
                    self._top_up(link)
            elif producer is not None:
                target, path = producer
                via, via_path = self.via.get(link, producer)
                transactions = self.transactions
                if transactions is None:
                    why = f"no transaction {_hex(state.txn_id)} is open on this connection: declare one first"
                    outcome: Any = Rejected(error=_error(UNKNOWN_ID, why))
                else:
                    faults = self.host.faults  # an unavailable entity refuses it as it refuses a plain send
                    check = functools.partial(faults.check_send, path) if faults.unavailable else None
                    outcome = transactions.post(state, delivery, target, via, via_path, now, check)
                if not delivery.settled:
                    link.settle(delivery, outcome)
                self._top_up(link)

    def _retire(self, consumer: _Consumer, delivery: Delivery, state: TransactionalState, now: float) -> None:
        """A settlement in a transaction: held by it, the delivery left unsettled and the
        receiver told the provisional outcome (or why it cannot join)."""
        if consumer.held.get(delivery.tag) is not delivery:
            return  # settled already
        transactions = self.transactions
        if transactions is None:
            why = f"no transaction {_hex(state.txn_id)} is open on this connection: declare one first"
            answer: Any = Rejected(error=_error(UNKNOWN_ID, why))
        else:
            answer = transactions.retire(consumer, delivery, state, now)
        if answer is not None:
            consumer.link.update(delivery, answer)

    def _settle_retired(self, link: SenderLink, delivery: Delivery, answer: Any) -> None:
        """A transaction's commit applied a settlement: the delivery is settled with it (with a
        store, once the commit is written)."""
        if delivery.settled or link.is_detached:
            return
        stored = self.host.persistence
        if stored is not None:
            self._settle_after_commit(stored, link, delivery, answer, 0.0)
        else:
            link.settle(delivery, answer)

    # -- receiving from the peer ------------------------------------------------------
    def _on_received(self, link: ReceiverLink, deliveries: list[Delivery], now: float) -> None:
        """A run of transfers: a producer link's are stored (:meth:`_on_sent`), a request
        link's (``$cbs``, ``$management``, ``$control``) answered one by one."""
        node = self.requests.get(link)
        if node is None:
            self._on_sent(link, deliveries, now)
            return
        for delivery in deliveries:
            if not self._on_request_delivery(link, node, delivery, now):
                return

    def _on_request_delivery(self, link: ReceiverLink, node: str, delivery: Delivery, now: float) -> bool:
        """A request on ``node``'s link answered and settled; False when the link is
        detached for too many replies waiting (the rest of its run goes unanswered)."""
        payload = delivery.payload
        if not self._on_request(node, payload if type(payload) is bytes else bytes(payload), now):
            link.detach(
                _error(
                    "amqp:resource-limit-exceeded",
                    f"more than {self.host.max_pending_replies} responses wait for credit on the reply link;"
                    " grant credit to read them",
                )
            )
            self.requests.pop(link, None)
            return False
        if self._settle_received(link, delivery, _ACCEPTED, 0.0):
            self._top_up(link)
        return True

    def _on_sent(self, link: ReceiverLink, deliveries: list[Delivery], now: float) -> None:
        """Transfers on a producer link, in arrival order (a run of them: one
        ``DeliveriesReceived``). Each message is stored or refused on its own, with its own
        fault checks; the link's entity is looked up once, and the accepted ones are settled
        together (consecutive delivery-ids: one disposition range) before the credit is topped up.
        While no fault is in force, the messages that are only a body are stored by the
        entity in one call (:meth:`Namespace.body_sender`) up to the first it does not take,
        which goes with the rest one at a time."""
        producer = self.producers.get(link)
        if producer is None:
            return
        target, path = producer
        faults = self.host.faults
        namespace = self.host.namespace
        unavailable, delays = faults.unavailable, faults.delays  # the fault tables (emptied in place)
        accepted: list[Delivery] = []
        top_up = False
        if not unavailable and not delays:  # no fault to check for each: the messages only a body stored together
            store_bodies = namespace.body_sender(target)
            stored = 0 if store_bodies is None else store_bodies(deliveries, now)
            if stored:
                # settle_all passes over those the sender settled (nothing to answer) ...
                accepted = deliveries if stored == len(deliveries) else deliveries[:stored]
                if self.host.persistence is not None and any(map(_SETTLED, accepted)):
                    top_up = True  # ... and those top the credit up at once (_settle_received)
                deliveries = deliveries[stored:]  # the rest one at a time, after those
        if deliveries:  # (none left when the entity stored them all)
            store = namespace.sender(target)  # the target's kind looked at once for the run
            for delivery in deliveries:
                outcome: Any = _ACCEPTED
                payload = delivery.payload
                try:
                    if unavailable:
                        faults.check_send(path)
                    store(payload if type(payload) is bytes else bytes(payload), now, delivery.message_format)
                except EntityError as exc:
                    log.info("%s: message refused: %s", path, exc.description)
                    outcome = Rejected(error=_error(exc.condition, exc.description))
                else:
                    if not delays and not delivery.settled:
                        accepted.append(delivery)  # the common case: settled below, with the others
                        continue
                delay = faults.delay_for(path) if delays else 0.0
                if outcome is _ACCEPTED and not delay and not delivery.settled:
                    accepted.append(delivery)
                    continue
                if accepted:  # settle in arrival order
                    top_up = self._settle_accepted(link, accepted) or top_up
                    accepted = []
                if self._settle_received(link, delivery, outcome, delay):
                    top_up = True
        if accepted:
            top_up = self._settle_accepted(link, accepted) or top_up
        if top_up:
            self._top_up(link)

    def _settle_accepted(self, link: ReceiverLink, deliveries: list[Delivery]) -> bool:
        """Settle a run of stored transfers with ``accepted`` (with a store, once they are
        written: one entry for the run); False when the store's commit settles them and tops
        the credit up then."""
        stored = self.host.persistence
        if stored is None:
            link.settle_all(deliveries, _ACCEPTED)
            return True
        self._settle_run_after_commit(stored, link, deliveries, _ACCEPTED)
        return False

    def _settle_received(self, link: ReceiverLink, delivery: Delivery, outcome: Any, delay: float) -> bool:
        """Settle a transfer the broker has handled with ``outcome`` (``delay`` seconds later
        when a delay-dispositions fault holds it; with a store, once what it caused is
        written). False when the store's commit settles it and tops the credit up then."""
        if delivery.settled:
            return True  # the sender settled it: nothing to answer
        stored = self.host.persistence
        if stored is not None:
            # Settled (and credit topped up) once the message is on disk.
            self._settle_after_commit(stored, link, delivery, outcome, delay)
            return False
        if delay:
            self._settle_stored(link, delivery, outcome, None, delay)
        else:
            link.settle(delivery, outcome)
        return True

    def _top_up(self, link: ReceiverLink) -> None:
        """Grant a producer or request link its credit window again once half of it is used."""
        if link.link_credit < self.host.credit_window // 2:
            link.flow(self.host.credit_window)

    def _on_request(self, node: str, data: bytes, now: float, *, transactional: bool = False) -> bool:
        """Answer one request; False when its reply link has too many answers waiting. One sent
        in a transaction is refused: "Mixing management and messaging operations in a
        transaction isn't supported" (Service Bus)."""
        try:
            request = Message.decode(data)
        except DecodeError as exc:
            log.info("%s: undecodable request dropped (%s)", node, exc)
            return True
        if transactional:
            why = f"{node}: management operations cannot be part of a transaction; make the request outside it"
            response = status_response(request, 400, description=why, condition=NOT_ALLOWED)
        elif node == _CBS:
            host = self.host
            local = self.local
            response = handle_put_token(
                request,
                keys=host.rules,
                now=now,
                authorizations=self.auth,
                names=host.names,
                local=local,
                strict=bool(host.require_auth),
                names_entity=host.namespace.names_entity,
            )
            status = (response.application_properties or {}).get("status-code")
            audience = (request.application_properties or {}).get("name")
            if status != 202 and isinstance(audience, str | bytes):
                text = audience.decode("utf-8", "replace") if isinstance(audience, bytes) else audience
                self.refused[entity_path(text).lower()] = None
                if len(self.refused) > MAX_TOKENS_PER_CONNECTION:
                    del self.refused[next(iter(self.refused))]
        elif node == CONTROL_NODE:
            host = self.host
            response = handle_control(host.faults, host.rules, self.auth, request, now, host.names, self.local)
        else:
            response = self._management(node, request, now)
        reply_to = request.reply_to
        link = self.replies.get(entity_path(str(reply_to)).lower()) if reply_to else None
        if link is None:
            link = self.replies.get(node.lower())
        if link is None or link.is_detached:
            log.info("%s: no reply link for a response; dropped", node)
            return True
        if len(link.queue) >= self.host.max_pending_replies:
            return False
        if reply_to:
            response.to = reply_to
        stored = self.host.persistence
        if stored is None:
            link.send(response.encode())
        else:
            reply = response
            stored.after_commit(lambda error: self._reply_stored(link, request, reply, error))
        return True

    def _management(self, node: str, request: Message, now: float) -> Message:
        """Answer a ``$management`` request once its operation's right is held."""
        operation = as_text((request.application_properties or {}).get("operation"))
        need = OPERATION_RIGHTS.get(operation) if isinstance(operation, str) else None
        if need is not None:
            path = node.lower().removesuffix("/$management")
            denied = self._authorized(path, now, need)
            if denied is not None:
                log.info("%s: %s refused: %s", node, operation, denied.description)
                description, condition = str(denied.description), str(denied.condition)
                return status_response(request, 401, description=description, condition=condition)
        answer = handle_management(self.host.namespace, node, request, now)
        return in_response(answer) if self._reads_servicebus_decimals() else answer

    # -- faults -----------------------------------------------------------------------
    @property
    def controls(self) -> bool:
        """Whether it has a ``$control`` link (faults on connections spare it)."""
        return CONTROL_NODE in self.requests.values()

    def force_close(self, error: Error) -> None:
        """Close the connection with ``error`` (its links' locks come back when it ends)."""
        self.engine.close(error)
        self.protocol.schedule_flush()

    def entity_paths(self) -> list[str]:
        """The entity paths its senders and receivers are attached to (lower case)."""
        return [
            *(c.path for c in self.consumers.values()),
            *(path for _, path in self.producers.values()),
            *(w.path.lower() for w in self.waits.waiters.values()),
        ]

    def detach_links(self, path: str | None, error: Error) -> list[str]:
        """Detach the links to entity ``path`` (None: every entity and management link) with
        ``error``; the names of those detached."""
        management = "/$management"
        links: list[tuple[Link, str]] = [
            *((c.link, c.path) for c in self.consumers.values()),
            *((p, entity) for p, (_, entity) in self.producers.items()),
            *((w.link, w.path.lower()) for w in self.waits.waiters.values()),
            *((r, node.lower()) for r, node in self.requests.items() if node.lower().endswith(management)),
            *((s, node) for node, s in self.replies.items() if node.endswith(management)),
        ]
        names: list[str] = []
        for link, where in links:
            if link.is_detached or link.detach_sent:
                continue
            if path is None or under(where, path):
                link.detach(error)
                self._drop(link)
                names.append(link.name)
        if names:
            self.protocol.schedule_flush()
        return names

    # -- after a store commit -----------------------------------------------------------
    def _settle_after_commit(
        self, stored: Persistence, link: SenderLink | ReceiverLink, delivery: Delivery, outcome: Any, delay: float
    ) -> None:
        """Settle a transfer once what it caused is on disk (``delay`` seconds later when a
        delay-dispositions fault holds it)."""
        if delay:
            stored.after_commit(lambda error: self._settle_stored(link, delivery, outcome, error, delay))
            return
        self._settle_run_after_commit(stored, link, [delivery], outcome)

    def _settle_run_after_commit(
        self, stored: Persistence, link: SenderLink | ReceiverLink, deliveries: list[Delivery], outcome: Any
    ) -> None:
        """Settle ``deliveries`` (of ``link``, in order) with ``outcome`` once what they caused
        is on disk: the runs of one commit wait behind one callback per connection (not one
        each), settled together in arrival order."""
        commits = stored.commits
        waiting = self._to_settle
        if waiting is None or self._to_settle_batch != commits.taken:
            waiting = self._to_settle = []
            self._to_settle_batch = commits.taken
            commits.after_commit(lambda error: self._settle_all(waiting, error))
        waiting += (link, deliveries, outcome)  # flat: no tuple per run kept for the collector

    def _settle_all(self, waiting: list[Any], error: BaseException | None) -> None:
        """Settle the runs one commit covered (``waiting``: link, deliveries, outcome, ... flat);
        when the commit failed, whatever was not refused already is refused as not stored."""
        if waiting is self._to_settle:
            self._to_settle = None
        if self.engine.close_sent:
            return
        refused = None if error is None else _store_failed(error)
        # Settled in arrival order, consecutive runs of one link and one outcome together
        # (consecutive delivery-ids: one disposition range). A run whose transfers were all
        # settled meanwhile does not cut the one before from the one after.
        run: list[Delivery] = []
        run_link: Any = None
        run_outcome: Any = None
        items = iter(waiting)
        for link, deliveries, outcome in zip(items, items, items, strict=True):
            if link.is_detached:
                continue
            # (a rejected with an error is a refusal already; the dead-letter echo, a rejected
            # without one, was applied and is refused like any other outcome)
            if refused is not None and (type(outcome) is not Rejected or outcome.error is None):
                outcome = refused
            if link is not run_link or outcome is not run_outcome:
                if all(delivery.settled for delivery in deliveries):
                    continue
                if run:
                    self._settle_run(run_link, run, run_outcome)
                run, run_link, run_outcome = [], link, outcome
            run += deliveries
        if run:
            self._settle_run(run_link, run, run_outcome)
        self.protocol.schedule_flush()

    def _settle_run(self, link: SenderLink | ReceiverLink, deliveries: list[Delivery], outcome: Any) -> None:
        """Settle ``deliveries`` of ``link`` with ``outcome``; a producer or request link gets
        its credit window again once half of it is used."""
        link.settle_all(deliveries, outcome)
        if isinstance(link, ReceiverLink):
            self._top_up(link)

    def _settle_stored(
        self,
        link: SenderLink | ReceiverLink,
        delivery: Delivery,
        outcome: Any,
        error: BaseException | None,
        delay: float = 0.0,
    ) -> None:
        """Settle a transfer whose effect is now on disk (or, when the write failed, refuse it),
        ``delay`` seconds from now when a delay-dispositions fault holds it."""
        if delay:
            asyncio.get_running_loop().call_later(delay, self._settle_stored, link, delivery, outcome, error)
            return
        if link.is_detached or delivery.settled or self.engine.close_sent:
            return
        if error is not None and not isinstance(outcome, Rejected):
            outcome = _store_failed(error)
        self._settle_run(link, [delivery], outcome)
        self.protocol.schedule_flush()

    def _reply_stored(self, link: SenderLink, request: Message, answer: Message, error: BaseException | None) -> None:
        if link.is_detached:
            return
        if error is not None:
            description = f"the broker could not store this: {error}"
            answer = status_response(request, 500, description=description, condition=INTERNAL_ERROR)
        link.send(answer.encode())
        self.protocol.schedule_flush()

    # -- links going away -------------------------------------------------------------
    def detach_entity_links(self, nodes: set[object], error: Error) -> None:
        """Detach the senders and receivers attached to any of ``nodes`` (deleted entities)."""
        links: list[Link] = [link for link, c in self.consumers.items() if c.entity in nodes]
        links += [link for link, (target, _) in self.producers.items() if target in nodes]
        links += [link for link, w in self.waits.waiters.items() if w.entity in nodes]
        for link in links:
            if not link.detach_sent:
                link.detach(error)
            self._drop(link)
        if links:
            self.protocol.schedule_flush()

    def _drop(self, link: Link) -> None:
        now = self.host.clock()
        self.waits.drop(link)
        consumer = self.consumers.pop(link, None)
        if consumer is not None:
            if link.context in consumer.entity.listeners:
                consumer.entity.listeners.remove(link.context)
            if consumer.session_id is not None:  # the session's lock ends: its messages come back, uncounted
                consumer.entity.release(list(consumer.held), now, counted=False)
                consumer.entity.close_session(consumer.session_id, link, now)
            # else, as Service Bus: the message locks are held until they expire (then counted as
            # any expired lock), and their tokens still settle or renew them over $management
            consumer.held.clear()
        self.producers.pop(link, None)
        self.via.pop(link, None)
        self.requests.pop(link, None)
        for key in [k for k, v in self.replies.items() if v is link]:
            del self.replies[key]


def _session_wanted(value: Any, path: str) -> str | None:
    """The session a receiver's ``com.microsoft:session-filter`` names (None: the next available);
    a session id is a string (binary taken as UTF-8), so any other value is refused with
    ``com.microsoft:argument-error`` rather than read as its text (an int 1 opened "1")."""
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            pass
    elif value is None or isinstance(value, str):
        return value
    raise EntityError(
        ARGUMENT_ERROR,
        f"the session filter of a receiver on {path!r} must be a session id (a string) or null "
        f"for the next available session, not {type(value).__name__} {repr(value)[:40]}",
    )


def _refused(path: str, exc: EntityError) -> Rejected:
    """The outcome of a settlement the entity refused (a rejected *with* an error: "not applied")."""
    log.info("%s: settlement refused: %s", path, exc.description)
    return Rejected(error=_error(exc.condition, exc.description))


def _store_failed(error: BaseException) -> Rejected:
    """The outcome of a transfer whose effect the store could not write (a full disk)."""
    return Rejected(error=_error(INTERNAL_ERROR, f"the broker could not store this: {error}"))


def _transfer_destination(properties: object) -> str | None:
    """The entity a sending link's messages go to via its target (send via): its attach's
    ``com.microsoft:transfer-destination-address`` property, as an entity path (None: none)."""
    if not isinstance(properties, dict):
        return None
    value = properties.get(TRANSFER_DESTINATION_ADDRESS)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return entity_path(value) if isinstance(value, str) and value else None


def _hex(txn_id: object) -> str:
    return txn_id.hex() if isinstance(txn_id, bytes) else repr(txn_id)
