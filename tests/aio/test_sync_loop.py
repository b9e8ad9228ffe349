"""The blocking facade's event loop (amqplink/sync/loop.py): driven by the calling thread
while calls come back to back, kept by the keeper thread in between, handed between
threads, never run by two at once; and what must hold whoever drives it: time-outs,
Ctrl-C, several threads on one connection, a forked child, exit."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from amqplink import Message, sync
from amqplink.aio import connect as aio_connect
from amqplink.broker import Broker
from amqplink.protocol.definitions import Accepted
from amqplink.sync import loop as sync_loop
from tests.conftest import broker_thread
from tests.receiving import receive_exactly_sync


@pytest.fixture()
def broker_url(embedded_broker: Broker) -> str:
    return embedded_broker.url


def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    """Poll ``condition`` (another thread's progress) until it holds."""
    deadline = time.monotonic() + within
    pause = threading.Event()
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        pause.wait(0.001)


main_ident = threading.main_thread().ident or 0


def driving(predicate: Callable[[sync_loop._Call], bool]) -> Callable[[], bool]:
    """A condition: a caller whose call matches ``predicate`` drives the loop."""

    def check() -> bool:
        driver = sync_loop.current()._driver
        return isinstance(driver, sync_loop._Call) and predicate(driver)

    return check


def test_calls_back_to_back_run_the_loop_on_the_calling_thread(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        sender = conn.create_sender("q")
        sender.send(b"attach")
        loop = sync_loop.current().loop
        ran_on: set[int] = set()
        original = loop.call_soon_threadsafe
        crossings = 0

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal crossings
            crossings += 1
            return original(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
        try:
            for i in range(20):
                assert isinstance(sender.send(f"m{i}"), Accepted)
                sync._run(_note_thread(ran_on))
        finally:
            del loop.call_soon_threadsafe
        assert ran_on == {threading.get_ident()}
        assert crossings == 0  # no call handed to another thread
        assert asyncio._get_running_loop() is None  # the loop is left stopped, not running here


async def _note_thread(seen: set[int]) -> None:
    seen.add(threading.get_ident())


def _instant(seen: set[int]) -> sync_loop.Begin:
    """An operation that ends as it starts, noting the thread that started it."""

    def begin(notify: sync_loop.Notify) -> None:
        seen.add(threading.get_ident())
        notify(None)

    return begin


def test_a_caller_takes_the_loop_back_from_the_keeper() -> None:
    until(lambda: sync_loop.current()._driver == sync_loop._KEEPER)  # idle: the keeper drives
    first: set[int] = set()
    sync._wait(_instant(first))  # handed to the keeper's loop: one hop
    assert first == {sync_loop.current().thread.ident}
    after: set[int] = set()
    for _ in range(20):
        sync._wait(_instant(after))
    assert threading.get_ident() in after  # the keeper let the loop go, and this thread drives


def test_the_keeper_keeps_an_idle_connection_alive_past_the_peers_idle_time_out() -> None:
    with broker_thread(Broker(idle_timeout=0.3)) as broker, sync.connect(broker.url) as conn:
        sender = conn.create_sender("q")
        sender.send(b"before")
        # The scenario is time itself: the caller runs none of the library for more than
        # three of the broker's idle time-outs; only the keeper's heartbeats keep it open.
        time.sleep(1.0)
        assert not conn.closed
        assert isinstance(sender.send(b"after-idle"), Accepted)


def test_the_keeper_reads_prefetched_messages_between_calls(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        receiver = conn.create_receiver("prefetched", mode="receive-and-delete", prefetch=10)

        async def send_elsewhere() -> None:  # another connection, on a loop of its own
            async with await aio_connect(broker_url) as other:
                sender = await other.create_sender("prefetched")
                for body in (b"a", b"b", b"c"):
                    await sender.send(body)

        asyncio.run(send_elsewhere())
        # No blocking call runs meanwhile: the keeper reads the transfers into the buffer.
        until(lambda: receiver.aio.buffered == 3)
        assert [m.body for m in receiver.receive(3, timeout=1)] == [b"a", b"b", b"c"]


def test_several_threads_hammer_one_sender_and_one_receiver(broker_url: str) -> None:
    senders, each, receivers = 6, 150, 3
    total = senders * each
    with sync.connect(broker_url) as conn:
        sender = conn.create_sender("hammer")
        receiver = conn.create_receiver("hammer", mode="peek-lock", prefetch=20)
        errors: list[BaseException] = []
        got: list[Any] = []
        got_lock = threading.Lock()

        def send(k: int) -> None:
            try:
                for i in range(each):
                    assert isinstance(sender.send(f"{k}-{i}"), Accepted)
            except BaseException as exc:  # reported below
                errors.append(exc)

        def receive() -> None:
            try:
                while True:
                    with got_lock:
                        if len(got) >= total:
                            return
                    for message in receiver.receive(5, timeout=0.2):
                        receiver.accept(message)
                        with got_lock:
                            got.append(message.body)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=send, args=(k,)) for k in range(senders)]
        threads += [threading.Thread(target=receive) for _ in range(receivers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        assert sorted(got) == sorted(f"{k}-{i}" for k in range(senders) for i in range(each))
        assert receiver.receive(1, timeout=0.2) == []  # each accepted once: nothing comes back


def test_a_call_made_while_another_thread_drives_is_run_by_that_driver(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        receiver = conn.create_receiver("handoff", mode="receive-and-delete")
        sender = conn.create_sender("handoff")
        sender.send(b"attach")
        assert [m.body for m in receiver.receive(1, timeout=5)] == [b"attach"]
        received: list[Any] = []
        waiting = threading.Thread(target=lambda: received.extend(receiver.receive(1, timeout=30)))
        waiting.start()
        until(driving(lambda call: call.driven))  # the receiving thread drives, waiting
        assert isinstance(sender.send(b"across"), Accepted)  # run by the receiving thread's loop
        waiting.join(30)
        assert [m.body for m in received] == [b"across"]


def test_a_time_out_cancels_the_operation_whoever_drives(broker_url: str) -> None:
    cancelled: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise

    with sync.connect(broker_url) as conn:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            sync._run(forever("driven"), timeout=0.2)
        assert time.monotonic() - started < 5
        receiver = conn.create_receiver("timeouts", mode="receive-and-delete")
        blocker = threading.Thread(target=lambda: receiver.receive(1, timeout=3))
        blocker.start()
        until(driving(lambda call: call.driven))
        with pytest.raises(TimeoutError):
            sync._run(forever("waiting"), timeout=0.2)  # another thread drives: this one waits
        blocker.join(30)
        sender = conn.create_sender("timeouts")
        assert isinstance(sender.send(b"after"), Accepted)
        until(lambda: sorted(cancelled) == ["driven", "waiting"])


@pytest.mark.usefixtures("python_sigint")  # what a program started from a terminal has
def test_ctrl_c_while_driving_cancels_the_call_and_leaves_the_loop_usable(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        receiver = conn.create_receiver("interrupted", mode="receive-and-delete", prefetch=0)
        sender = conn.create_sender("interrupted")
        sender.send(b"attach")
        assert [m.body for m in receiver.receive(1, timeout=5)] == [b"attach"]

        def interrupt() -> None:
            until(driving(lambda call: call.driven and sync_loop.current()._main_call is call))
            signal.pthread_kill(main_ident, signal.SIGINT)  # a real signal: it interrupts a wait

        helper = threading.Thread(target=interrupt)
        helper.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            receiver.receive(1, timeout=30)
        helper.join(10)
        assert threading.get_ident() == main_ident
        assert time.monotonic() - started < 10
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
        assert sync_loop.current()._driver is None or sync_loop.current()._driver == sync_loop._KEEPER
        # The receive was cancelled, not cut short in a callback: the loop, the connection
        # and the link work, and the next message goes to the next receive.
        assert isinstance(sender.send(b"after"), Accepted)
        assert [m.body for m in receiver.receive(1, timeout=5)] == [b"after"]
        assert not conn.closed


@pytest.mark.usefixtures("python_sigint")  # what a program started from a terminal has
def test_ctrl_c_while_waiting_for_another_driver_gives_the_call_up(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        first = conn.create_receiver("drives", mode="receive-and-delete")
        second = conn.create_receiver("waits", mode="receive-and-delete")
        sender = conn.create_sender("drives")
        other = threading.Thread(target=lambda: first.receive(1, timeout=30))
        other.start()
        until(driving(lambda call: call.driven))

        def interrupt() -> None:
            until(lambda: (call := sync_loop.current()._main_call) is not None and call.waiting)
            signal.pthread_kill(main_ident, signal.SIGINT)  # a real signal: it interrupts a wait

        helper = threading.Thread(target=interrupt)
        helper.start()
        with pytest.raises(KeyboardInterrupt):
            second.receive(1, timeout=30)
        helper.join(10)
        assert sender.send(b"wake") is not None  # ends the other thread's receive
        other.join(30)
        assert not other.is_alive()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        waits = conn.create_sender("waits")
        assert isinstance(waits.send(b"later"), Accepted)
        assert [m.body for m in second.receive(1, timeout=5)] == [b"later"]


def test_a_call_from_the_loop_itself_is_an_error(broker_url: str) -> None:
    async def nested() -> None:
        sync._run(asyncio.sleep(0))

    with pytest.raises(RuntimeError, match="own event loop"):
        sync._run(nested())
    with sync.connect(broker_url) as conn:  # the loop still works
        assert isinstance(conn.create_sender("q").send(b"ok"), Accepted)


def test_a_thread_running_another_event_loop_is_served_by_the_keeper(broker_url: str) -> None:
    async def inside_another_loop() -> Any:
        with sync.connect(broker_url) as conn:
            return conn.create_sender("q").send(b"from asyncio.run")

    assert isinstance(asyncio.run(inside_another_loop()), Accepted)


def test_a_forked_child_gets_a_loop_of_its_own(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        conn.create_sender("forked").send(b"parent")
        parent_loop = sync_loop.current()
        pid = os.fork()
        if pid == 0:  # the child: exit status tells the parent
            try:
                child_loop = sync_loop.current()
                ok = child_loop is not parent_loop and child_loop.loop is not parent_loop.loop
                with sync.connect(broker_url) as child:
                    ok = ok and isinstance(child.create_sender("forked").send(b"child"), Accepted)
            except BaseException:
                ok = False
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        receiver = conn.create_receiver("forked", mode="receive-and-delete")
        assert sorted(m.body for m in receive_exactly_sync(receiver, 2, accept=False)) == [b"child", b"parent"]


@pytest.mark.parametrize("close", [True, False])
def test_a_program_using_the_facade_exits_promptly(broker_url: str, close: bool) -> None:
    script = f"""
import sys, threading
from amqplink import sync
conn = sync.connect({broker_url!r})
sender = conn.create_sender("exit")
sender.send(b"x")
threading.Thread(target=lambda: sender.send(b"from a thread")).start()
if {close}:
    conn.close()
"""
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.fixture(autouse=True)
def _no_driver_left() -> Iterator[None]:
    yield
    driver = sync_loop.current()._driver
    assert driver is None or driver == sync_loop._KEEPER, f"a caller still holds the loop: {driver!r}"


def test_the_outcomes_of_messages_sent_without_waiting_arrive(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        sender = conn.create_sender("nowait")
        sender.send(b"attach")
        futures = [sender.send_nowait(Message(f"m{i}".encode())) for i in range(5)]
        assert all(isinstance(f.result(10), Accepted) for f in futures)


def test_waiting_for_an_outcome_runs_the_loop_here_and_a_time_out_leaves_it_under_way() -> None:
    decided_on: list[int] = []

    async def pending() -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def decide() -> None:
            decided_on.append(threading.get_ident())
            future.set_result(7)

        asyncio.get_running_loop().call_later(0.2, decide)
        return future

    source = sync._run(pending())
    outcome = sync._Outcome(source)
    with pytest.raises(TimeoutError):
        outcome.result(timeout=0.01)
    assert not source.cancelled()  # the wait timed out, not the operation
    assert outcome.result(timeout=10) == 7
    assert decided_on == [threading.get_ident()]  # decided by this thread's turn of the loop
