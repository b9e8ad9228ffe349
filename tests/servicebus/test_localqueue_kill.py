"""kill -9 of a process with a local queue, at random moments while it stores and while it
forwards (``tests/servicebus/localqueue_child.py``, compacting from 4 KiB on): every message
whose send returned reaches the (duplicate-detecting) queue exactly once, nothing else does."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from amqplink.broker import Broker
from tests.servicebus.paired_util import drain
from tests.servicebus.test_localqueue_client import DEDUPE

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SENDS = 1_000_000


def dead_port() -> int:
    """A port nothing listens on (a primary that refuses connections at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Child:
    def __init__(self, *args: str) -> None:
        cmd = [sys.executable, "-m", "tests.servicebus.localqueue_child", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
        self.lines: list[str] = []

    async def read_until_killed(self, kill_after: float) -> bool:
        """Read its lines; SIGKILL it ``kill_after`` s after the first one. True if it ended by itself."""
        assert self.proc.stdout is not None
        loop = asyncio.get_running_loop()
        first: asyncio.TimerHandle | None = None
        while True:
            line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), 60)
            if not line:
                break
            self.lines.append(line.strip())
            if first is None:
                first = loop.call_later(kill_after, self.kill)
        if first is not None:
            first.cancel()
        code = self.proc.wait(10)
        if code not in (0, -signal.SIGKILL):
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"the child failed ({code}): {err[-2000:]}")
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code == 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
async def test_sigkill_while_storing_and_while_forwarding_loses_and_repeats_nothing(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    directory = str(tmp_path / "lq")
    nowhere = f"Endpoint=sb://127.0.0.1:{dead_port()};SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
    acknowledged: set[str] = set()
    start = killed = 0
    for _ in range(5):  # five sending processes, each killed at a random moment while it stores
        # (each has more to send than any machine stores in the time it is given)
        child = Child("send", nowhere, directory, str(start), str(SENDS))
        killed += not await child.read_until_killed(rng.uniform(0.05, 0.5))
        acknowledged |= {line.split()[1] for line in child.lines if line.startswith("ok ")}
        start += SENDS
    assert killed == 5 and len(acknowledged) > 100
    async with Broker(servicebus=True, config=DEDUPE) as primary:
        kills = cut_short = 0
        while True:  # forwarding processes killed at random moments until one finishes
            child = Child("forward", primary.connection_string, directory)
            if await child.read_until_killed(rng.uniform(0.02, 0.3) if kills < 6 else 600):
                break
            kills += 1
            depths = [int(line.split()[1]) for line in child.lines if line.startswith("depth ")]
            cut_short += bool(depths) and "done" not in child.lines and depths[-1] > 0
        assert cut_short >= 1  # (at least one forwarding process died with messages left to forward)
        got = await drain(primary.connection_string, "orders", len(acknowledged))
    ids = Counter(str(m.message_id) for m in got)
    assert acknowledged <= set(ids), f"lost: {sorted(acknowledged - set(ids))[:10]}"
    assert set(ids.values()) == {1}  # each once (a repeated forward is removed by duplicate detection)
    for m in got:
        assert str(m) == f"body-{str(m.message_id)[1:]}" * 20
