"""$management and $cbs handlers as pure functions: request Message -> response Message."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from typing import Any
from urllib.parse import quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.cbs import Authorizations, handle_put_token
from amqplink.broker.namespace.management import handle_management
from amqplink.codec.types import AMQPType, Array, Long, Symbol, Timestamp
from amqplink.message import Message
from tests.broker.nsutil import T0, payload, send


def request(operation: str, body: dict[str, Any] | None, **props: Any) -> Message:
    """As the SDK sends it: operation as binary, a message-id to correlate."""
    app = {"operation": ("com.microsoft:" + operation).encode(), **props}
    return Message(body, application_properties=app, message_id=str(uuid.uuid4()), reply_to="reply")


def call(ns: Namespace, address: str, req: Message, now: float = T0) -> Message:
    resp = handle_management(ns, address, req, now)
    out = Message.decode(resp.encode())  # encodable, and read back as a peer would
    assert out.correlation_id == req.message_id
    return out


def status(resp: Message) -> tuple[int, Any]:
    app = resp.application_properties or {}
    return app["statusCode"], app.get("errorCondition")


def locked(ns: Namespace, now: float = T0) -> uuid.UUID:
    msg = ns.receiver_source("q").receive(now)
    assert msg is not None and msg.lock_token is not None
    return msg.lock_token


def tokens(*items: uuid.UUID) -> Array:
    return Array(list(items), AMQPType.UUID)


def test_renew_lock_and_410_when_lost() -> None:
    ns = Namespace()
    send(ns, "q")
    token = locked(ns)
    resp = call(ns, "amqps://h/q/$management", request("renew-lock", {"lock-tokens": tokens(token)}), T0 + 10)
    assert status(resp) == (200, None)
    assert list(resp.body["expirations"]) == [Timestamp(int((T0 + 70) * 1000))]
    resp = call(ns, "q/$management", request("renew-lock", {"lock-tokens": tokens(token)}), T0 + 71)
    assert status(resp) == (410, Symbol("com.microsoft:message-lock-lost"))


def test_peek_returns_messages_from_a_sequence_number_and_204_past_the_end() -> None:
    ns = Namespace()
    for i in range(3):
        send(ns, "q", message_id=f"m{i}")
    resp = call(ns, "q/$management", request("peek-message", {"from-sequence-number": Long(2), "message-count": 5}))
    assert status(resp) == (200, None)
    got = [Message.decode(item["message"]) for item in resp.body["messages"]]
    assert [m.message_id for m in got] == ["m1", "m2"]
    assert got[0].message_annotations is not None
    assert got[0].message_annotations[Symbol("x-opt-sequence-number")] == 2
    resp = call(ns, "q/$management", request("peek-message", {"from-sequence-number": Long(9), "message-count": 5}))
    assert status(resp)[0] == 204
    assert len(ns.receiver_source("q").store) == 3  # peek takes nothing


def test_schedule_and_cancel() -> None:
    ns = Namespace()
    at = Timestamp(int((T0 + 60) * 1000))
    encoded = [
        payload(b"a", message_id="a", message_annotations={"x-opt-scheduled-enqueue-time": at}),
        payload(b"b", message_id="b", message_annotations={"x-opt-scheduled-enqueue-time": at}),
    ]
    body = {"messages": [{"message-id": m, "message": e} for m, e in zip("ab", encoded, strict=True)]}
    resp = call(ns, "q/$management", request("schedule-message", body))
    assert status(resp) == (200, None)
    seqs = list(resp.body["sequence-numbers"])
    assert seqs == [1, 2]
    resp = call(ns, "q/$management", request("cancel-scheduled-message", {"sequence-numbers": Array([Long(2)])}))
    assert status(resp) == (200, None)
    resp = call(ns, "q/$management", request("cancel-scheduled-message", {"sequence-numbers": Array([Long(2)])}))
    assert status(resp) == (404, Symbol("com.microsoft:message-not-found"))
    q = ns.receiver_source("q")
    assert q.receive(T0 + 59) is None
    msg = q.receive(T0 + 60)
    assert msg is not None and msg.envelope.message_id == "a"


def test_schedule_on_a_topic_fans_out_when_due() -> None:
    ns = Namespace(NamespaceConfig(topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("s"),)),)))
    at = Timestamp(int((T0 + 5) * 1000))
    enc = payload(b"a", message_annotations={"x-opt-scheduled-enqueue-time": at})
    resp = call(ns, "t/$management", request("schedule-message", {"messages": [{"message": enc}]}))
    assert status(resp) == (200, None)
    sub = ns.receiver_source("t/Subscriptions/s")
    ns.tick(T0 + 4)
    assert len(sub.store) == 0
    ns.tick(T0 + 5)
    assert len(sub.store) == 1


def test_receive_by_sequence_number_locks_or_deletes() -> None:
    ns = Namespace()
    send(ns, "q", message_id="d")
    send(ns, "q", message_id="e")
    q = ns.receiver_source("q")
    for _ in range(2):
        q.defer(locked(ns), T0)
    seq_d, seq_e = (m.sequence_number for m in q.store)

    def by_seq(seq: int, mode: int) -> Message:
        body = {"sequence-numbers": Array([Long(seq)]), "receiver-settle-mode": mode}
        return call(ns, "q/$management", request("receive-by-sequence-number", body))

    resp = by_seq(seq_d, 1)  # rcv-settle-mode second: peek-lock
    assert status(resp) == (200, None)
    (item,) = resp.body["messages"]
    assert Message.decode(item["message"]).message_id == "d"
    token = item["lock-token"]
    assert isinstance(token, uuid.UUID)
    body = {"disposition-status": "completed", "lock-tokens": tokens(token)}
    assert status(call(ns, "q/$management", request("update-disposition", body))) == (200, None)
    resp = by_seq(seq_e, 0)  # rcv-settle-mode first: receive-and-delete
    (item,) = resp.body["messages"]
    assert "lock-token" not in item
    assert len(q.store) == 0
    assert status(by_seq(seq_e, 1)) == (404, Symbol("com.microsoft:message-not-found"))


def test_update_disposition_dead_letter_via_management() -> None:
    ns = Namespace()
    send(ns, "q")
    token = locked(ns)
    body = {
        "disposition-status": "suspended",
        "lock-tokens": tokens(token),
        "deadletter-reason": "why",
        "deadletter-description": "because",
    }
    assert status(call(ns, "q/$management", request("update-disposition", body))) == (200, None)
    dead = ns.receiver_source("q/$DeadLetterQueue").receive(T0)
    assert dead is not None
    assert dead.envelope.application_properties == {"DeadLetterReason": "why", "DeadLetterErrorDescription": "because"}
    resp = call(ns, "q/$management", request("update-disposition", body))
    assert status(resp) == (410, Symbol("com.microsoft:message-lock-lost"))


@pytest.mark.parametrize("disposition", ["completed", "abandoned", "defered"])
def test_update_disposition_outcomes(disposition: str) -> None:
    ns = Namespace()
    send(ns, "q")
    token = locked(ns)
    body = {"disposition-status": disposition, "lock-tokens": tokens(token)}
    assert status(call(ns, "q/$management", request("update-disposition", body))) == (200, None)
    q = ns.receiver_source("q")
    states = [m.state.value for m in q.store]
    assert states == {"completed": [], "abandoned": ["available"], "defered": ["deferred"]}[disposition]


def test_session_operations() -> None:
    ns = Namespace(NamespaceConfig(queues=(QueueConfig("s", EntityProperties(requires_session=True)),)))
    send(ns, "s", session_id="A")
    entity = ns.receiver_source("s")
    resp = call(ns, "s/$management", request("get-session-state", {"session-id": "A"}))
    assert status(resp) == (410, Symbol("com.microsoft:session-lock-lost"))
    entity.accept_session("A", object(), T0)
    resp = call(ns, "s/$management", request("set-session-state", {"session-id": "A", "session-state": b"st"}))
    assert status(resp) == (200, None)
    resp = call(ns, "s/$management", request("get-session-state", {"session-id": "A"}))
    assert resp.body == {"session-state": b"st"}
    resp = call(ns, "s/$management", request("renew-session-lock", {"session-id": "A"}), T0 + 30)
    assert resp.body == {"expiration": Timestamp(int((T0 + 90) * 1000))}


def test_unknown_operation_and_entity() -> None:
    ns = Namespace(NamespaceConfig())
    assert status(call(ns, "q/$management", request("frobnicate", {})))[0] == 400
    resp = call(ns, "nope/$management", request("peek-message", {"from-sequence-number": 1, "message-count": 1}))
    assert status(resp) == (404, Symbol("amqp:not-found"))
    resp = call(Namespace(), "q/$management", request("renew-lock", {"lock-tokens": ["not-a-uuid"]}))
    assert status(resp) == (400, Symbol("com.microsoft:argument-error"))


# -- $cbs ----------------------------------------------------------------------------------
KEY_NAME, KEY = "RootManageSharedAccessKey", "SAS_KEY_VALUE"


def mint(uri: str, key: str = KEY, name: str = KEY_NAME, expiry: int | None = None) -> str:
    """A SAS token minted here, independently of the library (the formula of docs/protocol.md#sas-tokens)."""
    se = str(expiry if expiry is not None else int(time.time()) + 3600)
    sr = quote_plus(uri)
    sig = base64.b64encode(hmac.new(key.encode(), f"{sr}\n{se}".encode(), hashlib.sha256).digest()).decode()
    return f"SharedAccessSignature sr={sr}&sig={quote_plus(sig)}&se={se}&skn={name}"


def put(token: str, audience: str, auth: Authorizations, now: float) -> tuple[int, str]:
    app = {"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience, "expiration": 0}
    req = Message(token, message_id="1", application_properties=app)
    resp = Message.decode(handle_put_token(req, keys={KEY_NAME: KEY}, now=now, authorizations=auth).encode())
    assert resp.correlation_id == "1"
    app = resp.application_properties or {}
    return app["status-code"], app["status-description"]


def test_put_token_valid_grants_the_audience() -> None:
    auth = Authorizations()
    now = time.time()
    assert put(mint("sb://127.0.0.1/q"), "sb://127.0.0.1/q", auth, now)[0] == 202
    assert auth.covers("q", now) and auth.covers("q/$management", now)
    assert not auth.covers("other", now) and not auth.covers("qq", now)
    assert not auth.covers("q", now + 7200)
    assert auth.expire(now + 7200) == ["q"]


@pytest.mark.parametrize(
    "token",
    [
        mint("sb://127.0.0.1/q", key="wrong"),
        mint("sb://127.0.0.1/q", expiry=1),
        mint("sb://127.0.0.1/q", name="Nobody"),
        mint("sb://127.0.0.1/other"),
        "garbage",
    ],
    ids=["bad-signature", "expired", "unknown-key-name", "other-audience", "malformed"],
)
def test_put_token_bad_tokens_get_401(token: str) -> None:
    auth = Authorizations()
    code, description = put(token, "sb://127.0.0.1/q", auth, time.time())
    assert code == 401 and description
    assert not auth.granted


# -- hostile requests ----------------------------------------------------------------------

_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8) | st.binary(max_size=8)
    | st.uuids(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip
_keys = st.sampled_from(
    ["lock-tokens", "from-sequence-number", "message-count", "messages", "sequence-numbers", "session-id",
     "session-state", "disposition-status", "receiver-settle-mode", "properties-to-modify", "message"]
)  # fmt: skip
_ops = st.sampled_from(
    ["renew-lock", "peek-message", "schedule-message", "cancel-scheduled-message", "receive-by-sequence-number",
     "update-disposition", "renew-session-lock", "get-session-state", "set-session-state", "nope"]
)  # fmt: skip


@settings(deadline=None)
@given(op=_ops, body=st.one_of(_values, st.dictionaries(_keys, _values, max_size=4)))
def test_any_request_gets_a_response_never_an_exception(op: str, body: Any) -> None:
    ns = Namespace()
    send(ns, "q")
    resp = handle_management(ns, "q/$management", request(op, body), T0)
    code = (resp.application_properties or {})["statusCode"]
    assert code in (200, 204, 400, 404, 410)
    Message.decode(resp.encode())
