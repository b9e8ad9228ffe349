"""The journal's records: what one change of the namespace looks like on disk, and the
state a sequence of them adds up to. Each kind is written and read here, and only here:
its layout (a :class:`struct.Struct` or a kind byte), the function that packs it, and
:meth:`State.apply`, which replays it (the group commit, the persistence and a compaction
write records through these functions; recovery reads them through :class:`State`).

A batch (one group commit) is a run of records; each record is a kind byte, fixed
fields packed big-endian with :mod:`struct`, and for some a variable tail:

* ``M`` a message stored: entity, sequence number, state, delivery count, deferred,
  enqueued/expiry/scheduled time (NaN: none), the length of its bytes, then the bytes
  (the message as delivered, without the broker's stamps);
* ``B`` messages stored together, their sequence numbers consecutive (as a run of ``M``
  records): entity, the first's sequence number, how many, the fields they share (state,
  delivery count, deferred, enqueued/expiry/scheduled time), each one's length (u32),
  then their bytes one after another (each message's as an ``M`` record holds them);
* ``U`` a message's state changed: the same as ``M`` without the bytes;
* ``V`` state changes of messages with consecutive sequence numbers whose fields are now
  the same (as a run of ``U`` records): entity, the first's sequence number, how many,
  the fields;
* ``D`` a message gone (settled, expired, dead-lettered away, purged);
* ``G`` messages with consecutive sequence numbers gone: entity, the first's sequence
  number, how many (as a run of ``D`` records);
* ``S`` an entity's next sequence number;
* ``E`` an entity id given to a path (``path#i`` for a partitioned entity's fragment ``i``);
* ``T`` a session's state (length ``0xFFFFFFFF``: removed);
* ``P`` a duplicate-detection id seen, ``X`` ids whose window ended before a time forgotten;
* ``N`` the namespace's entity definitions (JSON, :mod:`.definitions`), the last one wins;
* ``R`` forget everything before: the live state follows (what a compaction writes);
* ``A`` records that stand or fall together: their length, then the records (a
  transaction's commit, :meth:`.commit.GroupCommit.atomic`). A batch's frame is checked
  whole, so a torn write drops all of them; the record keeps them one unit whatever
  frames a batch is written in.

Later records win over earlier ones; :class:`State` replays them.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain, groupby
from operator import add, attrgetter

from amqplink import AMQPLinkError
from amqplink.broker.namespace.envelope import split_message
from amqplink.broker.namespace.store import MessageState, StoredMessage
from amqplink.codec.errors import DecodeError

__all__ = [
    "GONE",
    "KEYED",
    "KINDS",
    "MESSAGE",
    "RESET_RECORD",
    "RUN",
    "STATE",
    "STATE_CODES",
    "MessageFields",
    "RecordError",
    "State",
    "Touched",
    "atomic_record",
    "changed_record",
    "definitions_record",
    "delete_record",
    "duplicate_record",
    "entity_record",
    "gone_record",
    "message_records",
    "messages_records",
    "purge_record",
    "sequence_record",
    "session_record",
    "stored_message",
]

MESSAGE = struct.Struct(">BIqBIBdddI")
"""kind, entity, sequence number, state, delivery count, deferred, enqueued at, expires at,
scheduled at, payload length (then the payload)."""
STATE = struct.Struct(">BIqBIBddd")
"""The same without the payload."""
RUN = struct.Struct(">BIqIBIBddd")
"""kind, entity, first sequence number, count, then the shared fields as :data:`STATE` has
them (B: then ``count`` lengths as u32, then the payloads; V: nothing more)."""
GONE = struct.Struct(">BIqI")
"""kind, entity, first sequence number, count (G)."""
KEYED = struct.Struct(">BIq")
"""kind, entity, sequence number (D: a message deleted) or next sequence number (S)."""
_ENTITY = struct.Struct(">BIH")  # E: entity, path length
_SESSION = struct.Struct(">BIHI")  # T: entity, session id length, state length
_DUPLICATE = struct.Struct(">BIddH")  # P: entity, seen at, expires at, id length
_PURGE = struct.Struct(">Bd")  # X: before
_BLOB = struct.Struct(">BI")  # N: length
_ATOMIC = struct.Struct(">BI")  # A: the length of the records inside

K_MESSAGE, K_STATE, K_DELETE, K_SEQUENCE, K_RUN, K_STATE_RUN, K_GONE = b"MUDSBVG"
K_ENTITY, K_SESSION, K_DUPLICATE, K_PURGE, K_DEFINITIONS, K_RESET, K_ATOMIC = b"ETPXNRA"
KINDS = b"MUDSBVGETPXNRA"
"""Every record kind (the first byte of a batch is one of them)."""
_REMOVED = 0xFFFFFFFF

MessageFields = tuple[int, int, int, float, float, float | None, bytes]
"""(state code, delivery count, deferred, enqueued at, expires at, scheduled at, payload)."""
STATE_CODES = {MessageState.AVAILABLE: 0, MessageState.LOCKED: 1, MessageState.DEFERRED: 2, MessageState.SCHEDULED: 3}
_CODES = {state._value_: code for state, code in STATE_CODES.items()}
"""By the state's value: an enum member hashes in Python, its value string in C (hot path)."""
_STATES = {code: state for state, code in STATE_CODES.items()}
_MESSAGE = MESSAGE.pack
_RUN = RUN.pack
_STATE = STATE.pack
_KEYED = KEYED.pack
_GONE = GONE.pack


