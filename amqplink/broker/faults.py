"""Fault injection for the embedded Service Bus namespace: ``broker.faults``.

Every fault is deterministic (no randomness: it fires on the next matching event,
or after an exact number of bytes or frames) and observable: a :class:`Fault`
counts its firings (``fired``, ``first_fired_at``, ``last_fired_at``), sets
``fired_event`` (a :class:`threading.Event`, for tests on another thread) at the
first one, logs each firing once (the first at INFO), and :attr:`Faults.history` keeps the last
:data:`MAX_HISTORY` firings.

Standing faults (``entity_unavailable``, ``fragment_unavailable``,
``refuse_connections``, ``delay_dispositions``, ``drop_connections`` until it has
fired) stay until :meth:`Faults.clear` / :meth:`Faults.clear_all` or until their
``duration`` (seconds) runs out; one-shot faults (``close_connections``,
``detach_links``, ``expire_locks``) act at once and are finished on return.

The conditions are the ones Service Bus uses: ``com.microsoft:server-busy`` (or
``amqp:internal-error``) for a send to an unavailable entity,
``amqp:connection:forced`` for a refused or closed connection and
``amqp:link:detach-forced`` for a detached link ("an operator intervened to detach
for some reason", AMQP 1.0 2.8.16; "an operator intervened to close the connection",
2.8.15).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from amqplink import AMQPLinkError
from amqplink.broker.namespace.errors import EntityError
from amqplink.codec.types import Symbol
from amqplink.protocol.definitions import Error
from amqplink.sbwire.conditions import CONNECTION_FORCED, DETACH_FORCED, INTERNAL_ERROR, SERVER_BUSY

if TYPE_CHECKING:
    from amqplink.aio.transport import EngineProtocol
    from amqplink.broker.namespace.namespace import Namespace
    from amqplink.broker.namespace.partitioned import Partitions
    from amqplink.engine.connection import Connection as EngineConnection

__all__ = [
    "CONNECTION_FORCED",
    "DETACH_FORCED",
    "INTERNAL_ERROR",
    "MAX_FAULTS",
    "MAX_HISTORY",
    "SEND_CONDITIONS",
    "SERVER_BUSY",
    "Fault",
    "FaultError",
    "FaultKind",
    "FaultRecord",
    "FaultedConnection",
    "FaultedHost",
    "Faults",
]

log = logging.getLogger(__name__)
R = TypeVar("R")

SEND_CONDITIONS = (SERVER_BUSY, INTERNAL_ERROR)
"""The conditions a send to an unavailable entity (or fragment) may be refused with."""
MAX_FAULTS = 1000
"""Standing faults at once; beyond it a new one is refused (``FaultError``)."""
MAX_HISTORY = 1000
"""Firings :attr:`Faults.history` keeps (the oldest is forgotten beyond it)."""


class FaultError(AMQPLinkError, ValueError):
    """A fault that cannot be made (unknown kind, bad parameter, too many); the message says which."""


class FaultKind(enum.Enum):
    """What a fault does; the values are the names ``$control`` and ``amqplink broker-fault`` take."""

    ENTITY_UNAVAILABLE = "entity-unavailable"
    FRAGMENT_UNAVAILABLE = "fragment-unavailable"
    REFUSE_CONNECTIONS = "refuse-connections"
    CLOSE_CONNECTIONS = "close-connections"
    DETACH_LINKS = "detach-links"
    DROP_CONNECTIONS = "drop-connections"
    DELAY_DISPOSITIONS = "delay-dispositions"
    EXPIRE_LOCKS = "expire-locks"

    @classmethod
    def named(cls, name: str) -> FaultKind:
        try:
            return cls(name)
        except ValueError:
            known = ", ".join(k.value for k in cls)
            raise FaultError(f"unknown fault {name!r}: expected one of {known}") from None


@dataclass(frozen=True, slots=True)
class FaultRecord:
    """One firing: which fault, when (the broker's clock) and what it did."""

    fault_id: int
    kind: FaultKind
    at: float
    what: str


@dataclass(eq=False)
class Fault:
    """One injected fault and what it has done so far."""

    id: int
    kind: FaultKind
    entity: str | None = None
    """Lower-case entity path it applies to (None: every entity)."""
    condition: str | None = None
    fragment: int | None = None
    after_bytes: int | None = None
    after_frames: int | None = None
    delay: float = 0.0
    """Seconds (delay-dispositions)."""
    until: float = math.inf
    """Broker clock time it ends by itself (infinity: until cleared)."""
    active: bool = True
    fired: int = 0
    first_fired_at: float | None = None
    last_fired_at: float | None = None
    fired_event: threading.Event = field(default_factory=threading.Event, repr=False)

    def describe(self) -> dict[str, Any]:
        """Plain values (the ``$control`` and CLI answer)."""
        out: dict[str, Any] = {"id": self.id, "fault": self.kind.value, "active": self.active, "fired": self.fired}
        for key, value in (
            ("entity", self.entity),
            ("condition", self.condition),
            ("fragment", self.fragment),
            ("after-bytes", self.after_bytes),
            ("after-frames", self.after_frames),
            ("first-fired-at", self.first_fired_at),
            ("last-fired-at", self.last_fired_at),
        ):
            if value is not None:
                out[key] = value
        if self.delay:
            out["delay-ms"] = round(self.delay * 1000)
        if self.until != math.inf:
            out["until"] = self.until
        return out


class _Cutter:
    """Counts what the broker writes on one socket and aborts it once a budget is spent.

    Bytes: exactly ``after_bytes`` more bytes go out (a frame may be cut in two).
    Frames: exactly ``after_frames`` more whole frames go out; each write holds whole
    frames (the engine's output), so frames are counted by their 4-byte size prefix
    (AMQP 1.0 2.3.1: "SIZE ... the total frame size").
    """

    def __init__(self, faults: Faults, fault: Fault, conn: FaultedConnection, transport: Any) -> None:
        self.faults = faults
        self.fault = fault
        self.conn = conn
        self.transport = transport
        self.write = transport.write
        self.bytes_left = fault.after_bytes
        self.frames_left = fault.after_frames

    def __call__(self, data: bytes | bytearray | memoryview) -> None:
        cut = self._cut_at(memoryview(data))
        if cut is None:
            self.write(data)
            return
        if cut:
            self.write(bytes(memoryview(data)[:cut]))
        self.faults.drop_now(self.conn, self.fault)

    def _cut_at(self, data: memoryview) -> int | None:
        """Where to stop in ``data`` (None: write it all, budget left)."""
        if self.bytes_left is not None:
            if len(data) < self.bytes_left:
                self.bytes_left -= len(data)
                return None
            return self.bytes_left
        assert self.frames_left is not None
        pos = 0
        while pos + 4 <= len(data) and self.frames_left > 0:
            pos += max(8, int.from_bytes(data[pos : pos + 4], "big"))
            self.frames_left -= 1
        return None if self.frames_left > 0 else min(pos, len(data))

    def restore(self) -> None:
        if self.transport.__dict__.get("write") is self:
            del self.transport.write


class FaultedConnection(Protocol):
    """What a fault does to one of the host's connections (the broker's Service Bus connection)."""

    @property
    def engine(self) -> EngineConnection:
        """Its engine (whether a close was sent)."""

    @property
    def protocol(self) -> EngineProtocol:
        """Its transport adapter (the socket a drop cuts, the peer's address)."""

    @property
    def controls(self) -> bool:
        """Whether it has a ``$control`` link (faults on connections spare it)."""

    def force_close(self, error: Error) -> None:
        """Close the connection with ``error``."""

    def detach_links(self, path: str | None, error: Error) -> list[str]:
        """Detach the links to entity ``path`` (None: all); the names of those detached."""

    def entity_paths(self) -> list[str]:
        """The entity paths its senders and receivers are attached to (lower case)."""


class FaultedHost(Protocol):
    """What the faults see of the Service Bus host they belong to (``ServiceBusHost``, which
    this module does not import: it is the one that makes the faults)."""

    @property
    def namespace(self) -> Namespace:
        """Its namespace (entities to expire, fragments to take down)."""

    @property
    def connections(self) -> Collection[FaultedConnection]:
        """Its open connections."""

    @property
    def clock(self) -> Callable[[], float]:
        """Its clock (seconds, as ``time.time``)."""


class Faults:
    """The faults of one Service Bus host; ``broker.faults``.

    Every method that makes a fault returns it; :meth:`clear` undoes it. Entity names
    are case-insensitive, as in Service Bus. ``duration`` (seconds) ends a standing
    fault by itself.
    """

    def __init__(self, host: FaultedHost) -> None:
        self.host = host
        self.faults: dict[int, Fault] = {}
        """Standing faults by id."""
        self.history: deque[FaultRecord] = deque(maxlen=MAX_HISTORY)
        self.unavailable: dict[str, Fault] = {}
        """Entity path -> the fault refusing its sends (read on every send: empty is cheap)."""
        self.delays: dict[str | None, Fault] = {}
        """Entity path (None: all) -> the fault delaying the broker's dispositions."""
        self.refusing: Fault | None = None
        self.fragment_listeners: list[Callable[[str, int, bool], None]] = []
        """Called with (entity path, fragment, down) when a fragment fault starts or ends:
        the hook for partitioned entities (which fragment a send goes to is theirs)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The broker's event loop (set when it starts): :meth:`run` calls onto it."""
        self._cutters: dict[int, list[_Cutter]] = {}
        self._partitioned: set[int] = set()
        """Ids of the fragment faults on partitioned entities."""
        self._next_id = 1
        self._deadline = math.inf

    # -- making faults ------------------------------------------------------------------
    def entity_unavailable(self, entity: str, *, condition: str = SERVER_BUSY, duration: float | None = None) -> Fault:
        """Refuse every send to ``entity`` (a queue or topic) with ``condition``
        (``com.microsoft:server-busy`` or ``amqp:internal-error``); the link stays attached."""
        path = self._entity(entity)
        if path in self.unavailable:
            raise FaultError(f"{path!r} is unavailable already (fault {self.unavailable[path].id})")
        fault = self._standing(FaultKind.ENTITY_UNAVAILABLE, duration, entity=path, condition=_send(condition))
        self.unavailable[path] = fault
        return fault

    def fragment_unavailable(
        self, entity: str, fragment: int, *, condition: str = SERVER_BUSY, duration: float | None = None
    ) -> Fault:
        """Take fragment ``fragment`` of ``entity`` down.

        A partitioned queue or topic (one with ``partitions``) is told through
        ``Namespace.set_fragment_down`` and applies its own rules: a send without a key
        goes to another fragment, a key pinned to the fragment is refused with the
        retryable condition it chooses. An entity that is not partitioned is one
        fragment, 0: taking it down makes the entity unavailable (sends get ``condition``).
        :attr:`fragment_listeners` hear of both.
        """
        path = self._entity(entity)
        if not isinstance(fragment, int) or isinstance(fragment, bool) or fragment < 0:
            raise FaultError(f"a fragment is a number from 0, not {fragment!r}")
        fragments = _fragment_count(self.host, path)
        if fragment >= fragments:
            raise FaultError(f"{path!r} has {fragments} fragment(s): {fragment} is not one of them")
        if self.fragment_down(path, fragment):
            raise FaultError(f"fragment {fragment} of {path!r} is down already")
        if fragments == 1 and path in self.unavailable:
            raise FaultError(f"{path!r} is unavailable already (fault {self.unavailable[path].id})")
        fault = self._standing(
            FaultKind.FRAGMENT_UNAVAILABLE, duration, entity=path, condition=_send(condition), fragment=fragment
        )
        if fragments == 1:
            self.unavailable[path] = fault
        else:
            self._partitioned.add(fault.id)
        self._fragment_changed(fault, down=True)
        return fault

    def refuse_connections(self, *, duration: float | None = None) -> Fault:
        """Close every new connection with ``amqp:connection:forced`` at its first link
        (a ``$control`` link excepted: the controller must be able to undo this)."""
        if self.refusing is not None:
            raise FaultError(f"connections are refused already (fault {self.refusing.id})")
        fault = self._standing(FaultKind.REFUSE_CONNECTIONS, duration)
        self.refusing = fault
        return fault

    def close_connections(self, entity: str | None = None) -> Fault:
        """Close every open connection (with a link to ``entity``, when given) now with
        ``amqp:connection:forced`` (one-shot; a connection with a ``$control`` link is spared)."""
        path = None if entity is None else self._entity(entity)
        fault = self._one_shot(FaultKind.CLOSE_CONNECTIONS, entity=path)
        for conn in self._connections(path):
            if not conn.engine.close_sent:
                conn.force_close(_error(CONNECTION_FORCED, "the namespace closed the connection (fault injected)"))
                self.fire(fault, f"closed the connection from {conn.protocol.peername}")
        return fault

    def detach_links(self, entity: str | None = None) -> Fault:
        """Detach every link to ``entity`` (None: every entity link) with
        ``amqp:link:detach-forced`` now (one-shot); ``$cbs`` and ``$control`` stay."""
        path = None if entity is None else self._entity(entity)
        fault = self._one_shot(FaultKind.DETACH_LINKS, entity=path)
        error = _error(DETACH_FORCED, f"the namespace detached the link to {path or 'the entity'} (fault injected)")
        for conn in list(self.host.connections):
            for name in conn.detach_links(path, error):
                self.fire(fault, f"detached link {name!r}")
        return fault

    def drop_connections(
        self,
        entity: str | None = None,
        *,
        after_bytes: int | None = None,
        after_frames: int | None = None,
        duration: float | None = None,
    ) -> Fault:
        """Abort the socket of every open connection (with a link to ``entity``, when
        given; no close frame), at once or after exactly ``after_bytes`` more bytes or
        ``after_frames`` more frames written to it (a connection with a ``$control`` link
        is spared)."""
        path = None if entity is None else self._entity(entity)
        if after_bytes is not None and after_frames is not None:
            raise FaultError("give after-bytes or after-frames, not both")
        for name, value in (("after-bytes", after_bytes), ("after-frames", after_frames)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise FaultError(f"{name} is a number from 0, not {value!r}")
        at_once = after_bytes is None and after_frames is None
        if at_once and duration is not None:
            raise FaultError("a drop at once is over at once: give a duration with after-bytes or after-frames")
        kind = FaultKind.DROP_CONNECTIONS
        if at_once:
            fault = self._one_shot(kind, entity=path)
        else:
            fault = self._standing(kind, duration, entity=path, after_bytes=after_bytes, after_frames=after_frames)
        cutters: list[_Cutter] = []
        for conn in self._connections(path):
            transport: Any = conn.protocol.transport  # (its write is replaced below)
            if transport is None or transport.is_closing():
                continue
            if at_once:
                self.drop_now(conn, fault)
                continue
            cutter = _Cutter(self, fault, conn, transport)
            transport.write = cutter  # undone by restore()
            cutters.append(cutter)
        if not at_once:
            self._cutters[fault.id] = cutters
            if not cutters:
                self._finish(fault)
        return fault

    def delay_dispositions(self, delay_ms: int, *, entity: str | None = None, duration: float | None = None) -> Fault:
        """Hold every disposition the broker sends (its outcome for a message sent to
        ``entity``, its answer to a settlement) ``delay_ms`` ms; the entity's state changes at once."""
        if not isinstance(delay_ms, int) or isinstance(delay_ms, bool) or delay_ms < 1:
            raise FaultError(f"delay-ms is a number from 1, not {delay_ms!r}")
        path = None if entity is None else self._entity(entity)
        if path in self.delays:
            raise FaultError(f"dispositions of {path or 'every entity'} are delayed already")
        fault = self._standing(FaultKind.DELAY_DISPOSITIONS, duration, entity=path, delay=delay_ms / 1000)
        self.delays[path] = fault
        return fault

    def expire_locks(self, entity: str | None = None) -> Fault:
        """End every message and session lock (of ``entity``, or of every entity) now, as
        if it had run out: settling with the old token gets ``com.microsoft:message-lock-lost``."""
        path = None if entity is None else self._entity(entity)
        fault = self._one_shot(FaultKind.EXPIRE_LOCKS, entity=path)
        now = self.host.clock()
        for ent in self.host.namespace.entities():
            if path is None or ent.path.lower() == path:
                count = ent.expire_locks(now)
                if count:
                    self.fire(fault, f"expired {count} lock(s) of {ent.path!r}")
        return fault

    def inject(self, spec: Mapping[str, Any]) -> Fault:
        """Make the fault a ``$control`` request body describes: ``{"fault": KIND, "entity": ...,
        "condition": ..., "fragment": N, "after-bytes": N, "after-frames": N, "delay-ms": N,
        "duration": SECONDS}``; unknown keys are refused."""
        kind = FaultKind.named(str(spec.get("fault")))
        allowed = _PARAMETERS[kind]
        unknown = sorted(set(spec) - allowed - {"fault"})
        if unknown:
            raise FaultError(f"{kind.value} does not take {', '.join(unknown)} (it takes {', '.join(sorted(allowed))})")
        kwargs = {_ARGUMENT.get(key, key): value for key, value in spec.items() if key != "fault"}
        if kind in (FaultKind.ENTITY_UNAVAILABLE, FaultKind.FRAGMENT_UNAVAILABLE) and "entity" not in spec:
            raise FaultError(f"{kind.value} needs an entity")
        if kind is FaultKind.FRAGMENT_UNAVAILABLE and "fragment" not in spec:
            raise FaultError("fragment-unavailable needs a fragment")
        if kind is FaultKind.DELAY_DISPOSITIONS and "delay-ms" not in spec:
            raise FaultError("delay-dispositions needs delay-ms")
        maker: Callable[..., Fault] = getattr(self, kind.value.replace("-", "_"))
        return maker(**kwargs)

    def run(self, method: Callable[..., R], *args: Any, timeout: float = 10.0, **kwargs: Any) -> R:
        """Call ``method`` (one of these, such as ``faults.entity_unavailable``) on the
        broker's event loop from another thread and return its result: for a broker
        running in a thread of its own while a blocking client is tested."""
        if self.loop is None:
            raise RuntimeError("the broker is not started")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:  # on the broker's own loop already: waiting would deadlock
            return method(*args, **kwargs)

        async def call() -> R:
            return method(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout)

    # -- undoing ----------------------------------------------------------------------
    def clear(self, fault: Fault | int) -> bool:
        """End a standing fault (by value or id); False if it was not active."""
        found = self.faults.get(fault if isinstance(fault, int) else fault.id)
        if found is None:
            return False
        self._finish(found)
        log.info("fault %d (%s) cleared", found.id, found.kind.value)
        return True

    def clear_all(self) -> int:
        """End every standing fault; how many there were."""
        ids = list(self.faults)
        for fault_id in ids:
            self.clear(fault_id)
        return len(ids)

    @property
    def active(self) -> list[Fault]:
        """The standing faults, oldest first."""
        return list(self.faults.values())

    # -- queries the server makes ---------------------------------------------------------
    def check_send(self, path: str) -> None:
        """Raise the error a send to ``path`` gets while it is unavailable (call only when
        :attr:`unavailable` is not empty)."""
        fault = self.unavailable.get(path)
        if fault is not None:
            self.fire(fault, f"refused a send to {path!r}")
            assert fault.condition is not None
            raise EntityError(fault.condition, f"{path!r} is unavailable (fault injected): retry later")

    def fragment_down(self, path: str, fragment: int) -> bool:
        """Whether fragment ``fragment`` of entity ``path`` (lower case) is down."""
        return any(
            f.kind is FaultKind.FRAGMENT_UNAVAILABLE and f.entity == path and f.fragment == fragment
            for f in self.faults.values()
        )

    def delay_for(self, path: str) -> float:
        """Seconds to hold a disposition about ``path`` (call only when :attr:`delays` is not empty)."""
        fault = self.delays.get(path) or self.delays.get(None)
        if fault is None:
            return 0.0
        self.fire(fault, f"delayed a disposition on {path!r} by {round(fault.delay * 1000)} ms")
        return fault.delay

    def refuse_connection(self, fault: Fault, peer: object) -> Error | None:
        """The close error for a connection opened while ``fault`` refuses connections
        (None when it has been cleared since)."""
        if not fault.active:
            return None
        self.fire(fault, f"refused the connection from {peer}")
        return _error(CONNECTION_FORCED, "the namespace refuses connections (fault injected): retry later")

    def tick(self, now: float) -> None:
        """End the faults whose duration ran out."""
        if now < self._deadline:
            return
        for fault in [f for f in self.faults.values() if f.until <= now]:
            log.info("fault %d (%s) ended after its duration", fault.id, fault.kind.value)
            self._finish(fault)
        self._deadline = min((f.until for f in self.faults.values()), default=math.inf)

    # -- bookkeeping ----------------------------------------------------------------------
    def fire(self, fault: Fault, what: str) -> None:
        """Record that ``fault`` acted (once per event, logged)."""
        now = self.host.clock()
        fault.fired += 1
        if fault.first_fired_at is None:
            fault.first_fired_at = now
        fault.last_fired_at = now
        self.history.append(FaultRecord(fault.id, fault.kind, now, what))
        # The first firing at INFO; repeats (a refused send each) at DEBUG, as the server logs them.
        log.log(
            logging.INFO if fault.fired == 1 else logging.DEBUG,
            "fault %d (%s) fired: %s",
            fault.id,
            fault.kind.value,
            what,
        )
        fault.fired_event.set()

    def drop_now(self, conn: FaultedConnection, fault: Fault) -> None:
        """Abort ``conn``'s socket (no close frame: as a network failure)."""
        transport = conn.protocol.transport
        cutters = self._cutters.get(fault.id, [])
        for cutter in [c for c in cutters if c.conn is conn]:
            cutter.restore()
            cutters.remove(cutter)
        if transport is not None:
            self.fire(fault, f"dropped the connection from {conn.protocol.peername}")
            transport.abort()
        if fault.id in self._cutters and not cutters:
            self._finish(fault)

    def _connections(self, path: str | None) -> list[FaultedConnection]:
        """The open connections, but those with a ``$control`` link; with a link to ``path`` if given."""
        return [
            conn
            for conn in self.host.connections
            if not conn.controls and (path is None or any(under(where, path) for where in conn.entity_paths()))
        ]

    def _fragment_refused(self, path: str) -> Callable[[int, str], None]:
        def refused(fragment: int, what: str) -> None:
            for fault in list(self.faults.values()):
                if fault.kind is FaultKind.FRAGMENT_UNAVAILABLE and fault.entity == path and fault.fragment == fragment:
                    self.fire(fault, f"refused {what} on fragment {fragment} of {path!r}")

        return refused

    def _entity(self, entity: str) -> str:
        if not isinstance(entity, str) or not entity.strip("/"):
            raise FaultError(f"an entity is a path such as 'queue' or 'topic/subscriptions/sub', not {entity!r}")
        return entity.strip("/").lower()

    def _until(self, duration: float | None) -> float:
        if duration is None:
            return math.inf
        if isinstance(duration, bool) or not isinstance(duration, int | float) or not duration > 0:
            raise FaultError(f"a duration is a number of seconds above 0, not {duration!r}")
        return self.host.clock() + float(duration)

    def _new(self, kind: FaultKind, **params: Any) -> Fault:
        fault = Fault(self._next_id, kind, **params)
        self._next_id += 1
        return fault

    def _standing(self, kind: FaultKind, duration: float | None, **params: Any) -> Fault:
        until = self._until(duration)
        if len(self.faults) >= MAX_FAULTS:
            raise FaultError(f"{MAX_FAULTS} faults are active: clear some first")
        fault = self._new(kind, until=until, **params)
        self._deadline = min(self._deadline, until)
        self.faults[fault.id] = fault
        log.info("fault %d (%s) injected: %s", fault.id, kind.value, fault.describe())
        return fault

    def _one_shot(self, kind: FaultKind, **params: Any) -> Fault:
        fault = self._new(kind, **params)
        fault.active = False
        log.info("fault %d (%s) injected", fault.id, kind.value)
        return fault

    def _finish(self, fault: Fault) -> None:
        fault.active = False
        self.faults.pop(fault.id, None)
        if self.unavailable.get(fault.entity or "") is fault:
            del self.unavailable[fault.entity or ""]
        if self.delays.get(fault.entity) is fault:
            del self.delays[fault.entity]
        if self.refusing is fault:
            self.refusing = None
        for cutter in self._cutters.pop(fault.id, []):
            cutter.restore()
        if fault.kind is FaultKind.FRAGMENT_UNAVAILABLE and fault.entity is not None and fault.fragment is not None:
            self._fragment_changed(fault, down=False)
            self._partitioned.discard(fault.id)

    def _fragment_changed(self, fault: Fault, *, down: bool) -> None:
        path, fragment = fault.entity, fault.fragment
        assert path is not None and fragment is not None
        if fault.id in self._partitioned:
            # The partitioned entity owns the fragment rules; it tells us of each refusal.
            assert fault.condition is not None
            self.host.namespace.set_fragment_down(path, fragment, down, condition=fault.condition)
            partitions = _partitions(self.host, path)
            still = any(f.kind is FaultKind.FRAGMENT_UNAVAILABLE and f.entity == path for f in self.faults.values())
            if partitions is not None:
                partitions.on_refused = self._fragment_refused(path) if still else None
        for listener in list(self.fragment_listeners):
            listener(path, fragment, down)


_PARAMETERS: dict[FaultKind, frozenset[str]] = {
    FaultKind.ENTITY_UNAVAILABLE: frozenset({"entity", "condition", "duration"}),
    FaultKind.FRAGMENT_UNAVAILABLE: frozenset({"entity", "fragment", "condition", "duration"}),
    FaultKind.REFUSE_CONNECTIONS: frozenset({"duration"}),
    FaultKind.CLOSE_CONNECTIONS: frozenset({"entity"}),
    FaultKind.DETACH_LINKS: frozenset({"entity"}),
    FaultKind.DROP_CONNECTIONS: frozenset({"entity", "after-bytes", "after-frames", "duration"}),
    FaultKind.DELAY_DISPOSITIONS: frozenset({"delay-ms", "entity", "duration"}),
    FaultKind.EXPIRE_LOCKS: frozenset({"entity"}),
}
"""The parameters each fault takes, as ``$control`` and the CLI spell them."""
_ARGUMENT = {"after-bytes": "after_bytes", "after-frames": "after_frames", "delay-ms": "delay_ms"}


def parameters(kind: FaultKind) -> frozenset[str]:
    """The parameters ``kind`` takes (``$control`` spelling)."""
    return _PARAMETERS[kind]


def under(where: str, path: str) -> bool:
    """Whether entity path ``where`` is ``path`` or below it (``t`` covers ``t/subscriptions/s``)."""
    return where == path or where.startswith(path + "/")


def _send(condition: str) -> str:
    """A send refusal's condition; ``server-busy`` and ``internal-error`` are short for the two."""
    condition = {"server-busy": SERVER_BUSY, "internal-error": INTERNAL_ERROR}.get(condition, condition)
    if condition not in SEND_CONDITIONS:
        raise FaultError(f"a send may be refused with {' or '.join(SEND_CONDITIONS)}, not {condition!r}")
    return condition


def _partitions(host: FaultedHost, path: str) -> Partitions | None:
    """The fragments of the queue or topic at ``path`` (None: not partitioned).

    Never makes the entity; ``FaultError`` if there is none and none is made on first use."""
    namespace = host.namespace
    name = path.split("/", 1)[0]
    target = namespace.queues.get(name) or namespace.topics.get(name)
    if target is None and not namespace.auto_create:
        raise FaultError(f"no entity {path!r} in the namespace")
    return None if target is None else target.partitions


def _fragment_count(host: FaultedHost, path: str) -> int:
    """Fragments of entity ``path``: 1 unless it is partitioned."""
    partitions = _partitions(host, path)
    return 1 if partitions is None else partitions.count


def _error(condition: str, description: str) -> Error:
    return Error(condition=Symbol(condition), description=description, info={})


def describe_all(faults: Iterable[Fault]) -> list[dict[str, Any]]:
    """:meth:`Fault.describe` of each."""
    return [f.describe() for f in faults]
