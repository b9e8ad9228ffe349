"""Crash tests of the durable store: a subprocess broker with ``--data-dir`` is SIGKILLed
while an amqplink client works with it, then restarted from the same directory.

* every message whose send was acknowledged is there exactly once (counted by id),
  over several kill points;
* a completion the broker confirmed is never redelivered; a message that was locked
  comes back with delivery-count + 1;
* a torn tail of the store file (after its recovery point) is dropped, never a crash on start;
* corruption before the tail, or of batches the recovery point covers, and a journal cut
  short of its recovery point are refused with nothing changed on disk;
* on a full disk (a tmpfs, or the journal's seam) a refused send stays refused after a kill.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from amqplink.aio import connect
from amqplink.aio.connection import Connection
from amqplink.aio.errors import MessageRejected
from amqplink.broker.durable import checkpoint, journal_files
from amqplink.broker.durable.recovery import CURRENT, MAGIC
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
QUEUE = "crash"
BODY = b"x" * 256


# The command line, with the journal compacted at every batch once it holds this many bytes.
_COMPACTING = (
    "import sys; import amqplink.broker.durable.journal as j; j.COMPACT_MIN_BYTES = int(sys.argv.pop(1));"
    " j.COMPACT_FACTOR = 0;"
    " from amqplink.cli import main; sys.exit(main(sys.argv[1:]))"
)


def seeds(first: int, *more: int) -> list[Any]:
    """The kill points (random seeds) of a crash test: the fast tier tries the first, the
    slow tier the others too (each run is a broker process killed and started again)."""
    return [first, *(pytest.param(seed, marks=pytest.mark.slow) for seed in more)]


class BrokerProcess:
    """``amqplink broker --port 0 --data-dir DIR`` in a subprocess (``compact_bytes``: the
    journal compacted from that size on)."""

    def __init__(
        self, data_dir: Path, compact_bytes: int | None = None, launcher: tuple[str, str] | None = None
    ) -> None:
        args = ["broker", "--port", "0", "--data-dir", str(data_dir)]
        if launcher is not None:  # (a script of this module and its first argument)
            cmd = [sys.executable, "-c", launcher[0], launcher[1], *args]
        elif compact_bytes is None:
            cmd = [sys.executable, "-m", "amqplink.cli", *args]
        else:
            cmd = [sys.executable, "-c", _COMPACTING, str(compact_bytes), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        self.url = ""

    async def ready(self) -> str:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), 30)
        found = re.search(r"amqp://127\.0\.0\.1:\d+", line)
        if found is None:
            err = self.proc.stderr.read() if self.proc.stderr is not None else ""
            raise AssertionError(f"the broker did not start: {line!r} {err}")
        self.url = found.group(0)
        return self.url

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@asynccontextmanager
async def broker(data_dir: Path, compact_bytes: int | None = None) -> AsyncIterator[tuple[BrokerProcess, Connection]]:
    proc = BrokerProcess(data_dir, compact_bytes)
    try:
        conn = await connect(await proc.ready())
        try:
            yield proc, conn
        finally:
            if proc.proc.poll() is None:
                await conn.close()
    finally:
        proc.stop()


async def drain(conn: Connection, expected: set[str]) -> Counter[str]:
    """Every message of the queue (receive-and-delete), counted by message id: waits for
    ``expected`` and then until a short while passes with nothing more."""
    receiver = await conn.create_receiver(QUEUE, mode="receive-and-delete", prefetch=2000)
    seen: Counter[str] = Counter()
    while True:
        timeout = 30.0 if not expected <= set(seen) else 0.5
        batch = await receiver.receive(2000, timeout=timeout)
        if not batch:
            return seen
        seen.update(str(m.message_id) for m in batch)


async def send_until_killed(proc: BrokerProcess, conn: Connection, count: int, kill_after: int) -> set[str]:
    """Send ``count`` unsettled messages; SIGKILL the broker the moment the
    ``kill_after``-th acknowledgement arrives. The ids acknowledged before it died."""
    sender = await conn.create_sender(QUEUE, max_in_flight=1000)
    acked: set[str] = set()
    killed = asyncio.get_running_loop().create_future()

    def on_outcome(mid: str, future: asyncio.Future[object]) -> None:
        if killed.done() or future.cancelled() or future.exception() is not None:
            return
        if isinstance(future.result(), Accepted):
            acked.add(mid)
            if len(acked) >= kill_after:
                proc.kill()
                killed.set_result(None)

    async def produce() -> None:
        for i in range(count):
            mid = f"m{i}"
            future = await sender.send_nowait(Message(BODY, message_id=mid))
            future.add_done_callback(lambda f, mid=mid: on_outcome(mid, f))

    producing = asyncio.ensure_future(produce())
    await asyncio.wait([producing, killed], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    assert killed.done(), f"only {len(acked)} of {count} sends were acknowledged"
    producing.cancel()
    await asyncio.gather(producing, return_exceptions=True)
    return set(acked)


@pytest.mark.parametrize("seed", seeds(1, 2, 3))
async def test_every_acknowledged_send_survives_sigkill_exactly_once(tmp_path: Path, seed: int) -> None:
    kill_after = random.Random(seed).randrange(500, 9500)
    async with broker(tmp_path) as (proc, conn):
        acked = await send_until_killed(proc, conn, 10_000, kill_after)
    assert len(acked) >= kill_after
    async with broker(tmp_path) as (_, conn):
        seen = await drain(conn, acked)
    assert acked <= set(seen), f"lost {len(acked - set(seen))} acknowledged messages"
    assert max(seen.values()) == 1, "a message came back twice"


@pytest.mark.parametrize("seed", seeds(4, 5))
async def test_acknowledged_sends_survive_sigkill_while_the_journal_is_compacted_again_and_again(
    tmp_path: Path, seed: int
) -> None:
    """Compacted at every batch from 64 KiB on (each compaction rewrites all that is stored),
    so the kill lands before, during or after one."""
    kill_after = random.Random(seed).randrange(2000, 9500)
    async with broker(tmp_path, compact_bytes=64 << 10) as (proc, conn):
        acked = await send_until_killed(proc, conn, 10_000, kill_after)
    numbers = [number for number, _ in journal_files(str(tmp_path))]
    assert max(numbers) > 4, "the journal should have been compacted again and again"
    async with broker(tmp_path) as (_, conn):
        seen = await drain(conn, acked)
    assert acked <= set(seen), f"lost {len(acked - set(seen))} acknowledged messages"
    assert max(seen.values()) == 1, "a message came back twice"
    assert len(journal_files(str(tmp_path))) == 1


async def test_confirmed_completions_stay_completed_and_locks_come_back_counted(tmp_path: Path) -> None:
    ids = [f"m{i}" for i in range(200)]
    async with broker(tmp_path) as (proc, conn):
        sender = await conn.create_sender(QUEUE)
        await asyncio.gather(*[sender.send(Message(BODY, message_id=mid)) for mid in ids])
        receiver = await conn.create_receiver(QUEUE, prefetch=200)
        got: list = []
        while len(got) < 200:
            got += await receiver.receive(200 - len(got), timeout=30)
        assert all(m.header.delivery_count in (0, None) for m in got)  # type: ignore[union-attr]
        completed = got[:100]
        await receiver.accept(*completed)  # returns once the broker confirmed each completion
        assert all(isinstance(m._delivery.remote_state, Accepted) for m in completed)  # type: ignore[union-attr]
        proc.kill()
    done = {str(m.message_id) for m in completed}
    async with broker(tmp_path) as (_, conn):
        receiver = await conn.create_receiver(QUEUE, prefetch=200)
        back: list = []
        while len(back) < 100:
            batch = await receiver.receive(200, timeout=30)
            assert batch, f"only {len(back)} of the 100 locked messages came back"
            back += batch
        assert await receiver.receive(1, timeout=0.5) == []
        assert {str(m.message_id) for m in back} == set(ids) - done
        assert {m.header.delivery_count for m in back} == {1}  # type: ignore[union-attr]
        await receiver.accept(*back)


async def send_groups(conn: Connection) -> tuple[list[str], list[str]]:
    """Two groups of 500 acknowledged sends (each awaited): their ids."""
    sender = await conn.create_sender(QUEUE)
    first = [f"a{i}" for i in range(500)]
    await asyncio.gather(*[sender.send(Message(BODY, message_id=mid)) for mid in first])
    second = [f"b{i}" for i in range(500)]
    await asyncio.gather(*[sender.send(Message(BODY, message_id=mid)) for mid in second])
    return first, second


@pytest.mark.parametrize("damage", ["torn", "garbage"])
async def test_a_torn_tail_of_the_store_is_dropped(tmp_path: Path, damage: str) -> None:
    """What a crash in the middle of a write leaves after the last batch written (part of
    a frame, or bytes a file system never wrote): dropped, every acknowledged send there."""
    async with broker(tmp_path) as (proc, conn):
        first, second = await send_groups(conn)
        proc.kill()
    ((_, journal),) = journal_files(str(tmp_path))
    size = os.path.getsize(journal)
    assert size > 1000 * len(BODY), "both groups of sends should be in the journal"
    with open(journal, "ab") as f:
        if damage == "torn":  # the head and part of the body of a batch copied from the one before
            body = (b"M" + BODY) * 20
            f.write((CURRENT.frame(body, 10**6) + body)[: len(body) // 2])
        else:
            f.write(random.Random(7).randbytes(700))
    async with broker(tmp_path) as (_, conn):
        seen = await drain(conn, set(first) | set(second))
    assert set(first) | set(second) <= set(seen), "an acknowledged send was lost"
    assert max(seen.values()) == 1


def wait_for_recovery_point(directory: Path, timeout: float = 30.0) -> int:
    """The journal's length once its recovery point covers it (the writer writes it within a
    second of the last batch): polled, the condition stated, with a deadline."""
    ((_, journal),) = journal_files(str(directory))
    deadline = time.monotonic() + timeout
    while True:
        point = checkpoint.read(str(directory))
        size = os.path.getsize(journal)
        if point is not None and point.length == size:
            return size
        assert time.monotonic() < deadline, f"the recovery point {point} never covered the journal ({size} bytes)"
        time.sleep(0.05)


def refused_start(directory: Path) -> subprocess.CompletedProcess[str]:
    """``amqplink broker --data-dir`` on ``directory``: refused with one line, nothing changed on disk."""
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in directory.iterdir()}
    done = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0", "--data-dir", str(directory)],
        capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--salvage" in done.stderr
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in directory.iterdir()} == before
    return done


async def salvaged_and_drained(directory: Path) -> Counter[str]:
    """``broker-store DIR --salvage``, then every message of the queue the broker reads back."""
    salvage = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "amqplink.cli", "broker-store", str(directory), "--salvage"],
        capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip
    assert salvage.returncode == 0, salvage.stderr
    async with broker(directory) as (_, conn):
        return await drain(conn, set())


@pytest.mark.parametrize("damage", ["truncate", "corrupt"])
async def test_damage_to_batches_the_recovery_point_covers_is_refused_after_sigkill(
    tmp_path: Path, damage: str
) -> None:
    """Killed once the recovery point covered every batch: the last batch cut or overwritten
    is not a torn write (it was committed), and the broker refuses to start on it."""
    async with broker(tmp_path) as (proc, conn):
        await send_groups(conn)
        size = await asyncio.to_thread(wait_for_recovery_point, tmp_path)
        proc.kill()
    ((_, journal),) = journal_files(str(tmp_path))
    with open(journal, "r+b") as f:
        if damage == "truncate":
            f.truncate(size - 3000)
        else:
            f.seek(size - 700)
            f.write(random.Random(7).randbytes(700))
    done = await asyncio.to_thread(refused_start, tmp_path)
    assert os.path.basename(journal) in done.stderr
    if damage == "truncate":
        assert f"is {size - 3000} bytes long" in done.stderr and f"says {size} bytes were committed" in done.stderr
    else:
        assert "damaged at offset" in done.stderr


@pytest.mark.slow  # (the same in one process: test_durable_recovery_point.py)
async def test_a_journal_cut_at_a_quarter_after_a_clean_stop_is_refused_and_salvaged(tmp_path: Path) -> None:
    """Salvage keeps the whole records before the cut. A lone send acknowledged first is a
    record of its own, so the quarter holds at least it (the 500 gathered sends can arrive in
    so few reads that the journal's first record of them runs past the quarter: then the
    salvaged store was empty, and the test failed about one run in three)."""
    async with broker(tmp_path) as (_, conn):
        await (await conn.create_sender(QUEUE)).send(Message(BODY, message_id="lone"))
        first, _ = await send_groups(conn)
        first.append("lone")
    # (left by SIGTERM: a clean stop, the recovery point the whole journal)
    ((_, journal),) = journal_files(str(tmp_path))
    size = os.path.getsize(journal)
    os.truncate(journal, size // 4)
    done = await asyncio.to_thread(refused_start, tmp_path)
    assert f"is {size // 4} bytes long" in done.stderr and f"says {size} bytes were committed" in done.stderr
    seen = await salvaged_and_drained(tmp_path)
    assert 0 < len(seen) < 500 and set(seen) <= set(first) and max(seen.values()) == 1


def test_the_command_refuses_a_damaged_store_with_one_line(tmp_path: Path) -> None:
    journal = tmp_path / "journal-00000001.log"
    journal.write_bytes(b"not a journal" * 1000)
    done = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert journal.name in done.stderr and "move the directory away" in done.stderr


@pytest.mark.parametrize("seed", seeds(11, 12, 13))
async def test_corruption_at_a_random_offset_is_refused_and_nothing_changes_on_disk(tmp_path: Path, seed: int) -> None:
    """A flipped byte anywhere before the last batch (acknowledged batches follow it): the
    broker refuses to start with one line naming the file and the offset, and every file
    keeps its bytes and its mtime; ``broker-store --salvage`` then reads back all but the
    damaged batch."""
    async with broker(tmp_path) as (proc, conn):
        sender = await conn.create_sender(QUEUE)
        acked = [f"a{i}" for i in range(300)]
        for chunk in range(0, len(acked), 30):  # (several batches)
            await asyncio.gather(*[sender.send(Message(BODY, message_id=mid)) for mid in acked[chunk : chunk + 30]])
        proc.kill()
    ((_, journal),) = journal_files(str(tmp_path))
    size = os.path.getsize(journal)
    offset = random.Random(seed).randrange(len(MAGIC), size * 3 // 4)  # (well before the last batch)
    with open(journal, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x10]))
    done = await asyncio.to_thread(refused_start, tmp_path)
    assert os.path.basename(journal) in done.stderr and "damaged at offset" in done.stderr
    seen = await salvaged_and_drained(tmp_path)
    assert max(seen.values()) == 1
    assert len(set(acked) - set(seen)) <= 30, "salvage lost more than the damaged batch"


@contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (as root), unmounted afterwards."""
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        raise NotMountable(mounted.stderr.decode(errors="replace").strip())
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