# -- writing -------------------------------------------------------------------------
def gone_record(entity: int, first: int, count: int) -> bytes:
    """The record of ``count`` messages with consecutive sequence numbers from ``first`` gone
    (one: ``D``, else ``G``)."""
    if count == 1:
        return _KEYED(K_DELETE, entity, first)
    return _GONE(K_GONE, entity, first, count)


def delete_record(entity: int, sequence_number: int) -> bytes:
    """The record of one message gone (``D``)."""
    return gone_record(entity, sequence_number, 1)


def changed_record(entity: int, first: int, count: int, msg: StoredMessage) -> bytes:
    """The record of the state changes of ``count`` messages with consecutive sequence numbers
    from ``first``, their fields now ``msg``'s (one: ``U``, else ``V``)."""
    fields = _stored_fields(msg)
    if count == 1:
        return _STATE(K_STATE, entity, first, *fields)
    return _RUN(K_STATE_RUN, entity, first, count, *fields)


def _stored_fields(msg: StoredMessage) -> tuple[int, int, bool, float, float, float]:
    """The fields of ``msg`` a message or state record holds after its key: state code,
    delivery count, deferred, enqueued at, expires at, scheduled at (NaN: none)."""
    at = msg.scheduled_at
    return (
        _CODES[msg.state._value_], msg.delivery_count, msg.deferred,
        msg.enqueued_at, msg.expires_at, math.nan if at is None else at,
    )  # fmt: skip


def _scheduled_at(value: float) -> float | None:
    """A record's scheduled time as :func:`_stored_fields` wrote it (NaN: none)."""
    return None if math.isnan(value) else value


def message_records(out: list[bytes], entity: int, msg: StoredMessage) -> None:
    """Append the records storing ``msg`` (its fields, then its bytes: :meth:`Envelope.encode`'s,
    in the pieces the envelope holds, not copied into one) to ``out``."""
    messages_records(out, entity, (msg,))


