"""A full disk (the journal's ``space`` seam: a write past it writes what fits and fails
with ENOSPC): a refused send, completion or session state has no effect, in memory or on
disk; reads keep working; the broker takes writes again as soon as the next batch fits,
and a compaction with no room for its copy is put off (issue 23, items 3-4)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.aio import connect
from amqplink.aio.errors import MessageRejected
from amqplink.broker import Broker
from amqplink.broker.durable.commit import GroupCommit
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted
from tests import profiles
from tests.broker.nsutil import commit_outcome as outcome
from tests.broker.nsutil import send
from tests.broker.test_durable import committed, opened, restart


def ids(ns: Any, path: str, now: float) -> list[str]:
    return [m.envelope.message_id for m in ns.receiver_source(path).peek(1, 100, now)]


async def test_refused_sends_completions_and_session_states_leave_nothing_behind(tmp_path: Path) -> None:
    now = time.time()
    store, ns = await opened(tmp_path)
    for i in range(5):
        send(ns, "q", now, message_id=f"kept{i}")
    q = ns.receiver_source("q")
    locked = [q.receive(now) for _ in range(2)]
    ns.receiver_source("s").sessions.set_state("alpha", b"before")
    await committed(store)
    journal = store.commits.journal
    on_disk = journal.path, Path(journal.path).read_bytes()

    journal.space = 0  # the disk is full
    for i in range(20):
        send(ns, "q", now, message_id=f"refused{i}")
    for msg in locked:
        assert msg is not None and msg.lock_token is not None
        q.complete(msg.lock_token, now)
    ns.receiver_source("s").sessions.set_state("alpha", b"after")
    assert isinstance(await outcome(store), OSError)

    # In memory: the refused sends are gone, the "completed" messages are back (their locks
    # lost, as on a restart), the session state is as it was.
    assert sorted(ids(ns, "q", now)) == [f"kept{i}" for i in range(5)]
    assert ns.receiver_source("s").sessions.state["alpha"] == b"before"
    assert Path(on_disk[0]).read_bytes() == on_disk[1]  # on disk: the failed write was cut back
    assert q.peek(1, 100, now)  # reads keep working while the disk is full
    assert await outcome(store) is None  # (a batch with nothing to write needs no room)

    journal.space = 4096  # a little room again: enough for the next batch, not for a copy of the state
    send(ns, "q", now, message_id="refused0")  # a retry is not taken for a duplicate
    assert await outcome(store) is None
    store, ns = await restart(store, tmp_path)
    assert sorted(ids(ns, "q", now)) == sorted([f"kept{i}" for i in range(5)] + ["refused0"])
    assert ns.receiver_source("s").sessions.state["alpha"] == b"before"
    await store.close()


async def test_a_compaction_with_no_room_for_its_copy_is_put_off_and_the_batch_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = time.time()
    store, ns = await opened(tmp_path)
    for i in range(50):
        send(ns, "q", now, body=b"x" * 1000, message_id=f"m{i}")
    await committed(store)
    journal = store.commits.journal
    journal.space = 2000  # room for a small batch, not for the live state (50 kB)
    monkeypatch.setattr(GroupCommit, "_compaction_due", lambda self: True)
    send(ns, "q", now, message_id="small")
    assert await outcome(store) is None
    assert "compaction put off (it needs" in caplog.text
    assert journal.number == 1  # not compacted
    store, ns = await restart(store, tmp_path)
    assert len(ids(ns, "q", now)) == 51
    await store.close()


async def test_over_amqp_a_full_disk_refuses_sends_and_peek_still_answers(tmp_path: Path) -> None:
    async with Broker(servicebus=True, data_dir=tmp_path) as broker:
        assert broker.servicebus is not None and broker.servicebus.persistence is not None
        journal = broker.servicebus.persistence.commits.journal
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            assert isinstance(await sender.send(Message(b"x", message_id="kept"), timeout=10), Accepted)
            journal.space = 0
            for i in range(20):
                with pytest.raises(MessageRejected, match=r"internal-error.*No space left on device"):
                    await sender.send(Message(b"y", message_id=f"r{i}"), timeout=10)
            requests = await conn.create_sender("q/$management")
            replies = await conn.create_receiver("q/$management", prefetch=10)
            app = {"operation": "com.microsoft:peek-message"}
            body = {"from-sequence-number": 1, "message-count": 30}
            await requests.send(Message(body, application_properties=app, message_id="p", reply_to="q/$management"))
            (reply,) = await replies.receive(1, timeout=10)
            assert reply.application_properties["statusCode"] == 200  # type: ignore[index]
            assert len(reply.body["messages"]) == 1  # type: ignore[index]  # the refused ones are not there
            journal.space = 1 << 20
            assert isinstance(await sender.send(Message(b"z", message_id="after"), timeout=10), Accepted)
        finally:
            await conn.close()
    async with Broker(servicebus=True, data_dir=tmp_path) as broker:
        assert broker.servicebus is not None
        peeked = broker.servicebus.namespace.receiver_source("q").peek(1, 100, time.time())
        assert [m.envelope.message_id for m in peeked] == ["kept", "after"]


OPS = ("send", "send-session", "receive", "complete", "abandon", "defer", "dead-letter", "state")


async def _run(directory: Path, steps: list[tuple[str, int, bool]]) -> None:
    """Apply ``steps`` (operation, which, the disk full for its write) and check after each
    that what is refused had no effect: at the end, a restart finds what memory holds."""
    now = time.time()
    store, ns = await opened(directory)
    journal = store.commits.journal
    held: list[Any] = []
    for n, (op, which, full) in enumerate(steps):
        journal.space = 0 if full else None
        prior = (_contents(ns, now), dict(ns.receiver_source("s").sessions.state))
        q = ns.receiver_source("q")
        if op == "send":
            send(ns, "q", now, message_id=f"m{n}")
        elif op == "send-session":
            send(ns, "s", now, message_id=f"m{n}", session_id=f"s{which % 2}")
        elif op == "receive":
            msg = q.receive(now)
            if msg is not None:
                held.append(msg)
        elif op == "state":
            ns.receiver_source("s").sessions.set_state(f"s{which % 2}", b"%d" % n)
        elif held:
            msg = held.pop(which % len(held))
            try:
                if op == "complete":
                    q.complete(msg.lock_token, now)
                elif op == "abandon":
                    q.abandon(msg.lock_token, now)
                elif op == "defer":
                    q.defer(msg.lock_token, now)
                else:
                    q.dead_letter(msg.lock_token, now, "reason", "description")
            except Exception:  # the lock was lost (taken back by a failed write): nothing done
                pass
        done = (_contents(ns, now), dict(ns.receiver_source("s").sessions.state))
        error = await outcome(store)
        assert (error is not None) <= full
        now_held = (_contents(ns, now), dict(ns.receiver_source("s").sessions.state))
        assert now_held == (prior if error is not None else done)  # refused: no effect; else: kept
    journal.space = None
    memory = (_contents(ns, now), dict(ns.receiver_source("s").sessions.state))
    store, ns = await restart(store, directory)
    assert (_contents(ns, now), dict(ns.receiver_source("s").sessions.state)) == memory, "a restart differs"
    await store.close()


def _contents(ns: Any, now: float) -> dict[str, list[tuple[str, bool]]]:
    """Each entity's messages by id and whether deferred (locks do not survive a restart)."""
    out = {}
    for path in ("q", "q/$deadletterqueue", "s"):
        entity = ns.receiver_source(path)
        out[path] = sorted((str(m.envelope.message_id), m.deferred) for m in entity.store)
    return out


@settings(profiles.HEAVY, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 7), st.booleans()), max_size=25))
def test_whatever_writes_fail_a_restart_finds_what_memory_holds(steps: list[tuple[str, int, bool]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_run(Path(directory), steps))
