"""``$management`` request handlers: a request :class:`Message` in, a response :class:`Message` out.

"Request/response on ``<entity>/$management``": application property
``operation="com.microsoft:<op>"``; the response carries ``statusCode``,
``statusDescription`` and, on failure, ``errorCondition`` (docs/protocol.md#management-operations), and its
correlation-id is the request's message-id. 200 with a body, 204 for nothing
found, 410 for a lost lock, 404 for unknown sequence numbers.

The SDK sends symbols and strings as binary in places (its ``operation`` is
bytes), so every key and text value is read in either form.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from amqplink.broker.namespace.envelope import as_text, split_message, timestamp
from amqplink.broker.namespace.errors import ARGUMENT_ERROR, NOT_ALLOWED, EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.namespace import Namespace, Topic
from amqplink.broker.namespace.sessions import MAX_SESSION_STATE
from amqplink.broker.namespace.storable import refusal
from amqplink.broker.namespace.store import MessageState
from amqplink.broker.namespace.unwritable import unwritable
from amqplink.broker.rights import Right
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import AMQPType, Array, Int, Long, Symbol
from amqplink.message import Message
from amqplink.sbwire.nodes import Operation

__all__ = ["MAX_PEEK_COUNT", "OPERATIONS", "OPERATION_RIGHTS", "handle_management", "response"]

log = logging.getLogger(__name__)

MAX_PEEK_COUNT = 1000
"""Messages one peek or receive-by-sequence-number answers at most."""
RECEIVE_AND_DELETE = 0
"""``receiver-settle-mode`` as the SDK sends it: rcv-settle-mode ``first`` (0) for
receive-and-delete, ``second`` (1) for peek-lock."""


def _body(request: Message) -> dict[str, Any]:
    body = request.body
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise EntityError(ARGUMENT_ERROR, "a management request body must be a map")
    return {str(as_text(k)): v for k, v in body.items()}


def _field(body: dict[str, Any], name: str) -> Any:
    if name not in body:
        raise EntityError(ARGUMENT_ERROR, f"the request has no {name!r}")
    return body[name]


def _tokens(body: dict[str, Any]) -> list[uuid.UUID]:
    out = []
    for raw in _field(body, "lock-tokens"):
        if isinstance(raw, uuid.UUID):
            out.append(raw)
        else:
            try:
                out.append(uuid.UUID(str(as_text(raw))))
            except ValueError:
                raise EntityError(ARGUMENT_ERROR, f"{raw!r} is not a lock token") from None
    return out


def _longs(body: dict[str, Any], name: str) -> list[int]:
    values = _field(body, name)
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise EntityError(ARGUMENT_ERROR, f"{name!r} must be a list of sequence numbers")
    return [int(v) for v in values]


def response(
    request: Message, status: int, body: Any = None, *, description: str = "", condition: str | None = None
) -> Message:
    """A management/CBS response to ``request``: status properties, correlation-id, optional body."""
    props: dict[str, Any] = {"statusCode": status, "statusDescription": description or _REASON.get(status, "")}
    if condition is not None:
        props["errorCondition"] = Symbol(condition)
    return Message(body, application_properties=props, correlation_id=request.message_id or request.correlation_id)


_REASON = {200: "OK", 202: "Accepted", 204: "No Content", 400: "Bad Request", 404: "Not Found", 410: "Gone"}

Context = tuple[Namespace, MessagingEntity | Topic, float]


def _entity(target: MessagingEntity | Topic) -> MessagingEntity:
    if isinstance(target, Topic):
        raise EntityError(NOT_ALLOWED, f"{target.name!r} is a topic: use one of its subscriptions")
    return target


def _renew_lock(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    entity = _entity(ctx[1])
    until = [entity.renew_lock(token, ctx[2]) for token in _tokens(body)]
    return 200, {"expirations": Array([timestamp(t) for t in until], AMQPType.TIMESTAMP)}


def _peek(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    entity = _entity(ctx[1])
    start = int(_field(body, "from-sequence-number"))
    count = max(0, min(int(_field(body, "message-count")), MAX_PEEK_COUNT))
    session_id = as_text(body.get("session-id"))
    found = entity.peek(start, count, ctx[2], session_id=session_id)
    if not found:
        return 204, None
    try:
        return 200, {"messages": [{"message": entity.encode(m, peek=True)} for m in found]}
    except Exception as exc:  # a bug (storable admits what is written back)
        raise unwritable(entity, found, exc, taken=False) from None


def _schedule(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    namespace, target, now = ctx
    items = _field(body, "messages")
    if not isinstance(items, list):
        raise EntityError(ARGUMENT_ERROR, "'messages' must be a list")
    envelopes = []
    for item in items:
        raw = item.get("message", item.get(b"message")) if isinstance(item, dict) else None
        if not isinstance(raw, bytes):
            raise EntityError(ARGUMENT_ERROR, "each scheduled message needs its encoded 'message'")
        try:
            envelopes.append(split_message(raw, check=True))
        except DecodeError as exc:
            raise refusal(exc, target.path, "a scheduled message") from None
    items = [(envelope, now if (at := envelope.scheduled_enqueue_time()) is None else at) for envelope in envelopes]
    seqs = namespace.schedule_all(target, items, now)
    return 200, {"sequence-numbers": Array([Long(s) for s in seqs], AMQPType.LONG)}


def _cancel(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    ctx[1].cancel_scheduled(_longs(body, "sequence-numbers"))
    return 200, None


def _receive_by_sequence(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    entity = _entity(ctx[1])
    seqs = _longs(body, "sequence-numbers")[:MAX_PEEK_COUNT]
    mode = body.get("receiver-settle-mode")
    lock = mode is None or int(mode) != RECEIVE_AND_DELETE
    session_id = as_text(body.get("session-id"))
    found = entity.receive_deferred(seqs, ctx[2], lock=lock, session_id=session_id)
    out = []
    try:
        for m in found:
            item: dict[str, Any] = {"message": entity.encode(m)}
            if m.lock_token is not None:
                item["lock-token"] = m.lock_token
            out.append(item)
    except Exception as exc:  # a bug (storable admits what is written back): the messages given back
        raise unwritable(entity, found, exc) from None
    return 200, {"messages": out}


_DISPOSITIONS = ("completed", "abandoned", "suspended", "defered", "deferred")


def _update_disposition(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    entity = _entity(ctx[1])
    now = ctx[2]
    status = as_text(_field(body, "disposition-status"))
    if status not in _DISPOSITIONS:
        raise EntityError(ARGUMENT_ERROR, f"disposition-status {status!r} is not one of {_DISPOSITIONS[:4]}")
    modify = body.get("properties-to-modify")
    annotations = {str(as_text(k)): v for k, v in modify.items()} if isinstance(modify, dict) else None
    for token in _tokens(body):
        if status == "completed":
            entity.complete(token, now)
        elif status == "abandoned":
            entity.abandon(token, now, annotations)
        elif status == "suspended":
            reason = as_text(body.get("deadletter-reason"))
            description = as_text(body.get("deadletter-description"))
            entity.dead_letter(token, now, reason, description, annotations)
        else:
            entity.defer(token, now, annotations)
    return 200, None


def _session_id(body: dict[str, Any]) -> str:
    sid = as_text(_field(body, "session-id"))
    if not isinstance(sid, str):
        raise EntityError(ARGUMENT_ERROR, "'session-id' must be a string")
    return sid


def _renew_session(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    entity = _entity(ctx[1])
    return 200, {"expiration": timestamp(entity.sessions.renew(_session_id(body), ctx[2]))}


def _get_state(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    entity = _entity(ctx[1])
    sid = _session_id(body)
    entity.sessions.held(sid, ctx[2])
    return 200, {"session-state": entity.sessions.state.get(sid)}


def _set_state(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    entity = _entity(ctx[1])
    sid = _session_id(body)
    entity.sessions.held(sid, ctx[2])
    state = body.get("session-state")
    if state is not None and (not isinstance(state, bytes) or len(state) > MAX_SESSION_STATE):
        raise EntityError(ARGUMENT_ERROR, f"session state must be binary of at most {MAX_SESSION_STATE} bytes")
    entity.sessions.set_state(sid, state, ctx[2])
    return 200, None


LISTING_ALL_MS = 253402300800000
"""``last-updated-time`` of the default listing (.NET's DateTime.MaxValue as the SDKs send it):
every session with active messages or stored state; an earlier time lists the sessions whose
state was set after it."""
MAX_SESSIONS_PAGE = 1000
"""Session ids one ``get-message-sessions`` answers at most (the SDK asks for 100)."""


def _get_message_sessions(ctx: Context, body: dict[str, Any]) -> tuple[int, Any]:
    """``get-message-sessions``: a page (``skip``, ``top``) of the entity's session ids, in
    order; 204 (as Service Bus) when the page is empty."""
    entity = _entity(ctx[1])
    if not entity.requires_session:
        raise EntityError(NOT_ALLOWED, f"{entity.path!r} does not require sessions: it has no sessions to list")
    skip = max(0, int(body.get("skip") or 0))
    top = max(0, min(int(body.get("top") or MAX_SESSIONS_PAGE), MAX_SESSIONS_PAGE))
    updated = body.get("last-updated-time")
    entity.tick(ctx[2])
    if updated is None or int(updated) >= LISTING_ALL_MS:
        active = (MessageState.AVAILABLE, MessageState.LOCKED)
        ids = {m.session_id for m in entity.store if m.session_id is not None and m.state in active}
        ids.update(entity.sessions.state)
    else:
        since = int(updated) / 1000
        ids = {sid for sid, at in entity.sessions.updated.items() if at > since}
    page = sorted(ids)[skip : skip + top]
    if not page:
        return 204, None
    return 200, {"skip": Int(skip + len(page)), "sessions-ids": page}


OPERATIONS: dict[str, Callable[[Context, dict[str, Any]], tuple[int, Any]]] = {
    Operation.RENEW_LOCK: _renew_lock,
    Operation.PEEK_MESSAGE: _peek,
    Operation.SCHEDULE_MESSAGE: _schedule,
    Operation.CANCEL_SCHEDULED_MESSAGE: _cancel,
    Operation.RECEIVE_BY_SEQUENCE_NUMBER: _receive_by_sequence,
    Operation.UPDATE_DISPOSITION: _update_disposition,
    Operation.RENEW_SESSION_LOCK: _renew_session,
    Operation.GET_SESSION_STATE: _get_state,
    Operation.SET_SESSION_STATE: _set_state,
    Operation.GET_MESSAGE_SESSIONS: _get_message_sessions,
}

OPERATION_RIGHTS: dict[str, Right] = {
    **{operation: Right.LISTEN for operation in OPERATIONS},
    Operation.SCHEDULE_MESSAGE: Right.SEND,
    Operation.CANCEL_SCHEDULED_MESSAGE: Right.SEND,
}
"""The right each operation needs ("Send" to schedule or cancel a message, "Listen" for the
rest: they act on received or receivable messages and sessions)."""


def handle_management(namespace: Namespace, address: str, request: Message, now: float) -> Message:
    """Answer one request sent to ``address`` (``<entity>/$management``) at time ``now``."""
    app = {str(as_text(k)): v for k, v in (request.application_properties or {}).items()}
    operation = as_text(app.get("operation"))
    handler = OPERATIONS.get(operation) if isinstance(operation, str) else None
    if handler is None:
        return response(request, 400, description=f"operation {operation!r} is not supported", condition=NOT_ALLOWED)
    try:
        target = namespace.resolve(address).target
        status, body = handler((namespace, target, now), _body(request))
    except EntityError as exc:
        log.info("$management %s on %s: %s (%s)", operation, address, exc.condition, exc.description)
        return response(request, exc.status, description=exc.description, condition=exc.condition)
    except (TypeError, ValueError, AttributeError) as exc:
        return response(request, 400, description=f"malformed {operation} request: {exc}", condition=ARGUMENT_ERROR)
    return response(request, status, body)