def messages_records(out: list[bytes], entity: int, messages: Iterable[StoredMessage | None]) -> None:
    """:func:`message_records` of each of ``messages`` (None: skipped) in turn, in one call; a
    run of messages with consecutive sequence numbers and the same fields (as many sent
    together are) as one ``B`` record (:data:`RUN`). Each message's bytes are written as the
    envelope holds them (head, properties, body), not copied into one.

    The messages are taken a stretch of equal fields at a time (those of one batch transfer,
    or of one loop turn's sends, mostly), and a stretch that is one run (:func:`_one_run`)
    is written with no Python code per message; any other one message by message."""
    listed = list(messages)
    if None in listed:  # (a message gone since it was stored: rare)
        _runs_records(out, entity, listed)
        return
    at = 0
    for _, same in groupby(map(_SHARED, listed)):
        n = len(list(same))
        stretch = listed[at : at + n]
        at += n
        if n == 1 or not _one_run(out, entity, stretch):
            _runs_records(out, entity, stretch)


def _runs_records(out: list[bytes], entity: int, messages: list[StoredMessage | None]) -> None:
    """:func:`messages_records`, message by message: each run found as it goes."""
    heads: list[bytes] = []
    props: list[bytes] = []
    bodies: list[bytes] = []
    """The pieces of the messages of the run under way (empty: none), whose first is ``first``."""
    add_head, add_props, add_body = heads.append, props.append, bodies.append
    first: StoredMessage | None = None
    shared: tuple[object, ...] = ()
    """``first``'s fields (:data:`_SHARED`), which the run's others have too."""
    seq = 0
    """The sequence number the run's next message has."""
    # The head (header, delivery- and message-annotations sections) of the message before, and the
    # header and annotations it was encoded from: the messages of a batch transfer mostly share them
    # (the same objects: an envelope's annotations are never changed in place, ``Envelope.with_*``
    # copy them), so a distinct head is encoded once per run of them.
    header_of: object = None
    annotations_of: object = None
    delivery_annotations_of: object = None
    head = b""
    for msg in messages:
        if msg is None:
            if bodies:
                _run_records(out, entity, first, heads, props, bodies)
                heads, props, bodies = [], [], []
                add_head, add_props, add_body = heads.append, props.append, bodies.append
            continue
        envelope = msg.envelope
        annotations = envelope.annotations
        if (
            annotations is not annotations_of
            or envelope.header is not header_of
            or envelope.delivery_annotations is not delivery_annotations_of
        ):
            header_of, annotations_of, head = envelope.header, annotations, envelope.head()
            delivery_annotations_of = envelope.delivery_annotations
        if not bodies or msg.sequence_number != seq or _SHARED(msg) != shared:
            if bodies:
                _run_records(out, entity, first, heads, props, bodies)
                heads, props, bodies = [], [], []
                add_head, add_props, add_body = heads.append, props.append, bodies.append
            first, shared, seq = msg, _SHARED(msg), msg.sequence_number
        add_head(head)
        add_props(envelope.props_raw)
        add_body(envelope.body)
        seq += 1
    if bodies:
        _run_records(out, entity, first, heads, props, bodies)


def _one_run(out: list[bytes], entity: int, messages: list[StoredMessage | None]) -> bool:
    """The records of ``messages``, none None and all with the same fields, as one run when
    they are one (consecutive sequence numbers, one head for all: the same header, delivery- and
    message-annotations objects, or none), checked and gathered a list at a time with no Python code
    per message; False (nothing written) when they are not."""
    first = messages[0]
    assert first is not None
    start = first.sequence_number
    if list(map(_SEQUENCE, messages)) != list(range(start, start + len(messages))):
        return False
    envelopes = list(map(_ENVELOPE, messages))
    headers = list(map(_HEADER, envelopes))
    annotations = list(map(_ANNOTATIONS, envelopes))
    delivery_annotations = list(map(_DELIVERY_ANNOTATIONS, envelopes))
    if headers.count(None) == len(headers) and not any(annotations) and not any(delivery_annotations):
        head = b""
    else:  # (the same objects: an envelope's annotations are never changed in place)
        n = len(envelopes)
        for ids in (list(map(id, headers)), list(map(id, annotations)), list(map(id, delivery_annotations))):
            if ids.count(ids[0]) != n:
                return False
        head = envelopes[0].head()
    _run_records(out, entity, first, [head] * len(envelopes), list(map(_PROPS, envelopes)), list(map(_BODY, envelopes)))
    return True