class NotMountable(Exception):
    """This machine does not let a test mount a tmpfs."""


def fill(directory: Path) -> Path:
    """Write a file until the disk is full; the file (remove it to free the space)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\xff" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


async def test_a_full_disk_refuses_sends_with_no_effect_and_the_broker_takes_writes_again_once_space_is_freed(
    tmp_path: Path,
) -> None:
    """On a real full file system (tmpfs) where the machine allows it, else with the journal's
    ``space`` seam set in the broker process: a send is either acknowledged (and then there
    after a SIGKILL) or refused (and then not there); once space is freed, sends are
    acknowledged again without a restart."""
    try:
        with small_disk(tmp_path / "disk", "4m") as disk:
            await _full_disk(disk / "data", None)
    except NotMountable:
        await _full_disk(tmp_path / "data", tmp_path / "quota")


# The command line, the journal's writes limited to the bytes in the file given (a full disk).
_LIMITED = (
    "import sys; from amqplink.broker.durable import journal as j; path = sys.argv.pop(1); real = j.Journal.append\n"
    "def append(self, records):\n"
    "    self.space = int(open(path).read())\n"
    "    try:\n"
    "        real(self, records)\n"
    "    finally:\n"
    "        open(path, 'w').write(str(self.space))\n"
    "j.Journal.append = append\n"
    "from amqplink.cli import main; sys.exit(main(sys.argv[1:]))"
)


async def _full_disk(data: Path, quota: Path | None) -> None:
    """(``quota``: the seam's file, else ``data`` is on a tmpfs of its own)"""
    data.mkdir()
    if quota is not None:
        quota.write_text(str(1 << 30))
    proc = BrokerProcess(data) if quota is None else BrokerProcess(data, launcher=(_LIMITED, str(quota)))
    try:
        conn = await connect(await proc.ready())
        sender = await conn.create_sender(QUEUE)
        first = [f"a{i}" for i in range(200)]
        await asyncio.gather(*[sender.send(Message(BODY, message_id=mid)) for mid in first])
        filler = fill(data.parent) if quota is None else None
        if quota is not None:
            quota.write_text("0")
        accepted, refused = set(), set()
        for i in range(20):
            try:
                await sender.send(Message(BODY * 16, message_id=f"b{i}"), timeout=10)
            except MessageRejected as exc:
                assert "internal-error" in str(exc)
                refused.add(f"b{i}")
            else:
                accepted.add(f"b{i}")
        assert len(refused) >= 15, f"only {len(refused)} of 20 sends were refused on a full disk"
        if filler is not None:
            filler.unlink()
        if quota is not None:
            quota.write_text(str(1 << 30))
        after = [f"c{i}" for i in range(50)]
        outcomes = await asyncio.gather(*[sender.send(Message(BODY, message_id=mid)) for mid in after])
        assert all(isinstance(o, Accepted) for o in outcomes), "sends still fail after space was freed"
        proc.kill()
    finally:
        proc.stop()
    async with broker(data) as (_, conn):
        seen = await drain(conn, set(first) | accepted | set(after))
    assert set(first) | accepted | set(after) <= set(seen), "an acknowledged send was lost"
    assert not refused & set(seen), f"{len(refused & set(seen))} refused sends came back after a restart"
    assert max(seen.values()) == 1
