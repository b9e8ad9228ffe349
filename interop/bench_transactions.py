"""Transaction benchmark: what an AMQP 1.0 transaction costs, amqplink's clients vs qpid-proton's.

One run, one embedded broker (``amqplink broker`` in a subprocess, in memory or with
``--data-dir``/``--durable`` on disk), each scenario on fresh queues, each done twice: in
transactions and the same work without. Scenarios:

* **send**: ``--count`` messages, ``--per-transaction`` (100) per transaction (Service
  Bus's limit): declare, send them, commit; untransacted, the same sends, each group
  awaited before the next (so the only difference is the declare and the discharge);
* **move**: receive + complete + send-via, ``--move-per-transaction`` (1) message per
  transaction: a peek-lock receiver on ``in`` (prefetch), each message sent on to ``out``
  through ``in`` (send-via: ``com.microsoft:transfer-destination-address``) and completed,
  then the commit; untransacted, sent straight to ``out`` and completed once the send is
  accepted (at least once). ``in`` is filled first, untimed.

Clients, each written as its own users write it:

* ``servicebus``: ``amqplink.servicebus.aio`` (``async with client.transaction() as txn``,
  ``send_messages(list, transaction=txn)``: a list goes as one batch transfer, in a
  transaction and out of one; ``complete_message(m, transaction=txn)``, which waits for
  the broker's provisional answer; a sender created ``via="in"``);
* ``amqplink``: the plain client (``amqplink.aio``: ``await conn.transaction()``,
  ``txn.send_nowait`` for each message then the commit, the outcomes checked after it;
  ``txn.settle``);
* ``proton``: qpid-proton's Python reactor (``Container.declare_transaction``,
  ``Transaction.send``/``accept``/``commit`` as Debian's ``tx_send.py`` uses them: the
  commit sent right after the work, not after its outcomes; its send-via sender sets the
  link property itself).

Prints msg/s, the client's and the broker's CPU time per message (``time.process_time``,
``/proc``), then per scenario and client the transacted rate against the untransacted and
what one transaction costs: wall time and broker CPU per transaction over the same work
without. Against another broker (``--url``) only the ``send`` scenario of ``amqplink`` and
``proton`` runs (send-via and the Service Bus client need a Service Bus namespace).

    python3 interop/bench_transactions.py [--count 10000] [--move-count 1000] [--repeat 3]
        [--clients servicebus,amqplink,proton] [--scenarios send,move] [--durable] [--url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import re
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VIA = "com.microsoft:transfer-destination-address"
BODY = bytes(64)


@dataclass
class Target:
    url: str  # amqp://host:port
    conn_str: str | None  # a Service Bus connection string (None: not a Service Bus namespace)
    broker_pid: int = 0  # the broker's process, when it is ours (its CPU time is read)


@dataclass
class Run:
    rate: float  # messages per second
    client_us: float  # client CPU µs per message
    broker_us: float  # broker CPU µs per message (0: not measured)


class Clock:
    """Wall and CPU time of the timed part of one run (the client's process, the broker's)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.wall = self.cpu = self.broker = 0.0

    def _broker_cpu(self) -> float:
        if not self.target.broker_pid:
            return 0.0
        with open(f"/proc/{self.target.broker_pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def start(self) -> None:
        self.wall, self.cpu, self.broker = time.perf_counter(), time.process_time(), self._broker_cpu()

    def stop(self, count: int) -> Run:
        wall = time.perf_counter() - self.wall
        cpu = time.process_time() - self.cpu
        broker = self._broker_cpu() - self.broker
        return Run(count / wall, cpu * 1e6 / count, broker * 1e6 / count)


def _refused(states: list[Any]) -> Any:
    """The first of the transactional states that does not carry ``accepted`` (None: all do)."""
    from amqplink.aio.transactions import outcome_of
    from amqplink.protocol.definitions import Accepted

    return next((s for s in states if type(outcome_of(s)) is not Accepted), None)


# -- amqplink.servicebus.aio ---------------------------------------------------------------
def servicebus_send(target: Target, queue: str, count: int, per: int, transacted: bool) -> Run:
    from amqplink.servicebus import ServiceBusMessage
    from amqplink.servicebus.aio import ServiceBusClient

    assert target.conn_str is not None

    async def run() -> Run:
        async with ServiceBusClient.from_connection_string(target.conn_str) as client:
            sender = client.get_queue_sender(queue)
            await sender.send_messages(ServiceBusMessage(b"warm-up"))  # attach before the clock
            clock = Clock(target)
            clock.start()
            for _ in range(count // per):
                messages = [ServiceBusMessage(BODY) for _ in range(per)]
                if transacted:
                    async with client.transaction() as txn:
                        await sender.send_messages(messages, transaction=txn)
                else:
                    await sender.send_messages(messages)
            result = clock.stop(count)
            await sender.close()
            return result

    return asyncio.run(run())


def servicebus_move(target: Target, source: str, dest: str, count: int, per: int, transacted: bool) -> Run:
    from amqplink.servicebus import ServiceBusMessage
    from amqplink.servicebus.aio import ServiceBusClient

    assert target.conn_str is not None

    async def run() -> Run:
        async with ServiceBusClient.from_connection_string(target.conn_str) as client:
            receiver = client.get_queue_receiver(source, prefetch_count=max(100, per))
            onward = client.get_queue_sender(dest, via=source if transacted else None)
            await onward.create_message_batch()  # attach before the clock
            done = 0
            clock = Clock(target)
            clock.start()
            while done < count:
                messages = await receiver.receive_messages(max_message_count=min(per, count - done), max_wait_time=10)
                if not messages:
                    raise RuntimeError(f"servicebus move stalled at {done}/{count}")
                out = [ServiceBusMessage(b"".join(m.body)) for m in messages]
                if transacted:
                    async with client.transaction() as txn:
                        await onward.send_messages(out, transaction=txn)
                        for message in messages:
                            await receiver.complete_message(message, transaction=txn)
                else:
                    await onward.send_messages(out)
                    for message in messages:
                        await receiver.complete_message(message)
                done += len(messages)
            result = clock.stop(count)
            await receiver.close()
            await onward.close()
            return result

    return asyncio.run(run())


# -- amqplink.aio (the plain client) -------------------------------------------------------
def amqplink_send(target: Target, queue: str, count: int, per: int, transacted: bool) -> Run:
    from amqplink import Message
    from amqplink.aio import connect
    from amqplink.protocol.definitions import Accepted

    async def run() -> Run:
        async with await connect(target.url) as conn:
            sender = await conn.create_sender(queue, max_in_flight=max(1000, per))
            await sender.send(Message(b"warm-up"))
            clock = Clock(target)
            clock.start()
            for _ in range(count // per):
                if transacted:
                    txn = await conn.transaction()
                    futures = [await txn.send_nowait(sender, Message(BODY)) for _ in range(per)]
                    await txn.commit()  # the outcomes came before its answer
                    refused = _refused([f.result() for f in futures])
                    if refused is not None:
                        raise RuntimeError(f"a message sent in a transaction was not accepted: {refused}")
                else:
                    futures = [await sender.send_nowait(Message(BODY)) for _ in range(per)]
                    outcomes = await asyncio.gather(*futures)
                    if any(type(o) is not Accepted for o in outcomes):
                        raise RuntimeError("a message was not accepted")
            result = clock.stop(count)
            await sender.close()
            return result

    return asyncio.run(run())


def amqplink_move(target: Target, source: str, dest: str, count: int, per: int, transacted: bool) -> Run:
    from amqplink import Message
    from amqplink.aio import connect
    from amqplink.codec.types import Symbol

    async def run() -> Run:
        async with await connect(target.url) as conn:
            receiver = await conn.create_receiver(source, mode="peek-lock", prefetch=max(100, per))
            if transacted:
                onward = await conn.create_sender(source, properties={Symbol(VIA): dest})
            else:
                onward = await conn.create_sender(dest)
            done = 0
            clock = Clock(target)
            clock.start()
            while done < count:
                batch = await receiver.receive(min(per, count - done), timeout=10)
                if not batch:
                    raise RuntimeError(f"amqplink move stalled at {done}/{count}")
                if transacted:
                    txn = await conn.transaction()
                    futures = [await txn.send_nowait(onward, Message(m.body)) for m in batch]
                    for message in batch:
                        await txn.settle(receiver, message)
                    await txn.commit()
                    refused = _refused([f.result() for f in futures])
                    if refused is not None:
                        raise RuntimeError(f"a message sent in a transaction was not accepted: {refused}")
                else:
                    for message in batch:
                        await onward.send(Message(message.body))
                    await receiver.accept(*batch)
                done += len(batch)
            result = clock.stop(count)
            await receiver.close()
            await onward.close()
            return result

    return asyncio.run(run())


# -- qpid-proton ---------------------------------------------------------------------------
def _proton_run(handler: Any) -> None:
    from proton.reactor import Container

    Container(handler).run()
    if handler.error:
        raise RuntimeError(f"proton: {handler.error}")


def proton_send(target: Target, queue: str, count: int, per: int, transacted: bool) -> Run:
    from proton import Message as PMessage
    from proton.handlers import MessagingHandler, TransactionHandler

    class Send(MessagingHandler, TransactionHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.clock = Clock(target)
            self.result: Run | None = None
            self.error: str | None = None
            self.sent = self.confirmed = self.committed = 0
            self.in_group = 0
            self.transaction: Any = None
            self.ready = False

        def on_start(self, event: Any) -> None:
            self.container = event.container
            self.conn = event.container.connect(target.url, reconnect=False)
            self.sender = event.container.create_sender(self.conn, queue, name=f"bench-{uuid.uuid4()}")

        def on_sendable(self, event: Any) -> None:
            if not self.ready:
                self.ready = True
                self.clock.start()
                self.next_group()
            elif not transacted:
                self.fill()

        def next_group(self) -> None:
            self.in_group = 0
            if transacted:
                self.container.declare_transaction(self.conn, handler=self)
            else:
                self.fill()

        def fill(self) -> None:
            while self.sender.credit and self.in_group < per:
                self.sender.send(PMessage(body=BODY))
                self.in_group += 1

        def on_transaction_declared(self, event: Any) -> None:
            for _ in range(per):  # (the broker's credit is far above 100)
                event.transaction.send(self.sender, PMessage(body=BODY))
            event.transaction.commit()

        def on_transaction_committed(self, event: Any) -> None:
            self.committed += per
            self.group_done()

        def on_transaction_aborted(self, event: Any) -> None:
            self.error = "a transaction was rolled back"
            event.connection.close()

        def on_accepted(self, event: Any) -> None:
            if transacted:
                return
            self.confirmed += 1
            if self.confirmed % per == 0:
                self.group_done()

        def on_rejected(self, event: Any) -> None:
            self.error = "a message was rejected"
            event.connection.close()

        def group_done(self) -> None:
            if max(self.committed, self.confirmed) >= count // per * per:
                self.result = self.clock.stop(count // per * per)
                self.conn.close()
            else:
                self.next_group()

    handler = Send()
    _proton_run(handler)
    assert handler.result is not None
    return handler.result


def proton_move(target: Target, source: str, dest: str, count: int, per: int, transacted: bool) -> Run:
    from proton import Message as PMessage
    from proton import symbol
    from proton.handlers import MessagingHandler, TransactionHandler
    from proton.reactor import LinkOption

    class Via(LinkOption):  # type: ignore[misc]
        def apply(self, link: Any) -> None:
            link.properties = {symbol(VIA): dest}

    class Move(MessagingHandler, TransactionHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(prefetch=max(100, per), auto_accept=False)
            self.clock = Clock(target)
            self.result: Run | None = None
            self.error: str | None = None
            self.waiting: collections.deque[tuple[Any, Any]] = collections.deque()
            self.group: list[tuple[Any, Any]] = []
            self.confirmed = 0
            self.done = 0
            self.started = False

        def on_start(self, event: Any) -> None:
            self.container = event.container
            self.conn = event.container.connect(target.url, reconnect=False)
            self.receiver = event.container.create_receiver(self.conn, source, name=f"bench-{uuid.uuid4()}")
            if transacted:
                self.onward = event.container.create_sender(
                    self.conn, source, name=f"bench-{uuid.uuid4()}", options=Via()
                )
            else:
                self.onward = event.container.create_sender(self.conn, dest, name=f"bench-{uuid.uuid4()}")

        def on_message(self, event: Any) -> None:
            self.waiting.append((event.delivery, event.message))
            if not self.started:
                self.started = True
                self.clock.start()
            if not self.group:
                self.step()

        def step(self) -> None:
            if self.done >= count:
                self.result = self.clock.stop(count)
                self.conn.close()
                return
            take = min(per, count - self.done)
            if len(self.waiting) < take:
                return  # on_message steps again
            self.group = [self.waiting.popleft() for _ in range(take)]
            if transacted:
                self.container.declare_transaction(self.conn, handler=self)
            else:
                self.confirmed = 0
                for _, message in self.group:
                    self.onward.send(PMessage(body=message.body))

        def on_transaction_declared(self, event: Any) -> None:
            for delivery, message in self.group:
                event.transaction.send(self.onward, PMessage(body=message.body))
                event.transaction.accept(delivery)
            event.transaction.commit()

        def on_transaction_committed(self, event: Any) -> None:
            self.finish_group()

        def on_transaction_aborted(self, event: Any) -> None:
            self.error = "a transaction was rolled back"
            event.connection.close()

        def on_accepted(self, event: Any) -> None:
            if transacted or event.sender != self.onward:
                return
            self.confirmed += 1
            if self.confirmed == len(self.group):
                for delivery, _ in self.group:
                    self.accept(delivery)  # once the copy is stored: at least once
                self.finish_group()

        def on_rejected(self, event: Any) -> None:
            self.error = "a message was rejected"
            event.connection.close()

        def finish_group(self) -> None:
            self.done += len(self.group)
            self.group = []
            self.step()

    handler = Move()
    _proton_run(handler)
    assert handler.result is not None
    return handler.result


# -- harness -------------------------------------------------------------------------------
def fill(target: Target, queue: str, count: int) -> None:
    from amqplink import Message
    from amqplink.aio import connect

    async def run() -> None:
        async with await connect(target.url) as conn:
            sender = await conn.create_sender(queue, max_in_flight=1000)
            for _ in range(count):
                await sender.send_nowait(Message(BODY))
            await sender.wait_settled()

    asyncio.run(run())


@contextlib.contextmanager
def broker_process(data_dir: str | None) -> Iterator[Target]:
    """``amqplink broker`` on a free port in a subprocess (its CPU time is read from /proc)."""
    from interop.bench_sbclient import broker_subprocess

    with broker_subprocess(*(["--data-dir", data_dir] if data_dir else [])) as (conn_str, pid):
        hostport = re.match(r"Endpoint=sb://([^/;]+)", conn_str)
        assert hostport is not None
        yield Target(f"amqp://{hostport.group(1)}", conn_str, pid)


SENDERS: dict[str, Callable[[Target, str, int, int, bool], Run]] = {
    "servicebus": servicebus_send,
    "amqplink": amqplink_send,
    "proton": proton_send,
}
MOVERS: dict[str, Callable[[Target, str, str, int, int, bool], Run]] = {
    "servicebus": servicebus_move,
    "amqplink": amqplink_move,
    "proton": proton_move,
}


def run_all(target: Target, args: argparse.Namespace) -> None:
    clients = [c for c in args.clients.split(",") if c]
    scenarios = [s for s in args.scenarios.split(",") if s]
    if target.conn_str is None:  # not a Service Bus namespace
        clients = [c for c in clients if c != "servicebus"]
        scenarios = [s for s in scenarios if s != "move"]
    per_of = {"send": args.per_transaction, "move": args.move_per_transaction}
    count_of = {"send": args.count, "move": args.move_count}
    runs: dict[tuple[str, str, bool], list[Run]] = {}
    for scenario in scenarios:
        count, per = count_of[scenario], per_of[scenario]
        # Clients and modes take turns, run after run, so a slow spell of the machine hits all alike.
        for attempt in range(1, args.repeat + 1):
            for client in clients:
                for transacted in (False, True):
                    tag = uuid.uuid4().hex[:8]
                    if scenario == "send":
                        run = SENDERS[client](target, f"bench-{client}-{tag}", count, per, transacted)
                    else:
                        source = f"bench-in-{client}-{tag}"
                        fill(target, source, count)
                        run = MOVERS[client](target, source, f"bench-out-{client}-{tag}", count, per, transacted)
                    runs.setdefault((scenario, client, transacted), []).append(run)
                    mode = "transacted" if transacted else "plain"
                    print(
                        f"  {scenario:<5} {per:>3}/txn  {client:<10} {mode:<10} {run.rate:>9,.0f} msg/s"
                        f"  client {run.client_us:6.1f} µs/msg  broker {run.broker_us:6.1f} µs/msg"
                        f"  (run {attempt}/{args.repeat})",
                        flush=True,
                    )

    def median(key: tuple[str, str, bool]) -> Run:
        got = runs[key]
        return Run(*(statistics.median(getattr(r, f) for r in got) for f in ("rate", "client_us", "broker_us")))

    print()
    medians = f" (medians of {args.repeat} runs)" if args.repeat > 1 else ""
    store = "durable" if args.data_dir else ("in memory" if target.broker_pid else args.url)
    print(f"broker: {store}{medians}")
    header = (
        f"{'scenario':<22} {'client':<10} {'plain msg/s':>11} {'txn msg/s':>10} {'txn/plain':>9}"
        f" {'µs/txn':>8} {'broker µs/txn':>13} {'client µs/txn':>13}"
    )
    print(header)
    for scenario in scenarios:
        per = per_of[scenario]
        label = f"{scenario} {per}/transaction"
        for client in clients:
            plain, txn = median((scenario, client, False)), median((scenario, client, True))
            # What one transaction adds to the same work: wall time, broker and client CPU.
            wall = (1 / txn.rate - 1 / plain.rate) * per * 1e6
            broker = (txn.broker_us - plain.broker_us) * per
            client_cpu = (txn.client_us - plain.client_us) * per
            broker_cell = f"{broker:>13.0f}" if target.broker_pid else f"{'-':>13}"
            print(
                f"{label:<22} {client:<10} {plain.rate:>11,.0f} {txn.rate:>10,.0f} {txn.rate / plain.rate:>8.2f}x"
                f" {wall:>8.0f} {broker_cell} {client_cpu:>13.0f}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000, help="messages sent in the send scenario")
    parser.add_argument("--per-transaction", type=int, default=100, help="messages per transaction (send)")
    parser.add_argument("--move-count", type=int, default=1_000, help="messages moved in the move scenario")
    parser.add_argument("--move-per-transaction", type=int, default=1, help="messages per transaction (move)")
    parser.add_argument("--clients", default="servicebus,amqplink,proton")
    parser.add_argument("--scenarios", default="send,move")
    parser.add_argument("--repeat", type=int, default=3, help="runs per client, scenario and mode; medians shown")
    parser.add_argument("--data-dir", help="run the broker durable, storing in DIR (must be empty)")
    parser.add_argument("--durable", action="store_true", help="run the broker durable, in a temporary directory")
    parser.add_argument("--url", help="another broker (AMQP 1.0 with a coordinator): send scenario, no Service Bus")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # (so that the broker is stopped too)
    if args.url:
        run_all(Target(args.url, None), args)
        return 0
    with contextlib.ExitStack() as stack:
        if args.durable and not args.data_dir:
            args.data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-txn-"))
        target = stack.enter_context(broker_process(args.data_dir))
        run_all(target, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