_SEQUENCE = attrgetter("sequence_number")
_ENVELOPE = attrgetter("envelope")
_HEADER = attrgetter("header")
_ANNOTATIONS = attrgetter("annotations")
_DELIVERY_ANNOTATIONS = attrgetter("delivery_annotations")
_PROPS = attrgetter("props_raw")
_BODY = attrgetter("body")
_SHARED = attrgetter("state", "delivery_count", "deferred", "enqueued_at", "expires_at", "scheduled_at")
"""The fields :func:`_stored_fields` writes, as the message holds them: equal for the messages
of one ``B`` record (compared as one tuple)."""


def _run_records(
    out: list[bytes], entity: int, first: StoredMessage | None, heads: list[bytes], props: list[bytes],
    bodies: list[bytes],
) -> None:  # fmt: skip
    """The records of a run: ``first`` and those after it, whose fields it shares, their bytes
    in pieces (one: an ``M`` record); an empty head or properties is an empty piece, which
    writes nothing."""
    assert first is not None
    fields = _stored_fields(first)
    if len(bodies) == 1:
        head, prop, body = heads[0], props[0], bodies[0]
        size = len(head) + len(prop) + len(body)
        out += (_MESSAGE(K_MESSAGE, entity, first.sequence_number, *fields, size), head, prop, body)
        return
    lengths = map(add, map(add, map(len, heads), map(len, props)), map(len, bodies))
    out.append(_RUN(K_RUN, entity, first.sequence_number, len(bodies), *fields))
    out.append(struct.pack(f">{len(bodies)}I", *lengths))
    out += chain.from_iterable(zip(heads, props, bodies, strict=True))


def sequence_record(entity: int, next_sequence: int) -> bytes:
    """An ``S`` record: ``entity``'s next sequence number."""
    return KEYED.pack(K_SEQUENCE, entity, next_sequence)


def entity_record(entity: int, path: str) -> bytes:
    """An ``E`` record: entity id ``entity`` given to ``path``."""
    raw = path.encode()
    return _ENTITY.pack(K_ENTITY, entity, len(raw)) + raw


def session_record(entity: int, session_id: str, state: bytes | None) -> bytes:
    """A ``T`` record: a session's state (None: removed)."""
    sid = session_id.encode()
    if state is None:
        return _SESSION.pack(K_SESSION, entity, len(sid), _REMOVED) + sid
    return _SESSION.pack(K_SESSION, entity, len(sid), len(state)) + sid + state


def duplicate_record(entity: int, message_id: bytes, seen_at: float, expires_at: float) -> bytes:
    """A ``P`` record: a duplicate-detection id seen at ``seen_at``, kept until ``expires_at``."""
    return _DUPLICATE.pack(K_DUPLICATE, entity, seen_at, expires_at, len(message_id)) + message_id


def purge_record(before: float) -> bytes:
    """An ``X`` record: the duplicate-detection ids whose window ended before ``before`` are forgotten."""
    return _PURGE.pack(K_PURGE, before)


def definitions_record(document: bytes) -> bytes:
    """An ``N`` record: the namespace's entity definitions (the JSON document)."""
    return _BLOB.pack(K_DEFINITIONS, len(document)) + document


RESET_RECORD = bytes((K_RESET,))


def atomic_record(records: list[bytes]) -> list[bytes]:
    """``records`` as one ``A`` record (its head, then the records' pieces as they are, not
    copied): replayed all together or, when its batch is torn, not at all."""
    return [_ATOMIC.pack(K_ATOMIC, sum(map(len, records))), *records]


# -- reading -------------------------------------------------------------------------
class RecordError(AMQPLinkError, ValueError):
    """A batch that passed its checksum but does not parse (written by something else)."""


