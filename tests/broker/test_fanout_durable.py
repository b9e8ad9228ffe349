"""A fan-out kept in a data directory is all or none across a crash (issue 30, item 1).

Every copy of one send (the subscriptions', a forward's destination, a dead letter made
on the way) and the ids it logs are recorded in the same loop turn, so the group commit
writes them in one batch, one CRC-checked frame of the journal
(docs/durability.md#what-a-failure-can-cost). A crash (SIGKILL, power cut) while that frame
is written leaves it cut somewhere: recovery drops a torn last frame whole, so the broker
comes back with every copy or with none, never some subscriptions holding it. Here the
journal is cut at offsets through that frame (every one of its head, then one in 29 of its
records; the recovery point set as a crash within the second leaves it) and read back by
a fresh store. (The fan-out was one batch before the plan too: this checks it stays so.)"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.durable import Persistence
from amqplink.broker.durable.journal import journal_files
from amqplink.broker.namespace import Namespace
from tests.broker.nsutil import committed, send
from tests.broker.test_durable_journal import as_if_crashed

DEDUP = EntityProperties(requires_duplicate_detection=True, duplicate_detection_window=3600.0)
CONFIG = NamespaceConfig(
    queues=(QueueConfig("dest"), QueueConfig("full", EntityProperties(max_messages=1))),
    topics=(
        TopicConfig(
            "t",
            DEDUP,
            subscriptions=(
                SubscriptionConfig("a"),
                SubscriptionConfig("b", EntityProperties(forward_to="dest")),
                SubscriptionConfig("c", EntityProperties(forward_to="full")),
                SubscriptionConfig("d"),
            ),
        ),
    ),
)
PLACES = ("t/Subscriptions/a", "dest", "t/Subscriptions/c/$DeadLetterQueue", "t/Subscriptions/d")
"""Where the send of X puts its copies: ``c``'s destination is full, so ``c`` dead-letters its copy."""


def holders(ns: Namespace, mid: str) -> list[str]:
    out = []
    for path in PLACES:
        count = sum(1 for m in ns.resolve(path).target.store if m.envelope.message_id == mid)  # type: ignore[union-attr]
        assert count <= 1, f"{path} holds {mid} {count} times"
        if count:
            out.append(path)
    return out


def opened(directory: Path) -> tuple[Persistence, Namespace]:
    store = Persistence(directory, fsync=False)
    ns = Namespace(CONFIG)
    store.attach(ns)
    return store, ns


async def test_a_fan_out_cut_anywhere_in_its_batch_comes_back_whole_or_not_at_all(tmp_path: Path) -> None:
    now = time.time()  # (ids logged before the window that ends now are not read back)
    live = tmp_path / "live"
    store, ns = opened(live)
    send(ns, "full", now, message_id="resident")
    await committed(store)
    journal = store.commits.journal
    start, batches = journal.size, journal.batches
    send(ns, "t", now, message_id="X")
    await committed(store)
    assert holders(ns, "X") == list(PLACES)
    assert journal.batches == batches + 1, "the fan-out took more than one batch"
    end = journal.size
    image = live / Path(journal_files(str(live))[0][1]).name
    data = image.read_bytes()
    assert len(data) == end
    await store.close()

    # every offset of the frame's head (length, CRC, number), then through the records
    cuts = sorted({*range(start, start + 17), *range(start, end, 29), end - 1, end})
    for cut in cuts:
        crashed = tmp_path / f"cut-{cut}"
        shutil.copytree(live, crashed)
        (crashed / image.name).write_bytes(data[:cut])
        as_if_crashed(crashed, start, batches)
        again, ns = opened(crashed)
        try:
            expected = list(PLACES) if cut == end else []
            assert holders(ns, "X") == expected, f"journal cut at {cut} of {start}..{end}"
            # and the id with it: a retry after a cut is stored, after the whole batch a duplicate
            send(ns, "t", now, message_id="X")
            assert holders(ns, "X") == list(PLACES)
        finally:
            again.commits.close_now()
        shutil.rmtree(crashed)


async def test_a_fan_out_whose_write_fails_is_taken_back_from_every_entity(tmp_path: Path) -> None:
    """The disk is full when the fan-out's batch is written: the send is refused, and every
    copy (each subscription's, the forward's, the dead letter) and the topic's id are taken
    back, so the retry, once there is room, is stored once in each place."""
    now = time.time()
    store, ns = opened(tmp_path)
    send(ns, "full", now, message_id="resident")
    await committed(store)
    journal = store.commits.journal
    journal.space = 0
    send(ns, "t", now, message_id="X")  # (the namespace took it: the write decides)
    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    store.after_commit(done.set_result)
    assert isinstance(await asyncio.wait_for(done, 10), OSError)
    assert holders(ns, "X") == []
    journal.space = None
    send(ns, "t", now, message_id="X")
    await committed(store)
    assert holders(ns, "X") == list(PLACES)
    await store.close()
    again, ns = opened(tmp_path)
    assert holders(ns, "X") == list(PLACES)
    await again.close()
