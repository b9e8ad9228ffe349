"""Property: over random topologies (queues and topics, partitioned or not, with duplicate
detection, subscriptions with filters, sessions, forwards and loops of forwards, small
caps) and random sends, batches, drains and fragments taken down, every entity holds what
a model holds that applies each send wholly or not at all (issue 30, item 1).

The model is written from the rules, not from the broker's code: a send is routed into a
*delta* (the copies and ids it would add); a refusal anywhere discards the delta, so the
send leaves no copy and no id; otherwise the delta is applied whole. Its rules
(docs/broker-semantics.md#forwarding-c4, #sessions-on-a-topic-c3, #duplicate-detection-issue-30-item-1):

* a partitioned entity pins a keyed message to fragment ``crc32(key) % count``; a send
  pinned to a fragment that is down is refused (``amqp:internal-error``); caps are per fragment;
* duplicate detection (per fragment when partitioned) drops an id logged before, or given
  earlier in the same send (the delta's own ids count);
* a topic copies a message into each subscription whose rule passes it, in order;
* a subscription (or a queue reached by a forward) that requires sessions dead-letters a
  message without a session id; a queue sent to directly refuses it (``amqp:not-allowed``);
* a forward at the fifth hop is dead-lettered in the forwarding entity; the others are
  forwarded one message at a time, and one whose destination refuses it for quota is
  dead-lettered likewise; any other refusal refuses the whole send;
* an entity over its cap (message count, the copies of this send counted) refuses for quota.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from amqplink.broker.config import (
    EntityProperties,
    NamespaceConfig,
    QueueConfig,
    SubscriptionConfig,
    TopicConfig,
    sql_rule,
)
from amqplink.broker.namespace import BATCH_FORMAT, EntityError, Namespace
from amqplink.message import Message
from tests.broker.nsutil import T0

QUEUES = ("q0", "q1", "q2")
TOPICS = ("t0", "t1")
NAMES = QUEUES + TOPICS
FRAGMENTS = 2
QUOTA = "amqp:resource-limit-exceeded"
DOWN = "amqp:internal-error"
NO_SESSION = "amqp:not-allowed"
RULES = {"all": "1 = 1", "red": "color = 'red'", "blue": "color = 'blue'"}


@dataclass(frozen=True)
class Spec:
    """One queue or subscription (``kind`` ``queue``/``sub``) or a topic (``topic``)."""

    kind: str
    cap: int = 3
    forward: str | None = None
    session: bool = False
    partitioned: bool = False
    dedup: bool = False
    rule: str = "all"
    subs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Msg:
    mid: str
    color: str
    session: str | None
    key: str  # the partition key: the session id, else a PartitionKey


class Refused(Exception):
    def __init__(self, condition: str) -> None:
        super().__init__(condition)
        self.condition = condition


@dataclass
class Delta:
    """What a send (or one forward of it) would add: copies by (path, fragment), ids by
    (detector, fragment)."""

    parent: Delta | None = None
    copies: list[tuple[tuple[str, int], str]] = field(default_factory=list)
    ids: list[tuple[tuple[str, int], str]] = field(default_factory=list)

    def all_copies(self) -> list[tuple[tuple[str, int], str]]:
        return (self.parent.all_copies() if self.parent else []) + self.copies

    def all_ids(self) -> list[tuple[tuple[str, int], str]]:
        return (self.parent.all_ids() if self.parent else []) + self.ids


class Model:
    def __init__(self, specs: dict[str, Spec]) -> None:
        self.specs = specs
        self.held: Counter[tuple[str, int, str]] = Counter()  # (path, fragment, mid)
        self.seen: set[tuple[tuple[str, int], str]] = set()
        self.down: set[tuple[str, int]] = set()  # (queue or topic, fragment)

    # -- the shape ------------------------------------------------------------------
    def spec(self, path: str) -> Spec:
        """The spec whose properties ``path`` has (a dead-letter queue: its entity's)."""
        path = path.removesuffix("/$DeadLetterQueue")
        if "/Subscriptions/" in path:
            topic, sub = path.split("/Subscriptions/")
            return self.specs[f"{topic}/{sub}"]
        return self.specs[path]

    def partitioned(self, path: str) -> bool:
        return self.specs[path.split("/")[0]].partitioned

    def fragment(self, path: str, msg: Msg) -> int:
        return zlib.crc32(msg.key.encode()) % FRAGMENTS if self.partitioned(path) else 0

    def paths(self) -> list[str]:
        out = []
        for name, spec in self.specs.items():
            if spec.kind == "queue":
                out.append(name)
            elif spec.kind == "sub":
                topic, sub = name.split("/")
                out.append(f"{topic}/Subscriptions/{sub}")
        return out + [f"{p}/$DeadLetterQueue" for p in out]

    # -- a send -------------------------------------------------------------------------
    def send(self, target: str, msgs: list[Msg]) -> str | None:
        """Apply a send wholly (None) or not at all (the condition refusing it)."""
        delta = Delta()
        try:
            self.route(target, msgs, 0, delta)
        except Refused as refused:
            return refused.condition
        for (path, fragment), mid in delta.copies:
            self.held[(path, fragment, mid)] += 1
        self.seen.update(delta.ids)
        return None

    def route(self, name: str, msgs: list[Msg], hops: int, delta: Delta) -> None:
        spec = self.specs[name]
        fragment = 0
        if spec.partitioned:  # (a send's messages share one key here)
            fragment = self.fragment(name, msgs[0])
            if (name, fragment) in self.down:
                raise Refused(DOWN)
        if spec.dedup:
            logged = self.seen | set(delta.all_ids())
            fresh = []
            for msg in msgs:
                if ((name, fragment), msg.mid) not in logged:
                    logged.add(((name, fragment), msg.mid))
                    fresh.append(msg)
            msgs = fresh
            delta.ids += [((name, fragment), m.mid) for m in msgs]
        if not msgs:
            return
        if spec.kind == "topic":
            for sub in spec.subs:
                rule = self.specs[f"{name}/{sub}"].rule
                passed = [m for m in msgs if rule in ("all", m.color)]
                if passed:
                    self.copy(f"{name}/Subscriptions/{sub}", passed, hops, delta)
            return
        if spec.forward:
            self.forward(name, msgs, hops, delta)
            return
        if spec.session:
            sessionless = [m for m in msgs if m.session is None]
            if sessionless and not hops:
                raise Refused(NO_SESSION)
            self.store(f"{name}/$DeadLetterQueue", sessionless, delta)
            msgs = [m for m in msgs if m.session is not None]
        self.store(name, msgs, delta)

    def copy(self, path: str, msgs: list[Msg], hops: int, delta: Delta) -> None:
        spec = self.spec(path)
        if spec.forward:
            self.forward(path, msgs, hops, delta)
            return
        if spec.session:
            self.store(f"{path}/$DeadLetterQueue", [m for m in msgs if m.session is None], delta)
            msgs = [m for m in msgs if m.session is not None]
        self.store(path, msgs, delta)

    def forward(self, path: str, msgs: list[Msg], hops: int, delta: Delta) -> None:
        if hops >= 4:
            self.store(f"{path}/$DeadLetterQueue", msgs, delta)
            return
        for msg in msgs:  # one by one
            child = Delta(parent=delta)
            try:
                self.route(self.spec(path).forward or "", [msg], hops + 1, child)
            except Refused as refused:
                if refused.condition != QUOTA:
                    raise
                self.store(f"{path}/$DeadLetterQueue", [msg], delta)
                continue
            delta.copies += child.copies
            delta.ids += child.ids

    def store(self, path: str, msgs: list[Msg], delta: Delta) -> None:
        if not msgs:
            return
        cap = self.spec(path).cap
        fragment = self.fragment(path, msgs[0])
        planned = sum(1 for (p, f), _ in delta.all_copies() if (p, f) == (path, fragment))
        held = sum(n for (p, f, _), n in self.held.items() if (p, f) == (path, fragment))
        if held + planned + len(msgs) > cap:
            raise Refused(QUOTA)
        delta.copies += [((path, fragment), m.mid) for m in msgs]

    # -- the rest -----------------------------------------------------------------------
    def drain(self, path: str) -> None:
        """Every message of ``path`` received, except in fragments that are down."""
        name = path.split("/")[0]
        for key in [k for k in self.held if k[0] == path and (name, k[1]) not in self.down]:
            del self.held[key]

    def contents(self, path: str) -> Counter[str]:
        out: Counter[str] = Counter()
        for (p, _, mid), n in self.held.items():
            if p == path:
                out[mid] += n
        return out


# -- the broker side ----------------------------------------------------------------------


def properties(spec: Spec) -> EntityProperties:
    extra: dict[str, Any] = {}
    if spec.dedup:
        extra.update(requires_duplicate_detection=True, duplicate_detection_window=600.0)
    if spec.partitioned:
        extra.update(enable_partitioning=True, partition_count=FRAGMENTS)
    return EntityProperties(max_messages=spec.cap, forward_to=spec.forward, requires_session=spec.session, **extra)


def namespace(specs: dict[str, Spec]) -> Namespace:
    queues = tuple(QueueConfig(name, properties(specs[name])) for name in QUEUES)
    topics = tuple(
        TopicConfig(
            name,
            properties(specs[name]),
            subscriptions=tuple(
                SubscriptionConfig(
                    sub,
                    properties(specs[f"{name}/{sub}"]),
                    rules=(sql_rule("r", RULES[specs[f"{name}/{sub}"].rule]),),
                )
                for sub in specs[name].subs
            ),
        )
        for name in TOPICS
    )
    return Namespace(NamespaceConfig(queues=queues, topics=topics))


def encoded(msg: Msg) -> bytes:
    friendly: dict[str, Any] = {"message_id": msg.mid, "application_properties": {"color": msg.color}}
    if msg.session is not None:
        friendly["session_id"] = msg.session
    else:
        friendly["partition_key"] = msg.key
    return Message(b"body", **friendly).encode()


def broker_send(ns: Namespace, target: str, msgs: list[Msg]) -> str | None:
    entity = ns.sender_target(target)
    if len(msgs) == 1:
        payload, message_format = encoded(msgs[0]), 0
    else:
        payload, message_format = Message([encoded(m) for m in msgs], body_type="data").encode(), BATCH_FORMAT
    try:
        ns.send(entity, payload, T0, message_format)
    except EntityError as exc:
        return exc.condition
    return None


def broker_contents(ns: Namespace, path: str) -> Counter[str]:
    return Counter(m.envelope.message_id for m in ns.resolve(path).target.store)  # type: ignore[union-attr]


# -- the strategies -----------------------------------------------------------------------

forward_to = st.one_of(st.none(), st.sampled_from(NAMES))


@st.composite
def topologies(draw: st.DrawFn) -> dict[str, Spec]:
    specs: dict[str, Spec] = {}
    for name in QUEUES:
        forward = draw(forward_to)
        specs[name] = Spec(
            "queue",
            cap=draw(st.integers(1, 3)),
            forward=forward,
            session=forward is None and draw(st.booleans()),
            partitioned=draw(st.booleans()),
            dedup=draw(st.booleans()),
        )
    for name in TOPICS:
        subs = tuple(f"s{i}" for i in range(draw(st.integers(1, 3))))
        specs[name] = Spec("topic", partitioned=draw(st.booleans()), dedup=draw(st.booleans()), subs=subs)
        for sub in subs:
            forward = draw(forward_to)
            specs[f"{name}/{sub}"] = Spec(
                "sub",
                cap=draw(st.integers(1, 3)),
                forward=forward,
                session=forward is None and draw(st.booleans()),
                rule=draw(st.sampled_from(list(RULES))),
            )
    return specs


@st.composite
def sends(draw: st.DrawFn) -> tuple[str, str, list[Msg]]:
    target = draw(st.sampled_from(NAMES))
    key = draw(st.sampled_from(["s0", "s1", "k0", "k1"]))
    session = key if key.startswith("s") else None
    count = draw(st.integers(1, 2))
    mids = draw(st.lists(st.sampled_from([f"m{i}" for i in range(6)]), min_size=count, max_size=count))
    msgs = [Msg(mid, draw(st.sampled_from(["red", "blue"])), session, key) for mid in mids]
    return ("send", target, msgs)


operations = st.one_of(
    sends(),
    st.tuples(st.just("drain"), st.sampled_from((*QUEUES, "t0/s0", "t1/s0")), st.booleans()),
    st.tuples(st.just("down"), st.sampled_from(NAMES), st.integers(0, FRAGMENTS - 1), st.booleans()),
)


def _path(name: str) -> str:
    if "/" in name:
        topic, sub = name.split("/")
        return f"{topic}/Subscriptions/{sub}"
    return name


@settings(deadline=None)
@given(specs=topologies(), ops=st.lists(operations, max_size=25))
def test_every_entity_holds_what_sends_applied_wholly_or_not_at_all_put_there(
    specs: dict[str, Spec], ops: list[tuple[Any, ...]]
) -> None:
    ns = namespace(specs)
    model = Model(specs)
    for op in ops:
        if op[0] == "send":
            _, target, msgs = op
            expected = model.send(target, msgs)
            event(f"a send {'refused: ' + expected if expected else 'stored'}")
            assert broker_send(ns, target, msgs) == expected, (target, msgs)
        elif op[0] == "drain":
            _, name, dead_letters = op
            path = _path(name) + ("/$DeadLetterQueue" if dead_letters else "")
            spec = model.spec(path)
            if (spec.forward or spec.session) and not dead_letters:
                continue  # (no receiver on a forwarding entity; a session receiver needs its session)
            entity = ns.resolve(path).entity
            assert entity is not None
            entity.receive_many(T0, len(entity.store), lock=False)
            model.drain(path)
        else:
            _, name, fragment, down = op
            if not specs[name].partitioned:
                continue
            ns.set_fragment_down(name, fragment, down)
            (model.down.add if down else model.down.discard)((name, fragment))
        for path in model.paths():
            assert broker_contents(ns, path) == model.contents(path), (path, op)
