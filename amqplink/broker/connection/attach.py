"""Answering a peer's attach: to an entity (a sender's or receiver's, a session receiver's,
send via), to ``$cbs``, ``$control`` or ``$management``, or a transaction coordinator."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqplink.broker.connection.consumer import Consumer
from amqplink.broker.connection.dispatch import dispatch
from amqplink.broker.connection.settle import error
from amqplink.broker.control import CONTROL_NODE
from amqplink.broker.namespace.decimals import servicebus_decimals
from amqplink.broker.namespace.errors import NOT_ALLOWED, EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.nodes import entity_path
from amqplink.broker.rights import Right
from amqplink.broker.session_wait import Waiter, requested_wait
from amqplink.broker.transactions import ConnectionTransactions
from amqplink.codec.types import Long
from amqplink.engine.link import RCV_FIRST, SND_SETTLED, Link, ReceiverLink, SenderLink
from amqplink.engine.transactions import CoordinatorLink
from amqplink.protocol.definitions import Error, Source
from amqplink.sbwire.conditions import ARGUMENT_ERROR, NOT_FOUND
from amqplink.sbwire.formats import dotnet_ticks
from amqplink.sbwire.nodes import CBS_NODE, LOCKED_UNTIL_UTC, SESSION_FILTER, TRANSFER_DESTINATION_ADDRESS

if TYPE_CHECKING:
    from amqplink.broker.connection.connection import ServiceBusConnection

__all__ = ["TRANSFER_SIZE_CAP", "Attacher", "refuse"]

log = logging.getLogger("amqplink.broker.sbserver")

TRANSFER_SIZE_CAP = 16 << 20
"""Bytes of one transfer the broker reads at most; beyond it the link is detached."""


def refuse(link: Link, why: Error) -> None:
    """Answer an attach with no terminus and detach the link with ``why``."""
    log.info("refusing link %r: %s (%s)", link.name, why.condition, why.description)
    link.attach(None, None, keep=False)
    link.detach(why)


class Attacher:
    """Sets up one connection's links as their attaches come."""

    def __init__(self, conn: ServiceBusConnection) -> None:
        self.conn = conn

    def on_attach(self, link: Link) -> None:
        """Answer the peer's attach of ``link`` (or refuse it with why)."""
        remote = link.remote_attach
        assert remote is not None
        if link.is_detached:
            return
        conn = self.conn
        now = conn.host.clock()
        if isinstance(link, CoordinatorLink):
            self._attach_coordinator(link)
            return
        if isinstance(link, SenderLink):
            address = None if remote.source is None else remote.source.address
        else:
            address = None if remote.target is None else remote.target.address
        if not address:
            refuse(link, error(NOT_FOUND, "a link to the namespace needs an address"))
            return
        path = entity_path(str(address))
        if conn.refused_by is not None and path.lower() != CONTROL_NODE:
            refusal = conn.host.faults.refuse_connection(conn.refused_by, conn.protocol.peername)
            conn.refused_by = None
            if refusal is not None:
                conn.force_close(refusal)  # the close answers the attach too
                return
        if path.lower() == CBS_NODE:
            self._attach_node(link, CBS_NODE)
            return
        if path.lower() == CONTROL_NODE:  # each request carries its own authority
            self._attach_node(link, CONTROL_NODE)
            return
        if path.lower().endswith("/$management"):
            need = None  # each request's operation is checked (Answers.on_request)
        else:
            need = Right.LISTEN if isinstance(link, SenderLink) else Right.SEND
        denied = conn.access.authorized(path.lower(), now, need)
        if denied is not None:
            refuse(link, denied)
            return
        namespace = conn.host.namespace
        try:
            if path.lower().endswith("/$management"):
                namespace.resolve(path)
                self._attach_node(link, path)
            elif isinstance(link, SenderLink):
                self._attach_consumer(link, path, now)
            else:
                assert isinstance(link, ReceiverLink)
                target = namespace.sender_target(path)
                destination = _transfer_destination(remote.properties)
                if destination is not None:  # send via ``path`` to ``destination``
                    denied = conn.access.authorized(destination.lower(), now, Right.SEND)
                    if denied is not None:
                        refuse(link, denied)
                        return
                    conn.via[link] = (target, path.lower())
                    target, path = namespace.sender_target(destination), destination
                    link.properties = {TRANSFER_DESTINATION_ADDRESS: destination}  # echoed, as Service Bus does
                # Advertise the entity's maximum (the SDK sizes its batches by it) ...
                link.max_message_size = target.properties.max_message_size
                link.answer_rcv_settle_mode = RCV_FIRST
                link.attach()
                # ... but read up to the hard cap, so that a message above the maximum is
                # rejected with message-size-exceeded, as Service Bus does, not detached.
                link.max_message_size = max(TRANSFER_SIZE_CAP, target.properties.max_message_size)
                conn.producers[link] = (target, path.lower())
                link.flow(conn.host.credit_window)
        except EntityError as exc:
            refuse(link, error(exc.condition, exc.description))

    def _attach_coordinator(self, link: CoordinatorLink) -> None:
        """A transaction controller's control link (AMQP 1.0 part 4): answered with the
        coordinator's capabilities and credit; its declares and discharges come as events."""
        conn = self.conn
        if conn.transactions is None:
            host, flush = conn.host, conn.protocol.schedule_flush
            conn.transactions = ConnectionTransactions(
                host.namespace, conn.engine, host.persistence, conn.settlement.retired, flush
            )
        link.answer_rcv_settle_mode = RCV_FIRST
        link.accept_attach()
        link.flow(conn.host.credit_window)

    def _attach_node(self, link: Link, path: str) -> None:
        """``$cbs`` or ``<entity>/$management``: requests come on one link, replies leave on another."""
        conn = self.conn
        link.attach()
        if isinstance(link, ReceiverLink):
            conn.requests[link] = path
            # azure-servicebus's aio session gives concurrent requests (AutoLockRenewer's
            # renewals) one delivery-id; Service Bus answers each, so this link tolerates
            # that (docs/dropin-websockets.md); every other link keeps the engine's check.
            link.tolerate_reused_delivery_ids = path.lower().endswith("/$management")
            link.flow(conn.host.credit_window)
        else:
            assert isinstance(link, SenderLink)
            remote = link.remote_attach
            target = None if remote is None or remote.target is None else remote.target.address
            conn.replies[entity_path(str(target or path)).lower()] = link
            conn.replies.setdefault(path.lower(), link)

    def _attach_consumer(self, link: SenderLink, path: str, now: float) -> None:
        conn = self.conn
        entity = conn.host.namespace.receiver_source(path)
        remote = link.remote_attach
        assert remote is not None and remote.source is not None
        filters = remote.source.filter if isinstance(remote.source.filter, dict) else {}
        if not entity.requires_session:
            if SESSION_FILTER in filters:
                raise EntityError(NOT_ALLOWED, f"{path!r} does not require sessions; receive without a session")
            self.start_consumer(link, entity, path, None)
            return
        if SESSION_FILTER not in filters:
            raise EntityError(NOT_ALLOWED, f"{path!r} requires sessions: receive with a session receiver")
        taken = entity.accept_session(_session_wanted(filters[SESSION_FILTER], path), link, now)
        if taken is not None:
            self.start_consumer(link, entity, path, taken)
            return
        # None free: Service Bus holds the attach until one is (or the receiver's wait ends).
        wait = requested_wait(remote.properties, conn.host.session_wait)
        conn.waits.add(Waiter(link, entity, path, now + wait))

    def start_consumer(
        self, link: SenderLink, entity: MessagingEntity, path: str, session: tuple[str, float] | None
    ) -> Consumer:
        """Answer a receiving link's attach (with the session it locked, if any) and serve it."""
        conn = self.conn
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
        protocol = conn.protocol
        consumer = Consumer(
            link,
            entity,
            path.lower(),
            lock=link.snd_settle_mode != SND_SETTLED,
            session_id=session_id,
            flush=protocol.schedule_flush,
            writable=lambda: not protocol.write_paused,
            encode_all=self._encoder(entity),
        )
        conn.consumers[link] = consumer
        wake = self._waker(consumer)
        link.context = wake
        entity.listeners.append(wake)
        return consumer

    def _encoder(self, entity: MessagingEntity) -> Callable[[list[Any], list[bytes] | None], list[bytes]]:
        """What writes a batch of ``entity``'s messages (and their lock tokens, None for
        receive-and-delete) for a receiver of this connection."""
        encode_all = entity.encode_all
        if not self.conn.reads_servicebus_decimals():
            return encode_all
        return lambda batch, tags: list(map(servicebus_decimals, encode_all(batch, tags), [m.envelope for m in batch]))

    def _waker(self, consumer: Consumer) -> Callable[[], None]:
        """The entity's listener: one dispatch on the next loop pass, however many messages
        arrive before it (a producer's whole read is stored first, then sent on in one go)."""
        loop = asyncio.get_running_loop()
        conn = self.conn

        def wake_up() -> None:
            consumer.woken = False
            if conn.consumers.get(consumer.link) is consumer:
                dispatch(consumer, conn.host.clock, conn.drop)

        def wake() -> None:
            # A closed loop: the connection died with it and has no one to send to.
            if not consumer.woken and not loop.is_closed():
                consumer.woken = True
                loop.call_soon(wake_up)

        return wake

    # -- receivers waiting for a session (amqplink.broker.session_wait) -------------------
    def start_waiter(self, waiter: Waiter, session_id: str, locked_until: float) -> None:
        """A waiting receiver got a session: answer its attach and serve it."""
        conn = self.conn
        if waiter.link.is_detached or conn.engine.close_sent:
            waiter.entity.close_session(session_id, waiter.link, conn.host.clock())
            return
        log.info("%s: receiver %r got session %r after waiting", waiter.path, waiter.link.name, session_id)
        consumer = self.start_consumer(waiter.link, waiter.entity, waiter.path, (session_id, locked_until))
        dispatch(consumer, conn.host.clock, conn.drop)
        conn.protocol.schedule_flush()

    def refuse_waiter(self, waiter: Waiter, condition: str, description: str) -> None:
        """A waiting receiver's wait ended with no session: refuse its attach."""
        if not waiter.link.detach_sent:
            refuse(waiter.link, error(condition, description))
            self.conn.protocol.schedule_flush()


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


def _transfer_destination(properties: object) -> str | None:
    """The entity a sending link's messages go to via its target (send via): its attach's
    ``com.microsoft:transfer-destination-address`` property, as an entity path (None: none)."""
    if not isinstance(properties, dict):
        return None
    value = properties.get(TRANSFER_DESTINATION_ADDRESS)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return entity_path(value) if isinstance(value, str) and value else None
