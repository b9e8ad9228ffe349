"""The lock bookkeeping stays as large as the live locks, however many were settled."""

from __future__ import annotations

from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.entity import LOCK_EXPIRY_SLACK
from tests.broker.nsutil import T0, send


def test_settled_locks_leave_no_growing_expiry_index() -> None:
    ns = Namespace()
    entity = ns.receiver_source("q")
    total = 4 * LOCK_EXPIRY_SLACK
    for _ in range(total):
        send(ns, "q")
    for i in range(total):
        msg = entity.receive(T0 + i * 1e-4)
        assert msg is not None and msg.lock_token is not None
        entity.complete(msg.lock_token, T0 + i * 1e-4)
    assert len(entity._lock_expiry) <= LOCK_EXPIRY_SLACK + 1


def test_live_and_renewed_locks_still_expire_after_a_compaction() -> None:
    ns = Namespace()
    entity = ns.receiver_source("q")
    duration = entity.properties.lock_duration
    for _ in range(3 * LOCK_EXPIRY_SLACK):
        send(ns, "q")
    kept = entity.receive(T0)
    assert kept is not None and kept.lock_token is not None
    renewed = entity.receive(T0)
    assert renewed is not None and renewed.lock_token is not None
    until = entity.renew_lock(renewed.lock_token, T0 + 10)
    for _ in range(3 * LOCK_EXPIRY_SLACK - 2):  # enough settled locks to force compactions
        msg = entity.receive(T0)
        assert msg is not None and msg.lock_token is not None
        entity.complete(msg.lock_token, T0)
    assert len(entity._lock_expiry) <= LOCK_EXPIRY_SLACK + 3
    entity.tick(T0 + duration)  # the first lock runs out, the renewed one does not
    assert kept.lock_token is None and renewed.lock_token is not None
    entity.tick(until)
    assert renewed.lock_token is None
    again = [entity.receive(until), entity.receive(until)]
    assert {m.sequence_number for m in again if m is not None} == {kept.sequence_number, renewed.sequence_number}
    assert all(m is not None and m.delivery_count == 2 for m in again)