@dataclass
class Touched:
    """What the batches replayed into a :class:`State` with ``touched`` changed (what a
    failed write takes back, :meth:`.persistence.Persistence.roll_back`)."""

    messages: set[tuple[int, int]] = field(default_factory=set)
    """(entity, sequence number) of every message stored, changed or removed."""
    sessions: set[tuple[int, str]] = field(default_factory=set)
    duplicates: set[tuple[int, bytes]] = field(default_factory=set)
    carried: list[bytes] = field(default_factory=list)
    """The entity-id and definitions records (``E``, ``N``), as they were: bookkeeping that
    later batches rely on, written again rather than taken back."""


@dataclass
class State:
    """What the records replayed so far add up to."""

    entities: dict[int, str] = field(default_factory=dict)
    next_sequence: dict[int, int] = field(default_factory=dict)
    messages: dict[int, dict[int, MessageFields]] = field(default_factory=dict)
    """Entity -> sequence number -> fields."""
    sessions: dict[int, dict[str, bytes]] = field(default_factory=dict)
    duplicates: dict[tuple[int, bytes], tuple[float, float]] = field(default_factory=dict)
    """(entity, encoded id) -> (seen at, expires at)."""
    definitions: bytes | None = None
    touched: Touched | None = None
    """Set: what each batch replayed changes is noted there too."""
    only: set[tuple[int, int]] | None = None
    """Set: only the messages with these (entity, sequence number) are kept (the others' bytes
    are not copied)."""

    def apply(self, batch: bytes | memoryview) -> None:
        """Replay one batch's records (:class:`RecordError` if it does not parse)."""
        buf = memoryview(batch)
        pos, end = 0, len(buf)
        try:
            while pos < end:
                pos = self._apply_record(buf, pos)
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise RecordError(f"a record at offset {pos} does not parse: {exc}") from None
        if pos != end:
            raise RecordError(f"the last record runs past the batch's end ({pos} > {end})")

    def _apply_record(self, buf: memoryview, pos: int) -> int:
        """Replay the record at ``pos`` (an atomic record's inner ones too); the offset after it."""
        kind = buf[pos]
        if kind in (K_MESSAGE, K_STATE):
            fixed = MESSAGE if kind == K_MESSAGE else STATE
            _, entity, seq, state, count, deferred, enqueued, expires, scheduled, *rest = fixed.unpack_from(buf, pos)
            _check_message(entity, seq, 1, state, count, deferred, enqueued, expires, scheduled)
            pos += fixed.size
            if self.touched is not None:
                self.touched.messages.add((entity, seq))
            if self.only is not None and (entity, seq) not in self.only:
                return pos + rest[0] if kind == K_MESSAGE else pos
            if kind == K_MESSAGE:
                payload = bytes(buf[pos : pos + rest[0]])
                pos += rest[0]
            else:
                old = self.messages.get(entity, {}).get(seq)
                if old is None:
                    return pos  # its message was never stored (or is gone): nothing to change
                payload = old[6]
            at = _scheduled_at(scheduled)
            self.messages.setdefault(entity, {})[seq] = (state, count, deferred, enqueued, expires, at, payload)
        elif kind == K_RUN:
            _, entity, first, count, state, dc, deferred, enqueued, expires, scheduled = RUN.unpack_from(buf, pos)
            _check_message(entity, first, count, state, dc, deferred, enqueued, expires, scheduled)
            pos += RUN.size
            if 4 * count > len(buf) - pos:
                raise RecordError(f"a run of {count} messages at offset {pos} runs past the batch's end")
            lengths = struct.unpack_from(f">{count}I", buf, pos)
            pos += 4 * count
            at = _scheduled_at(scheduled)
            messages = self.messages.setdefault(entity, {})
            if self.touched is not None:
                self.touched.messages.update((entity, seq) for seq in range(first, first + count))
            only = self.only
            for seq, n in enumerate(lengths, first):
                if pos + n > len(buf):
                    raise RecordError(f"a message of a run at offset {pos} runs past the batch's end")
                if only is None or (entity, seq) in only:
                    messages[seq] = (state, dc, deferred, enqueued, expires, at, bytes(buf[pos : pos + n]))
                pos += n
        elif kind == K_STATE_RUN:
            _, entity, first, count, state, dc, deferred, enqueued, expires, scheduled = RUN.unpack_from(buf, pos)
            _check_message(entity, first, count, state, dc, deferred, enqueued, expires, scheduled)
            pos += RUN.size
            at = _scheduled_at(scheduled)
            messages = self.messages.get(entity, {})
            if self.touched is not None:
                self.touched.messages.update((entity, seq) for seq in range(first, first + count))
            for seq in _stored_in(messages, first, count):
                old = messages[seq]  # (a message never stored, or gone: nothing to change)
                messages[seq] = (state, dc, deferred, enqueued, expires, at, old[6])
        elif kind == K_GONE:
            _, entity, first, count = GONE.unpack_from(buf, pos)
            _check_key(entity, first, count)
            pos += GONE.size
            if self.touched is not None:
                self.touched.messages.update((entity, seq) for seq in range(first, first + count))
            messages = self.messages.get(entity, {})
            for seq in _stored_in(messages, first, count):
                del messages[seq]
        elif kind in (K_DELETE, K_SEQUENCE):
            _, entity, value = KEYED.unpack_from(buf, pos)
            _check_key(entity, value, 1)
            pos += KEYED.size
            if kind == K_DELETE:
                self.messages.get(entity, {}).pop(value, None)
                if self.touched is not None:
                    self.touched.messages.add((entity, value))
            else:
                self.next_sequence[entity] = value
        elif kind == K_ENTITY:
            _, entity, n = _ENTITY.unpack_from(buf, pos)
            _check(entity >= 1 and n >= 1, "an entity record", f"entity id {entity}, path of {n} bytes")
            pos += _ENTITY.size
            self.entities[entity] = _text(buf, pos, n)
            if self.touched is not None:
                self.touched.carried.append(bytes(buf[pos - _ENTITY.size : pos + n]))
            pos += n
        elif kind == K_SESSION:
            _, entity, n, size = _SESSION.unpack_from(buf, pos)
            _check(entity >= 1, "a session state record", f"entity id {entity}")
            pos += _SESSION.size
            sid = _text(buf, pos, n)
            pos += n
            if self.touched is not None:
                self.touched.sessions.add((entity, sid))
            if size == _REMOVED:
                self.sessions.get(entity, {}).pop(sid, None)
            else:
                self.sessions.setdefault(entity, {})[sid] = bytes(buf[pos : pos + size])
                pos += size
        elif kind == K_DUPLICATE:
            _, entity, seen, expires, n = _DUPLICATE.unpack_from(buf, pos)
            _check(
                entity >= 1 and n >= 1 and math.isfinite(seen) and expires >= seen,
                "a duplicate-detection record",
                f"entity id {entity}, seen at {seen}, expires at {expires}, id of {n} bytes",
            )  # fmt: skip
            pos += _DUPLICATE.size
            self.duplicates[(entity, bytes(buf[pos : pos + n]))] = (seen, expires)
            if self.touched is not None:
                self.touched.duplicates.add((entity, bytes(buf[pos : pos + n])))
            pos += n
        elif kind == K_PURGE:
            (_, before) = _PURGE.unpack_from(buf, pos)
            _check(math.isfinite(before), "a purge record", f"before {before}")
            pos += _PURGE.size
            self.duplicates = {k: v for k, v in self.duplicates.items() if v[1] > before}
        elif kind == K_RESET:
            pos += 1
            self.entities, self.next_sequence, self.messages = {}, {}, {}
            self.sessions, self.duplicates, self.definitions = {}, {}, None
        elif kind == K_ATOMIC:
            _, n = _ATOMIC.unpack_from(buf, pos)
            pos += _ATOMIC.size
            end = pos + n
            if end > len(buf):
                raise RecordError(f"an atomic record at offset {pos} runs past the batch's end")
            while pos < end:
                if buf[pos] == K_ATOMIC:  # (never written: a commit's records are of the other kinds)
                    raise RecordError(f"an atomic record at offset {pos} inside another")
                pos = self._apply_record(buf, pos)
            if pos != end:
                raise RecordError(f"the records of an atomic record run past its end ({pos} > {end})")
        elif kind == K_DEFINITIONS:
            _, n = _BLOB.unpack_from(buf, pos)
            pos += _BLOB.size
            self.definitions = bytes(buf[pos : pos + n])
            if self.touched is not None:
                self.touched.carried.append(bytes(buf[pos - _BLOB.size : pos + n]))
            pos += n
        else:
            raise RecordError(f"unknown record kind {kind:#x} at offset {pos}")
        if pos > len(buf):
            raise RecordError(f"a record at offset {pos} runs past the batch's end")
        return pos


