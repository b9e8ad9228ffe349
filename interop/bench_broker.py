"""Broker benchmark (not a test): many amqplink clients at once through several brokers.

One run, in rounds (``--rounds``, 3 by default): each round measures every broker in
turn, so the brokers compared ran minutes apart, and the table gives the median of
the rounds (the machine's speed drifts; a shared virtual machine's more than most).
Every broker is started by this script on 127.0.0.1, each in its own
process; every client is its own process with its own connection (one client is
the bottleneck otherwise), so the machine's cores are shared by broker and clients
as in production. Per broker, on fresh queues (one per producer/consumer pair):

* ``send``: P producers at once, unsettled pipelined sends of 1 KiB messages
  (``max_in_flight`` 1000), each waiting for its ``accepted``;
* ``receive``: C consumers at once drain what was sent, peek-lock with prefetch,
  each message accepted (Service Bus: complete);
* ``both``: producers and consumers at the same time (consumers count what they took).

Throughput is messages over the wall time from the first client's start to the
last client's end (CLOCK_MONOTONIC is shared by the processes). Brokers:

* ``servicebus``: the embedded broker as a Service Bus namespace in memory, every
  behaviour on (peek-lock with a lock token and expiry per message, sequence
  numbers, the enqueued-time and locked-until stamps on every delivery);
* ``servicebus-partitioned``: the same with every queue partitioned (EnablePartitioning,
  16 fragments; no partition key, so sends go round robin);
* ``servicebus-durable``: the same with ``data_dir`` (a fresh temporary directory),
  when this tree's broker has one (else the table says it was not measured);
* ``rabbitmq`` / ``rabbitmq-persistent``: RabbitMQ 3.10's ``rabbitmq_amqp1_0``;
  ``/queue/NAME`` declares a durable classic queue, and a message is persistent
  when its header says ``durable=true`` (delivery-mode 2), transient otherwise;
* ``proton-c``: Debian's proton C example broker, in memory (the near-native reference).

Besides msg/s it prints the broker's CPU time per message moved (user + system of its
processes over the phase) and the clients' (all of them together): other work on the
machine disturbs these far less than the wall-clock rates. Prints every round, a table
of medians and the ratios the issue sets as goals (the median of the rounds' own
ratios, with the lowest and the highest). ``--profile FILE`` runs the embedded broker
under cProfile and writes its stats to FILE (the last embedded broker of the last round).

    python3 interop/bench_broker.py [--rounds 3] [--count 20000] [--producers 4] [--consumers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import re
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BROKERS = ("servicebus", "servicebus-partitioned", "servicebus-durable", "rabbitmq", "rabbitmq-persistent", "proton-c")
EMBEDDED = {"servicebus": "", "servicebus-partitioned": "--partitioned", "servicebus-durable": "--durable"}
PHASES = ("send", "receive", "both")
PHASE_TIMEOUT = 120.0
"""Seconds a phase may take before its clients are killed (the run stays bounded)."""
READY_TIMEOUT = 30.0


# -- clients (each runs in its own process: ``--worker ROLE URL ADDRESS COUNT SIZE``) --------
async def _produce(url: str, address: str, count: int, size: int, durable: bool) -> tuple[float, float]:
    from amqplink import Message
    from amqplink.aio import connect

    conn = await connect(url)
    sender = await conn.create_sender(address, settle_mode="unsettled", max_in_flight=1000)
    message = Message(bytes(size), durable=True) if durable else Message(bytes(size))
    refused = 0

    def check(future: asyncio.Future[Any]) -> None:
        nonlocal refused
        if type(future.result()).__name__ != "Accepted":
            refused += 1

    start = await _ready()
    for _ in range(count):
        (await sender.send_nowait(message)).add_done_callback(check)
    await sender.wait_settled()
    end = time.monotonic()
    await conn.close()
    if refused:
        raise RuntimeError(f"{refused} of {count} messages not accepted")
    return start, end


async def _consume(url: str, address: str, count: int) -> tuple[float, float]:
    from amqplink.aio import connect

    conn = await connect(url)
    receiver = await conn.create_receiver(address, mode="peek-lock", prefetch=1000)
    start = await _ready()
    got = 0
    while got < count:
        batch = await receiver.receive(1000, timeout=PHASE_TIMEOUT)
        if not batch:
            raise RuntimeError(f"receive stalled at {got}/{count}")
        await receiver.accept(*batch)
        got += len(batch)
    end = time.monotonic()
    await conn.close()
    return start, end


_CPU_AT_GO = [0.0]
"""This client process's CPU seconds when the parent said go."""


async def _ready() -> float:
    """Tell the parent the link is attached, wait for its go; the start time."""
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    _CPU_AT_GO[0] = time.process_time()
    return time.monotonic()


def worker(role: str, url: str, address: str, count: int, size: int) -> None:
    if role == "consume":
        start, end = asyncio.run(_consume(url, address, count))
    else:
        start, end = asyncio.run(_produce(url, address, count, size, durable=role == "produce-durable"))
    cpu = time.process_time() - _CPU_AT_GO[0]
    print(json.dumps({"start": start, "end": end, "count": count, "cpu": cpu}), flush=True)


