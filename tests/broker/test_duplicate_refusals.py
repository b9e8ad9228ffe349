"""Duplicate detection remembers only what was stored (issue 30, item 1): an id enters an
entity's history when its message is stored, so a send refused for any reason (quota,
sessions, a fragment down, a forward that failed, a full disk) leaves no id behind and its
retry is stored, not dropped as a duplicate. A batch is checked message by message, in
order; a scheduled message counts as a send when it is scheduled (Service Bus: "I received
two sequence numbers. The second message is ignored, the first message survives",
Azure/azure-service-bus#265). Namespace objects without sockets; the durable store's side
with its ``Journal.space`` seam (a full disk)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.durable import Persistence
from amqplink.broker.namespace import BATCH_FORMAT, EntityError, Namespace
from amqplink.broker.namespace.envelope import Envelope, split_message
from amqplink.codec.types import Timestamp
from amqplink.message import Message
from amqplink.sbwire.annotations import SCHEDULED_ENQUEUE_TIME
from tests.broker.nsutil import T0, send
from tests.broker.nsutil import commit_outcome as _outcome

DEDUP = {"requires_duplicate_detection": True, "duplicate_detection_window": 600.0}


def props(**kwargs: Any) -> EntityProperties:
    return EntityProperties(**{**DEDUP, **kwargs})


CONFIG = NamespaceConfig(
    queues=(
        QueueConfig("capped", props(max_bytes=3000)),
        QueueConfig("few", props(max_messages=2)),
        QueueConfig("small", props(max_message_size=1200)),
        QueueConfig("sessions", props(requires_session=True)),
        QueueConfig("parted", props(enable_partitioning=True, partition_count=4)),
        QueueConfig("forwards", props(forward_to="parted")),
        QueueConfig("plain-dest", EntityProperties(max_messages=1)),
        QueueConfig("forwards-full", props(forward_to="plain-dest", max_messages=1)),
    ),
    topics=(
        TopicConfig("t", props(), subscriptions=(SubscriptionConfig("one", EntityProperties(max_messages=1)),)),
        TopicConfig("pt", props(enable_partitioning=True, partition_count=4), subscriptions=(SubscriptionConfig("s"),)),
    ),
)


def ids(ns: Namespace, path: str) -> list[Any]:
    """The message ids stored in ``path`` (any state: scheduled ones too), in sequence order."""
    return [m.envelope.message_id for m in ns.receiver_source(path).store]


def drain(ns: Namespace, path: str, now: float = T0) -> None:
    """Receive (and delete) every available message of ``path``."""
    entity = ns.receiver_source(path)
    entity.receive_many(now, len(entity.store), lock=False)
    assert not any(True for _ in entity.store)


def batch(*message_ids: str, size: int = 10) -> bytes:
    inner = [Message(bytes(size), message_id=mid).encode() for mid in message_ids]
    return Message(inner, body_type="data").encode()


def refuse(condition: str, call: Callable[[], object]) -> None:
    with pytest.raises(EntityError) as refused:
        call()
    assert refused.value.condition == condition


def fragment_of_key(ns: Namespace, path: str, key: str) -> int:
    partitions = ns.resolve(path).target.partitions
    assert partitions is not None
    return partitions.index(key)


# -- each refusal leaves no trace ------------------------------------------------------


def test_the_issue_repro_quota_refusals_are_not_remembered() -> None:
    """10 of 20 sends of 1 KiB fit a 10 KiB queue; the refused ids sent again after a drain are stored."""
    ns = Namespace(NamespaceConfig(queues=(QueueConfig("q", props(max_bytes=10 * 1100)),)))
    refused = []
    for i in range(20):
        try:
            send(ns, "q", T0, bytes(1024), message_id=f"m{i}")
        except EntityError as exc:
            assert exc.condition == "amqp:resource-limit-exceeded"
            refused.append(f"m{i}")
    assert refused == [f"m{i}" for i in range(10, 20)]
    drain(ns, "q")
    for mid in refused:
        send(ns, "q", T0 + 1, bytes(1024), message_id=mid)
    assert ids(ns, "q") == refused
    for i in range(20):  # and now every id is a duplicate within the window
        send(ns, "q", T0 + 2, bytes(10), message_id=f"m{i}")
    assert ids(ns, "q") == refused


@pytest.mark.parametrize(
    ("path", "condition", "friendly"),
    [
        ("capped", "amqp:resource-limit-exceeded", {"body": bytes(4000)}),
        ("small", "amqp:link:message-size-exceeded", {"body": bytes(2000)}),
        ("sessions", "amqp:not-allowed", {}),  # no session id
    ],
)
def test_a_refused_send_is_retried_and_stored(path: str, condition: str, friendly: dict[str, Any]) -> None:
    ns = Namespace(CONFIG)
    body = friendly.pop("body", b"x")
    refuse(condition, lambda: send(ns, path, T0, body, message_id="X", **friendly))
    assert ids(ns, path) == []
    retry = {"session_id": "s"} if path == "sessions" else {}
    send(ns, path, T0 + 1, b"x", message_id="X", **retry)
    assert ids(ns, path) == ["X"]


def test_a_full_queue_refuses_then_takes_the_retry_once_there_is_room() -> None:
    ns = Namespace(CONFIG)
    send(ns, "few", T0, message_id="a")
    send(ns, "few", T0, message_id="b")
    refuse("amqp:resource-limit-exceeded", lambda: send(ns, "few", T0, message_id="c"))
    drain(ns, "few")
    send(ns, "few", T0, message_id="c")
    send(ns, "few", T0, message_id="a")  # stored before: a duplicate
    assert ids(ns, "few") == ["c"]


@pytest.mark.parametrize("sent_to", ["parted", "forwards"])
def test_a_fragment_down_refuses_and_the_retry_is_stored(sent_to: str) -> None:
    """Sent to ``parted`` (with duplicate detection the message id is the key, pinned to a
    fragment that is down), or to ``forwards``, which detects duplicates and forwards there:
    the send fails (a forward refused for anything but quota fails the send:
    docs/broker-semantics.md#forwarding-c4), so neither queue remembers X."""
    ns = Namespace(CONFIG)
    index = fragment_of_key(ns, "parted", "X")
    ns.set_fragment_down("parted", index)
    refuse("amqp:internal-error", lambda: send(ns, sent_to, T0, message_id="X"))
    ns.set_fragment_down("parted", index, down=False)
    send(ns, sent_to, T0, message_id="X")
    send(ns, sent_to, T0, message_id="X")
    assert ids(ns, "parted") == ["X"]


def test_a_failed_forward_holds_none_of_the_batchs_scheduled_messages_either() -> None:
    """A batch to ``forwards`` of one message due now (D, forwarded to ``parted``, whose fragment
    for D is down) and one scheduled for later (L, held in ``forwards`` until due): the send
    fails, and L is not held (before, it was, and the retry held a second copy)."""
    ns = Namespace(CONFIG)
    later = Message(
        b"x", message_id="L", message_annotations={SCHEDULED_ENQUEUE_TIME: Timestamp(int((T0 + 60) * 1000))}
    )
    payload = Message([later.encode(), Message(b"x", message_id="D").encode()], body_type="data").encode()
    index = fragment_of_key(ns, "parted", "D")
    ns.set_fragment_down("parted", index)
    forwards = ns.sender_target("forwards")
    refuse("amqp:internal-error", lambda: ns.send(forwards, payload, T0, BATCH_FORMAT))
    assert len(ns.queue("forwards").store) == 0
    ns.set_fragment_down("parted", index, down=False)
    ns.send(forwards, payload, T0, BATCH_FORMAT)
    ns.send(forwards, payload, T0, BATCH_FORMAT)  # both duplicates now
    assert [m.envelope.message_id for m in ns.queue("forwards").store] == ["L"]
    assert ids(ns, "parted") == ["D"]


def test_a_forward_refused_for_quota_is_dead_lettered_stored_and_remembered() -> None:
    """Service Bus dead-letters what the destination refuses for its quota: the send succeeds
    and the message is stored (in the source's dead-letter queue), so its id counts."""
    ns = Namespace(CONFIG)
    send(ns, "forwards-full", T0, message_id="first")
    send(ns, "forwards-full", T0, message_id="X")  # plain-dest is full: dead-lettered in forwards-full
    assert ids(ns, "forwards-full/$DeadLetterQueue") == ["X"]
    send(ns, "forwards-full", T0, message_id="X")
    assert ids(ns, "forwards-full/$DeadLetterQueue") == ["X"] and ids(ns, "plain-dest") == ["first"]


def test_a_topic_whose_subscription_refuses_remembers_nothing() -> None:
    ns = Namespace(CONFIG)
    send(ns, "t", T0, message_id="a")
    refuse("amqp:resource-limit-exceeded", lambda: send(ns, "t", T0, message_id="X"))
    drain(ns, "t/Subscriptions/one")
    send(ns, "t", T0, message_id="X")
    assert ids(ns, "t/Subscriptions/one") == ["X"]


# -- batches ---------------------------------------------------------------------------


def test_a_batch_refused_whole_records_none_of_its_ids() -> None:
    ns = Namespace(CONFIG)
    q = ns.sender_target("few")
    refuse("amqp:resource-limit-exceeded", lambda: ns.send(q, batch("a", "b", "c"), T0, BATCH_FORMAT))
    ns.send(q, batch("a", "b"), T0, BATCH_FORMAT)
    assert ids(ns, "few") == ["a", "b"]


def test_a_batch_partly_duplicate_stores_the_rest_and_drops_repeats_within_it() -> None:
    """Each message of a batch is checked as if sent one after another: the ids stored before,
    and an id repeated within the batch, are dropped; the others are stored (all or none)."""
    ns = Namespace(CONFIG)
    q = ns.sender_target("few")
    send(ns, "few", T0, message_id="a")
    ns.send(q, batch("a", "b", "b", "a"), T0, BATCH_FORMAT)  # only b is new: it fits
    assert ids(ns, "few") == ["a", "b"]
    drain(ns, "few")
    refuse("amqp:resource-limit-exceeded", lambda: ns.send(q, batch("a", "c", "d", "e"), T0, BATCH_FORMAT))
    ns.send(q, batch("a", "c", "d"), T0, BATCH_FORMAT)  # a is a duplicate; c and d were never stored
    assert ids(ns, "few") == ["c", "d"]


def test_a_partitioned_batch_of_one_id_keeps_one() -> None:
    ns = Namespace(CONFIG)
    ns.send(ns.sender_target("parted"), batch("same", "same", "same"), T0, BATCH_FORMAT)
    assert ids(ns, "parted") == ["same"]


# -- scheduled messages ---------------------------------------------------------------


def scheduled(message_id: str) -> Envelope:
    """A message as a schedule-message request carries it (its time given beside it)."""
    return split_message(Message(b"x", message_id=message_id).encode(), check=True)


@pytest.mark.parametrize("path", ["capped", "parted", "t", "pt"])
def test_schedule_then_send_keeps_one(path: str) -> None:
    ns = Namespace(CONFIG)
    target = ns.sender_target(path)
    first = ns.schedule(target, scheduled("X"), T0 + 60, T0)
    send(ns, path, T0 + 1, message_id="X")  # a duplicate within the window
    again = ns.schedule(target, scheduled("X"), T0 + 60, T0 + 2)  # likewise: a number, nothing stored
    assert again != first
    ns.tick(T0 + 61)
    where = path if path in ("capped", "parted") else f"{path}/Subscriptions/{'one' if path == 't' else 's'}"
    assert ids(ns, where) == ["X"]
    refuse("com.microsoft:message-not-found", lambda: target.cancel_scheduled([again]))


@pytest.mark.parametrize("path", ["capped", "parted"])
def test_a_send_scheduled_by_annotation_then_scheduled_again_keeps_one(path: str) -> None:
    ns = Namespace(CONFIG)
    target = ns.sender_target(path)
    stamp = Message(
        b"x", message_id="X", message_annotations={SCHEDULED_ENQUEUE_TIME: Timestamp(int((T0 + 60) * 1000))}
    ).encode()
    ns.send(target, stamp, T0)
    ns.schedule(target, scheduled("X"), T0 + 60, T0 + 1)
    send(ns, path, T0 + 2, message_id="X")
    assert ids(ns, path) == ["X"]


def test_one_schedule_request_with_an_id_twice_schedules_it_once() -> None:
    ns = Namespace(CONFIG)
    target = ns.sender_target("capped")
    seqs = ns.schedule_all(target, [(scheduled("X"), T0 + 60), (scheduled("X"), T0 + 60), (scheduled("Y"), T0)], T0)
    assert len(set(seqs)) == 3
    assert ids(ns, "capped") == ["X", "Y"]


def test_a_refused_schedule_records_no_id() -> None:
    ns = Namespace(CONFIG)
    target = ns.sender_target("few")
    refuse(
        "amqp:resource-limit-exceeded",
        lambda: ns.schedule_all(target, [(scheduled(m), T0 + 60) for m in ("a", "b", "c")], T0),
    )
    assert ids(ns, "few") == []
    ns.schedule_all(target, [(scheduled(m), T0 + 60) for m in ("a", "b")], T0)
    # a duplicate of the request does not count against the queue's limit
    ns.schedule_all(target, [(scheduled(m), T0 + 60) for m in ("a", "b")], T0)
    assert ids(ns, "few") == ["a", "b"]


# -- the durable store -----------------------------------------------------------------


async def _opened(directory: Path) -> tuple[Persistence, Namespace]:
    store = Persistence(directory)
    ns = Namespace(CONFIG)
    store.attach(ns)
    return store, ns


async def test_a_send_whose_write_fails_is_forgotten_even_when_its_id_was_stored_before_the_window(
    tmp_path: Path,
) -> None:
    """X stored and written; its window ends; X sent again while the disk is full: refused,
    and forgotten although the journal holds the first sighting (a retry is stored)."""
    now = time.time()
    store, ns = await _opened(tmp_path)
    send(ns, "capped", now, message_id="X")
    assert await _outcome(store) is None
    drain(ns, "capped", now)
    assert await _outcome(store) is None
    later = now + 601
    store.commits.journal.space = 0
    send(ns, "capped", later, message_id="X")
    assert isinstance(await _outcome(store), OSError)
    assert ids(ns, "capped") == []
    store.commits.journal.space = None
    send(ns, "capped", later, message_id="X")
    assert await _outcome(store) is None
    assert ids(ns, "capped") == ["X"]
    await store.close()


async def test_a_duplicate_accepted_while_its_original_is_written_is_refused_when_that_write_fails(
    tmp_path: Path,
) -> None:
    """X's batch is being written (held at the disk) when X comes again: the second send is a
    duplicate and stores nothing, so its acknowledgement rests on the first write. That write
    fails: the duplicate is refused too, not acknowledged for a message that is not there."""
    now = time.time()
    store, ns = await _opened(tmp_path)
    journal = store.commits.journal
    gate = threading.Event()
    writing = threading.Event()
    append = journal.append

    def held(records: list[bytes]) -> None:
        writing.set()
        gate.wait(10)
        append(records)

    journal.append = held  # type: ignore[method-assign]
    journal.space = 0
    first: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    send(ns, "capped", now, message_id="X")
    store.after_commit(first.set_result)
    assert await asyncio.to_thread(writing.wait, 10)  # the batch with X is at the disk
    taken = store.commits.taken
    send(ns, "capped", now, message_id="X")  # a duplicate: nothing to write
    assert ids(ns, "capped") == ["X"]
    second: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    store.after_commit(second.set_result)
    while store.commits.taken == taken:  # the duplicate's (empty) batch handed to the writer
        await asyncio.sleep(0)
    gate.set()
    assert isinstance(await asyncio.wait_for(first, 10), OSError)
    assert isinstance(await asyncio.wait_for(second, 10), OSError)
    assert ids(ns, "capped") == []
    journal.space = None
    send(ns, "capped", now, message_id="X")  # the retry is stored
    assert await _outcome(store) is None
    assert ids(ns, "capped") == ["X"]
    await store.close()