_MAX_SEQUENCE = (1 << 63) - 1
_MAX_DELIVERY_COUNT = (1 << 31) - 1
"""Service Bus counts deliveries in a 32-bit signed int (its MaxDeliveryCount's range)."""


def _check(ok: bool, record: str, fields: str) -> None:
    """:class:`RecordError` unless ``ok``: a record whose fields no writer writes (it checks,
    so it was written so, but not by this broker: replayed, it would make a phantom)."""
    if not ok:
        raise RecordError(f"{record} with fields out of range ({fields})")


def _check_key(entity: int, first: int, count: int) -> None:
    """The key fields of a record of ``count`` messages from sequence number ``first``."""
    if not (entity >= 1 and count >= 1 and 1 <= first <= _MAX_SEQUENCE - count + 1):
        _check(False, "a message record", f"entity id {entity}, sequence number {first}, count {count}")


def _check_message(
    entity: int, first: int, count: int, state: int, delivery_count: int, deferred: int, enqueued: float,
    expires: float, scheduled: float,
) -> None:  # fmt: skip
    """The fields of a message or state record (or a run of ``count``): a state among
    :data:`STATE_CODES`, a delivery count Service Bus can count, times that are times (the
    scheduled one NaN for none, the expiry infinite for none)."""
    _check_key(entity, first, count)
    if not (
        state in _STATES
        and 0 <= delivery_count <= _MAX_DELIVERY_COUNT
        and deferred in (0, 1)
        and math.isfinite(enqueued)
        and expires >= 0
        and not math.isinf(scheduled)
    ):
        _check(
            False, "a message record",
            f"entity id {entity}, sequence number {first}: state code {state}, delivery count {delivery_count},"
            f" deferred {deferred}, enqueued at {enqueued}, expires at {expires}, scheduled at {scheduled}",
        )  # fmt: skip


def _stored_in(messages: dict[int, MessageFields], first: int, count: int) -> list[int]:
    """The sequence numbers from ``first`` (``count`` of them) that ``messages`` holds, found
    by walking whichever is shorter (a count is bounded by its field, not by what is stored)."""
    if count <= len(messages):
        return [seq for seq in range(first, first + count) if seq in messages]
    return [seq for seq in messages if first <= seq < first + count]


def stored_message(seq: int, fields: MessageFields) -> StoredMessage | None:
    """The message a journal holds under ``seq``, from the fields :class:`State` replayed
    (None: its bytes do not decode)."""
    code, count, deferred, enqueued, expires, scheduled, payload = fields
    try:
        envelope = split_message(payload)
    except DecodeError:
        return None
    msg = StoredMessage(seq, envelope, enqueued, expires, _STATES[code], count, bool(deferred))
    msg.scheduled_at = scheduled
    return msg


def _text(buf: memoryview, pos: int, n: int) -> str:
    if pos + n > len(buf):
        raise IndexError("text past the end")
    return bytes(buf[pos : pos + n]).decode()