# -- the embedded broker in its own process (``--serve``) ------------------------------------
def durable_supported() -> bool:
    """Whether this tree's broker keeps a namespace on disk (``Broker(data_dir=...)``)."""
    from amqplink.broker import Broker

    return "data_dir" in inspect.signature(Broker).parameters


def serve(profile: str | None, variant: str) -> None:
    """Run the embedded Service Bus broker until stdin closes; print its URL first."""
    from amqplink.aio.server import SERVER_GC_THRESHOLD, raise_gc_threshold
    from amqplink.broker import Broker
    from amqplink.broker.config import EntityProperties

    raise_gc_threshold(SERVER_GC_THRESHOLD)  # as `amqplink broker` does (this process only serves)

    async def run() -> None:
        with tempfile.TemporaryDirectory(prefix="bench-broker-") as data_dir:
            extra: dict[str, Any] = {"data_dir": data_dir} if variant == "--durable" else {}
            broker = Broker(servicebus=True, **extra)
            if variant == "--partitioned":
                assert broker.servicebus is not None
                # Queues made on first use take these properties.
                broker.servicebus.namespace.default_properties = EntityProperties(enable_partitioning=True)
            await broker.start("127.0.0.1", 0)
            print(f"listening {broker.url}", flush=True)
            loop = asyncio.get_running_loop()
            stop = asyncio.Event()
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            loop.add_reader(sys.stdin.fileno(), stop.set)
            await stop.wait()
            await broker.stop()

    if profile is None:
        asyncio.run(run())
        return
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        asyncio.run(run())
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


@contextlib.contextmanager
def embedded_broker(profile: str | None, variant: str) -> Iterator[tuple[str, int]]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", *([variant] if variant else [])]
    cmd += ["--profile", profile] if profile else []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.match(r"listening (\S+)", line)
        if match is None:
            raise RuntimeError(f"the embedded broker did not start: {line!r}")
        yield match.group(1), process.pid
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the broker stops (and writes its profile)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def start_broker(name: str, profile: str | None) -> Iterator[tuple[str, str, int]]:
    """(url, address prefix, process group whose CPU time is the broker's) of a running broker."""
    if name in EMBEDDED:
        with embedded_broker(profile, EMBEDDED[name]) as (url, pid):
            yield url, "", pid
    elif name.startswith("rabbitmq"):
        from interop.peers.rabbitmq import RabbitMQ

        with RabbitMQ() as rabbit:
            server = rabbit._server  # started under setsid: its pid is the node's process group
            yield rabbit.url, "/queue/", 0 if server is None else server.pid
    elif name == "proton-c":
        from interop.peers.proton_c import ProtonCBroker

        with ProtonCBroker() as peer:
            process = peer._process
            yield peer.url, "", 0 if process is None else process.pid
    else:
        raise ValueError(f"unknown broker {name!r}")


def cpu_seconds(leader: int) -> float:
    """User + system CPU seconds of process ``leader`` and the live processes of its group."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[2]) == leader or stat.parent.name == str(
            leader
        ):  # pgrp; utime and stime are fields 14 and 15 of stat
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


# -- a phase: many client processes at once --------------------------------------------------
Cell = tuple[float, float, float]
"""A phase's messages per second, broker CPU us/msg and clients' CPU us/msg."""


@dataclass
class Phase:
    clients: list[tuple[str, str, int]] = field(default_factory=list)
    """(role, address, count) per client process."""


def run_phase(url: str, phase: Phase, size: int, group: int) -> Cell:
    """Start every client, let them attach, say go at once; messages per second, the
    broker's CPU microseconds per message and the clients' (all of them together)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", role, url, address, str(count), str(size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for role, address, count in phase.clients
    ]
    try:
        ready_by = time.monotonic() + READY_TIMEOUT
        for proc in procs:
            _expect(proc, "ready", ready_by - time.monotonic())
        cpu = cpu_seconds(group)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        deadline = time.monotonic() + PHASE_TIMEOUT  # one bound for the whole phase
        results = [json.loads(_expect(proc, "{", deadline - time.monotonic())) for proc in procs]
        cpu = cpu_seconds(group) - cpu
    finally:
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    moved = sum(r["count"] for r, (role, _, _) in zip(results, phase.clients, strict=True) if role == "consume")
    if not moved:  # a send phase: messages sent
        moved = sum(r["count"] for r in results)
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    return moved / wall, cpu * 1e6 / moved, sum(r["cpu"] for r in results) * 1e6 / moved


def _expect(proc: subprocess.Popen[str], prefix: str, timeout: float) -> str:
    """The next line of a client that starts with ``prefix`` (RuntimeError on exit or timeout)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"a client gave no {prefix!r} within {timeout} s")
            if not sel.select(left):
                continue
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"a client exited (status {proc.wait()}) before {prefix!r}")
            if line.startswith(prefix):
                return line


def bench(name: str, args: argparse.Namespace) -> dict[str, Cell]:
    """Per phase: msg/s and the broker's CPU microseconds per message."""
    produce = "produce-durable" if name == "rabbitmq-persistent" else "produce"
    out: dict[str, Cell] = {}
    with start_broker(name, args.profile if name in EMBEDDED else None) as (url, prefix, leader):
        tag = uuid.uuid4().hex[:6]
        pairs = max(args.producers, args.consumers)
        # Each producer fills one queue, each consumer drains one; with fewer of one
        # kind, queues are shared round robin.
        total = args.count * args.producers
        per_queue = total // pairs

        def clients(queues: list[str]) -> list[tuple[str, str, int]]:
            return [(produce, queues[i % pairs], args.count) for i in range(args.producers)]

        def drains(queues: list[str]) -> list[tuple[str, str, int]]:
            return [("consume", q, per_queue) for q in queues[: args.consumers]]

        queues = [f"{prefix}bench-{tag}-{i}" for i in range(pairs)]
        out["send"] = run_phase(url, Phase(clients(queues)), args.size, leader)
        out["receive"] = run_phase(url, Phase(drains(queues)), args.size, leader)
        if "both" in args.phases:
            fresh = [f"{prefix}bench-{tag}-both-{i}" for i in range(pairs)]
            out["both"] = run_phase(url, Phase(clients(fresh) + drains(fresh)), args.size, leader)
    return out


def print_table(rounds: list[dict[str, dict[str, Cell]]], phases: list[str], skipped: dict[str, str]) -> None:
    """The median of the rounds per broker and phase, then each goal's ratio: the median of
    the rounds' own ratios (each round's brokers ran minutes apart, not a whole run apart),
    with the lowest and highest round."""
    names = list(rounds[0]) if rounds else []
    print()
    print(f"{'broker':<22}" + "".join(f"{p + ' msg/s':>15}{'us/msg':>8}" for p in phases))
    for name in names:
        cells = ""
        for p in phases:
            if p in rounds[0][name]:
                rate = statistics.median(r[name][p][0] for r in rounds)
                cpu = statistics.median(r[name][p][1] for r in rounds)
                cells += f"{rate:>15,.0f}{cpu:>8.1f}"
            else:
                cells += f"{'-':>15}{'-':>8}"
        print(f"{name:<22}{cells}")
    for name, reason in skipped.items():
        print(f"{name:<22}  not measured: {reason}")
    print(f"(median of {len(rounds)} round(s); us/msg: the broker's CPU time per message moved, user + system)")
    print()
    goals = [
        (ours, theirs, goal)
        for ours in ("servicebus", "servicebus-partitioned")
        for theirs, goal in (("rabbitmq", 3.0), ("proton-c", 0.5))
    ]
    goals.append(("servicebus-durable", "rabbitmq-persistent", 2.0))
    for ours, theirs, goal in goals:
        if ours not in names or theirs not in names:
            continue
        parts = []
        for p in phases:
            if p not in rounds[0][theirs]:
                continue
            ratios = sorted(r[ours][p][0] / r[theirs][p][0] for r in rounds)
            spread = f" ({ratios[0]:.2f}-{ratios[-1]:.2f})" if len(ratios) > 1 else ""
            parts.append(f"{p} {statistics.median(ratios):.2f}x{spread}")
        print(f"{ours} / {theirs}: {', '.join(parts)}   (goal >= {goal}x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default=",".join(BROKERS))
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--count", type=int, default=20_000, help="messages per producer")
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument(
        "--rounds", type=int, default=3, help="times every broker is measured, in turn (the table gives medians)"
    )
    parser.add_argument("--profile", default=None, help="run the embedded broker under cProfile, stats to this file")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--partitioned", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--durable", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", nargs=5, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.profile, "--partitioned" if args.partitioned else "--durable" if args.durable else "")
        return 0
    if args.worker:
        role, url, address, count, size = args.worker
        worker(role, url, address, int(count), int(size))
        return 0
    args.phases = args.phases.split(",")
    print(
        f"{args.producers} producers + {args.consumers} consumers, {args.count} messages of {args.size} B"
        f" per producer, {os.cpu_count()} cores",
        flush=True,
    )
    rounds: list[dict[str, dict[str, Cell]]] = []
    skipped: dict[str, str] = {}
    names = args.brokers.split(",")
    if "servicebus-durable" in names and not durable_supported():
        skipped["servicebus-durable"] = "this tree's Broker has no data_dir (the durable branch has not landed)"
        names.remove("servicebus-durable")
    for number in range(1, args.rounds + 1):
        results: dict[str, dict[str, Cell]] = {}
        for name in names:
            results[name] = bench(name, args)
            cells = (f"{p} {v:,.0f}/s ({us:.1f} us, clients {cus:.1f} us)" for p, (v, us, cus) in results[name].items())
            print(f"  round {number}  {name:<22} " + "  ".join(cells), flush=True)
        rounds.append(results)
    print_table(rounds, args.phases, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
